// One point's share of the ranking metrics (core/ranking_metrics.h defines them): what it adds to
// each k's sums and which labels it marks as covered / relevant. Written once for the host and the
// device (FRUGAL_HOST_DEVICE): RankingMetrics runs it on the host, Backend::ranking_add on the
// backend that holds the top-k, so an evaluation counted on a device gives the host's bits and
// only the sums come down.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/device_sort.h"
#include "core/host_device.h"

namespace frugal::ranking {

// The sums per k, in this order (kSums of them per k, k by k).
enum Sum : uint32_t { precision, ndcg, recall, psp, psp_best, psndcg, psndcg_best };
inline constexpr size_t kSums = 7;

// The settings as plain values and pointers where the program runs.
struct Spec {
  const uint64_t* ks = nullptr;  // the cut-offs, as given
  uint64_t num_ks = 0;
  uint64_t max_k = 0;
  const double* discounts = nullptr;  // max_k of them: 1 / log2(j + 2) (computed once, on the host)
  const double* inverse = nullptr;    // 1/p per label (null: no propensities); beyond num_inverse: unseen
  uint64_t num_inverse = 0;
  double unseen = 1.0;
  FRUGAL_HOST_DEVICE double weight(uint32_t label) const {
    return inverse == nullptr ? 0.0 : (label < num_inverse ? inverse[label] : unseen);
  }
};

// Ascending, duplicates dropped, for a device thread (no library sort; a point has few labels).
// Returns the distinct count.
FRUGAL_HOST_DEVICE inline uint64_t sort_unique(uint32_t* v, uint64_t n) {
  insertion_sort(v, n);
  uint64_t m = 0;
  for (uint64_t a = 0; a < n; ++a)
    if (m == 0 || v[m - 1] != v[a]) v[m++] = v[a];
  return m;
}

// Descending, for a device thread.
FRUGAL_HOST_DEVICE inline void sort_descending(double* v, uint64_t n) { insertion_sort(v, n, Descending{}); }

FRUGAL_HOST_DEVICE inline bool contains(const uint32_t* sorted, uint64_t n, uint32_t x) {
  uint64_t lo = 0, hi = n;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && sorted[lo] == x;
}

// One point: truth = its m distinct labels, ascending; weights = their 1/p, descending (null
// without propensities); top = its n predictions, best first (UINT32_MAX: none). out (num_ks x kSums)
// gets what the point adds to each sum (zeros for a point without labels, which still counts in
// the averages). marks.relevant(l) is called for each true label, marks.covered(q, t) for each
// hit t within the first ks[q].
template <class Marks>
FRUGAL_HOST_DEVICE void point(const Spec& s, const uint32_t* truth, uint64_t m, const double* weights,
                              const uint32_t* top, uint64_t n, double* out, Marks& marks) {
  for (uint64_t c = 0; c < s.num_ks * kSums; ++c) out[c] = 0.0;
  if (m == 0) return;
  for (uint64_t a = 0; a < m; ++a) marks.relevant(truth[a]);
  const auto y = static_cast<double>(m);
  double hits = 0, dcg = 0, idcg = 0, psp_sum = 0, psdcg = 0, best_psp = 0, best_psdcg = 0;
  for (uint64_t j = 0; j < s.max_k; ++j) {
    const double discount = s.discounts[j];
    const uint32_t t = j < n ? top[j] : UINT32_MAX;
    if (t != UINT32_MAX && contains(truth, m, t)) {
      const double w = s.weight(t);
      hits += 1;
      dcg += discount;
      psp_sum += w;
      psdcg += w * discount;
      for (uint64_t q = 0; q < s.num_ks; ++q)
        if (s.ks[q] > j) marks.covered(q, t);
    }
    if (j < m) {  // the perfect ranking puts a true label here
      idcg += discount;
      if (weights != nullptr) {
        best_psp += weights[j];
        best_psdcg += weights[j] * discount;
      }
    }
    for (uint64_t q = 0; q < s.num_ks; ++q) {
      if (s.ks[q] != j + 1) continue;
      const auto k = static_cast<double>(s.ks[q]);
      double* o = out + q * kSums;
      o[precision] = hits / k;
      o[ndcg] = dcg / idcg;
      o[recall] = hits / y;
      o[psp] = psp_sum / k;
      o[psp_best] = best_psp / k;
      o[psndcg] = psdcg / idcg;
      o[psndcg_best] = best_psdcg / idcg;
    }
  }
}

}  // namespace frugal::ranking
