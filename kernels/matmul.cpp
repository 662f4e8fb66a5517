#include "kernels/matmul.h"

#include <algorithm>

#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>

#include <dnnl.hpp>
#include <omp.h>
#include <tbb/global_control.h>

#include "core/check.h"

namespace frugal::kernels {
namespace {

using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, bool>;

struct Engine {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<Key, dnnl::matmul> cache;
  std::mutex mutex;
};

Engine& engine() {
  static Engine e;
  return e;
}

std::unique_ptr<tbb::global_control> g_tbb_threads;
int g_threads = 0;

}  // namespace

void matmul(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t m,
            int64_t n, int64_t k, bool accumulate) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum (a rank holding no slice of the inner dimension): C = 0 (+ C)
    if (!accumulate) std::fill_n(c, m * n, 0.0f);
    return;
  }
  using dnnl::memory;
  using tag = memory::format_tag;
  Engine& e = engine();
  const memory::desc a_md({m, k}, memory::data_type::f32, trans_a ? tag::ba : tag::ab);
  const memory::desc b_md({k, n}, memory::data_type::f32, trans_b ? tag::ba : tag::ab);
  const memory::desc c_md({m, n}, memory::data_type::f32, tag::ab);
  std::lock_guard<std::mutex> lock(e.mutex);
  const Key key{m, n, k, trans_a, trans_b, accumulate};
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
  memory a_mem(a_md, e.engine, const_cast<float*>(a));
  memory b_mem(b_md, e.engine, const_cast<float*>(b));
  memory c_mem(c_md, e.engine, c);
  it->second.execute(e.stream, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
  e.stream.wait();
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
