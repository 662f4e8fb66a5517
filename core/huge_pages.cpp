#include "core/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>

namespace frugal {

void* allocate_for_random_access(size_t bytes, size_t alignment) {
  const bool huge = bytes >= kHugePagesFrom;
  const size_t align = huge ? kHugePageBytes : std::max(alignment, sizeof(void*));
  // aligned_alloc wants a multiple of the alignment; at least one byte, so that a null pointer
  // always means failure.
  const size_t size = (std::max<size_t>(bytes, 1) + align - 1) / align * align;
  void* p = std::aligned_alloc(align, size);
  if (p == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  if (huge) madvise(p, size, MADV_HUGEPAGE);  // advice only (see the header)
#endif
  return p;
}

void free_for_random_access(void* p) noexcept { std::free(p); }

}  // namespace frugal
