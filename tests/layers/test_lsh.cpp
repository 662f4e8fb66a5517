// LSH quality: on planted data, the neuron with the largest inner product with the query must be in
// the query's active set in >= 90% of queries, with the default K and L, for both families.
#include <algorithm>
#include <memory>
#include <set>
#include <sstream>

#include <catch2/catch.hpp>
#include <cereal/archives/binary.hpp>
#include <cereal/types/vector.hpp>

#include "core/backend.h"
#include "core/rng.h"
#include "layers/lsh/lsh_sampler.h"
#include "layers/lsh/lsh_tables.h"

using namespace frugal;

namespace {

// The sampler's sets (host tensors: the host backend's) as host vectors.
ActiveSets host_sets(const ActiveTensors& t) {
  ActiveSets s;
  s.offsets.assign(t.offsets.u64().begin(), t.offsets.u64().end());
  s.ids.assign(t.ids.u32().begin(), t.ids.u32().end());
  if (!t.logit_offsets.empty()) s.logit_offsets.assign(t.logit_offsets.span().begin(), t.logit_offsets.span().end());
  return s;
}

}  // namespace

namespace {

double planted_recall(const lsh::Family& base, size_t neurons, size_t dim, size_t queries) {
  const lsh::Family family = lsh::auto_family(base, 50, neurons);
  Rng rng(21);
  Tensor w(neurons, dim);
  for (size_t i = 0; i < w.size(); ++i) w.data()[i] = rng.normal();
  lsh::LshSampler sampler({.family = family, .tables = 50}, dim, neurons, 99);
  sampler.rebuild(w, 0);
  // Each query is a neuron's weight vector plus noise; the planted neuron must remain the one with
  // the largest inner product (checked), so the query's true nearest neighbour is known.
  Tensor q(queries, dim);
  std::vector<uint32_t> best(queries);
  for (size_t i = 0; i < queries; ++i) {
    const auto target = static_cast<uint32_t>(rng.below(neurons));
    for (size_t c = 0; c < dim; ++c) q.at(i, c) = w.at(target, c) + 0.5f * rng.normal();
    float best_ip = -1e30f;
    for (uint32_t n = 0; n < neurons; ++n) {
      float ip = 0;
      for (size_t c = 0; c < dim; ++c) ip += q.at(i, c) * w.at(n, c);
      if (ip > best_ip) best_ip = ip, best[i] = n;
    }
    REQUIRE(best[i] == target);
  }
  ActiveTensors active_sets;
  sampler.sample(q, nullptr, 0, 1, active_sets);
  const ActiveSets active = host_sets(active_sets);
  size_t found = 0;
  double mean_size = 0;
  for (size_t i = 0; i < queries; ++i) {
    const auto* b = active.ids.data() + active.offsets[i];
    const auto* e = active.ids.data() + active.offsets[i + 1];
    found += std::find(b, e, best[i]) != e;
    mean_size += static_cast<double>(e - b) / queries;
  }
  INFO(lsh::family_name(family) << ", mean active set " << mean_size << " of " << neurons);
  CHECK(mean_size < 0.2 * neurons);  // sampling must actually sample
  return static_cast<double>(found) / queries;
}

}  // namespace

TEST_CASE("LSH: planted nearest neuron is found (DWTA)") {
  REQUIRE(planted_recall(lsh::Dwta{}, 20000, 128, 300) >= 0.9);
}

TEST_CASE("LSH: planted nearest neuron is found (SimHash)") {
  REQUIRE(planted_recall(lsh::SimHash{}, 20000, 128, 300) >= 0.9);
}

TEST_CASE("LSH: active sets honour the bounds and contain the true labels") {
  Rng rng(5);
  const size_t n = 2000, dim = 32;
  Tensor w(n, dim), h(8, dim);
  for (size_t i = 0; i < w.size(); ++i) w.data()[i] = rng.normal();
  for (size_t i = 0; i < h.size(); ++i) h.data()[i] = std::max(0.0f, rng.normal());
  SparseBatch labels;
  for (uint32_t i = 0; i < 8; ++i) {
    const uint32_t ls[] = {i * 7, i * 7 + 1};
    labels.add_point({}, {}, ls);
  }
  for (const auto& [lo, hi] : {std::pair<size_t, size_t>{100, 150}, {0, 20}, {300, 0}}) {
    lsh::LshSampler sampler({.family = lsh::Dwta{.k = 2}, .tables = 10, .min_active = lo, .max_active = hi}, dim, n, 3);
    sampler.rebuild(w, 0);
    ActiveTensors a_sets;
    sampler.sample(h, &labels, 0, 7, a_sets);
    const ActiveSets a = host_sets(a_sets);
    for (size_t i = 0; i < 8; ++i) {
      const size_t size = a.offsets[i + 1] - a.offsets[i];
      if (lo > 0) REQUIRE(size >= lo);
      if (hi > 0) REQUIRE(size <= hi);
      REQUIRE(a.ids[a.offsets[i]] == i * 7);
      REQUIRE(a.ids[a.offsets[i] + 1] == i * 7 + 1);
      std::vector<uint32_t> ids(a.ids.begin() + a.offsets[i], a.ids.begin() + a.offsets[i + 1]);
      std::sort(ids.begin(), ids.end());
      REQUIRE(std::adjacent_find(ids.begin(), ids.end()) == ids.end());  // no duplicates
    }
    ActiveTensors again_sets;
    sampler.sample(h, &labels, 0, 7, again_sets);
    const ActiveSets again = host_sets(again_sets);
    REQUIRE(again.ids == a.ids);  // deterministic for a step
  }
}

TEST_CASE("LSH: a capped set keeps room for the random negatives") {
  // Tables that return far more than the cap (2 buckets a table: ~half the labels each), so the
  // union alone would fill it: the candidates found in the most tables take cap - negatives places,
  // the negatives (their logQ offsets nonzero) the rest.
  Rng rng(9);
  const size_t n = 2000, dim = 32, cap = 40, draws = 16;
  Tensor w(n, dim), h(8, dim);
  for (size_t i = 0; i < w.size(); ++i) w.data()[i] = rng.normal();
  for (size_t i = 0; i < h.size(); ++i) h.data()[i] = std::max(0.0f, rng.normal());
  SparseBatch labels;
  for (uint32_t i = 0; i < 8; ++i) {
    const uint32_t ls[] = {i * 11};
    labels.add_point({}, {}, ls);
  }
  lsh::LshSampler sampler({.family = lsh::Dwta{.k = 1, .bin_size = 2}, .tables = 10, .max_active = cap,
                           .negatives = draws}, dim, n, 3);
  sampler.rebuild(w, 0);
  ActiveTensors sets;
  sampler.sample(h, &labels, 0, 5, sets);
  const ActiveSets a = host_sets(sets);
  REQUIRE(a.logit_offsets.size() == a.ids.size());
  for (size_t i = 0; i < 8; ++i) {
    size_t negatives = 0;
    for (uint64_t e = a.offsets[i]; e < a.offsets[i + 1]; ++e) negatives += a.logit_offsets[e] != 0.0f;
    const size_t size = a.offsets[i + 1] - a.offsets[i];
    CHECK(size <= cap);
    CHECK(size - negatives <= cap - draws);   // the label and the tables' candidates
    CHECK(size - negatives == cap - draws);   // which the tables fill
    CHECK(negatives >= draws / 2);            // distinct draws of 16 among ~2,000 labels
  }
}

TEST_CASE("LSH: rebuild schedule starts frequent and decays") {
  lsh::LshSampler s({.family = lsh::SimHash{.k = 4}, .tables = 2, .rebuild_first = 10, .rebuild_growth = 2.0,
                     .rebuild_max = 50}, 4, 10, 1);
  Tensor w(10, 4);
  w.fill(0.5f);
  std::vector<uint64_t> at;
  for (uint64_t step = 0; step < 200; ++step)
    if (s.maybe_rebuild(w, step)) at.push_back(step);
  REQUIRE(at == std::vector<uint64_t>{0, 10, 30, 70, 120, 170});
}

TEST_CASE("LSH: the automatic width aims at an active set that does not grow with the label count") {
  for (const size_t tables : {size_t{50}, size_t{100}})
    for (const size_t labels : {size_t{1000}, size_t{20000}, size_t{100000}, size_t{1000000}, size_t{3000000}}) {
      const size_t target = lsh::default_active_target(labels);
      REQUIRE(target >= lsh::kMinDefaultActive);
      REQUIRE(target <= lsh::kMaxDefaultActive);
      for (const lsh::Family& base : {lsh::Family{lsh::Dwta{}}, lsh::Family{lsh::SimHash{}}}) {
        const lsh::Family f = lsh::auto_family(base, tables, labels);
        const auto family = lsh::HashFamily::create(f, 16, tables, 1);
        const double expected = static_cast<double>(tables * labels) / family->buckets_per_table();
        INFO(lsh::family_name(f) << ", " << tables << " tables, " << labels << " labels, expected set " << expected);
        if (const auto* d = std::get_if<lsh::Dwta>(&f)) REQUIRE(d->k * 3 >= d->bucket_bits);  // bins fill the buckets
        // Never fewer than the target, and at most twice it unless the widest table (2^18) is reached.
        REQUIRE(expected >= static_cast<double>(target));
        if (family->buckets_per_table() < (1u << lsh::kMaxBucketBits)) REQUIRE(expected < 2.0 * target);
        REQUIRE(expected < 2.5 * lsh::kMaxDefaultActive);  // 3M labels in 100 tables: ~1,144
      }
    }
  // An explicit target: 100 tables over 1M labels aiming at 500 labels per point.
  const lsh::Family f = lsh::auto_family(lsh::Dwta{}, 100, 1000000, 500);
  const auto family = lsh::HashFamily::create(f, 16, 100, 1);
  const double expected = 100.0 * 1000000 / family->buckets_per_table();
  CHECK(expected >= 500);
  CHECK(expected < 1000);
}

TEST_CASE("LSH: measured active sets at 200k labels stay near the automatic target") {
  const size_t n = 200000, dim = 32, tables = 20, queries = 64;
  Rng rng(8);
  Tensor w(n, dim), h(queries, dim);
  for (size_t i = 0; i < w.size(); ++i) w.data()[i] = rng.normal();
  for (size_t i = 0; i < h.size(); ++i) h.data()[i] = std::max(0.0f, rng.normal());
  lsh::LshSampler sampler({.family = lsh::auto_family(lsh::Dwta{}, tables, n), .tables = tables, .negatives = 0},
                          dim, n, 4);
  sampler.rebuild(w, 0);
  ActiveTensors a_sets;
  sampler.sample(h, nullptr, 0, 1, a_sets);
  const ActiveSets a = host_sets(a_sets);
  const double mean = static_cast<double>(a.ids.size()) / queries;
  INFO("mean active set " << mean << " of " << n << " labels");
  CHECK(mean >= 0.5 * lsh::kMaxDefaultActive);
  CHECK(mean <= 3.0 * lsh::kMaxDefaultActive);
}

TEST_CASE("LSH: tables saved with another width are rebuilt, not used") {
  Rng rng(3);
  const size_t n = 500, dim = 16;
  Tensor w(n, dim), h(4, dim);
  for (size_t i = 0; i < w.size(); ++i) w.data()[i] = rng.normal();
  for (size_t i = 0; i < h.size(); ++i) h.data()[i] = std::max(0.0f, rng.normal());
  lsh::LshSampler narrow({.family = lsh::Dwta{.k = 2}, .tables = 4, .negatives = 0}, dim, n, 1);
  narrow.rebuild(w, 0);
  const auto saved = [&narrow] {
    auto bytes = std::make_unique<std::stringstream>();
    cereal::BinaryOutputArchive out(*bytes);
    narrow.save(out);
    return bytes;
  };
  const auto bytes = saved();
  lsh::LshSampler wide({.family = lsh::Dwta{.k = 3}, .tables = 4, .negatives = 0}, dim, n, 1);
  cereal::BinaryInputArchive in(*bytes);
  wide.load(in);
  REQUIRE_FALSE(wide.ready());  // 64 buckets saved, 512 here: dropped
  REQUIRE(wide.maybe_rebuild(w, 7));
  ActiveTensors a_sets;
  wide.sample(h, nullptr, 0, 7, a_sets);
  const ActiveSets a = host_sets(a_sets);
  REQUIRE(a.offsets.size() == 5);
  // The same width loads as it was saved.
  const auto again = saved();
  lsh::LshSampler same({.family = lsh::Dwta{.k = 2}, .tables = 4, .negatives = 0}, dim, n, 1);
  cereal::BinaryInputArchive in2(*again);
  same.load(in2);
  REQUIRE(same.ready());
}

TEST_CASE("LSH tables: every bucket holds its neurons, overfull ones a capped subset, and checkpoints keep their form") {
  Rng rng(5);
  const size_t n = 3000, dim = 16, tables = 6, capacity = 8;
  Tensor w(n, dim);
  for (size_t i = 0; i < w.size(); ++i) w.data()[i] = rng.normal();
  const std::shared_ptr<const lsh::HashFamily> family = lsh::HashFamily::create(lsh::Dwta{.k = 2}, dim, tables, 9);
  lsh::LshTables t(family, capacity);
  t.build(host_backend(), w, 77);
  REQUIRE(t.num_tables() == tables);
  REQUIRE(t.num_neurons() == n);
  // Each neuron's code in each table, from the family itself.
  std::vector<uint32_t> all(n), codes(n * tables);
  for (size_t i = 0; i < n; ++i) all[i] = static_cast<uint32_t>(i);
  Tensor codes_out = Tensor::wrap(codes.data(), n, tables, Dtype::u32);
  family->hash(host_backend(), w, all, codes_out);
  const uint32_t nb = family->buckets_per_table();
  size_t overfull = 0;
  for (size_t tb = 0; tb < tables; ++tb) {
    std::vector<std::vector<uint32_t>> expect(nb);
    for (size_t i = 0; i < n; ++i) expect[codes[i * tables + tb]].push_back(static_cast<uint32_t>(i));
    for (uint32_t b = 0; b < nb; ++b) {
      const auto got = t.bucket(tb, b);
      const std::vector<uint32_t> ids(got.begin(), got.end());
      if (expect[b].size() <= capacity) {
        CHECK(ids == expect[b]);  // in id order
      } else {
        ++overfull;
        CHECK(ids.size() == capacity);
        for (const uint32_t id : ids) CHECK(std::find(expect[b].begin(), expect[b].end(), id) != expect[b].end());
        CHECK(std::set<uint32_t>(ids.begin(), ids.end()).size() == capacity);
      }
    }
  }
  REQUIRE(overfull > 0);  // 3000 neurons in 16 buckets a table: the cap is exercised

  // A checkpoint is, per table, its offsets and ids as two std::vector<uint32_t> (the form it had
  // when every table had its own vectors), and loads back into the same buckets.
  std::stringstream bytes;
  {
    cereal::BinaryOutputArchive out(bytes);
    t.save(out);
  }
  {
    std::stringstream copy(bytes.str());
    cereal::BinaryInputArchive in(copy);
    uint64_t neurons = 0, saved_tables = 0;
    in(neurons, saved_tables);
    REQUIRE(neurons == n);
    REQUIRE(saved_tables == tables);
    for (size_t tb = 0; tb < tables; ++tb) {
      std::vector<uint32_t> offsets, ids;
      in(offsets, ids);
      REQUIRE(offsets.size() == size_t{nb} + 1);
      REQUIRE(offsets.back() == ids.size());
      for (uint32_t b = 0; b < nb; ++b) {
        const auto got = t.bucket(tb, b);
        CHECK(std::vector<uint32_t>(ids.begin() + offsets[b], ids.begin() + offsets[b + 1]) ==
              std::vector<uint32_t>(got.begin(), got.end()));
      }
    }
  }
  lsh::LshTables loaded(family, capacity);
  cereal::BinaryInputArchive in(bytes);
  REQUIRE(loaded.load(in));
  const BucketTables a = t.view(), b = loaded.view();
  REQUIRE(b.num_tables() == tables);
  for (size_t tb = 0; tb < tables; ++tb) {
    CHECK(std::vector<uint32_t>(a.offsets[tb].begin(), a.offsets[tb].end()) ==
          std::vector<uint32_t>(b.offsets[tb].begin(), b.offsets[tb].end()));
    CHECK(std::vector<uint32_t>(a.ids[tb].begin(), a.ids[tb].end()) ==
          std::vector<uint32_t>(b.ids[tb].begin(), b.ids[tb].end()));
  }

  // Rebuilding after a load hashes every row again (the codes kept for rebuilds are the loaded
  // tables' no longer) and gives the tables a build from scratch gives.
  std::vector<uint8_t> changed(n, 0);
  changed[3] = 1;
  loaded.build(host_backend(), w, 78, &changed);
  lsh::LshTables fresh(family, capacity);
  fresh.build(host_backend(), w, 78);
  for (size_t tb = 0; tb < tables; ++tb)
    for (uint32_t c = 0; c < nb; ++c) {
      const auto x = loaded.bucket(tb, c), y = fresh.bucket(tb, c);
      CHECK(std::vector<uint32_t>(x.begin(), x.end()) == std::vector<uint32_t>(y.begin(), y.end()));
    }
}
