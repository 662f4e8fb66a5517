#include "train/run/trainer_support.h"

#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/check.h"
#include "core/say.h"

namespace frugal::run {
namespace {

enum class Support { works, refused, ignored };

// What one trainer does with an option; `why` completes a refusal's message.
struct Verdict {
  Support support = Support::works;
  std::string_view why{};
};
constexpr Verdict works() { return {}; }
constexpr Verdict refused(std::string_view why) { return {Support::refused, why}; }
constexpr Verdict ignored() { return {Support::ignored, {}}; }

struct OptionSupport {
  std::string_view flag;
  // Whether the run uses the option (by its value, so a C++ caller's setting counts); null: whether
  // the face said it was given (TrainConfig::given).
  bool (*used)(const RunArgs&);
  Verdict pipeline, dlrm;
};

// The pipeline's refusals read "--pipeline: WHY is not implemented for pipeline stages"; DLRM's
// "--model dlrm: WHY".
const OptionSupport kSupport[] = {
    {"--parallel", [](const RunArgs& a) { return a.parallel == ParallelMode::data; },
     refused("--parallel data"), works()},
    {"--slice-weights", [](const RunArgs& a) { return !a.slice_weights.empty(); },
     refused("--slice-weights (stages are split by --stage-split)"), ignored()},
    {"--dp-compress", [](const RunArgs& a) { return a.dp_compress == comm::DpTarget::updates; },
     refused("--dp-compress updates (use gradients)"),
     refused("--dp-compress updates is not implemented (its DCT-DP thresholds the MLP gradients: leave "
             "--dp-compress at its default)")},
    {"--dp-momentum-correction", [](const RunArgs& a) { return a.dp_momentum_correction; },
     refused("--dp-momentum-correction"),
     refused("--dp-momentum-correction is not implemented (its trainer steps the optimizer on the replicas' "
             "thresholded sum; drop the flag)")},
    // The DLRM trainer never brings skipped rows up to date before they are read, so catch-up would
    // silently be lazy with extra bookkeeping.
    {"--sparse-updates", [](const RunArgs& a) { return a.sparse_updates == optim::SparseUpdates::catchup; },
     refused("--sparse-updates catchup"),
     refused("--sparse-updates catchup is not implemented (its tables and MLPs update lazily: leave "
             "--sparse-updates at lazy)")},
    // The pipeline's stages score the validation set at epoch ends (its epoch is one call).
    {"--valid-every", [](const RunArgs& a) { return a.valid_every.value_or(0) > 0; },
     refused("--valid-every (scoring the validation set within an epoch)"), works()},
    // A pipeline's stages hold the training set (each epoch is one call over it).
    {"--stream", [](const RunArgs& a) { return a.stream.value_or(false); },
     refused("--stream on (training from a packed file block by block)"), works()},
    {"--pipeline", [](const RunArgs& a) { return a.pipeline > 0; }, works(),
     refused("--pipeline is not implemented (its tables and MLPs train data-parallel)")},
    // The pipeline trainer refuses skip-batch itself, saying why (only the last stage sees the loss).
    {"--on-divergence", [](const RunArgs& a) { return a.on_divergence == train::OnDivergence::skip_batch; }, works(),
     refused("--on-divergence skip-batch is not implemented (a diverged DLRM epoch stops the run)")},
    // DLRM computes on the CPU backend; --device auto (the default) means the CPU for it.
    {"--device", [](const RunArgs& a) { return a.device != "cpu" && a.device != "auto"; }, works(),
     refused("--device other than cpu or auto is not implemented (its tables and MLPs compute on the CPU "
             "backend: leave --device at auto, which is the CPU for --model dlrm)")},
    {"--grid", [](const RunArgs& a) { return !a.grid.empty(); }, works(),
     refused("--grid does not apply (every rank trains on its part of each batch; --table-exchange or "
             "--parallel data say how the tables are shared)")},
    // The XMC network's own options, which DLRM's network does not have.
    {"--hidden", nullptr, works(), ignored()},
    {"--layers", nullptr, works(), ignored()},
    {"--sampler", nullptr, works(), ignored()},
    {"--hash", nullptr, works(), ignored()},
    {"--tables", nullptr, works(), ignored()},
    {"--bucket-capacity", nullptr, works(), ignored()},
    {"--k", nullptr, works(), ignored()},
    {"--bin-size", nullptr, works(), ignored()},
    {"--active-target", nullptr, works(), ignored()},
    {"--min-active", nullptr, works(), ignored()},
    {"--max-active", nullptr, works(), ignored()},
    {"--rebuild-first", nullptr, works(), ignored()},
    {"--rebuild-growth", nullptr, works(), ignored()},
    {"--rebuild-max", nullptr, works(), ignored()},
    {"--negatives", nullptr, works(), ignored()},
    {"--negatives-uniform", nullptr, works(), ignored()},
    {"--logq", nullptr, works(), ignored()},
    {"--infer", nullptr, works(), ignored()},
    {"--infer-candidates", nullptr, works(), ignored()},
    {"--ensemble-weight", nullptr, works(), ignored()},
    {"--ensemble-knn-weight", nullptr, works(), ignored()},
    {"--ensemble-temperature", nullptr, works(), ignored()},
    {"--ensemble-neighbours", nullptr, works(), ignored()},
    {"--output-init", nullptr, works(), ignored()},
    {"--centroid-scale", nullptr, works(), ignored()},
    {"--calibration-steps", nullptr, works(), ignored()},
    {"--calibration-warmup", nullptr, works(), ignored()},
    {"--micro-batches", nullptr, works(), ignored()},
    {"--stage-split", nullptr, works(), ignored()},
    {"--precision", nullptr, works(), ignored()},
    {"--overlap", nullptr, works(), ignored()},
    {"--overlap-forward", nullptr, works(), ignored()},
    {"--dp-keep-input", nullptr, works(), ignored()},
    {"--dp-local-clip", nullptr, works(), ignored()},
    // DLRM's input is dense features and ids, not a sparse feature vector to drop out of, and its
    // ranks exchange no activations.
    {"--dropout", nullptr, works(), ignored()},
    {"--mp-keep", nullptr, works(), ignored()},
    {"--mp-mass", nullptr, works(), ignored()},
    {"--mp-wire-dtype", nullptr, works(), ignored()},
    {"--mp-straight-through", nullptr, works(), ignored()},
    {"--mp-straight-through-steps", nullptr, works(), ignored()},
    {"--mp-error-feedback", nullptr, works(), ignored()},
    {"--mp-warmup-steps", nullptr, works(), ignored()},
};

}  // namespace

void check_trainer_support(const RunArgs& a, TrainerKind kind) {
  if (kind == TrainerKind::network) return;
  std::vector<std::string_view> not_applying;
  for (const OptionSupport& o : kSupport) {
    const bool used = o.used != nullptr ? o.used(a) : a.given.count(std::string(o.flag)) > 0;
    if (!used) continue;
    const Verdict& v = kind == TrainerKind::pipeline ? o.pipeline : o.dlrm;
    if (v.support == Support::refused)
      throw Error(kind == TrainerKind::pipeline
                      ? fmt::format("--pipeline: {} is not implemented for pipeline stages", v.why)
                      : fmt::format("--model dlrm: {}", v.why));
    // Only what the face said was given is said to be ignored (a default is no choice).
    if (v.support == Support::ignored && a.given.count(std::string(o.flag)) > 0) not_applying.push_back(o.flag);
  }
  if (!not_applying.empty())
    say_notice("note: {} do(es) not apply to {}: ignored\n", fmt::join(not_applying, ", "),
               kind == TrainerKind::pipeline ? "--pipeline" : "--model dlrm");
}

}  // namespace frugal::run
