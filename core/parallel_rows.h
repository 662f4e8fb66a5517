// parallel_rows(n, body): body(i) for i in [0, n) on oneTBB's threads, rows independent of each
// other (so results do not depend on how TBB splits the range). `grain`: rows per task at least.
// Internal header (not installed): it includes TBB; the CPU kernels and the layers use it.
#pragma once

#include <cstddef>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

namespace frugal {

template <class F>
void parallel_rows(size_t n, F&& body, size_t grain = 1) {
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n, grain), [&](const auto& r) {
    for (size_t i = r.begin(); i < r.end(); ++i) body(i);
  });
}

}  // namespace frugal
