// Memory for big arrays read in random order: a weight matrix's sampled rows, its optimizer moments
// and row-sparse gradient, the LSH tables' buckets. With 4 KB pages such a read costs a TLB miss,
// and 1-rank XMC runs measured fell into a slow mode besides (the optimizer 10-19 ms a step);
// Debian's kernels give transparent huge pages (2 MB) only where a process asks (THP "madvise").
// So arrays from kHugePagesFrom up are placed on 2 MB boundaries and advised to use them: the
// optimizer took 9-12 ms in every run (bench/REPORT.md, "Huge pages for the big arrays"). Smaller
// ones are allocated as usual: a huge page each would waste most of it.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace frugal {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;
inline constexpr size_t kHugePagesFrom = 2 * kHugePageBytes;

// `bytes` aligned to `alignment` (a power of two up to 2 MB); on a 2 MB boundary and advised to
// use huge pages when bytes >= kHugePagesFrom. The advice changes only speed: where the kernel has
// no huge page to give, the pages stay 4 KB. Throws std::bad_alloc.
void* allocate_for_random_access(size_t bytes, size_t alignment);
// Frees what allocate_for_random_access gave.
void free_for_random_access(void* p) noexcept;

// std::vector's allocator for such arrays.
template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    if (n > static_cast<size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(allocate_for_random_access(n * sizeof(T), alignof(T)));
  }
  void deallocate(T* p, size_t) noexcept { free_for_random_access(p); }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using HugePageVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace frugal
