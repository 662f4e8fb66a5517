// Insertion sort for a device thread, which has no library sort (the programs written once for the
// host and the device sort a sample's or a point's few ids there). `before(a, b)`: a goes first;
// equal elements keep their order.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace frugal {

struct Ascending {
  template <class T>
  FRUGAL_HOST_DEVICE bool operator()(const T& a, const T& b) const { return a < b; }
};
struct Descending {
  template <class T>
  FRUGAL_HOST_DEVICE bool operator()(const T& a, const T& b) const { return b < a; }
};

template <class T, class Before = Ascending>
FRUGAL_HOST_DEVICE void insertion_sort(T* v, uint64_t n, Before before = {}) {
  for (uint64_t a = 1; a < n; ++a) {
    const T x = v[a];
    uint64_t b = a;
    for (; b > 0 && before(x, v[b - 1]); --b) v[b] = v[b - 1];
    v[b] = x;
  }
}

}  // namespace frugal
