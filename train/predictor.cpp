#include "train/predictor.h"

#include <fmt/format.h>

#include "core/communicator.h"
#include "core/check.h"
#include "train/checkpoint_history.h"
#include "train/checkpoint_manifest.h"
#include "train/served_checkpoint.h"
#include "core/warnings.h"
#include "core/data/label_counts_file.h"
#include "core/model.h"
#include "train/trainer.h"
#include "layers/network_config.h"

namespace frugal::train {

struct Predictor::Impl {
  Model model;
  std::unique_ptr<Trainer> trainer;  // inference only: the forward pass over the group, top-k merge
  CheckpointManifest info;
  ServedCheckpoint served;
  std::optional<LabelCounts> counts;
  size_t batch = 512;
  data::LabelCentroids centroids;            // --infer ensemble only, when it gives them weight
  data::NearestPoints points;                // likewise
  std::unique_ptr<EnsembleRanker> ensemble;  // over `centroids` and `points`
  std::vector<uint32_t> net_labels;
  std::vector<float> net_scores;
};

Predictor::Predictor(const std::string& folder, const PredictorOptions& options)
    : impl_(std::make_unique<Impl>()) {
  FRUGAL_CHECK(options.batch > 0, "PredictorOptions::batch must be > 0");
  Impl& m = *impl_;
  // The folder's best epoch on validation when the run kept one (train/served_checkpoint.h).
  m.served = served_checkpoint(folder, options.accept_unchecked_checkpoint);
  const std::string& checkpoint_dir = m.served.dir;
  m.batch = options.batch;
  m.info = read_manifest(checkpoint_dir, options.accept_unchecked_checkpoint);
  if (const std::string older = older_manifest_warning(checkpoint_dir, m.info); !older.empty()) warn(older);
  comm::Communicator* group = comm::is_active(options.group) ? options.group : nullptr;
  const Placement placement = group != nullptr ? Placement::sliced(*group) : Placement::replicated();
  if (options.build) {
    options.build(m.model, placement);
  } else {
    layers::NetworkSpec spec = layers::network_spec_from_config(m.info.config, checkpoint_dir + "/manifest.json");
    spec.sampler = "exact";  // inference scores every label: LSH tables would only cost time to build
    layers::build_network(m.model, spec, placement);
  }
  if (options.backend != nullptr) m.model.set_backend(options.backend);  // before the weights load into it
  m.trainer = std::make_unique<Trainer>(m.model, TrainerOptions{.parallel = {.model = group}, .inference_only = true});
  load_weights(checkpoint_dir, m.info, m.model, group);
  m.model.output().set_inference({.mode = options.inference, .candidates = options.inference_candidates});
  const bool unchecked = options.accept_unchecked_checkpoint;
  if (verify_member_file(checkpoint_dir, m.info, kLabelCountsFile, unchecked)) m.counts = load_label_counts(checkpoint_dir);
  if (options.ensemble) {
    // Each member the blend gives weight, as `frugal train` kept it next to the checkpoint.
    // A member missing from the checkpoint comes from the training set when one is given.
    const auto missing = [&](bool present, const char* file) {
      FRUGAL_CHECK(present || options.ensemble_train != nullptr,
                   fmt::format("--infer ensemble: {} holds no {}: the run that saved it did not infer with this "
                               "ensemble; give the training file (--train FILE), or use --infer exact",
                               checkpoint_dir, file));
      return !present;
    };
    const size_t labels = m.model.output().out_features();
    const auto check_labels = [&](size_t got, const char* file) {
      FRUGAL_CHECK(got == labels, fmt::format("{}/{}: made for {} labels, the model has {}", checkpoint_dir, file, got,
                                              labels));
    };
    EnsembleMembers members;
    if (options.ensemble->weight > 0.0f) {
      m.centroids = missing(verify_member_file(checkpoint_dir, m.info, data::kLabelCentroidsFile, unchecked),
                            "label centroids (label_centroids.bin)")
                        ? data::LabelCentroids(*options.ensemble_train)
                        : data::LabelCentroids::load(checkpoint_dir);
      check_labels(m.centroids.num_labels(), data::kLabelCentroidsFile);
      members.centroids = &m.centroids;
    }
    if (options.ensemble->knn_weight > 0.0f) {
      m.points = missing(verify_member_file(checkpoint_dir, m.info, data::kNearestPointsFile, unchecked),
                         "nearest training points (nearest_points.bin)")
                     ? data::NearestPoints(*options.ensemble_train)
                     : data::NearestPoints::load(checkpoint_dir);
      check_labels(m.points.num_labels(), data::kNearestPointsFile);
      members.points = &m.points;
    }
    m.ensemble = std::make_unique<EnsembleRanker>(members, *options.ensemble);
  }
}

Predictor::~Predictor() = default;
Predictor::Predictor(Predictor&&) noexcept = default;
Predictor& Predictor::operator=(Predictor&&) noexcept = default;

size_t Predictor::num_features() const { return impl_->model.input().in_features(); }
size_t Predictor::num_labels() const { return impl_->model.output().out_features(); }
uint64_t Predictor::epoch() const { return impl_->info.epoch; }
uint64_t Predictor::step() const { return impl_->info.step; }
int Predictor::saved_slices() const { return impl_->info.model_slices; }
const ServedCheckpoint& Predictor::served() const { return impl_->served; }

const CheckpointInfo& Predictor::checkpoint() const { return impl_->info; }

const std::optional<LabelCounts>& Predictor::label_counts() const { return impl_->counts; }
uint64_t Predictor::labels_scored() const { return impl_->model.output().labels_scored(); }

Predictions Predictor::top_k(const SparseBatch& batch, size_t k) {
  Predictions out;
  top_k(batch, k, out);
  return out;
}

void Predictor::top_k(const SparseBatch& batch, size_t k, Predictions& out) {
  FRUGAL_CHECK(k > 0, "Predictor::top_k: k must be > 0");
  const size_t features = num_features();
  for (size_t i = 0; i < batch.size(); ++i)
    for (const uint32_t f : batch.features_of(i))
      FRUGAL_CHECK(f < features, fmt::format("point {} of the batch: feature id {} >= the model's {} input features",
                                             i, f, features));
  Impl& m = *impl_;
  if (m.ensemble == nullptr) {
    m.trainer->predict(batch, k, out.labels, out.scores);
    out.k = std::min(k, num_labels());
    return;
  }
  m.trainer->predict(batch, std::max(k, m.ensemble->options().candidates), m.net_labels, m.net_scores);
  const size_t net_k = batch.size() == 0 ? std::min(k, num_labels()) : m.net_labels.size() / batch.size();
  out.k = m.ensemble->blend(batch, m.net_labels, m.net_scores, net_k, k, out.labels, out.scores);
}

RankingScores Predictor::evaluate(const data::Dataset& data, const std::vector<size_t>& ks,
                                  const Propensities* propensities) {
  FRUGAL_CHECK(data.num_features <= num_features(),
               fmt::format("{}: data has {} features, the model's input takes {}", data.source, data.num_features,
                           num_features()));
  FRUGAL_CHECK(data.num_labels <= num_labels(), fmt::format("{}: data has {} labels, the model's output has {}",
                                                            data.source, data.num_labels, num_labels()));
  return impl_->trainer->evaluate(data, {.k = ks, .batch = impl_->batch,
                                         .inference = impl_->model.output().inference().mode,
                                         .inference_candidates = impl_->model.output().inference().candidates,
                                         .propensities = propensities,
                                         .ensemble = impl_->ensemble.get()});
}

}  // namespace frugal::train
