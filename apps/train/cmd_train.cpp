// `frugal train`: its flags, parsed into the run API's TrainConfig (train/run/run.h), which does the
// rest: every default, check and refusal of a training run lives in the library, so that the C++
// API and the Python module get the same run (docs/architecture.md, "The C++ API"). This file
// declares the flags (names, help, ranges: what --help and docs/cli.md show), records which were
// given and as what (the ranks compare them), and maps the library's option names back to flags in
// its errors.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "apps/cli_options.h"
#include "apps/comm_flags.h"
#include "apps/commands.h"
#include "apps/train/dlrm_flags.h"
#include "apps/infer_flags.h"
#include "apps/train/train_in_process.h"
#include "core/parse.h"
#include "kernels/bf16_dot.h"
#include "train/run/dct_cost.h"
#include "train/run/rank_agreement.h"
#include "train/run/run.h"

namespace frugal::cli {
namespace {

// Flags whose unset state the config tells apart (std::optional there), read here as CLI11 values,
// and the flags that belong to this process rather than to the run (the CPU's bf16 instruction,
// how this rank joins the cluster).
struct FlagOnly {
  comm::ValueType wire_dtype = comm::ValueType::f32;
  uint64_t mp_warmup_steps = 0;
  bool mp_error_feedback = false;
  kernels::Bf16Dot bf16_dot = kernels::Bf16Dot::auto_;
  CommFlags comm;
};

// The flags of `cmd` the ranks must agree on (run::compared_as_given: all but the per-rank ones, those
// compared as resolved and the cluster's), keyed as the run config names settings (--dp-keep ->
// dp_keep), each as given or defaulted (TrainConfig::settings: the run reads the text as a number,
// on / off or text); a flag without a value or default (an unset optional) is left out: a rank that
// sets it then differs by having it.
std::vector<std::pair<std::string, std::string>> flag_settings(const CLI::App& cmd, const CommFlags& comm) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const CLI::Option* o : cmd.get_options()) {
    if (o->get_lnames().empty()) continue;
    const std::string flag = "--" + o->get_lnames().front();
    if (flag == "--help" || !run::compared_as_given(flag) || comm.has_flag(flag)) continue;
    std::string text;
    if (o->count() > 0) {
      const std::vector<std::string> given = o->results();
      text = o->get_items_expected_max() == 0 ? "on" : fmt::format("{}", fmt::join(given, ","));
    } else {
      text = o->get_items_expected_max() == 0 ? "off" : o->get_default_str();
    }
    if (text.empty()) continue;
    std::string key = o->get_lnames().front();
    std::replace(key.begin(), key.end(), '-', '_');
    out.emplace_back(key, text);
  }
  return out;
}

// The option fields library errors name, and the flags that set them here.
const FlagNames kTrainFlags = {
    {"LshOptions::tables", "--tables"},
    {"LshOptions::bucket_capacity", "--bucket-capacity"},
    {"LshOptions::min_active", "--min-active"},
    {"LshOptions::max_active", "--max-active"},
    {"LshOptions::rebuild_first", "--rebuild-first"},
    {"LshOptions::rebuild_growth", "--rebuild-growth"},
    {"LshOptions::rebuild_max", "--rebuild-max"},
    {"LshOptions::negatives", "--negatives"},
    {"LshOptions::negative_uniform_share", "--negatives-uniform"},
    {"TrainerOptions::dp", "--dp-keep"},
    {"TrainerOptions::parallel.dense_gradients", "--parallel data"},
    {"DpCompression::keep", "--dp-keep"},
    {"DpCompression::reestimate_every", "--dp-reestimate-every"},
    {"MpCompression::keep", "--mp-keep"},
    {"MpCompression::warmup_steps", "--mp-warmup-steps"},
    {"MpCompression::mass", "--mp-mass"},
    {"optimizer: weight decay must", "optimizer: --weight-decay must"},
};


}  // namespace

static CLI::App* add_train_command(CLI::App& app, InProcessTrain* in_process) {
  auto a = std::make_shared<run::TrainConfig>();
  auto own = std::make_shared<FlagOnly>();
  CLI::App* cmd = app.add_subcommand("train", "train the XMC network: sparse input -> hidden (ReLU) -> softmax");
  cmd->add_option("--train", a->train, "training file (XMC format), or IDX prefix such as .../fashion-mnist/train")
      ->required();
  cmd->add_option("--test", a->test, "test file (XMC format), or IDX prefix such as .../fashion-mnist/t10k")->required();
  add_choice(cmd, "--model", a->model, {run::ModelKind::xmc, run::ModelKind::dlrm},
             "xmc: sparse input -> hidden layers -> softmax over labels; dlrm: the DLRM click-through model "
             "(embedding tables, bottom/top MLPs, dot interaction; --format criteo)");
  add_choice(cmd, "--format", a->format, {data::DataFormat::xmc, data::DataFormat::idx, data::DataFormat::criteo},
             "xmc: text files; idx: PREFIX-images-idx3-ubyte[.gz] + PREFIX-labels-idx1-ubyte[.gz]; criteo: "
             "Criteo-format click logs (--model dlrm; its default)");
  add_dlrm_options(cmd, a->dlrm);
  cmd->add_option("--layers", a->layers, "hidden layer widths, input side first, e.g. 1024,1024 (replaces --hidden)");
  cmd->add_option_function<std::string>(
         "--hidden",
         [a](const std::string& text) {
           a->hidden = text == "auto" ? 0 : parse_number<size_t>("--hidden", text, "auto or a width from 1 to 1048576",
                                                                 [](size_t w) { return w >= 1 && w <= (size_t{1} << 20); });
         },
         "hidden layer width; auto: 128, or for few-shot labels (a typical label with <= 8 training points) the "
         "widest of 1024, 512, 256 whose epoch stays within a work budget (the log says what it chose)")
      ->default_str("auto");
  cmd->add_option("--batch", a->batch, "points per step")->capture_default_str()->check(cli::positive());
  cmd->add_option("--epochs", a->epochs, "epochs (in total, counting those of a resumed run)")->capture_default_str();
  cmd->add_option("--lr", a->lr, fmt::format("learning rate (default {} with adam, {} with sgd, {} with adagrad, {} "
                                              "with rowwise-adagrad ({} with --model dlrm), {} with rowwise-adam ({} "
                                              "with --model dlrm))",
                                              optim::Adam{}.lr, optim::Sgd{}.lr, optim::Adagrad{}.lr,
                                              optim::RowwiseAdagrad{}.lr, optim::Adagrad{}.lr, optim::RowwiseAdam{}.lr,
                                              optim::Adam{}.lr))
      ->check(cli::above_up_to(0.0, run::kMaxLr));  // beyond, the first step diverges: refused before the data is read
  std::vector<std::pair<std::string, std::optional<optim::Method>>> optimizers{{"auto", std::nullopt}};
  for (const optim::Method m : {optim::Method::adam, optim::Method::sgd, optim::Method::adagrad,
                                optim::Method::rowwise_adagrad, optim::Method::rowwise_adam})
    optimizers.emplace_back(optim::to_string(m), m);
  add_choice(cmd, "--optimizer", a->optimizer, optimizers,
             "adam, sgd (with --momentum), adagrad (with --initial-accumulator), rowwise-adagrad (one accumulator "
             "per row of the sparse input layer and of the LSH output layer, per-element Adagrad elsewhere), "
             "rowwise-adam (Adam with one second moment per row of those layers; see --rowwise-momentum), or auto: "
             "rowwise-adam with the LSH sampler, adam with the exact softmax and --model dlrm");
  add_choice(cmd, "--rowwise-layers", a->rowwise_input,
             {{"all", std::optional<bool>(true)}, {"output", std::optional<bool>(false)}},
             "row-wise optimizers: row-wise state on the sparse input layer and the LSH output layer (all: the "
             "default with --optimizer rowwise-*), or on the output layer's label rows only, the input layer keeping "
             "per-element state (output: what --optimizer auto uses)");
  add_choice(cmd, "--rowwise-momentum", a->rowwise_momentum, {{"on", true}, {"off", false}},
             "--optimizer rowwise-adam: keep Adam's per-element first moment on the row-wise layers (on), or "
             "step by the gradient over the row's RMS alone (off: no per-element state at all)");
  add_choice(cmd, "--sparse-updates", a->sparse_updates, {optim::SparseUpdates::lazy, optim::SparseUpdates::catchup},
             "rows without a gradient in a step: lazy (untouched) or catchup (get the missed steps when next "
             "touched, as the dense optimizer would)");
  cmd->add_option("--momentum", a->momentum, "SGD momentum (0: plain SGD)")->capture_default_str()->check(cli::in_range(0.0, 0.9999));
  cmd->add_option("--initial-accumulator", a->initial_accumulator,
                  "Adagrad: the sum of squared gradients every weight starts from (PyTorch's 0: a first step of "
                  "lr * sign(g); TensorFlow's 0.1 outweighs small gradients and needs a larger --lr)")
      ->capture_default_str()->check(cli::non_negative());
  cmd->add_option("--update-threshold", a->update_threshold,
                  "skip the update of a sparse-input or LSH-output row whose step gradient RMS is below this fraction "
                  "of the row's running gradient RMS; the gradient waits in a residual until it matters or the epoch "
                  "ends (0: off)")
      ->capture_default_str()->check(cli::non_negative());
  cmd->add_option("--adam-freeze-v-after", a->adam_freeze_v_after,
                  "Adam: freeze each row's second moment after its first N updates (1-bit Adam's frozen "
                  "variance; 0: never). Lets DCT-DP's error-feedback bursts move weights in full")
      ->capture_default_str();
  cmd->add_option("--weight-decay", a->weight_decay, "decoupled weight decay W: w -= lr * W * w every step (AdamW)")
      ->capture_default_str()->check(cli::non_negative());
  add_choice(cmd, "--lr-schedule", a->lr_schedule,
             {optim::ScheduleKind::constant, optim::ScheduleKind::linear, optim::ScheduleKind::cosine},
             "learning rate over the run: constant, or linear / cosine decay to 0 over epochs x steps per epoch");
  cmd->add_option("--warmup-steps", a->warmup_steps, "linear learning-rate warm-up from 0 over the first N steps")
      ->capture_default_str();
  cmd->add_option("--clip-norm", a->clip_norm, "clip the global gradient L2 norm to C (0: off)")
      ->capture_default_str()->check(cli::non_negative());
  cmd->add_option("--dropout", a->dropout, "input-feature dropout probability in training (inverted dropout)")
      ->capture_default_str()->check(cli::in_range(0.0, 0.99));
  cmd->add_option("--valid-fraction", a->valid_fraction, "hold out this seeded fraction of the training set for "
                                                         "validation (valid_p@1 in the epoch lines)")
      ->capture_default_str()->check(cli::in_range(0.0, 0.9));
  cmd->add_option("--early-stopping", a->early_stopping, "stop after N epochs without validation P@1 improvement, "
                                                         "keeping the best model in CHECKPOINT/best (0: off)")
      ->capture_default_str();
  add_choice(cmd, "--sampler", a->sampler, {layers::Sampler::lsh, layers::Sampler::exact},
             "output neurons computed in training");
  add_choice(cmd, "--precision", a->precision, {{"f32", Dtype::f32}, {"bf16", Dtype::bf16}},
             "storage of the sparse input layer's and the LSH softmax's weights and their optimizer moments: f32, "
             "or bf16 (half the memory and bandwidth; computed in f32, updates stored with stochastic rounding)");
  add_choice(cmd, "--bf16-dot", own->bf16_dot,
             {{"auto", kernels::Bf16Dot::auto_}, {"on", kernels::Bf16Dot::on}, {"off", kernels::Bf16Dot::off}},
             "--precision bf16 on the CPU: products over bf16 weight rows (active logits, dLoss/dh, the sparse input "
             "layer) with AVX512-BF16's vdpbf16ps, the f32 side rounded to bf16 (auto: where the CPU has it; off: "
             "widened to f32, the bits of the f32 kernels)");
  add_choice(cmd, "--hash", a->hash, {layers::HashKind::dwta, layers::HashKind::simhash}, "LSH family");
  cmd->add_option("--k", a->k, "LSH bits (simhash) or bins (dwta) per table; 0: chosen from the label count")
      ->check(cli::in_range(0, 24));
  cmd->add_option("--active-target", a->active_target,
                  "LSH: labels per point the automatic hash width (--k 0) aims at from the tables (0: 1.5% of the "
                  "labels, at least 256 and at most 1024)")
      ->capture_default_str()
      ->check(cli::non_negative());  // a size_t option would take -5 as 2^64 - 5
  cmd->add_option("--bin-size", a->bin_size, "DWTA coordinates per bin (power of two)")->capture_default_str()
      ->check(cli::in_range(2, 256));
  cmd->add_option("--tables", a->tables, "LSH tables")->capture_default_str()->check(cli::in_range(1, 4096));
  cmd->add_option("--bucket-capacity", a->bucket, "LSH bucket capacity (random eviction)")->capture_default_str()
      ->check(cli::in_range(1, 65536));
  cmd->add_option("--min-active", a->min_active, "top active sets up to this size with random labels")->capture_default_str();
  cmd->add_option("--max-active", a->max_active, "cap active sets at this size (0: no cap)")->capture_default_str();
  cmd->add_option("--negatives", a->negatives, "LSH: random negatives drawn per point in training, from a mix of "
                                              "label frequency and uniform (0: none)")->capture_default_str();
  cmd->add_option("--negatives-uniform", a->negatives_uniform, "LSH: uniform share of the negatives' proposal "
                                                               "(the rest follows label frequency)")
      ->capture_default_str()->check(cli::in_range(0.0, 1.0));
  add_choice(cmd, "--logq", a->logq, {{"on", true}, {"off", false}},
             "LSH: correct random negatives' logits by their sampling probability");
  add_infer_options(cmd, a->infer, "ensemble on few-shot labels (a typical label with <= 8 training points), "
                                          "else exact");
  add_choice(cmd, "--output-init", a->output_init,
             {{"auto", std::nullopt}, {"random", run::OutputInit::random}, {"centroid", run::OutputInit::centroid}},
             "output rows: random, or each label's centroid in hidden space (a nearest-centroid classifier to "
             "start from; trains at --lr 1e-3 when --lr is not given on few-shot labels); auto: centroid for "
             "few-shot labels (a typical label with <= 8 training points), else random");
  cmd->add_option("--centroid-scale", a->centroid_scale, "logit of a point along its label's centroid, per RMS "
                                                         "hidden norm (--output-init centroid)")
      ->capture_default_str()->check(cli::positive());
  cmd->add_option("--rebuild-first", a->rebuild_first, "steps before the first LSH table rebuild")->capture_default_str();
  cmd->add_option("--rebuild-growth", a->rebuild_growth, "factor by which rebuild intervals grow")->capture_default_str()
      ->check(cli::in_range(1.0, 1e6));  // beyond, an interval times it is no step count (a cast to 64 bits)
  cmd->add_option("--rebuild-max", a->rebuild_max, "longest interval between rebuilds (steps)")->capture_default_str();
  cmd->add_option("--threads", a->threads, "compute threads (0: all cores, divided among the ranks frugal launch or mpirun starts on this host)")->capture_default_str();
  cmd->add_option("--seed", a->seed, "seed of every random choice")->capture_default_str();
  cmd->add_option("--max-steps", a->max_steps, "end each epoch after this many steps (0: whole epochs); for "
                                               "throughput measurements")->capture_default_str();
  cmd->add_option("--eval-batch", a->eval_batch, "points per evaluation batch")->capture_default_str()
      ->check(cli::positive());
  cmd->add_option("--metrics", a->metrics, "append-free JSON-lines metrics log (FILE.jsonl)");
  cmd->add_option("--checkpoint", a->checkpoint, "save a checkpoint here after every epoch");
  cmd->add_option("--resume", a->resume, "continue from the newest intact checkpoint in this directory (a damaged "
                                        "newer one is skipped, saying why)");
  add_accept_unchecked_flag(cmd, a->accept_unchecked_checkpoint);
  add_strict_flag(cmd);
  cmd->add_option("--keep-checkpoints", a->keep_checkpoints, "--checkpoint: keep the newest K checkpoints (older "
                                                             "ones are --resume's fallback); 1: the newest only")
      ->capture_default_str()->check(cli::positive());
  cmd->add_option("--grid", a->grid, "process grid DxM: D data-parallel replicas of M ranks slicing the model "
                                      "(default 1xN: all ranks slice the model); DxMxS: D replicas of S pipeline "
                                      "stages, each stage sliced over M ranks");
  cmd->add_option("--pipeline", a->pipeline, "split the layers into S pipeline stages on S ranks (1F1B over "
                                             "micro-batches; with more ranks, data-parallel replicas of the pipeline)")
      ->check(cli::positive());
  cmd->add_option("--micro-batches", a->micro_batches, "--pipeline: micro-batches per batch (default 2 per stage, "
                                                       "at least 16 points each)")
      ->check(cli::positive());
  cmd->add_option("--stage-split", a->stage_split, "--pipeline: layers per stage, e.g. 1,3 (input layer, hidden "
                                                   "layers, output layer in order); auto: balanced by estimated cost")
      ->capture_default_str();
  add_choice(cmd, "--parallel", a->parallel, {run::ParallelMode::model, run::ParallelMode::data},
             "model: slice the model (with --grid); data: the whole model on every rank, gradients summed by a "
             "dense all-reduce every step (Horovod)");
  cmd->add_option("--slice-weights", a->slice_weights, "relative share of the neurons per model rank, e.g. 1,1,2; "
                                                       "auto: measured (calibrated in the first epoch)");
  cmd->add_option("--calibration-steps", a->calibration_steps, "--slice-weights auto: steps timed to size the slices")
      ->capture_default_str()->check(cli::positive());
  cmd->add_option("--memory-limit", a->memory_limit_mib,
                  "MiB this rank may take: a model whose weights alone exceed it is refused before it is allocated, "
                  "and --slice-weights auto caps this rank's share of weights and optimizer state by it (0: the "
                  "machine's available memory is the limit)")
      ->capture_default_str()->check(cli::non_negative());
  cmd->add_option("--calibration-warmup", a->calibration_warmup, "--slice-weights auto: steps before the timed ones")
      ->capture_default_str();
  add_device_option(cmd, a->device);
  add_choice(cmd, "--dp-transport", a->dp_transport,
             {run::DpTransport::auto_, run::DpTransport::host, run::DpTransport::nccl},
             "what sums the data-parallel replicas' gradients: host (the ranks' ZeroMQ/MPI transport), nccl "
             "(NCCL between their GPUs; every replica on --device cuda), auto (nccl when every replica runs on a "
             "GPU and this build has NCCL, else host)");
  own->comm.add_to(cmd);
  add_choice(cmd, "--compress", a->compress, {run::Compress::link, run::Compress::off, run::Compress::auto_},
             "DCT on the network: auto sets the keep fractions online (DCT-DP: per parameter, the fewest entries "
             "carrying a fixed share of the gradient's energy, backing off when the error grows; DCT-MP: per sample, "
             "the fewest activations carrying a fixed share of the L1 mass); off: only what --dp-keep / --mp-keep "
             "and friends ask for; link: auto for the replicas' exchange when the link measured at start-up is slow "
             "enough for it to pay, else off (the log says which; --dp-keep and friends mean off)")
      ->capture_default_str();
  cmd->add_option("--compress-energy", a->compress_energy,
                  fmt::format("--compress auto: the share of each parameter's accumulated gradient energy that DCT-DP's "
                              "messages must carry (default {} under per-row selection, {} with one tau per parameter; "
                              "higher: closer to uncompressed, fewer bytes saved)",
                              run::kAutoDpEnergyPerRow, run::kAutoDpEnergyGlobal))
      ->check(cli::in_range(0.01, 0.99));
  cmd->add_option("--dp-keep", a->dp_keep, "DCT-DP: fraction ETA of gradient entries each data-parallel replica "
                                         "sends (|g + residual| >= tau; the rest is fed back); unset: every "
                                         "touched row travels")
      ->check(cli::in_range(1e-9, 1.0));
  cmd->add_option("--dp-reestimate-every", a->dp_reestimate_every, "DCT-DP: steps between estimates of tau (stale "
                                                                   "in between; 1: every step)")
      ->capture_default_str()->check(cli::positive());
  add_choice(cmd, "--dp-tau", a->dp_tau, {run::TauEstimate::sampled, run::TauEstimate::exact},
             "DCT-DP: estimate tau from a 10k-entry sample or by exact selection (exact with "
             "--dp-reestimate-every 1: exact top-k every step)");
  add_choice(cmd, "--dp-compress", a->dp_compress,
             {{"auto", std::nullopt}, {"gradients", comm::DpTarget::gradients}, {"updates", comm::DpTarget::updates}},
             "DCT-DP: what replicas threshold and exchange: gradients (the optimizer steps on their sum), "
             "updates (each replica's optimizer steps on its own gradient; the weight changes are averaged), or "
             "auto: updates when a batch touches at least half of the input rows, the softmax is exact and "
             "--dp-keep < 1, else gradients");
  add_choice(cmd, "--dp-select", a->dp_select,
             {{"auto", std::nullopt}, {"global", run::DpSelect::global}, {"row", run::DpSelect::row}, {"floor", run::DpSelect::floor}},
             "DCT-DP: global (the entries above one tau per parameter), row (each touched row sends its own "
             "top ETA fraction; values, not signs) or floor (global, and a touched row with no entry above tau "
             "sends its largest); auto: row when gradients are thresholded, else global");
  cmd->add_option("--dp-keep-input", a->dp_keep_input,
                  "DCT-DP: the keep fraction of the sparse input layer (sparse_dense.*); unset: 2.5 x --dp-keep "
                  "under per-row selection, else --dp-keep")
      ->check(CLI::Validator([](std::string& v) { const auto x = to_number<float>(v);
                                                  return x && *x > 0.0f && *x <= 1.0f ? std::string()
                                                                                      : "expected a fraction in (0, 1]"; },
                             "in (0, 1]"));
  cmd->add_option("--dp-keep-param", a->dp_keep_param,
                  "DCT-DP: PREFIX=ETA, the keep fraction of the parameters whose names start with PREFIX (e.g. "
                  "softmax.=0.2; repeatable, the first match wins; the rest keep --dp-keep)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--dp-warmup-steps", a->dp_warmup_steps, "DCT-DP: the kept fraction falls geometrically from "
                                                           "everything to --dp-keep over the first N steps")
      ->capture_default_str();
  add_choice(cmd, "--dp-momentum-correction", a->dp_momentum_correction, {{"on", true}, {"off", false}},
             "DCT-DP (gradients): each replica accumulates its own momentum velocity and thresholds that (DGC's "
             "momentum correction); the optimizer then steps without momentum of its own");
  cmd->add_option("--dp-explore", a->dp_explore,
                  "DCT-DP: besides the entries the threshold selects, send each other touched entry with this "
                  "probability (Slim-DP's exploration: no coordinate waits behind the large ones indefinitely; its "
                  "bytes count like the rest); 0: off")
      ->capture_default_str()->check(cli::in_range(0.0, 0.5));
  add_choice(cmd, "--dp-local-clip", a->dp_local_clip, {{"on", true}, {"off", false}},
             "DCT-DP (gradients) with --clip-norm C: each replica clips its own gradient to C / sqrt(replicas) "
             "before thresholding (DGC's local clipping) instead of clipping the sum");
  add_choice(cmd, "--on-divergence", a->on_divergence, {OnDivergence::stop, OnDivergence::skip_batch},
             "a training step whose loss (or, with --clip-norm, gradient norm) is NaN or infinite: stop the run "
             "with an error naming the epoch and step, keeping the last good checkpoint; or skip-batch: drop that "
             "batch's update and go on (the epoch line counts skipped_batches; not with replicas or --pipeline)");
  add_choice(cmd, "--overlap", a->overlap, {{"on", true}, {"off", false}},
             "model-parallel steps move the layers above the input while the input boundary's gradient exchange "
             "is in flight (applies without replicas and without --clip-norm), and may compute the input layer in "
             "two halves, the first half's all-gather in flight while the second is computed (--overlap-forward); "
             "the same bits either way");
  add_choice(cmd, "--overlap-forward", a->overlap_forward,
             {{"auto", ForwardSplit::automatic}, {"on", ForwardSplit::always}, {"off", ForwardSplit::never}},
             "with --overlap on and an exact input boundary (--mp-keep 1, f32): split the input layer's forward "
             "pass in two halves always (on), never (off), or where half the batch's input work on the widest "
             "slice reaches 2^20 multiply-adds (auto: below that the extra round of messages costs more than it "
             "hides)");
  cmd->add_option("--mp-keep", a->mp_keep, "DCT-MP: activations each sample keeps per rank's slice at a sliced "
                                           "layer boundary: a fraction (<= 1) or a count (> 1); 1: all")
      ->capture_default_str()
      ->check(cli::in_range(0.0, 1048576.0));  // a count is at most a slice's width (--hidden's largest)
  cmd->add_option("--mp-mass", a->mp_mass, "DCT-MP adaptive k: each sample keeps the fewest of its top --mp-keep "
                                           "activations per slice whose magnitudes cover this fraction of the "
                                           "slice's L1 mass; 1: a fixed k")
      ->capture_default_str();
  add_choice(cmd, "--mp-straight-through", a->mp_straight_through,
             {comm::StraightThrough::off, comm::StraightThrough::input, comm::StraightThrough::all},
             "DCT-MP: backward, this rank's own share of the gradient reaches every unit of its slice, kept or "
             "not (free: it is local), at the input layer's boundary (input) or at every boundary (all); off: "
             "the exact gradient of the masked network");
  add_choice(cmd, "--mp-error-feedback", own->mp_error_feedback, {{"on", true}, {"off", false}},
             "DCT-MP: what a rank's backward message leaves out (gradient shares at dropped positions, value "
             "rounding) is added to its share at the same batch row and position next step (Optimus-CC's lazy "
             "error propagation); on by default at a compressed --pipeline boundary");
  cmd->add_option("--mp-straight-through-steps", a->mp_straight_through_steps,
                  "DCT-MP: the straight-through estimate applies during the first N training steps only; 0: the "
                  "whole run")
      ->capture_default_str();
  cmd->add_option("--mp-warmup-steps", own->mp_warmup_steps, "DCT-MP: the kept fraction falls geometrically from "
                                                           "everything to --mp-keep over the first N steps (a "
                                                           "compressed --pipeline boundary: the first two epochs' "
                                                           "steps unless given)")
      ->capture_default_str();
  add_choice(cmd, "--wire-dtype", own->wire_dtype, {comm::ValueType::f32, comm::ValueType::bf16, comm::ValueType::f16},
             "value type of DCT messages (activations, their gradients, thresholded parameter gradients)");
  add_choice(cmd, "--mp-wire-dtype", a->mp_wire,
             {{"auto", std::nullopt}, {"f32", comm::ValueType::f32}, {"bf16", comm::ValueType::bf16},
              {"f16", comm::ValueType::f16}, {"i8", comm::ValueType::i8}},
             "DCT-MP: value type of the kept activations and their gradients; i8: one byte each plus a bf16 scale "
             "per sample (activations round to nearest, gradients stochastically); auto: --wire-dtype when given, "
             "else i8 below --mp-keep 1 and f32 at 1");
  add_choice(cmd, "--dp-wire-dtype", a->dp_wire,
             {{"auto", std::nullopt}, {"f32", comm::ValueType::f32}, {"bf16", comm::ValueType::bf16},
              {"f16", comm::ValueType::f16}, {"sign", comm::ValueType::sign}},
             "DCT-DP: value type of the thresholded entries; sign: one bit each plus one scale per message; auto: "
             "--wire-dtype when given, else below --dp-keep 1 sign for exchanged updates and bf16 for gradients, "
             "f32 at 1");
  cmd->add_flag("--quiet", a->quiet, "no progress output");
  cmd->callback([a, own, cmd, in_process] {
    run::TrainConfig config = *a;
    if (cmd->count("--wire-dtype") > 0) config.wire_dtype = own->wire_dtype;
    if (cmd->count("--mp-warmup-steps") > 0) config.mp_warmup_steps = own->mp_warmup_steps;
    if (cmd->count("--mp-error-feedback") > 0) config.mp_error_feedback = own->mp_error_feedback;
    config.settings = flag_settings(*cmd, own->comm);
    for (const CLI::Option* o : cmd->get_options())
      if (!o->get_lnames().empty() && o->count() > 0) config.given.insert("--" + o->get_lnames().front());
    own->comm.check();
    config.join = own->comm.init_options({});
    kernels::set_bf16_dot(own->bf16_dot);  // before any op on bf16 weights; `on` without the instruction fails here
    with_flag_names(kTrainFlags, "", [&] {
      if (in_process == nullptr) {
        run::train(config);
      } else if (in_process->train) {
        in_process->result = run::train(config, std::move(*in_process->train), std::move(*in_process->test),
                                        in_process->callbacks);
      } else {
        in_process->result = run::train(config, in_process->callbacks);
      }
    });
  });
  return cmd;
}

void add_train_command(CLI::App& app) { add_train_command(app, nullptr); }

void run_train_in_process(const std::vector<std::string>& args, InProcessTrain& data) {
  CLI::App app{"frugal"};
  app.require_subcommand(1);
  add_train_command(app, &data);
  refuse_negative_unsigned(app);
  // CLI11 takes a vector of arguments last first.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  reversed.emplace_back("train");
  try {
    app.parse(reversed);
  } catch (const CLI::RuntimeError& e) {
    throw Error(fmt::format("frugal train stopped with exit code {}", e.get_exit_code()));
  } catch (const CLI::ParseError& e) {
    // The command line's own words: "--batch: 0 is not positive: expected a count from 1 up".
    throw Error(parse_error_words(e));
  }
}

std::vector<TrainFlag> train_flags() {
  CLI::App app{"frugal"};
  CLI::App* cmd = add_train_command(app, nullptr);
  std::vector<TrainFlag> flags;
  for (const CLI::Option* o : cmd->get_options()) {
    if (o->get_lnames().empty() || o->get_lnames().front() == "help") continue;
    const std::string name = "--" + o->get_lnames().front();
    flags.push_back({.name = name, .default_value = o->get_default_str(), .takes_value = o->get_items_expected_max() != 0});
  }
  return flags;
}

}  // namespace frugal::cli
