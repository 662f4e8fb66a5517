#include "train/run/trained_model.h"

#include <chrono>
#include <cstring>
#include <filesystem>
#include <limits>
#include <span>

#include <fmt/format.h>

#include "core/communicator.h"
#include "core/data/label_counts_file.h"
#include "core/say.h"
#include "train/checkpoint_manifest.h"

namespace frugal::run {

namespace {
// The ensemble's members as its ranker reads them (a member not built: null).
train::EnsembleMembers members_of(const Ensemble& e) {
  return {.centroids = e.centroids ? &*e.centroids : nullptr, .points = e.points ? &*e.points : nullptr};
}
}  // namespace

bool chooses_blend(const RunArgs& a, const data::Dataset* valid) {
  return valid != nullptr && valid->size() > 0 && a.inference.mode == InferMode::ensemble && !a.infer.weight &&
         !a.infer.knn_weight && !a.infer.temperature;
}

void build_ensemble(const RunArgs& a, const data::Dataset& train, Ensemble& e, bool all_members) {
  const auto t = std::chrono::steady_clock::now();
  train::EnsembleMembers members;
  if (all_members || a.inference.ensemble.weight > 0.0f) members.centroids = &e.centroids.emplace(train);
  if (all_members || a.inference.ensemble.knn_weight > 0.0f) members.points = &e.points.emplace(train);
  e.ranker.emplace(members, a.inference.ensemble);
  const double mib = static_cast<double>((e.centroids ? e.centroids->bytes() : 0) + (e.points ? e.points->bytes() : 0)) /
                     double(1 << 20);
  if (!a.quiet)
    say("--infer ensemble: {:.1f} MiB of label centroids and nearest training points in {:.1f} s; evaluation "
               "blends the network ({:g}) with the centroids ({:g}) and the {} nearest points' votes ({:g}), "
               "temperature {:g}\n",
               mib, std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count(),
               1.0f - a.inference.ensemble.weight - a.inference.ensemble.knn_weight, a.inference.ensemble.weight,
               a.inference.ensemble.neighbours, a.inference.ensemble.knn_weight, a.inference.ensemble.temperature);
}

Scoring::Scoring(const RunArgs& a, const data::Dataset& train, const data::Dataset* valid, const LabelCounts* counts)
    : label_counts(counts != nullptr ? *counts : LabelCounts::of(train)) {
  // The ensemble's members are built from the training points: a streamed set never infers with it
  // (settle_streamed_inference, train/run/run_settings.h).
  FRUGAL_CHECK(counts == nullptr || a.inference.mode != InferMode::ensemble,
               "Scoring: an ensemble over a training set that is not held in memory");
  if (label_counts.points > 0) propensities.emplace(label_counts);
  const bool choose = chooses_blend(a, valid);
  if (a.inference.mode == InferMode::ensemble) build_ensemble(a, train, ensemble, choose);
  if (choose) {
    const auto t = std::chrono::steady_clock::now();
    choice = std::make_unique<train::EnsembleChoice>(members_of(ensemble), a.inference.ensemble, *valid, a.eval_batch);
    if (!a.quiet)
      say("--infer ensemble: the blend is chosen on the validation set after every epoch, {} blends of shares "
          "and temperature (the members' candidates of its {} points found in {:.1f} s)\n", choice->blends(),
          valid->size(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
  }
  options = {.k = {1, 3, 5}, .batch = a.eval_batch, .inference = a.inference.layer_mode(),
             .inference_candidates = a.inference.candidates, .propensities = propensities ? &*propensities : nullptr,
             .ensemble = ensemble.ranker ? &*ensemble.ranker : nullptr};
}

void Scoring::use_blend(size_t index) {
  FRUGAL_CHECK(choice != nullptr, "Scoring::use_blend: the run does not choose its blend");
  ensemble.ranker.emplace(members_of(ensemble), choice->blend(index));
  options.ensemble = &*ensemble.ranker;
}

BlendChosen choose_blend(Scoring& scoring, train::Trainer& trainer, comm::Communicator& world) {
  BlendChosen b;
  b.chosen = scoring.choice->choose(trainer, &b.base);
  if (world.size() > 1) {  // rank 0's choice everywhere (the checkpoint and the best epoch follow it)
    std::vector<double> said = {static_cast<double>(b.chosen.index), b.chosen.p1, b.chosen.p5, b.base.p1, b.base.p5};
    std::vector<std::byte> bytes(said.size() * sizeof(double));
    std::memcpy(bytes.data(), said.data(), bytes.size());
    world.broadcast_bytes(bytes, 0).wait();
    FRUGAL_CHECK(bytes.size() == said.size() * sizeof(double), "ensemble: rank 0's blend choice arrived damaged");
    std::memcpy(said.data(), bytes.data(), bytes.size());
    b.chosen.index = static_cast<size_t>(said[0]);
    b.chosen.options = scoring.choice->blend(b.chosen.index);
    b.chosen.p1 = said[1], b.chosen.p5 = said[2], b.base.p1 = said[3], b.base.p5 = said[4];
  }
  scoring.use_blend(b.chosen.index);
  return b;
}

std::string describe_blend(const BlendChosen& b) {
  const train::EnsembleOptions& o = b.chosen.options;
  return fmt::format("--infer ensemble: blend chosen on validation: network {:g}, centroids {:g}, nearest points {:g}, "
                     "temperature {:g} (valid P@1 {:.4f}, P@5 {:.4f}; the base blend {:.4f}, {:.4f})",
                     1.0f - o.weight - o.knn_weight, o.weight, o.knn_weight, o.temperature, b.chosen.p1, b.chosen.p5,
                     b.base.p1, b.base.p5);
}

nlohmann::json blend_record(const BlendChosen& b) {
  const train::EnsembleOptions& o = b.chosen.options;
  return {{"weight", o.weight}, {"knn_weight", o.knn_weight}, {"temperature", o.temperature},
          {"valid_p@1", b.chosen.p1}, {"valid_p@5", b.chosen.p5}, {"base_valid_p@1", b.base.p1},
          {"base_valid_p@5", b.base.p5}};
}

void Scoring::keep_beside(const std::string& dir, int rank) const {
  if (dir.empty() || rank != 0 || !kept_in_.insert(dir).second) return;
  for (const char* name : train::kCheckpointMemberFiles) {
    std::error_code ignored;  // absent: nothing to remove
    std::filesystem::remove(std::filesystem::path(dir) / name, ignored);
  }
  if (propensities) save_label_counts(dir, label_counts);
  if (ensemble.centroids) ensemble.centroids->save(dir);
  if (ensemble.points) ensemble.points->save(dir);
}

double EpochRecord::p_at(size_t k) const {
  const std::optional<double>& p = k == 1 ? p1 : k == 3 ? p3 : k == 5 ? p5 : valid_p1;
  FRUGAL_CHECK(k == 1 || k == 3 || k == 5, fmt::format("EpochRecord::p_at({}): the record has P@1, P@3 and P@5", k));
  return p.value_or(std::numeric_limits<double>::quiet_NaN());
}

bool report_epoch(const nlohmann::json& line, const RunCallbacks* callbacks, RunResult& result,
                  comm::Communicator* world) {
  EpochRecord r;
  r.epoch = line.value("epoch", uint64_t{0});
  r.rank = line.value("rank", 0);
  r.loss = line.value("loss", 0.0);
  r.train_samples_per_s = line.value("train_samples_per_s", 0.0);
  const auto metric = [&](const char* key) {
    return line.contains(key) && line[key].is_number() ? std::optional<double>(line[key].get<double>()) : std::nullopt;
  };
  r.p1 = metric("p@1");
  r.p3 = metric("p@3");
  r.p5 = metric("p@5");
  r.valid_p1 = metric("valid_p@1");
  r.auc = metric("auc");
  r.logloss = metric("logloss");
  r.json = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  result.epochs.push_back(r);
  float stop = callbacks != nullptr && callbacks->on_epoch && !callbacks->on_epoch(result.epochs.back()) ? 1.0f : 0.0f;
  if (world != nullptr && world->size() > 1) world->all_reduce(std::span<float>(&stop, 1), comm::ReduceOp::max).wait();
  return stop == 0.0f;
}

train::EvalResult RunResult::evaluate(const data::Dataset& data) const {
  FRUGAL_CHECK(model != nullptr, "RunResult::evaluate: this run returned no model (DLRM, a pipeline, or a rank "
                                 "--slice-weights auto left out): load its checkpoint with frugal::Predictor");
  return model->trainer->evaluate(data, model->scoring->options);
}

train::Predictions RunResult::predict(const data::Dataset& data, size_t k) const {
  FRUGAL_CHECK(model != nullptr, "RunResult::predict: this run returned no model (DLRM, a pipeline, or a rank "
                                 "--slice-weights auto left out): load its checkpoint with frugal::Predictor");
  FRUGAL_CHECK(k > 0, "RunResult::predict: k must be > 0");
  train::Predictions out;
  out.k = std::min<size_t>(k, model->model.output().out_features());
  const size_t batch = std::max<size_t>(1, model->scoring->options.batch);
  SparseBatch part;
  std::vector<uint32_t> ids, labels;
  std::vector<float> scores;
  for (size_t begin = 0; begin < data.size(); begin += batch) {
    const size_t end = std::min(data.size(), begin + batch);
    ids.resize(end - begin);
    for (size_t i = begin; i < end; ++i) ids[i - begin] = static_cast<uint32_t>(i);
    data.gather(ids, part);
    model->trainer->predict(part, out.k, labels, scores);
    out.labels.insert(out.labels.end(), labels.begin(), labels.end());
    out.scores.insert(out.scores.end(), scores.begin(), scores.end());
  }
  return out;
}

}  // namespace frugal::run
