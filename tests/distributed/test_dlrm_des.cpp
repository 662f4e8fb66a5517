// The DLRM tables over a group (layers/dlrm/table_exchange.h: des, ps, replicated): 2 and 3 ranks,
// each training on its part of every global batch, equal 1 rank on the whole batch. The MLP
// gradients (and ps's and replicated's table gradients) are summed over the ranks in another order
// than one rank's sums, so losses and AUC agree to 1e-5 rather than bit for bit. Every --ids mode,
// and a global batch that leaves a rank without samples.
#include <catch2/catch.hpp>

#include <cmath>
#include <mutex>
#include <vector>

#include "comm/local_communicator.h"
#include "core/rng.h"
#include "train/dlrm_trainer.h"

using namespace frugal;
using namespace frugal::layers;

namespace {

struct Data {
  size_t n = 0, dense = 3, fields = 5;
  std::vector<float> labels, x;
  std::vector<uint64_t> cats;
  CtrView view() const { return {n, dense, fields, labels, x, cats}; }
};

// A planted click model with one large field (3000 ids: freq-double and qr squeeze it).
Data make_data(size_t n, uint64_t seed) {
  Data d;
  d.n = n;
  Rng rng(seed);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t key = rng.below(40), big = rng.below(3000);
    double z = (key % 2 == 0 ? 1.2 : -1.2) + (big % 3 == 0 ? 0.8 : -0.4);
    for (size_t j = 0; j < d.dense; ++j) {
      const float v = rng.uniform(0.0f, 2.0f);
      d.x.push_back(v);
      if (j == 0) z += 0.5 * (v - 1.0);
    }
    d.cats.push_back(key);
    d.cats.push_back(0x10000 + big);
    for (size_t f = 2; f < d.fields; ++f) d.cats.push_back(rng.below(25));
    d.labels.push_back(rng.uniform() < 1.0 / (1.0 + std::exp(-z)) ? 1.0f : 0.0f);
  }
  return d;
}

struct Run {
  std::vector<double> losses;
  double auc = 0, logloss = 0;
  uint64_t bytes = 0;
};

Run run_training(const Data& train_set, const Data& test_set, const IdMap& ids, size_t batch, comm::Communicator* group,
          TableMode tables = TableMode::des) {
  DlrmNetwork net({.num_dense = train_set.dense, .fields = embedding_fields(ids), .lookups = ids.lookups(), .dim = 8,
                   .bottom = {16}, .top = {16}, .seed = 5, .group = group, .tables = tables});
  train::DlrmTrainer trainer(net, ids, {.optimizer = optim::Adam{.lr = 0.01f}, .batch = batch});
  Run run;
  for (uint64_t e = 1; e <= 2; ++e) run.losses.push_back(trainer.fit_epoch(train_set.view(), e).loss);
  const train::ClickMetrics m = trainer.evaluate(test_set.view(), 97);
  run.auc = m.auc;
  run.logloss = m.logloss;
  if (group != nullptr) run.bytes = group->stats().total().sent;
  return run;
}

void require_close(double a, double b, const char* what) {
  INFO(what << ": " << a << " vs " << b);
  CHECK(std::abs(a - b) <= 1e-5 * std::max(1.0, std::abs(b)));
}

}  // namespace

TEST_CASE("dlrm tables over a group (des, ps, replicated) train as 1 rank on the whole batch") {
  const Data train_set = make_data(1500, 1), test_set = make_data(400, 2);
  IdCounts counts(train_set.fields);
  counts.add(train_set.view());
  const auto [mode, combine] = GENERATE(table<IdMode, Combine>({{IdMode::full, Combine::sum},
                                                                 {IdMode::hash, Combine::sum},
                                                                 {IdMode::freq_double, Combine::sum},
                                                                 {IdMode::qr, Combine::sum},
                                                                 {IdMode::qr, Combine::product}}));
  const int ranks = GENERATE(2, 3);
  const TableMode tables = GENERATE(TableMode::des, TableMode::ps, TableMode::replicated);
  INFO("--ids " << to_string(mode) << " (" << to_string(combine) << "), " << ranks << " ranks, tables "
                  << to_string(tables));
  const IdMap ids({.mode = mode, .min_count = 1, .hash_rows = 512, .qr_combine = combine}, counts);
  // 1500 = 23 x 64 + 28: the last global batch is short; with batch 64 every rank has samples.
  const Run alone = run_training(train_set, test_set, ids, 64, nullptr);
  std::mutex mu;
  std::vector<Run> runs(static_cast<size_t>(ranks));
  comm::run_local(ranks, [&](comm::Communicator& c) {
    Run r = run_training(train_set, test_set, ids, 64, &c, tables);
    std::lock_guard<std::mutex> lock(mu);
    runs[static_cast<size_t>(c.rank())] = r;
  });
  for (const Run& r : runs) {
    REQUIRE(r.losses.size() == alone.losses.size());
    for (size_t e = 0; e < r.losses.size(); ++e) require_close(r.losses[e], alone.losses[e], "epoch loss");
    require_close(r.auc, alone.auc, "AUC");
    require_close(r.logloss, alone.logloss, "logloss");
    CHECK(r.bytes > 0);
  }
  CHECK(alone.auc > 0.7);
}

TEST_CASE("dlrm tables over a group: a global batch smaller than the group leaves ranks idle, not stuck") {
  const Data train_set = make_data(10, 3), test_set = make_data(5, 4);
  IdCounts counts(train_set.fields);
  counts.add(train_set.view());
  const IdMap ids({.mode = IdMode::full, .min_count = 1}, counts);
  const Run alone = run_training(train_set, test_set, ids, 2, nullptr);
  std::mutex mu;
  const TableMode tables = GENERATE(TableMode::des, TableMode::ps, TableMode::replicated);
  INFO("tables " << to_string(tables));
  std::vector<Run> runs(3);
  comm::run_local(3, [&](comm::Communicator& c) {
    Run r = run_training(train_set, test_set, ids, 2, &c, tables);  // batches of 2 over 3 ranks: one rank idle
    std::lock_guard<std::mutex> lock(mu);
    runs[static_cast<size_t>(c.rank())] = r;
  });
  for (const Run& r : runs)
    for (size_t e = 0; e < r.losses.size(); ++e) require_close(r.losses[e], alone.losses[e], "epoch loss");
}
