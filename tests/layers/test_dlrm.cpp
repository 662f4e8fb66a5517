// The DLRM layers (layers/dlrm/): finite-difference gradients of the whole network (bottom MLP,
// embedding rows, dot interaction, top MLP, logistic loss), the interaction's values, the id maps,
// AUC and logloss against hand-computed values, and a training run that learns a planted click
// model.
#include <catch2/catch.hpp>

#include <cmath>
#include <algorithm>
#include <functional>
#include <vector>

#include "core/rng.h"
#include "layers/dlrm/click_metrics.h"
#include "layers/dlrm/dlrm_network.h"
#include "layers/dlrm/dlrm_trainer.h"
#include "layers/dlrm/dot_interaction.h"
#include "layers/dlrm/id_map.h"

using namespace frugal;
using namespace frugal::layers;

namespace {

// A planted click model: field 0's id decides most of it, dense feature 0 a little.
struct Planted {
  size_t n = 0, dense = 3, fields = 4;
  std::vector<float> labels, x;
  std::vector<uint64_t> cats;
  CtrView view() const { return {n, dense, fields, labels, x, cats}; }
};

Planted planted(size_t n, uint64_t seed) {
  Planted p;
  p.n = n;
  Rng rng(seed);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t key = rng.below(50);
    double z = (key % 2 == 0 ? 1.5 : -1.5);
    for (size_t d = 0; d < p.dense; ++d) {
      const float v = rng.uniform(0.0f, 2.0f);
      p.x.push_back(v);
      if (d == 0) z += 0.5 * (v - 1.0);
    }
    p.cats.push_back(0xa000 + key);
    for (size_t f = 1; f < p.fields; ++f) p.cats.push_back(f == 3 && rng.below(10) == 0 ? kMissingId : rng.below(30));
    p.labels.push_back(rng.uniform() < 1.0 / (1.0 + std::exp(-z)) ? 1.0f : 0.0f);
  }
  return p;
}

double numeric(float* x, const std::function<double()>& f) {
  const float eps = 1e-3f, saved = *x;
  *x = saved + eps;
  const double up = f();
  *x = saved - eps;
  const double down = f();
  *x = saved;
  return (up - down) / (2.0 * eps);
}

}  // namespace

TEST_CASE("dlrm: finite-difference gradients of every parameter") {
  const Planted data = planted(6, 3);
  const CtrView batch = data.view();
  IdCounts counts(batch.num_fields);
  counts.add(batch);
  const IdMap ids({.mode = IdMode::full, .min_count = 1}, counts);
  DlrmNetwork net({.num_dense = batch.num_dense,
                   .table_rows = {ids.rows(0), ids.rows(1), ids.rows(2), ids.rows(3)},
                   .dim = 4, .bottom = {5}, .top = {6}, .seed = 7});
  std::vector<uint32_t> rows;
  ids.map(batch, rows);
  net.forward_backward(batch, rows, true);
  // Analytic gradients are of the mean loss; the forward returns the sum.
  const double scale = 1.0 / static_cast<double>(batch.size);
  const auto loss = [&] { return net.forward_backward(batch, rows, false) * scale; };
  Rng rng(11);
  size_t checked = 0;
  for (Parameter* p : net.parameters()) {
    // Snapshot the analytic gradient (the numeric passes do not touch it: train = false).
    const std::vector<uint32_t> grad_rows = p->grad.rows;
    const Tensor grad = p->grad.values;
    REQUIRE(!grad_rows.empty());
    for (int trial = 0; trial < 4; ++trial) {
      const size_t j = rng.below(grad_rows.size()), c = rng.below(p->value.cols());
      const double analytic = grad.row(j)[c];
      const double num = numeric(p->value.row(grad_rows[j]) + c, loss);
      INFO(p->name << " row " << grad_rows[j] << " col " << c << ": analytic " << analytic << " numeric " << num);
      CHECK(std::abs(analytic - num) <= 2e-2 * std::max(1.0, std::abs(num)) + 1e-3);
      ++checked;
    }
  }
  CHECK(checked >= 4 * (2 * 2 + 4 + 2 * 2));
}

TEST_CASE("dlrm: the dot interaction outputs the bottom vector then the lower triangle") {
  DotInteraction inter(2, 2);
  CHECK(inter.out_features() == 2 + 3);
  Tensor bottom(1, 2), emb(1, 4);
  bottom.row(0)[0] = 1; bottom.row(0)[1] = 2;
  emb.row(0)[0] = 3; emb.row(0)[1] = 4;  // field 1
  emb.row(0)[2] = 5; emb.row(0)[3] = 6;  // field 2
  const Tensor& out = inter.forward(bottom, emb);
  // bottom, then <e1, b>, <e2, b>, <e2, e1>
  const std::vector<float> expected = {1, 2, 11, 17, 39};
  for (size_t i = 0; i < expected.size(); ++i) CHECK(out.row(0)[i] == expected[i]);
}

TEST_CASE("dlrm: id maps") {
  const Planted data = planted(200, 5);
  IdCounts counts(data.fields);
  counts.add(data.view());
  // One more sample whose field-0 id occurs once.
  const std::vector<float> one_label = {1}, one_dense = {0, 0, 0};
  const std::vector<uint64_t> one_cats = {0xfeed, 1, 2, 3};
  counts.add({1, 3, 4, one_label, one_dense, one_cats});
  const IdMap full({.mode = IdMode::full, .min_count = 2}, counts);
  // Row 0 plus one row per id seen at least twice.
  size_t kept = 0, once = 0;
  uint64_t rare = 0;
  for (const auto& [id, n] : counts.field(0)) {
    if (n >= 2) ++kept;
    if (n == 1) ++once, rare = id;
  }
  CHECK(full.rows(0) == kept + 1);
  REQUIRE(once > 0);
  CHECK(full.row(0, rare) == 0);        // seen once: shares row 0 with the unseen
  CHECK(full.row(0, 0xbeef) == 0);      // unseen
  CHECK(full.row(3, kMissingId) == 0);  // missing
  // Rows in id order: the smallest kept id gets row 1.
  uint64_t smallest = UINT64_MAX;
  for (const auto& [id, n] : counts.field(0))
    if (n >= 2) smallest = std::min(smallest, id);
  CHECK(full.row(0, smallest) == 1);
  const IdMap hash({.mode = IdMode::hash, .hash_rows = 16}, data.fields);
  CHECK(hash.rows(2) == 16);
  CHECK(hash.row(1, 12345) == hash.row(1, 12345));
  CHECK(hash.row(1, 12345) < 16);
  const IdMap other_seed({.mode = IdMode::hash, .hash_rows = 1 << 20, .seed = 99}, data.fields);
  const IdMap same_seed({.mode = IdMode::hash, .hash_rows = 1 << 20}, data.fields);
  CHECK(other_seed.row(1, 12345) != same_seed.row(1, 12345));
  CHECK_THROWS_WITH(IdMap({.mode = IdMode::full}, data.fields), Catch::Contains("needs the training data's id counts"));
}

TEST_CASE("dlrm: AUC and logloss against hand-computed values") {
  // scikit-learn's roc_auc_score example: 0.75.
  const std::vector<float> p = {0.1f, 0.4f, 0.35f, 0.8f}, y = {0, 0, 1, 1};
  const ClickMetrics m = click_metrics(p, y);
  CHECK(m.auc == Approx(0.75));
  const double ll = -(std::log(0.9) + std::log(0.6) + std::log(0.35) + std::log(0.8)) / 4;
  CHECK(m.logloss == Approx(ll).epsilon(1e-6));
  CHECK(m.clicks == 2);
  // Ties count one half: every score equal gives 0.5.
  CHECK(click_metrics(std::vector<float>{0.3f, 0.3f, 0.3f}, std::vector<float>{1, 0, 1}).auc == Approx(0.5));
  // One class only: AUC is undefined and reported as 0.5.
  CHECK(click_metrics(std::vector<float>{0.3f, 0.6f}, std::vector<float>{1, 1}).auc == 0.5);
  CHECK_THROWS_WITH(click_metrics(p, std::vector<float>{0, 1}), Catch::Contains("4 probabilities for 2 labels"));
}

TEST_CASE("dlrm: training learns a planted click model") {
  const Planted train = planted(4000, 1), test = planted(1000, 2);
  IdCounts counts(train.fields);
  counts.add(train.view());
  const IdMap ids({.mode = IdMode::full, .min_count = 1}, counts);
  std::vector<size_t> rows;
  for (size_t f = 0; f < ids.num_fields(); ++f) rows.push_back(ids.rows(f));
  DlrmNetwork net({.num_dense = train.dense, .table_rows = rows, .dim = 8, .bottom = {16}, .top = {16}, .seed = 1});
  DlrmTrainer trainer(net, ids, {.optimizer = optim::Adam{.lr = 0.01f}, .batch = 64});
  const double before = trainer.evaluate(test.view()).auc;
  DlrmEpoch first{}, last{};
  for (uint64_t e = 1; e <= 3; ++e) {
    last = trainer.fit_epoch(train.view(), e);
    if (e == 1) first = last;
  }
  const ClickMetrics after = trainer.evaluate(test.view());
  INFO("AUC before " << before << ", after " << after.auc << "; loss " << first.loss << " -> " << last.loss);
  // The planted model's own AUC is about 0.82 (field 0 sets z = +-1.5): the network must get close.
  CHECK(after.auc > 0.78);
  CHECK(last.loss < first.loss);
  CHECK(first.steps == (4000 + 63) / 64);
  // The same seed gives the same run.
  DlrmNetwork net2({.num_dense = train.dense, .table_rows = rows, .dim = 8, .bottom = {16}, .top = {16}, .seed = 1});
  DlrmTrainer trainer2(net2, ids, {.optimizer = optim::Adam{.lr = 0.01f}, .batch = 64});
  for (uint64_t e = 1; e <= 3; ++e) trainer2.fit_epoch(train.view(), e);
  CHECK(trainer2.evaluate(test.view()).auc == after.auc);
}
