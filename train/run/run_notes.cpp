#include "train/run/run_notes.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "comm/codec.h"
#include "comm/environment.h"
#include "comm/init.h"
#include "comm/routed_communicator.h"
#include "core/backend.h"
#include "core/communicator.h"
#include "core/data/dataset_split.h"
#include "core/data/dataset_stats.h"
#include "core/data/fingerprint.h"
#include "core/data/label_counts_file.h"
#include "core/data/xmc_file.h"
#include "core/device.h"
#include "core/output.h"
#include "core/parse.h"
#include "core/propensity.h"
#include "core/quote.h"
#include "core/rng.h"
#include "core/say.h"
#include "kernels/bf16_dot.h"
#include "layers/network_config.h"
#include "layers/network_spec.h"
#include "train/checkpoint_history.h"
#include "train/checkpoint_manifest.h"
#include "train/early_stopping.h"
#include "train/metrics_log.h"
#include "train/rebalance.h"
#include "train/resume_choice.h"
#include "train/run/calibration.h"
#include "train/run/compression.h"
#include "train/run/data_defaults.h"
#include "train/run/dct_cost.h"
#include "train/run/dlrm_run.h"
#include "train/run/dp_transport.h"
#include "train/run/epoch_report.h"
#include "train/run/infer_choice.h"
#include "train/run/memory_check.h"
#include "train/run/pipeline_run.h"
#include "train/run/rank_threads.h"
#include "train/run/run_notes.h"
#include "train/run/run_settings.h"
#include "train/run/step_profile_json.h"
#include "train/run/train_inputs.h"
#include "train/run/trained_model.h"
#include "train/trainer.h"

namespace frugal::run {

void note_momentum_correction(const RunArgs& a, int replicas) {
  if (a.quiet || !a.dp_momentum_correction || !a.dp_keep) return;
  if (replicas < 2)
    say("note: --dp-momentum-correction has no effect without data-parallel replicas (--grid DxM, D > 1)\n");
  else if (*a.dp_keep >= 1.0f)
    say("note: --dp-momentum-correction at --dp-keep 1 sends every velocity every step, so it restarts at 0 "
               "each time: the optimizer runs without momentum (Adam with beta1 0)\n");
}

void note_precision(const RunArgs& a, bool bf16_products) {
  if (a.precision_from_cpu && !a.quiet && a.precision == Dtype::bf16)
    say("precision auto: bf16 storage of the sparse input and LSH output layers' weights and moments ({}{}; "
        "--precision f32 keeps f32)\n",
        precision_reason(a).value_or(""), kernels::bf16_dot_active() ? ", its vdpbf16ps multiplies them" : "");
  if (a.precision != Dtype::f32 && !a.quiet && a.sampler == layers::Sampler::exact)
    say("note: --precision bf16 stores the sparse input layer's weights in bf16; the exact softmax "
               "multiplies its whole weight matrix every step and keeps it in f32{}\n",
               bf16_products ? " (its products, and the dense layers', run in bf16 with f32 sums on this device)"
                             : " (as the dense layers' products on this device)");
}

void note_straight_through(const RunArgs& a, int model_ranks) {
  const bool compressed = a.mp_keep != 1.0 || a.mp_mass < 1.0;
  const bool stacked = a.layers.find(',') != std::string::npos;
  if (!a.quiet && compressed && model_ranks > 1 && stacked && a.mp_straight_through == comm::StraightThrough::all)
    say("note: --mp-straight-through all adds the estimate at every sliced boundary; through stacked "
               "hidden layers its bias compounds (Fashion-MNIST 784-1024-1024-10 on 4 ranks at --mp-keep 0.1: "
               "-0.76 points, against -0.48 with input and -0.09 off)\n");
}

void note_cuda_alone(const RunArgs& a, const Backend& backend, int model_ranks) {
  if (a.quiet || model_ranks != 1 || backend.name() != "cuda") return;
  say("note: the CUDA backend keeps the step's tensors on the device{}; this design has not been timed on a "
             "GPU yet (the previous one, which copied every op's arguments through host memory, trained {} on an "
             "H200): compare --device cpu on this machine (bench/REPORT.md, \"GPU\")\n",
             a.sampler == layers::Sampler::exact ? "" : ", the LSH sampler's sets and tables included",
             a.sampler == layers::Sampler::exact ? "20-46x slower than PyTorch with --sampler exact"
                                                 : "the LSH sampler slower than --device cpu on the machine's 16 cores");
}

void note_forward_split(const RunArgs& a, int model_ranks) {
  if (a.quiet || a.overlap_forward != train::ForwardSplit::always) return;
  const bool compressed = a.mp_keep != 1.0 || a.mp_mass < 1.0 || mp_compression(a).wire != comm::ValueType::f32;
  const char* why = !a.overlap         ? "--overlap is off"
                    : model_ranks <= 1 ? "the input layer is not sliced (one model rank)"
                    : compressed       ? "DCT-MP's compressed exchange (--mp-keep, --mp-mass, or a narrow --mp-wire-dtype "
                                         "or --wire-dtype) goes whole"
                                       : nullptr;
  if (why != nullptr) say("note: --overlap-forward on has no effect: {}\n", why);
}

void note_compress(const RunArgs& a, const Grid& grid) {
  if (a.quiet || a.compress != Compress::auto_) return;
  std::string what;
  if (grid.data > 1)
    what += fmt::format("DCT-DP keeps, per parameter, the fewest entries whose values carry {:.0f}% of the "
                        "accumulated gradient's energy (from everything down to at most 1 in {:.0f})",
                        100.0 * dp_compression(a)->auto_energy, 1.0 / kAutoDpFloor);
  if (grid.model > 1)
    what += fmt::format("{}DCT-MP sends, per sample and slice, the fewest largest activations that carry {:.0f}% "
                        "of the slice's L1 mass", what.empty() ? "" : "; ", 100.0 * kAutoMpMass);
  say("compress auto: {}\n", what.empty() ? "one rank, nothing crosses the network" : what);
}

void note_optimizer(const RunArgs& a, const train::Trainer& trainer, int rank) {
  // Row-wise state needs whole rows: a model slice of the input layer (part of every row) is updated
  // per element instead, said once (even with --quiet: it is not what the flag asked for).
  if (rank == 0 && a.optimizer)
    for (const std::string& name : trainer.optimizer().row_wise_fallbacks())
      say_notice("note: --optimizer {}: {} is sliced by columns over the model-parallel group (each rank has "
                         "part of every row), so it keeps per-element {} state\n",
                 optim::to_string(a.method), name,
                 a.method == optim::Method::rowwise_adagrad ? "Adagrad" : "Adam");
  if (rank == 0 && !a.quiet && !a.optimizer)
    say("optimizer auto: {}{}{}\n", optim::to_string(a.method),
               a.optimizer_from_checkpoint ? fmt::format(" (the checkpoint's, --resume {})", a.resume)
               : a.method == optim::Method::rowwise_adam
                   ? fmt::format(" (one second moment per row of the LSH output layer, per-element Adam elsewhere, --lr {:g})",
                                 effective_lr(a))
                   : a.sampler == layers::Sampler::exact ? " (the exact softmax)" : "",
               trainer.optimizer().row_wise_fallbacks().empty()
                   ? ""
                   : "; the input layer's model slices keep per-element Adam state");
}

}  // namespace frugal::run
