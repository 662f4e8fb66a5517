#include "kernels/matmul.h"

#include <algorithm>

#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <dnnl.hpp>
#include <omp.h>
#include <tbb/global_control.h>

#include "core/check.h"
#include "core/tensor.h"
#include "kernels/bf16_dot.h"

namespace frugal::kernels {
namespace {

// m, n, k, trans_a, trans_b, accumulate, bf16 operands, OpenMP threads.
using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, bool, bool, int>;

struct Engine {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<Key, dnnl::matmul> cache;
  std::vector<uint16_t> a16, b16;  // matmul_bf16's rounded operands (grown, never shrunk)
  std::mutex mutex;
};

Engine& engine() {
  static Engine e;
  return e;
}

std::unique_ptr<tbb::global_control> g_tbb_threads;
int g_threads = 0;

// out[i] = f32_to_bf16(in[i]) (core/tensor.h: to nearest, ties to even, NaN quiet).
void round_bf16_portable(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = f32_to_bf16(in[i]);
}

#if defined(__x86_64__)
// The same with AVX512-BF16's vcvtne2ps2bf16 (32 values an instruction; over a large array twice
// as fast as f32_to_bf16's integer arithmetic on 16 lanes, measured on an AMD EPYC), which also
// rounds to nearest even but reads an f32 below 2^-126 as 0:
// the dot instruction oneDNN's bf16 kernel runs (vdpbf16ps) reads such a bf16 value as 0 anyway,
// so only f32_to_bf16's rounding of the largest denormals up to 2^-126 is lost.
__attribute__((target("avx512f,avx512bf16"))) void round_bf16_avx512(const float* in, uint16_t* out, size_t n) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512bh r = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(in + i + 16), _mm512_loadu_ps(in + i));
    _mm512_storeu_si512(out + i, reinterpret_cast<__m512i>(r));
  }
  round_bf16_portable(in + i, out + i, n - i);
}
#endif

constexpr double kBf16WorkPerThread = 4194304.0;  // 2^22 multiply-adds

// Rounds n values to bf16, in blocks on `threads` OpenMP threads (small arrays on the caller's).
void round_bf16(const float* in, uint16_t* out, size_t n, int threads) {
#if defined(__x86_64__)
  const auto run = bf16_dot_available() ? round_bf16_avx512 : round_bf16_portable;
#else
  const auto run = round_bf16_portable;
#endif
  constexpr size_t kBlock = size_t{1} << 16;
  const auto blocks = static_cast<int64_t>((n + kBlock - 1) / kBlock);
  if (blocks <= 1 || threads <= 1) return run(in, out, n);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t j = 0; j < blocks; ++j) {
    const size_t begin = static_cast<size_t>(j) * kBlock;
    run(in + begin, out + begin, std::min(kBlock, n - begin));
  }
}

// Sets OpenMP's thread count for the calling thread while it lives (oneDNN sizes a primitive's
// work split and scratch by it when the primitive is created, and runs it with that split).
struct OmpThreads {
  int saved = omp_get_max_threads();
  explicit OmpThreads(int threads) {
    if (threads != saved) omp_set_num_threads(threads);
  }
  ~OmpThreads() {
    if (omp_get_max_threads() != saved) omp_set_num_threads(saved);
  }
};

void product(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t m, int64_t n,
             int64_t k, bool accumulate, bool bf16) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum (a rank holding no slice of the inner dimension): C = 0 (+ C)
    if (!accumulate) std::fill_n(c, m * n, 0.0f);
    return;
  }
  using dnnl::memory;
  using tag = memory::format_tag;
  Engine& e = engine();
  const memory::data_type in_type = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  const memory::desc a_md({m, k}, in_type, trans_a ? tag::ba : tag::ab);
  const memory::desc b_md({k, n}, in_type, trans_b ? tag::ba : tag::ab);
  const memory::desc c_md({m, n}, memory::data_type::f32, tag::ab);
  // bf16 products: a thread per 2^22 multiply-adds at most. oneDNN's bf16 kernel splits a small
  // product badly (on 2 cores, 128x64x256 took 2x as long on 2 threads as on 1; 128x256x512 and up
  // gain from the second thread: bench/kernels/matmul_bf16_bench).
  int threads = omp_get_max_threads();
  if (bf16) {
    const double work = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    threads = static_cast<int>(std::clamp(work / kBf16WorkPerThread, 1.0, static_cast<double>(threads)));
  }
  const OmpThreads scope(threads);
  std::lock_guard<std::mutex> lock(e.mutex);
  void* a_data = const_cast<float*>(a);
  void* b_data = const_cast<float*>(b);
  if (bf16) {  // the operands rounded once, in their own layout (a transposed operand stays so)
    const auto a_size = static_cast<size_t>(m * k), b_size = static_cast<size_t>(k * n);
    if (e.a16.size() < a_size) e.a16.resize(a_size);
    if (e.b16.size() < b_size) e.b16.resize(b_size);
    round_bf16(a, e.a16.data(), a_size, threads);
    round_bf16(b, e.b16.data(), b_size, threads);
    a_data = e.a16.data();
    b_data = e.b16.data();
  }
  const Key key{m, n, k, trans_a, trans_b, accumulate, bf16, threads};
  auto it = e.cache.find(key);
  if (it == e.cache.end()) {
    dnnl::primitive_attr attr;
    if (accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, e.engine);
    it = e.cache.emplace(key, dnnl::matmul(pd)).first;
  }
  memory a_mem(a_md, e.engine, a_data);
  memory b_mem(b_md, e.engine, b_data);
  memory c_mem(c_md, e.engine, c);
  it->second.execute(e.stream, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
  e.stream.wait();
}

}  // namespace

void matmul(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t m,
            int64_t n, int64_t k, bool accumulate) {
  product(a, trans_a, b, trans_b, c, m, n, k, accumulate, false);
}

void matmul_bf16(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t m,
                 int64_t n, int64_t k, bool accumulate) {
  product(a, trans_a, b, trans_b, c, m, n, k, accumulate, true);
}

void set_num_threads(int threads) {
  FRUGAL_CHECK(threads >= 0, "the thread count must be >= 0");
  const int n = threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency());
  omp_set_num_threads(n);
  g_tbb_threads = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, n);
  g_threads = n;
}

int num_threads() {
  return g_threads > 0 ? g_threads : static_cast<int>(std::thread::hardware_concurrency());
}

}  // namespace frugal::kernels
