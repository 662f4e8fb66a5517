#include "train/run/train_options.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "comm/init_flags.h"
#include "core/check.h"
#include "core/device.h"
#include "core/flag_number.h"
#include "core/parse.h"
#include "train/ensemble_ranker.h"
#include "train/run/option_builders.h"
#include "train/run/rank_agreement.h"

namespace frugal::run {

using namespace options;

namespace {

std::vector<Option<run::DlrmArgs>> dlrm_options() {
  using D = DlrmArgs;
  std::vector<Option<D>> out;
  out.push_back(choice<D, layers::IdMode>(
      "--ids", &D::ids, {layers::IdMode::full, layers::IdMode::hash, layers::IdMode::freq_double, layers::IdMode::qr},
      "--model dlrm: embedding rows of the categorical ids: full (a row per id seen --min-id-count times), "
      "hash (--hash-rows per field), freq-double (frequent ids own rows, rare ones double-hashed) or qr "
      "(quotient x remainder tables); freq-double and qr keep 1/--id-compression of full's rows"));
  out.push_back(number("--embedding-dim", &D::embedding_dim,
                       "--model dlrm: embedding dimension (and the bottom MLP's output)", NumberBounds::positive()));
  out.push_back(text_option("--bottom", &D::bottom, "--model dlrm: hidden widths of the bottom (dense-feature) MLP, "
                                                    "e.g. 64 or 256,64; none: one layer"));
  out.push_back(text_option("--top", &D::top, "--model dlrm: hidden widths of the top MLP before its click logit"));
  out.push_back(number("--min-id-count", &D::min_id_count, "--model dlrm: ids seen fewer times in the training data "
                                                           "share one row (--ids full, freq-double, qr)",
                       NumberBounds::positive()));
  out.push_back(number("--hash-rows", &D::hash_rows, "--model dlrm --ids hash: rows per field",
                       NumberBounds::in_range(1, static_cast<double>(size_t{1} << 31))));
  out.push_back(number("--id-compression", &D::id_compression,
                       "--model dlrm --ids freq-double|qr: full-mode rows per row kept in a large field",
                       NumberBounds::in_range(1.0, 1e6)));
  out.push_back(choice<D, layers::Combine>(
      "--qr-combine", &D::qr_combine, {layers::Combine::sum, layers::Combine::product},
      "--model dlrm --ids qr: the quotient and remainder rows added or multiplied element-wise"));
  out.push_back(choice<D, layers::TableMode>(
      "--table-exchange", &D::table_exchange, {layers::TableMode::ps, layers::TableMode::des},
      "--model dlrm on several ranks, tables sliced by rows: ps (each rank pulls the rows its samples use "
      "from their owners and pushes their gradients back; the fewest bytes with one id per field) or des "
      "(partial lookups of every sample summed over the ranks: ids cross the network, weights never); "
      "--parallel data replicates the tables instead"));
  return out;
}

// The FRUGAL_* variables' options (comm/init_flags.h): each stored as comm::init's setting, named by
// its flag, and checked as comm::init will (so that a typo fails before the data is read).
std::vector<Option<TrainConfig>> cluster_options() {
  std::vector<Option<TrainConfig>> out;
  for (const comm::InitFlag& f : comm::init_flags()) {
    Option<TrainConfig> o = declared<TrainConfig>(std::string(f.flag), f.help,
                                                  f.choices.empty() ? OptionType::text : OptionType::choice);
    o.choices = f.choices;
    o.group = std::string(comm::kInitFlagGroup);
    o.cluster = true;
    if (f.existing_file) o.accepts = "FILE";
    o.check_text = [f](const std::string& text) -> std::string {
      if (text.empty()) return "an empty value: give one, or leave it out for its default";
      if (!f.choices.empty() && std::find(f.choices.begin(), f.choices.end(), text) == f.choices.end())
        return fmt::format("{} not in {{{}}}", text, fmt::join(f.choices, ","));
      if (f.existing_file && !std::filesystem::is_regular_file(text)) return "File does not exist: " + text;
      return "";
    };
    o.store = [f](TrainConfig& c, const std::string& text) {
      if (f.check != nullptr) f.check(f.flag, text);  // throws in comm::init's words, naming the flag
      c.join.settings[std::string(f.variable)] = {text, std::string(f.flag)};
    };
    o.text = [f](const TrainConfig& c) {
      const auto it = c.join.settings.find(std::string(f.variable));
      return it == c.join.settings.end() ? std::string() : it->second.value;
    };
    o.problem = [](const TrainConfig&) { return std::string(); };  // comm::init checks what it reads
    out.push_back(std::move(o));
  }
  return out;
}

std::vector<Option<TrainConfig>> make_train_options();

}  // namespace

std::vector<Option<InferSettings>> infer_options(const std::string& auto_help) {
  using I = InferSettings;
  std::vector<Option<I>> out;
  out.push_back(choice<I, std::optional<InferMode>>(
      "--infer", &I::mode,
      {{"auto", std::nullopt}, {"exact", InferMode::exact}, {"lsh", InferMode::lsh}, {"ensemble", InferMode::ensemble}},
      "how labels are scored: exact (every label), lsh (the labels LSH tables over the output rows return: "
      "faster, approximate), ensemble (the network blended with each label's centroid of its training "
      "points' features, kept with the checkpoint), auto: " + auto_help));
  out.push_back(number("--infer-candidates", &I::candidates, "--infer lsh: labels scored per point at most, those "
                                                             "found in the most tables (0: all the tables return)"));
  out.push_back(number("--ensemble-weight", &I::weight,
                       fmt::format("--infer ensemble: the label centroids' share of the blended probability, 0 to 1 "
                                   "(default {:g}, or the checkpoint's)", train::EnsembleOptions{}.weight)));
  out.push_back(number("--ensemble-knn-weight", &I::knn_weight,
                       fmt::format("--infer ensemble: the nearest training points' share, 0 to 1 (default {:g}, or "
                                   "the checkpoint's); the network's share is what the two leave",
                                   train::EnsembleOptions{}.knn_weight)));
  out.push_back(number("--ensemble-temperature", &I::temperature,
                       fmt::format("--infer ensemble: temperature of the softmax over the centroids' cosines and the "
                                   "neighbours' votes (default {:g}, or the checkpoint's)",
                                   train::EnsembleOptions{}.temperature)));
  out.push_back(number("--ensemble-neighbours", &I::neighbours,
                       fmt::format("--infer ensemble: training points that vote for their labels (default {}, or the "
                                   "checkpoint's)", train::EnsembleOptions{}.neighbours)));
  return out;
}

const std::vector<Option<TrainConfig>>& train_options() {
  static const std::vector<Option<TrainConfig>> options = make_train_options();
  return options;
}

const Option<TrainConfig>* find_train_option(std::string_view flag) {
  for (const Option<TrainConfig>& o : train_options())
    if (o.flag == flag) return &o;
  return nullptr;
}

void set_option(TrainConfig& config, std::string_view flag, const std::string& value) {
  const Option<TrainConfig>* o = find_train_option(flag);
  FRUGAL_CHECK(o != nullptr, fmt::format("frugal train has no option {}", flag));
  o->set(config, value);
  config.given.insert(std::string(flag));
}

TrainConfig parse_train_options(const std::vector<std::string>& args) {
  TrainConfig config;
  std::map<std::string, int> times;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    const Option<TrainConfig>* o = find_train_option(flag);
    FRUGAL_CHECK(o != nullptr, fmt::format("The following argument was not expected: {}", flag));
    if (++times[flag] > 1 && !o->repeatable)
      throw Error(fmt::format("{}: given {} times; give it once", flag, times[flag]));
    if (o->type == OptionType::switch_) {
      set_option(config, flag, "on");
      continue;
    }
    FRUGAL_CHECK(i + 1 < args.size(), fmt::format("{}: 1 required {} missing", flag, "value"));
    set_option(config, flag, args[++i]);
  }
  for (const Option<TrainConfig>& o : train_options())
    FRUGAL_CHECK(!o.required || times.count(o.flag) > 0, fmt::format("{} is required", o.flag));
  return config;
}

void check_options(const TrainConfig& config) {
  for (const Option<TrainConfig>& o : train_options()) {
    if (const std::string problem = o.problem(config); !problem.empty())
      throw Error(fmt::format("{}: {}", o.flag, problem));
  }
}

std::vector<std::pair<std::string, std::string>> agreed_settings(const TrainConfig& config) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Option<TrainConfig>& o : train_options()) {
    if (o.cluster || !compared_as_given(o.flag)) continue;
    std::string text = o.text(config);
    if (text.empty()) continue;
    std::string key = o.flag.substr(2);
    std::replace(key.begin(), key.end(), '-', '_');
    out.emplace_back(std::move(key), std::move(text));
  }
  return out;
}

namespace {

std::vector<Option<TrainConfig>> make_train_options() {
  using T = TrainConfig;
  std::vector<Option<T>> out;
  auto add = [&](Option<T> o) { out.push_back(std::move(o)); };
  add(text_option("--train", &T::train, "training file (XMC format), or IDX prefix such as .../fashion-mnist/train",
                  true));
  add(text_option("--test", &T::test, "test file (XMC format), or IDX prefix such as .../fashion-mnist/t10k", true));
  add(choice<T, ModelKind>("--model", &T::model, {ModelKind::xmc, ModelKind::dlrm},
                           "xmc: sparse input -> hidden layers -> softmax over labels; dlrm: the DLRM click-through "
                           "model (embedding tables, bottom/top MLPs, dot interaction; --format criteo)"));
  add(choice<T, data::DataFormat>(
      "--format", &T::format, {data::DataFormat::xmc, data::DataFormat::idx, data::DataFormat::criteo},
      "xmc: text files; idx: PREFIX-images-idx3-ubyte[.gz] + PREFIX-labels-idx1-ubyte[.gz]; criteo: "
      "Criteo-format click logs (--model dlrm; its default)"));
  for (const Option<DlrmArgs>& o : dlrm_options()) add(nested(o, &T::dlrm));
  add(text_option("--layers", &T::layers, "hidden layer widths, input side first, e.g. 1024,1024 (replaces --hidden)"));
  {
    Option<T> hidden = declared<T>("--hidden",
                                   "hidden layer width; auto: 128, or for few-shot labels (a typical label with <= 8 "
                                   "training points) the widest of 1024, 512, 256 whose epoch stays within a work "
                                   "budget (the log says what it chose)",
                                   OptionType::text);
    hidden.default_text = "auto";
    hidden.store = [](T& c, const std::string& text) {
      c.hidden = text == "auto" ? 0
                                : parse_number<size_t>("--hidden", text, "auto or a width from 1 to 1048576",
                                                       [](size_t w) { return w >= 1 && w <= (size_t{1} << 20); });
    };
    hidden.text = [](const T& c) { return c.hidden == 0 ? std::string("auto") : fmt::format("{}", c.hidden); };
    hidden.problem = [](const T& c) {
      return c.hidden <= (size_t{1} << 20) ? std::string()
                                           : fmt::format("{} is outside [1, 1048576] (0: auto)", c.hidden);
    };
    add(std::move(hidden));
  }
  add(number("--batch", &T::batch, "points per step", NumberBounds::positive()));
  add(number("--epochs", &T::epochs,
             "epochs (in total, counting those of a resumed run); auto: up to 10 where a validation set stops the "
             "run early (see --valid-fraction), else 3", {}, "auto"));
  // Beyond kMaxLr the first step diverges: refused before the data is read.
  add(number("--lr", &T::lr,
             fmt::format("learning rate (default {} with adam, {} with sgd, {} with adagrad, {} with rowwise-adagrad "
                         "({} with --model dlrm), {} with rowwise-adam ({} with --model dlrm))",
                         optim::Adam{}.lr, optim::Sgd{}.lr, optim::Adagrad{}.lr, optim::RowwiseAdagrad{}.lr,
                         optim::Adagrad{}.lr, optim::RowwiseAdam{}.lr, optim::Adam{}.lr),
             NumberBounds::above_up_to(0.0, kMaxLr)));
  {
    std::vector<std::pair<std::string, std::optional<optim::Method>>> optimizers{{"auto", std::nullopt}};
    for (const optim::Method m : {optim::Method::adam, optim::Method::sgd, optim::Method::adagrad,
                                  optim::Method::rowwise_adagrad, optim::Method::rowwise_adam})
      optimizers.emplace_back(optim::to_string(m), m);
    add(choice<T, std::optional<optim::Method>>(
        "--optimizer", &T::optimizer, optimizers,
        "adam, sgd (with --momentum), adagrad (with --initial-accumulator), rowwise-adagrad (one accumulator "
        "per row of the sparse input layer and of the LSH output layer, per-element Adagrad elsewhere), "
        "rowwise-adam (Adam with one second moment per row of those layers; see --rowwise-momentum), or auto: "
        "rowwise-adam with the LSH sampler, adam with the exact softmax and --model dlrm"));
  }
  add(choice<T, std::optional<bool>>(
      "--rowwise-layers", &T::rowwise_input, {{"all", true}, {"output", false}},
      "row-wise optimizers: row-wise state on the sparse input layer and the LSH output layer (all: the "
      "default with --optimizer rowwise-*), or on the output layer's label rows only, the input layer keeping "
      "per-element state (output: what --optimizer auto uses)"));
  add(on_off("--rowwise-momentum", &T::rowwise_momentum,
             "--optimizer rowwise-adam: keep Adam's per-element first moment on the row-wise layers (on), or "
             "step by the gradient over the row's RMS alone (off: no per-element state at all)"));
  add(choice<T, optim::SparseUpdates>("--sparse-updates", &T::sparse_updates,
                                      {optim::SparseUpdates::lazy, optim::SparseUpdates::catchup},
                                      "rows without a gradient in a step: lazy (untouched) or catchup (get the missed "
                                      "steps when next touched, as the dense optimizer would)"));
  add(number("--momentum", &T::momentum, "SGD momentum (0: plain SGD)", NumberBounds::in_range(0.0, 0.9999)));
  add(number("--initial-accumulator", &T::initial_accumulator,
             "Adagrad: the sum of squared gradients every weight starts from (PyTorch's 0: a first step of "
             "lr * sign(g); TensorFlow's 0.1 outweighs small gradients and needs a larger --lr)",
             NumberBounds::non_negative()));
  add(number("--update-threshold", &T::update_threshold,
             "skip the update of a sparse-input or LSH-output row whose step gradient RMS is below this fraction "
             "of the row's running gradient RMS; the gradient waits in a residual until it matters or the epoch "
             "ends (0: off)",
             NumberBounds::non_negative()));
  add(number("--adam-freeze-v-after", &T::adam_freeze_v_after,
             "Adam: freeze each row's second moment after its first N updates (1-bit Adam's frozen "
             "variance; 0: never). Lets DCT-DP's error-feedback bursts move weights in full"));
  add(number("--weight-decay", &T::weight_decay, "decoupled weight decay W: w -= lr * W * w every step (AdamW)",
             NumberBounds::non_negative()));
  add(choice<T, std::optional<optim::ScheduleKind>>(
      "--lr-schedule", &T::lr_schedule,
      {{"auto", std::nullopt}, {"constant", optim::ScheduleKind::constant}, {"linear", optim::ScheduleKind::linear},
       {"cosine", optim::ScheduleKind::cosine}},
      "learning rate over the run: constant, or linear / cosine decay to 0 over epochs x steps per epoch; auto: "
      "cosine where early stopping watches a validation set (over --epochs, the bound it stops within), else "
      "constant; with --resume, the checkpoint's"));
  add(number("--warmup-steps", &T::warmup_steps, "linear learning-rate warm-up from 0 over the first N steps"));
  add(number("--clip-norm", &T::clip_norm, "clip the global gradient L2 norm to C (0: off)",
             NumberBounds::non_negative()));
  add(number("--dropout", &T::dropout, "input-feature dropout probability in training (inverted dropout)",
             NumberBounds::in_range(0.0, 0.99)));
  add(number("--valid-fraction", &T::valid_fraction,
             "hold back this seeded, label-stratified share of the training set and score it after every epoch "
             "(valid_p@1 in the epoch lines; --model dlrm: click-stratified, valid_auc); the best-scoring epoch is the model the run returns and CHECKPOINT "
             "serves. Default: 5% (at least 1,000 and at most 20,000 points) of a set of 5,000 points or more, "
             "none below; 0: off",
             NumberBounds::in_range(0.0, 0.9), "auto"));
  add(text_option("--valid", &T::valid,
                  "validation file (the training file's format), scored after every epoch instead of a share of the "
                  "training set"));
  add(number("--early-stopping", &T::early_stopping,
             "stop after N epochs in a row without a better validation score (default 2 where there is a "
             "validation set; 0: off); the best epoch's model is returned either way, and --epochs is the upper "
             "bound", {}, "auto"));
  add(number("--valid-every", &T::valid_every,
             "also score the validation set every N training steps within an epoch, keeping the model there when "
             "it is the best so far (0: at epoch ends only). Default: in long epochs only, every (validation "
             "points / 0.05) training points, so each scoring costs what an epoch-end one does on a set with a "
             "5% split (none in an epoch of up to 400,000 points with the default split)", {}, "auto"));
  add(choice<T, layers::Sampler>("--sampler", &T::sampler, {layers::Sampler::lsh, layers::Sampler::exact},
                                 "output neurons computed in training"));
  add(choice<T, std::optional<Dtype>>(
      "--precision", &T::precision, {{"auto", std::nullopt}, {"f32", Dtype::f32}, {"bf16", Dtype::bf16}},
      "storage of the sparse input layer's and the LSH softmax's weights and their optimizer moments: f32, or "
      "bf16 (half the memory and bandwidth; computed in f32, updates stored with stochastic rounding); auto: bf16 "
      "for the LSH network on a CPU with AVX512-BF16, f32 otherwise (and a resumed run's own)"));
  add(choice<T, Bf16Dot>("--bf16-dot", &T::bf16_dot, {{"auto", Bf16Dot::auto_}, {"on", Bf16Dot::on}, {"off", Bf16Dot::off}},
                         "--precision bf16 on the CPU: products over bf16 weight rows (active logits, dLoss/dh, the "
                         "sparse input layer) with AVX512-BF16's vdpbf16ps, the f32 side rounded to bf16 (auto: where "
                         "the CPU has it; off: widened to f32, the bits of the f32 kernels)"));
  add(choice<T, layers::HashKind>("--hash", &T::hash, {layers::HashKind::dwta, layers::HashKind::simhash}, "LSH family"));
  add(number("--k", &T::k, "LSH bits (simhash) or bins (dwta) per table; 0: chosen from the label count",
             NumberBounds::in_range(0, 24)));
  add(number("--active-target", &T::active_target,
             "LSH: labels per point the automatic hash width (--k 0) aims at from the tables (0: 1.5% of the "
             "labels, at least 256 and at most 1024)",
             NumberBounds::non_negative()));  // a count would take -5 as 2^64 - 5
  add(number("--bin-size", &T::bin_size, "DWTA coordinates per bin (power of two)", NumberBounds::in_range(2, 256)));
  add(number("--tables", &T::tables, "LSH tables", NumberBounds::in_range(1, 4096)));
  add(number("--bucket-capacity", &T::bucket, "LSH bucket capacity (random eviction)", NumberBounds::in_range(1, 65536)));
  add(number("--min-active", &T::min_active, "top active sets up to this size with random labels"));
  add(number("--max-active", &T::max_active,
             "LSH: labels a training point computes at most: its own, the LSH candidates found in the most tables, "
             "then the random negatives (--negatives); 0: no cap (the union of the tables' buckets, which grows "
             "with the label count). auto: a budget that does not grow with the labels", {}, "auto"));
  add(number("--negatives", &T::negatives, "LSH: random negatives drawn per point in training, from a mix of "
                                           "label frequency and uniform (0: none)"));
  add(number("--negatives-uniform", &T::negatives_uniform,
             "LSH: uniform share of the negatives' proposal (the rest follows label frequency)",
             NumberBounds::in_range(0.0, 1.0)));
  add(on_off("--logq", &T::logq, "LSH: correct random negatives' logits by their sampling probability"));
  for (const Option<InferSettings>& o : infer_options("ensemble on few-shot labels (a typical label with <= 8 "
                                                      "training points), else exact"))
    add(nested(o, &T::infer));
  add(choice<T, std::optional<OutputInit>>(
      "--output-init", &T::output_init,
      {{"auto", std::nullopt}, {"random", OutputInit::random}, {"centroid", OutputInit::centroid}},
      "output rows: random, or each label's centroid in hidden space (a nearest-centroid classifier to "
      "start from; trains at --lr 1e-3 when --lr is not given on few-shot labels); auto: centroid for "
      "few-shot labels (a typical label with <= 8 training points), else random"));
  add(number("--centroid-scale", &T::centroid_scale,
             "logit of a point along its label's centroid, per RMS hidden norm (--output-init centroid)",
             NumberBounds::positive()));
  add(number("--rebuild-first", &T::rebuild_first, "steps before the first LSH table rebuild"));
  // Beyond 1e6, an interval times it is no step count (a cast to 64 bits).
  add(number("--rebuild-growth", &T::rebuild_growth, "factor by which rebuild intervals grow",
             NumberBounds::in_range(1.0, 1e6)));
  add(number("--rebuild-max", &T::rebuild_max, "longest interval between rebuilds (steps)"));
  add(threads_option(&T::threads));
  add(number("--seed", &T::seed, "seed of every random choice"));
  add(number("--max-steps", &T::max_steps,
             "end each epoch after this many steps (0: whole epochs); for throughput measurements"));
  add(number("--eval-batch", &T::eval_batch, "points per evaluation batch", NumberBounds::positive()));
  add(text_option("--metrics", &T::metrics, "append-free JSON-lines metrics log (FILE.jsonl)"));
  add(text_option("--checkpoint", &T::checkpoint, "save a checkpoint here after every epoch"));
  add(number("--checkpoint-every", &T::checkpoint_every,
             "with --checkpoint, also save it every N training steps within an epoch, so that --resume continues "
             "from the middle of one as the uninterrupted run would (0: at epoch ends only). Default: in long "
             "epochs only, every 400,000 training points", {}, "auto"));
  add(text_option("--resume", &T::resume, "continue from the newest intact checkpoint in this directory (a damaged "
                                          "newer one is skipped, saying why)"));
  add(accept_unchecked_option(&T::accept_unchecked_checkpoint));
  add(switch_option("--strict", &T::strict,
                    "warnings about suspicious but valid input (label ids far above the rest, feature values "
                    "beyond any sane scale, a class with a single point, a checkpoint older than its run's "
                    "newest) are errors"));
  add(number("--keep-checkpoints", &T::keep_checkpoints,
             "--checkpoint: keep the newest K checkpoints (older ones are --resume's fallback); 1: the newest only",
             NumberBounds::positive()));
  add(text_option("--grid", &T::grid, "process grid DxM: D data-parallel replicas of M ranks slicing the model "
                                      "(default 1xN: all ranks slice the model); DxMxS: D replicas of S pipeline "
                                      "stages, each stage sliced over M ranks"));
  {
    Option<T> pipeline = number("--pipeline", &T::pipeline, "split the layers into S pipeline stages on S ranks (1F1B "
                                                            "over micro-batches; with more ranks, data-parallel "
                                                            "replicas of the pipeline)",
                                NumberBounds::positive());
    pipeline.default_text = "";  // unset: no pipeline
    add(std::move(pipeline));
    Option<T> micro = number("--micro-batches", &T::micro_batches, "--pipeline: micro-batches per batch (default 2 "
                                                                   "per stage, at least 16 points each)",
                             NumberBounds::positive());
    micro.default_text = "";  // unset: chosen from the stages
    add(std::move(micro));
  }
  add(text_option("--stage-split", &T::stage_split, "--pipeline: layers per stage, e.g. 1,3 (input layer, hidden "
                                                    "layers, output layer in order); auto: balanced by estimated cost"));
  add(choice<T, ParallelMode>("--parallel", &T::parallel, {ParallelMode::model, ParallelMode::data},
                              "model: slice the model (with --grid); data: the whole model on every rank, gradients "
                              "summed by a dense all-reduce every step (Horovod)"));
  add(text_option("--slice-weights", &T::slice_weights, "relative share of the neurons per model rank, e.g. 1,1,2; "
                                                        "auto: measured (calibrated in the first epoch)"));
  add(number("--calibration-steps", &T::calibration_steps, "--slice-weights auto: steps timed to size the slices",
             NumberBounds::positive()));
  add(number("--memory-limit", &T::memory_limit_mib,
             "MiB this rank may take: a model whose weights alone exceed it is refused before it is allocated, "
             "and --slice-weights auto caps this rank's share of weights and optimizer state by it (0: the "
             "machine's available memory is the limit)",
             NumberBounds::non_negative()));
  add(choice<T, std::optional<bool>>(
      "--stream", &T::stream, {{"auto", std::nullopt}, {"on", true}, {"off", false}},
      "train from a packed training file (docs/data.md) block by block, each data-parallel replica reading "
      "its share of the blocks, in memory that holds a few of them, shuffled within them (the XMC network "
      "and --model dlrm; not --pipeline); auto: when the set would take more than half of --memory-limit "
      "(or of the available memory)",
      "auto"));
  add(number("--calibration-warmup", &T::calibration_warmup, "--slice-weights auto: steps before the timed ones"));
  add(device_option(&T::device));
  add(choice<T, DpTransport>("--dp-transport", &T::dp_transport,
                             {DpTransport::auto_, DpTransport::host, DpTransport::nccl},
                             "what sums the data-parallel replicas' gradients: host (the ranks' ZeroMQ/MPI "
                             "transport), nccl (NCCL between their GPUs; every replica on --device cuda), auto (nccl "
                             "when every replica runs on a GPU and this build has NCCL, else host)"));
  for (Option<T>& o : cluster_options()) add(std::move(o));
  add(choice<T, Compress>(
      "--compress", &T::compress, {Compress::link, Compress::off, Compress::auto_},
      "DCT on the network: auto sets the keep fractions online (DCT-DP: per parameter, the fewest entries "
      "carrying a fixed share of the gradient's energy, backing off when the error grows; DCT-MP: per sample, "
      "the fewest activations carrying a fixed share of the L1 mass); off: only what --dp-keep / --mp-keep "
      "and friends ask for; link: auto for the replicas' exchange when the link measured at start-up is slow "
      "enough for it to pay, else off (the log says which; --dp-keep and friends mean off)"));
  {
    Option<T> energy = number("--compress-energy", &T::compress_energy,
                              fmt::format("--compress auto: the share of each parameter's accumulated gradient energy "
                                          "that DCT-DP's messages must carry (default {} under per-row selection, {} "
                                          "with one tau per parameter; higher: closer to uncompressed, fewer bytes "
                                          "saved)",
                                          kAutoDpEnergyPerRow, kAutoDpEnergyGlobal),
                              NumberBounds::in_range(0.01, 0.99));
    energy.default_text = "";  // 0: the selection's own
    add(std::move(energy));
  }
  add(number("--dp-keep", &T::dp_keep, "DCT-DP: fraction ETA of gradient entries each data-parallel replica sends "
                                       "(|g + residual| >= tau; the rest is fed back); unset: every touched row "
                                       "travels",
             NumberBounds::in_range(1e-9, 1.0)));
  add(number("--dp-reestimate-every", &T::dp_reestimate_every,
             "DCT-DP: steps between estimates of tau (stale in between; 1: every step)", NumberBounds::positive()));
  add(choice<T, TauEstimate>("--dp-tau", &T::dp_tau, {TauEstimate::sampled, TauEstimate::exact},
                             "DCT-DP: estimate tau from a 10k-entry sample or by exact selection (exact with "
                             "--dp-reestimate-every 1: exact top-k every step)"));
  add(choice<T, std::optional<comm::DpTarget>>(
      "--dp-compress", &T::dp_compress,
      {{"auto", std::nullopt}, {"gradients", comm::DpTarget::gradients}, {"updates", comm::DpTarget::updates}},
      "DCT-DP: what replicas threshold and exchange: gradients (the optimizer steps on their sum), "
      "updates (each replica's optimizer steps on its own gradient; the weight changes are averaged), or "
      "auto: updates when a batch touches at least half of the input rows, the softmax is exact and "
      "--dp-keep < 1, else gradients"));
  add(choice<T, std::optional<DpSelect>>(
      "--dp-select", &T::dp_select,
      {{"auto", std::nullopt}, {"global", DpSelect::global}, {"row", DpSelect::row}, {"floor", DpSelect::floor}},
      "DCT-DP: global (the entries above one tau per parameter), row (each touched row sends its own "
      "top ETA fraction; values, not signs) or floor (global, and a touched row with no entry above tau "
      "sends its largest); auto: row when gradients are thresholded, else global"));
  {
    Option<T> keep_input = number("--dp-keep-input", &T::dp_keep_input,
                                  "DCT-DP: the keep fraction of the sparse input layer (sparse_dense.*); unset: 2.5 x "
                                  "--dp-keep under per-row selection, else --dp-keep",
                                  NumberBounds::above_up_to(0.0, 1.0));
    keep_input.check_text = [](const std::string& text) {
      const auto x = to_number<float>(text);
      return x && *x > 0.0f && *x <= 1.0f ? std::string() : "expected a fraction in (0, 1]";
    };
    add(std::move(keep_input));
  }
  {
    Option<T> keep_param = declared<T>("--dp-keep-param",
                                       "DCT-DP: PREFIX=ETA, the keep fraction of the parameters whose names start "
                                       "with PREFIX (e.g. softmax.=0.2; repeatable, the first match wins; the rest "
                                       "keep --dp-keep)",
                                       OptionType::text);
    keep_param.repeatable = true;
    keep_param.check_text = [](const std::string& text) {
      return text.empty() ? "an empty value: give one, or leave it out for its default" : std::string();
    };
    keep_param.store = [](T& c, const std::string& text) { c.dp_keep_param.push_back(text); };
    keep_param.text = [](const T& c) { return fmt::format("{}", fmt::join(c.dp_keep_param, ",")); };
    keep_param.problem = [](const T&) { return std::string(); };  // the run reads each PREFIX=ETA
    add(std::move(keep_param));
  }
  add(number("--dp-warmup-steps", &T::dp_warmup_steps,
             "DCT-DP: the kept fraction falls geometrically from everything to --dp-keep over the first N steps"));
  add(on_off("--dp-momentum-correction", &T::dp_momentum_correction,
             "DCT-DP (gradients): each replica accumulates its own momentum velocity and thresholds that (DGC's "
             "momentum correction); the optimizer then steps without momentum of its own"));
  add(number("--dp-explore", &T::dp_explore,
             "DCT-DP: besides the entries the threshold selects, send each other touched entry with this "
             "probability (Slim-DP's exploration: no coordinate waits behind the large ones indefinitely; its "
             "bytes count like the rest); 0: off",
             NumberBounds::in_range(0.0, 0.5)));
  add(on_off("--dp-local-clip", &T::dp_local_clip,
             "DCT-DP (gradients) with --clip-norm C: each replica clips its own gradient to C / sqrt(replicas) "
             "before thresholding (DGC's local clipping) instead of clipping the sum"));
  add(choice<T, train::OnDivergence>(
      "--on-divergence", &T::on_divergence, {train::OnDivergence::stop, train::OnDivergence::skip_batch},
      "a training step whose loss (or, with --clip-norm, gradient norm) is NaN or infinite: stop the run "
      "with an error naming the epoch and step, keeping the last good checkpoint; or skip-batch: drop that "
      "batch's update and go on (the epoch line counts skipped_batches; not with replicas or --pipeline)"));
  add(on_off("--overlap", &T::overlap,
             "model-parallel steps move the layers above the input while the input boundary's gradient exchange "
             "is in flight (applies without replicas and without --clip-norm), and may compute the input layer in "
             "two halves, the first half's all-gather in flight while the second is computed (--overlap-forward); "
             "the same bits either way"));
  add(choice<T, train::ForwardSplit>(
      "--overlap-forward", &T::overlap_forward,
      {{"auto", train::ForwardSplit::automatic}, {"on", train::ForwardSplit::always}, {"off", train::ForwardSplit::never}},
      "with --overlap on and an exact input boundary (--mp-keep 1, f32): split the input layer's forward "
      "pass in two halves always (on), never (off), or where half the batch's input work on the widest "
      "slice reaches 2^20 multiply-adds (auto: below that the extra round of messages costs more than it "
      "hides)"));
  // A count is at most a slice's width (--hidden's largest).
  add(number("--mp-keep", &T::mp_keep, "DCT-MP: activations each sample keeps per rank's slice at a sliced layer "
                                       "boundary: a fraction (<= 1) or a count (> 1); 1: all",
             NumberBounds::in_range(0.0, 1048576.0)));
  add(number("--mp-mass", &T::mp_mass, "DCT-MP adaptive k: each sample keeps the fewest of its top --mp-keep "
                                       "activations per slice whose magnitudes cover this fraction of the slice's L1 "
                                       "mass; 1: a fixed k"));
  add(choice<T, comm::StraightThrough>(
      "--mp-straight-through", &T::mp_straight_through,
      {comm::StraightThrough::off, comm::StraightThrough::input, comm::StraightThrough::all},
      "DCT-MP: backward, this rank's own share of the gradient reaches every unit of its slice, kept or "
      "not (free: it is local), at the input layer's boundary (input) or at every boundary (all); off: "
      "the exact gradient of the masked network"));
  add(on_off("--mp-error-feedback", &T::mp_error_feedback,
             "DCT-MP: what a rank's backward message leaves out (gradient shares at dropped positions, value "
             "rounding) is added to its share at the same batch row and position next step (Optimus-CC's lazy "
             "error propagation); on by default at a compressed --pipeline boundary",
             "off"));
  add(number("--mp-straight-through-steps", &T::mp_straight_through_steps,
             "DCT-MP: the straight-through estimate applies during the first N training steps only; 0: the "
             "whole run"));
  {
    Option<T> warmup = number("--mp-warmup-steps", &T::mp_warmup_steps,
                              "DCT-MP: the kept fraction falls geometrically from everything to --mp-keep over the "
                              "first N steps (a compressed --pipeline boundary: the first two epochs' steps unless "
                              "given)");
    warmup.default_text = "0";
    add(std::move(warmup));
  }
  add(choice<T, std::optional<comm::ValueType>>(
      "--wire-dtype", &T::wire_dtype,
      {{"f32", comm::ValueType::f32}, {"bf16", comm::ValueType::bf16}, {"f16", comm::ValueType::f16}},
      "value type of DCT messages (activations, their gradients, thresholded parameter gradients)", "f32"));
  add(choice<T, std::optional<comm::ValueType>>(
      "--mp-wire-dtype", &T::mp_wire,
      {{"auto", std::nullopt}, {"f32", comm::ValueType::f32}, {"bf16", comm::ValueType::bf16},
       {"f16", comm::ValueType::f16}, {"i8", comm::ValueType::i8}},
      "DCT-MP: value type of the kept activations and their gradients; i8: one byte each plus a bf16 scale "
      "per sample (activations round to nearest, gradients stochastically); auto: --wire-dtype when given, "
      "else i8 below --mp-keep 1 and f32 at 1"));
  add(choice<T, std::optional<comm::ValueType>>(
      "--dp-wire-dtype", &T::dp_wire,
      {{"auto", std::nullopt}, {"f32", comm::ValueType::f32}, {"bf16", comm::ValueType::bf16},
       {"f16", comm::ValueType::f16}, {"sign", comm::ValueType::sign}},
      "DCT-DP: value type of the thresholded entries; sign: one bit each plus one scale per message; auto: "
      "--wire-dtype when given, else below --dp-keep 1 sign for exchanged updates and bf16 for gradients, "
      "f32 at 1"));
  add(switch_option("--quiet", &T::quiet, "no progress bars or setup lines: rank 0 prints only the epoch lines, "
                                                  "warnings and errors"));
  // Every option set records itself as given (TrainConfig::given), whichever face set it.
  for (Option<T>& o : out) {
    o.store = [store = std::move(o.store), flag = o.flag](T& c, const std::string& text) {
      store(c, text);
      c.given.insert(flag);
    };
  }
  return out;
}

}  // namespace

}  // namespace frugal::run
