// The DLRM layers (layers/dlrm/): finite-difference gradients of the whole network (bottom MLP,
// embedding rows, dot interaction, top MLP, logistic loss), the interaction's values, the id maps,
// and training runs that learn a planted click model (Adam; Adagrad, whose checkpoint resumes
// bit-identically).
#include <catch2/catch.hpp>
#include <cereal/archives/binary.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/utility.hpp>
#include <cereal/types/vector.hpp>

#include <cmath>
#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "train/dlrm_checkpoint.h"
#include "layers/dlrm/dlrm_network.h"
#include "train/divergence.h"
#include "train/dlrm_trainer.h"
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

// The id map of a planted set's training data (every id kept) and the small DLRM the training tests
// fit on it.
struct SmallDlrm {
  IdMap ids;
  DlrmOptions options;
};

SmallDlrm small_dlrm(const Planted& train) {
  IdCounts counts(train.fields);
  counts.add(train.view());
  IdMap ids({.mode = IdMode::full, .min_count = 1}, counts);
  DlrmOptions options{.num_dense = train.dense, .fields = embedding_fields(ids), .lookups = ids.lookups(),
                      .dim = 8, .bottom = {16}, .top = {16}, .seed = 1};
  return {std::move(ids), std::move(options)};
}

}  // namespace

// Counts in which field 1 has 4000 ids (a large field, which freq-double and qr squeeze), the most
// frequent ones those of `batch`.
IdCounts large_field_counts(const CtrView& batch) {
  IdCounts counts(batch.num_fields);
  for (int rep = 0; rep < 3; ++rep) counts.add(batch);
  std::vector<float> labels(4000, 0.0f), dense(4000 * batch.num_dense, 0.0f);
  std::vector<uint64_t> cats(4000 * batch.num_fields, 0);
  for (size_t i = 0; i < 4000; ++i) cats[i * batch.num_fields + 1] = 0x100000 + i;
  counts.add({4000, batch.num_dense, batch.num_fields, labels, dense, cats});
  return counts;
}

TEST_CASE("dlrm: finite-difference gradients of every parameter") {
  const Planted data = planted(6, 3);
  const auto [mode, combine] = GENERATE(table<IdMode, Combine>({{IdMode::full, Combine::sum},
                                                                 {IdMode::hash, Combine::sum},
                                                                 {IdMode::freq_double, Combine::sum},
                                                                 {IdMode::qr, Combine::sum},
                                                                 {IdMode::qr, Combine::product}}));
  INFO("--ids " << to_string(mode) << ", --qr-combine " << to_string(combine));
  const IdCounts counts = large_field_counts(data.view());
  // Half the batch has field-1 ids the counts never saw: rare ids (freq-double's double-hashed
  // rows, the shared row 0 elsewhere) get gradients too.
  std::vector<uint64_t> cats = data.cats;
  for (size_t i = 3; i < data.n; ++i) cats[i * data.fields + 1] = 0x900000 + i;
  const CtrView batch{data.n, data.dense, data.fields, data.labels, data.x, cats};
  const IdMap ids({.mode = mode, .min_count = 1, .hash_rows = 64, .qr_combine = combine}, counts);
  if (mode == IdMode::freq_double || mode == IdMode::qr) REQUIRE(ids.table_rows(1).size() == 2);
  if (mode == IdMode::qr) CHECK(ids.combine(1) == combine);
  DlrmNetwork net({.num_dense = batch.num_dense, .fields = embedding_fields(ids), .lookups = ids.lookups(),
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

TEST_CASE("dlrm: freq-double and qr squeeze large fields about 10x") {
  const Planted data = planted(50, 3);
  const IdCounts counts = large_field_counts(data.view());
  const IdMap full({.mode = IdMode::full, .min_count = 1}, counts);
  const size_t v = full.table_rows(1)[0];
  REQUIRE(v > IdMap::kSmallField);
  for (const IdMode mode : {IdMode::freq_double, IdMode::qr}) {
    INFO("--ids " << to_string(mode));
    const IdMap m({.mode = mode, .min_count = 1, .compression = 10}, counts);
    CHECK(m.lookups() == 2);
    const std::vector<size_t>& t = m.table_rows(1);
    REQUIRE(t.size() == 2);
    const size_t kept = t[0] + t[1];
    CHECK(kept * 10 <= v * 11 / 10 + 20);  // about V / 10 rows, rounding aside
    CHECK(kept * 10 >= v * 7 / 10);
    CHECK(m.table_rows(0) == full.table_rows(0));  // a small field stays full
    // Every id keeps a distinct row pair under qr; under freq-double the frequent ones own a row.
    std::set<std::pair<uint32_t, uint32_t>> pairs;
    size_t own = 0;
    for (size_t i = 0; i < 4000; ++i) {
      uint32_t r[2];
      m.rows(1, 0x100000 + i, r);
      pairs.emplace(r[0], r[1]);
      if (r[1] == kNoRow) ++own;
    }
    if (mode == IdMode::qr) CHECK(pairs.size() == 4000);
    if (mode == IdMode::freq_double) {
      // The frequent part of table 0 (row 0 shared) holds the 4000 ids' most frequent and the
      // batch's field-1 ids (counted 3 times: the most frequent of all).
      std::set<uint64_t> batch_ids;
      for (size_t i = 0; i < data.n; ++i) batch_ids.insert(data.cats[i * data.fields + 1]);
      CHECK(own + batch_ids.size() + 1 == t[0] - t[1]);
      uint32_t r[2];
      m.rows(1, data.cats[1], r);  // the batch's ids are the most frequent: a row of their own
      CHECK(r[1] == kNoRow);
      CHECK(r[0] >= 1);
    }
  }
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
  CHECK(full.table_rows(0) == std::vector<size_t>{kept + 1});
  REQUIRE(once > 0);
  const auto row = [](const IdMap& m, size_t f, uint64_t id) {
    uint32_t r[2] = {kNoRow, kNoRow};
    m.rows(f, id, r);
    return r[0];
  };
  CHECK(row(full, 0, rare) == 0);        // seen once: shares row 0 with the unseen
  CHECK(row(full, 0, 0xbeef) == 0);      // unseen
  CHECK(row(full, 3, kMissingId) == 0);  // missing
  // Rows by frequency: the most frequent id (the smallest among equals) gets row 1.
  uint64_t top = 0;
  uint32_t top_count = 0;
  for (const auto& [id, n] : counts.field(0))
    if (n > top_count || (n == top_count && id < top)) top = id, top_count = n;
  CHECK(row(full, 0, top) == 1);
  const IdMap hash({.mode = IdMode::hash, .hash_rows = 16}, data.fields);
  CHECK(hash.table_rows(2) == std::vector<size_t>{16});
  CHECK(row(hash, 1, 12345) == row(hash, 1, 12345));
  CHECK(row(hash, 1, 12345) < 16);
  const IdMap other_seed({.mode = IdMode::hash, .hash_rows = 1 << 20, .seed = 99}, data.fields);
  const IdMap same_seed({.mode = IdMode::hash, .hash_rows = 1 << 20}, data.fields);
  CHECK(row(other_seed, 1, 12345) != row(same_seed, 1, 12345));
  CHECK_THROWS_WITH(IdMap({.mode = IdMode::full}, data.fields), Catch::Contains("--ids full needs the training data's id counts"));
}

TEST_CASE("dlrm: training learns a planted click model") {
  const Planted train = planted(4000, 1), test = planted(1000, 2);
  const SmallDlrm small = small_dlrm(train);
  const IdMap& ids = small.ids;
  const DlrmOptions& options = small.options;
  DlrmNetwork net(options);
  train::DlrmTrainer trainer(net, ids, {.optimizer = optim::Adam{.lr = 0.01f}, .batch = 64});
  const double before = trainer.evaluate(test.view()).auc;
  train::FitResult first{}, last{};
  for (uint64_t e = 1; e <= 3; ++e) {
    last = trainer.fit_epoch(train.view(), e);
    if (e == 1) first = last;
  }
  const train::ClickMetrics after = trainer.evaluate(test.view());
  INFO("AUC before " << before << ", after " << after.auc << "; loss " << first.loss << " -> " << last.loss);
  // The planted model's own AUC is about 0.82 (field 0 sets z = +-1.5): the network must get close.
  CHECK(after.auc > 0.78);
  CHECK(last.loss < first.loss);
  CHECK(first.steps == (4000 + 63) / 64);
  // The same seed gives the same run.
  DlrmNetwork net2(options);
  train::DlrmTrainer trainer2(net2, ids, {.optimizer = optim::Adam{.lr = 0.01f}, .batch = 64});
  for (uint64_t e = 1; e <= 3; ++e) trainer2.fit_epoch(train.view(), e);
  CHECK(trainer2.evaluate(test.view()).auc == after.auc);
}

TEST_CASE("dlrm: the trainer steps in the skeleton every trainer shares (max_steps, the divergence rule, finite weights)") {
  const Planted train = planted(2000, 3);
  const SmallDlrm small = small_dlrm(train);
  const IdMap& ids = small.ids;
  const DlrmOptions& options = small.options;
  DlrmNetwork net(options);
  train::DlrmTrainer trainer(net, ids, {.optimizer = optim::Adam{.lr = 0.01f}, .batch = 64});
  const train::FitResult part = trainer.fit_epoch(train.view(), 1, /*max_steps=*/5);
  CHECK(part.steps == 5);
  CHECK(part.samples == 5 * 64);
  CHECK(part.diverged_step == 0);
  CHECK(std::isfinite(part.loss));
  // A learning rate that throws the weights to infinity: the epoch stops with the error every
  // trainer gives (train/divergence.h), naming the epoch, before anything could be saved.
  DlrmNetwork wild(options);
  train::DlrmTrainer diverging(wild, ids, {.optimizer = optim::Sgd{.lr = 1e30f}, .batch = 64});
  try {
    diverging.fit_epoch(train.view(), 1, 0, "train", 4);
    FAIL("a diverging epoch returned");
  } catch (const train::DivergenceError& e) {
    CHECK_THAT(e.what(), Catch::Contains("epoch 4"));
  }
}

// Inputs of tests/fuzz/fuzz_idmap: maps whose lookups would land outside their own tables (a
// freq-double field in a one-lookup map wrote past rows()'s output) or whose vocabulary count asks
// for more entries than the bytes hold.
TEST_CASE("IdMap::from_bytes refuses maps whose rows fall outside their tables") {
  struct Field {
    IdMode mode = IdMode::full;
    std::vector<uint64_t> tables;
    std::vector<std::pair<uint64_t, uint32_t>> vocab;
    uint64_t frequent = 0, hashed = 0, modulus = 0;
  };
  // The bytes of IdMap::to_bytes for one field, hash_rows 100; `vocab_count` overrides the vocabulary's size tag.
  const auto bytes = [](uint64_t lookups, const Field& f, uint64_t vocab_count = 0) {
    std::ostringstream out;
    {
      cereal::BinaryOutputArchive ar(out);
      ar(std::string("frugal-idmap-1"), uint32_t{0}, uint64_t{1}, uint64_t{100}, 10.0, uint32_t{0}, uint64_t{1},
         lookups, uint64_t{1});
      ar(f.tables, uint32_t{0}, static_cast<uint32_t>(f.mode));
      if (vocab_count > 0) ar(cereal::make_size_tag(vocab_count));
      else ar(f.vocab);
      ar(f.frequent, f.hashed, f.modulus);
    }
    return out.str();
  };
  const auto error_of = [](const std::string& b) {
    try {
      IdMap::from_bytes(b, "x/ids.bin");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const Field full{.mode = IdMode::full, .tables = {3}, .vocab = {{7, 1}, {8, 2}}, .frequent = 0, .hashed = 0, .modulus = 0};
  const IdMap ok = IdMap::from_bytes(bytes(1, full), "x/ids.bin");
  uint32_t row = 0;
  ok.rows(0, 8, &row);
  CHECK(row == 2);
  CHECK_THAT(error_of(bytes(1, {.mode = IdMode::full, .tables = {3}, .vocab = {{7, 3}}, .frequent = 0, .hashed = 0, .modulus = 0})), Catch::Contains("row 3 of a 3-row table"));
  CHECK_THAT(error_of(bytes(1, {.mode = IdMode::freq_double, .tables = {10}, .vocab = {}, .frequent = 4, .hashed = 2, .modulus = 0})),
             Catch::Contains("x/ids.bin") && Catch::Contains("field C1 (freq-double): 1 tables, expected 2"));
  CHECK_THAT(error_of(bytes(2, {.mode = IdMode::freq_double, .tables = {5, 2}, .vocab = {}, .frequent = 4, .hashed = 2, .modulus = 0})),
             Catch::Contains("4 frequent and 2 hashed rows do not fit"));
  CHECK_THAT(error_of(bytes(2, {.mode = IdMode::qr, .tables = {2, 4}, .vocab = {{5, 9}}, .frequent = 0, .hashed = 0, .modulus = 4})),
             Catch::Contains("row 9 has quotient 2"));
  CHECK_THAT(error_of(bytes(1, {.mode = IdMode::hash, .tables = {5}, .vocab = {}, .frequent = 0, .hashed = 0, .modulus = 0})), Catch::Contains("5 rows, the map hashes into 100"));
  CHECK_THAT(error_of(bytes(1, full, uint64_t{1} << 62)),
             Catch::Contains("x/ids.bin: id map vocabulary") && Catch::Contains("truncated or corrupt"));
}

TEST_CASE("dlrm: Adagrad learns the planted model; its checkpoint resumes bit-identically") {
  const Planted train = planted(4000, 1), test = planted(1000, 2);
  const SmallDlrm small = small_dlrm(train);
  const IdMap& ids = small.ids;
  const DlrmOptions& options = small.options;
  const train::DlrmTrainOptions adagrad{.optimizer = optim::Adagrad{.weight_decay = 1e-3f}, .batch = 64};
  DlrmNetwork net(options);
  train::DlrmTrainer trainer(net, ids, adagrad);
  const train::FitResult first = trainer.fit_epoch(train.view(), 1), second = trainer.fit_epoch(train.view(), 2);
  const train::ClickMetrics after = trainer.evaluate(test.view());
  INFO("AUC " << after.auc << "; loss " << first.loss << " -> " << second.loss);
  CHECK(second.loss < first.loss);
  CHECK(after.auc > 0.78);
  // Epoch 1 saved, then resumed by a fresh network and optimizer: epoch 2 is the same bits.
  const std::string dir = "dlrm_adagrad_ckpt";
  std::filesystem::remove_all(dir);
  {
    DlrmNetwork saved_net(options);
    train::DlrmTrainer saved(saved_net, ids, adagrad);
    saved.fit_epoch(train.view(), 1);
    train::save_dlrm_checkpoint(dir, R"({"optimizer": "adagrad"})", 1, ids, saved_net, saved.optimizer(), nullptr);
  }
  DlrmNetwork resumed_net(options);
  train::DlrmTrainer resumed(resumed_net, ids, adagrad);
  train::load_dlrm_state(dir, train::read_dlrm_checkpoint(dir), resumed_net, &resumed.optimizer());
  REQUIRE(resumed.optimizer().steps() == first.steps);
  CHECK(resumed.fit_epoch(train.view(), 2).loss == second.loss);
  const auto a = net.parameters(), b = resumed_net.parameters();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i]->name);
    const Tensor &wa = a[i]->value, &wb = b[i]->value;
    const Tensor &ma = trainer.optimizer().state(i).m, &mb = resumed.optimizer().state(i).m;
    CHECK(std::equal(wa.data(), wa.data() + wa.size(), wb.data(), wb.data() + wb.size()));
    CHECK(std::equal(ma.data(), ma.data() + ma.size(), mb.data(), mb.data() + mb.size()));
    CHECK(trainer.optimizer().state(i).row_steps == resumed.optimizer().state(i).row_steps);
  }
  std::filesystem::remove_all(dir);
}
