// What the bf16 dense-product tests of every backend share (test_bf16_dot.cpp for the CPU,
// test_cuda_ops.cpp for CUDA): a product's shape and transposes, its operands (uniform in [-1, 1],
// seeded by the shape) with their bf16-rounded copies, the product through a backend on wrapped host
// vectors, and the normalized squared error the bounds are stated in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace frugal::testing {

struct ProductShape {
  int64_t m, n, k;
  bool ta, tb, acc;
};

// A (m x k, or k x m when ta), B (k x n, or n x k when tb), C's starting values, and A and B rounded
// to bf16 (to nearest even) and widened back.
struct ProductOperands {
  std::vector<float> a, b, c0, ar, br;
  explicit ProductOperands(const ProductShape& sh)
      : a(static_cast<size_t>(sh.m * sh.k)), b(static_cast<size_t>(sh.k * sh.n)), c0(static_cast<size_t>(sh.m * sh.n)) {
    Rng rng(static_cast<uint64_t>(sh.m * 31 + sh.n * 7 + sh.k));
    for (float& x : a) x = rng.uniform(-1, 1);
    for (float& x : b) x = rng.uniform(-1, 1);
    for (float& x : c0) x = rng.uniform(-1, 1);
    ar = a;
    br = b;
    for (float& x : ar) x = bf16_to_f32(f32_to_bf16(x));
    for (float& x : br) x = bf16_to_f32(f32_to_bf16(x));
  }
};

// out = op(x) op(y) (+ out when sh.acc) through `be`, on the host vectors as they are.
inline void backend_product(Backend& be, const ProductShape& sh, std::vector<float>& x, std::vector<float>& y,
                            std::vector<float>& out) {
  const Tensor tx = Tensor::wrap(x.data(), static_cast<size_t>(sh.ta ? sh.k : sh.m),
                                 static_cast<size_t>(sh.ta ? sh.m : sh.k), Dtype::f32);
  const Tensor ty = Tensor::wrap(y.data(), static_cast<size_t>(sh.tb ? sh.n : sh.k),
                                 static_cast<size_t>(sh.tb ? sh.k : sh.n), Dtype::f32);
  Tensor tc = Tensor::wrap(out.data(), static_cast<size_t>(sh.m), static_cast<size_t>(sh.n), Dtype::f32);
  be.matmul(tx, sh.ta, ty, sh.tb, tc, sh.acc);
}

// sum (got - want)^2 / sum want^2 (the plain sum when want is all zero).
inline double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err2 += (double{got[i]} - want[i]) * (double{got[i]} - want[i]);
    ref2 += double{want[i]} * want[i];
  }
  return ref2 > 0 ? err2 / ref2 : err2;
}

}  // namespace frugal::testing
