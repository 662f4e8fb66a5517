// The backend parity harness (tests/kernels/backend_harness.cpp), shared by the `kernels` test
// (every registered backend) and the `kernels_cuda` test (the "cuda" backend, also against "cpu").
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/rng.h"

namespace frugal::harness {

// The comparison of one case: NMSE over the floating outputs, exact counts for the rest. With
// `perturb`, every reference value is made wrong before it is compared (the self-test).
struct Compare {
  bool perturb = false;
  // When set, every value an op produced (`got`), in the order compared, with whether it is
  // compared exactly: two backends' outputs for the same case can then be compared directly.
  struct Recorded {
    double value;
    bool exact;
  };
  std::vector<Recorded>* record = nullptr;
  double err2 = 0, ref2 = 0;
  size_t count = 0, mismatches = 0, perturbed = 0;

  void add(double got, double want) {
    ++count;
    if (record != nullptr) record->push_back({got, false});
    if (perturb && std::isfinite(want)) {
      want = want * 1.01 + 1e-3;
      ++perturbed;
    }
    if (!std::isfinite(want) || !std::isfinite(got)) {
      if (!(got == want || (std::isnan(got) && std::isnan(want)))) ++mismatches;
      return;
    }
    err2 += (got - want) * (got - want);
    ref2 += want * want;
  }
  // Sizes and row counts: structure, compared but never perturbed (the self-test must fail on values).
  void same_size(uint64_t got, uint64_t want) {
    ++count;
    if (record != nullptr) record->push_back({static_cast<double>(got), true});
    if (got != want) ++mismatches;
  }
  void exact(uint64_t got, uint64_t want) {
    ++count;
    if (record != nullptr) record->push_back({static_cast<double>(got), true});
    if (perturb) {
      want ^= 1;
      ++perturbed;
    }
    if (got != want) ++mismatches;
  }
  void tensor(const Tensor& got, const std::vector<double>& want) {
    same_size(got.size(), want.size());
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) add(got.data()[i], want[i]);
  }
  double nmse() const { return ref2 > 0 ? err2 / ref2 : err2; }
};

struct Case {
  std::string shape;
  std::function<void(Backend&, Compare&)> run;
};

struct OpCases {
  Op op;
  double bound;  // largest NMSE that passes
  std::vector<Case> cases;
};

// Exact-order ops (a fixed summation order, float vs the reference's double) and GEMM (oneDNN or
// a device BLAS may block and reorder the sums).
constexpr double kExact = 1e-10, kGemm = 1e-8;

struct Tally {
  size_t ok = 0, fail = 0, skip = 0;
};

// Random LSH tables and a batch's look-up for bucket_union: `tables` tables of `buckets` buckets
// over `neurons` neurons (each neuron in one bucket per table, a bucket cut to `capacity`), codes
// that favour a few hot buckets (so neurons recur across tables), and up to max_labels labels per
// sample, some of them also in the sample's buckets.
struct BucketFixture {
  std::vector<std::vector<uint32_t>> offsets, ids;
  std::vector<std::span<const uint32_t>> offset_spans, id_spans;
  uint32_t buckets = 0;
  uint64_t generation = 0;  // new per fixture: a backend keeping a copy must not reuse another's
  size_t neurons = 0, samples = 0;
  std::vector<uint32_t> codes, labels;
  std::vector<uint64_t> label_offsets;
  BucketTables view() const;
  BucketQuery query(size_t cap) const;
};
BucketFixture random_buckets(uint64_t seed, size_t samples, size_t tables, uint32_t buckets, size_t neurons,
                             size_t capacity, size_t max_labels);
// bucket_union by its definition (core/backend.h), with ordered maps: the reference.
ActiveSets reference_union(const BucketFixture& f, size_t cap);

// An alias table over `neurons` labels for active_extend (every third label rare) and log(c) for
// c <= draws, as host vectors.
struct ExtensionTables {
  std::vector<float> threshold;
  std::vector<uint32_t> alias;
  std::vector<double> log_prob, log_count;
};
ExtensionTables random_extension_tables(Rng& rng, size_t neurons, size_t draws);

// active_extend by its definition (core/backend.h's ActiveExtension) with core/rng.h's Rng and set
// membership; the alias table and log Q are host vectors (the extension's tensors are not read).
ActiveSets reference_extension(const ActiveSets& in, const ActiveExtension& e, const std::vector<float>& threshold,
                               const std::vector<uint32_t>& alias, const std::vector<double>& log_prob);

// Every op with its cases (each case seeds its own inputs: two runs see the same inputs).
std::vector<OpCases> all_cases();

// Runs every case of every op on `be`, printing one line each (Catch CHECKs per case). With
// perturb, the references are wrong on purpose and every case that compares something must FAIL.
Tally run_all(Backend& be, bool perturb);

}  // namespace frugal::harness
