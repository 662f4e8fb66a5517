// gpu/nccl_communicator.h with NCCL: libnccl loaded at run time (dlopen), a non-blocking NCCL
// communicator so that set-up and every collective can be given up on after the timeout, and one
// stream with a pinned staging buffer and a device buffer, grown as needed and kept.
#include "gpu/nccl_communicator.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <numeric>
#include <thread>
#include <type_traits>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nccl.h>

#include "core/check.h"
#include "gpu/nccl_check.h"

#ifndef FRUGAL_NCCL_LIBDIR
#define FRUGAL_NCCL_LIBDIR ""
#endif

namespace frugal::gpu {
namespace {

using comm::CommError;
using comm::Communicator;
using comm::OpKind;
using comm::ReduceOp;
using comm::Work;

// The NCCL entry points frugal uses, from libnccl.so.2 (found as the dynamic loader finds
// libraries, then FRUGAL_NCCL_LIBRARY, then the toolkit's folder this build saw).
struct NcclApi {
  decltype(&::ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&::ncclCommInitRankConfig) init_rank_config = nullptr;
  decltype(&::ncclCommGetAsyncError) get_async_error = nullptr;
  decltype(&::ncclCommAbort) abort = nullptr;
  decltype(&::ncclCommDestroy) destroy = nullptr;
  decltype(&::ncclGetErrorString) error_string = nullptr;
  decltype(&::ncclGetLastError) last_error = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
  decltype(&::ncclBroadcast) broadcast = nullptr;
  decltype(&::ncclReduce) reduce = nullptr;
  decltype(&::ncclGroupStart) group_start = nullptr;
  decltype(&::ncclGroupEnd) group_end = nullptr;
};

const NcclApi& nccl() {
  static const NcclApi api = [] {
    std::vector<std::string> tried;
    void* lib = nullptr;
    std::vector<std::string> names = {"libnccl.so.2"};
    if (const char* path = std::getenv("FRUGAL_NCCL_LIBRARY"); path != nullptr && *path != '\0')
      names.insert(names.begin(), path);
    if (std::string(FRUGAL_NCCL_LIBDIR) != "") names.push_back(std::string(FRUGAL_NCCL_LIBDIR) + "/libnccl.so.2");
    for (const std::string& name : names) {
      lib = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib != nullptr) break;
      const char* why = ::dlerror();
      tried.push_back(fmt::format("{} ({})", name, why != nullptr ? why : "not found"));
    }
    FRUGAL_CHECK(lib != nullptr, fmt::format("--dp-transport nccl: cannot load libnccl: tried {} (set "
                                             "FRUGAL_NCCL_LIBRARY to its path)",
                                             fmt::join(tried, "; ")));
    NcclApi a;
    const auto bind = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, symbol));
      FRUGAL_CHECK(fn != nullptr, fmt::format("--dp-transport nccl: libnccl has no {} (NCCL 2.14 or newer needed)",
                                              symbol));
    };
    bind(a.get_unique_id, "ncclGetUniqueId");
    bind(a.init_rank_config, "ncclCommInitRankConfig");
    bind(a.get_async_error, "ncclCommGetAsyncError");
    bind(a.abort, "ncclCommAbort");
    bind(a.destroy, "ncclCommDestroy");
    bind(a.error_string, "ncclGetErrorString");
    bind(a.last_error, "ncclGetLastError");
    bind(a.all_reduce, "ncclAllReduce");
    bind(a.broadcast, "ncclBroadcast");
    bind(a.reduce, "ncclReduce");
    bind(a.group_start, "ncclGroupStart");
    bind(a.group_end, "ncclGroupEnd");
    return a;
  }();
  return api;
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw CommError(fmt::format("NCCL group: {} failed: {}: {}", what, cudaGetErrorName(e), cudaGetErrorString(e)));
}

ncclRedOp_t to_nccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::min:
      return ncclMin;
    case ReduceOp::sum:
      break;
  }
  return ncclSum;
}

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(std::unique_ptr<Communicator> host, int device, double timeout_seconds)
      : host_(std::move(host)), device_(device), timeout_(timeout_seconds), counter_(host_->size()) {
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    // Rank 0 makes the group's id; the host transport carries it to the others.
    ncclUniqueId id{};
    std::vector<std::byte> bytes;
    if (rank() == 0) {
      check("ncclGetUniqueId", nccl().get_unique_id(&id));
      bytes.resize(sizeof(id));
      std::memcpy(bytes.data(), &id, sizeof(id));
    }
    host_->broadcast_bytes(bytes, 0).wait();
    FRUGAL_CHECK(bytes.size() == sizeof(id), fmt::format("NCCL set-up: rank 0 sent a {}-byte group id, not {}",
                                                         bytes.size(), sizeof(id)));
    std::memcpy(&id, bytes.data(), sizeof(id));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // returns at once: the set-up is waited for below, with a deadline
    check("ncclCommInitRankConfig", nccl().init_rank_config(&comm_, size(), id, rank(), &config));
    settle("set-up (ncclCommInitRankConfig)");
  }

  ~NcclCommunicator() override {
    if (comm_ != nullptr) {
      // A failed group is aborted; a healthy one destroyed (which waits for its work).
      if (dead_) nccl().abort(comm_);
      else nccl().destroy(comm_);
    }
    if (device_buf_ != nullptr) cudaFree(device_buf_);
    if (pinned_ != nullptr) cudaFreeHost(pinned_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string_view backend() const override { return "nccl"; }

  std::unique_ptr<Communicator> split(int, int) override {
    throw CommError("split is not supported on an NCCL data-parallel group (split the host communicator first)");
  }

  Work all_reduce(std::span<float> data, ReduceOp op) override {
    const uint64_t wire = comm::ring_all_reduce_bytes(data.size_bytes(), size());
    return run(OpKind::all_reduce, fmt::format("all_reduce({} floats)", data.size()), data.size(), data.data(),
               data.size(), data.data(), data.size(), wire, [&](float* buf) {
                 return nccl().all_reduce(buf, buf, data.size(), ncclFloat32, to_nccl(op), comm_, stream_);
               });
  }

  Work all_gatherv(std::span<const float> mine, std::span<float> all, std::span<const size_t> counts) override {
    check_counts(counts, all.size(), "all_gatherv");
    FRUGAL_CHECK(mine.size() == counts[static_cast<size_t>(rank())],
                 fmt::format("all_gatherv: this rank gives {} floats, counts say {}", mine.size(),
                             counts[static_cast<size_t>(rank())]));
    const std::vector<size_t> displ = comm::displacements(counts);
    const uint64_t wire = (all.size() - mine.size()) * sizeof(float);  // the ring: every other part passes by
    // Each rank's part is broadcast from it into its place: NCCL has no all-gather of unequal parts.
    return run(OpKind::all_gather, fmt::format("all_gatherv({} floats)", all.size()), all.size(), mine.data(),
               mine.size(), all.data(), all.size(), wire, [&](float* buf) {
                 const size_t mine_at = displ[static_cast<size_t>(rank())];
                 // The staged input is at the front; move it to its place (the parts may overlap it).
                 if (mine_at != 0 && !mine.empty())
                   check_cuda(cudaMemcpyAsync(buf + all.size(), buf, mine.size() * sizeof(float),
                                              cudaMemcpyDeviceToDevice, stream_),
                              "cudaMemcpyAsync");
                 const float* source = mine_at != 0 ? buf + all.size() : buf;
                 ncclResult_t r = nccl().group_start();
                 for (int root = 0; root < size() && r == ncclSuccess; ++root) {
                   const size_t at = displ[static_cast<size_t>(root)], n = counts[static_cast<size_t>(root)];
                   r = nccl().broadcast(root == rank() ? source : buf + at, buf + at, n, ncclFloat32, root, comm_,
                                        stream_);
                 }
                 const ncclResult_t end = nccl().group_end();
                 return r != ncclSuccess ? r : end;
               }, /*extra=*/mine.size());
  }

  Work reduce_scatterv(std::span<const float> all, std::span<float> mine, std::span<const size_t> counts,
                       ReduceOp op) override {
    check_counts(counts, all.size(), "reduce_scatterv");
    FRUGAL_CHECK(mine.size() == counts[static_cast<size_t>(rank())],
                 fmt::format("reduce_scatterv: this rank receives {} floats, counts say {}", mine.size(),
                             counts[static_cast<size_t>(rank())]));
    const std::vector<size_t> displ = comm::displacements(counts);
    const uint64_t wire = (all.size() - mine.size()) * sizeof(float);
    // Each part is reduced to its owner; the result lands after the staged input and is read back.
    return run(OpKind::reduce_scatter, fmt::format("reduce_scatterv({} floats)", all.size()), all.size(),
               all.data(), all.size(), mine.data(), mine.size(), wire, [&](float* buf) {
                 ncclResult_t r = nccl().group_start();
                 for (int root = 0; root < size() && r == ncclSuccess; ++root) {
                   const size_t at = displ[static_cast<size_t>(root)], n = counts[static_cast<size_t>(root)];
                   r = nccl().reduce(buf + at, buf + all.size(), n, ncclFloat32, to_nccl(op), root, comm_, stream_);
                 }
                 const ncclResult_t end = nccl().group_end();
                 return r != ncclSuccess ? r : end;
               }, /*extra=*/mine.size(), /*result_offset=*/all.size());
  }

  Work broadcast(std::span<float> data, int root) override {
    FRUGAL_CHECK(root >= 0 && root < size(), fmt::format("broadcast: root {} is not a rank of {}", root, size()));
    const uint64_t wire = (rank() + 1) % size() != root ? data.size_bytes() : 0;  // the chain's last one sends none
    return run(OpKind::broadcast, fmt::format("broadcast({} floats from {})", data.size(), root), data.size(),
               data.data(), data.size(), data.data(), data.size(), wire, [&](float* buf) {
                 return nccl().broadcast(buf, buf, data.size(), ncclFloat32, root, comm_, stream_);
               });
  }

  // Bytes, barriers and point to point: the host transport.
  Work broadcast_bytes(std::vector<std::byte>& data, int root) override { return host_->broadcast_bytes(data, root); }
  Work all_gather_bytes(std::span<const std::byte> mine, std::vector<std::vector<std::byte>>& all) override {
    return host_->all_gather_bytes(mine, all);
  }
  Work barrier() override { return host_->barrier(); }
  Work send(int dst, int tag, std::span<const std::byte> bytes) override { return host_->send(dst, tag, bytes); }
  Work recv(int src, int tag, std::vector<std::byte>& out) override { return host_->recv(src, tag, out); }

  comm::CommStats stats() const override {
    comm::CommStats s = host_->stats();
    const comm::CommStats mine = counter_.snapshot();
    for (size_t k = 0; k < s.by_kind.size(); ++k) s.by_kind[k] += mine.by_kind[k];
    s.by_peer.resize(std::max(s.by_peer.size(), mine.by_peer.size()));
    for (size_t p = 0; p < mine.by_peer.size(); ++p) s.by_peer[p] += mine.by_peer[p];
    return s;
  }
  void reset_stats() override {
    host_->reset_stats();
    counter_.reset();
  }

 private:
  void check_counts(std::span<const size_t> counts, size_t total, const char* what) const {
    FRUGAL_CHECK(counts.size() == static_cast<size_t>(size()),
                 fmt::format("{}: {} counts for {} ranks", what, counts.size(), size()));
    FRUGAL_CHECK(std::accumulate(counts.begin(), counts.end(), size_t{0}) == total,
                 fmt::format("{}: the counts add up to {}, the buffer has {} floats", what,
                             std::accumulate(counts.begin(), counts.end(), size_t{0}), total));
  }

  void check(const char* what, ncclResult_t r) {
    if (r == ncclSuccess || r == ncclInProgress) return;
    fail(fmt::format("NCCL group: {} failed: {}{}", what, nccl().error_string(r), last_error()));
  }

  std::string last_error() const {
    const char* text = comm_ != nullptr ? nccl().last_error(comm_) : nullptr;
    return text != nullptr && *text != '\0' ? fmt::format(" ({})", text) : std::string();
  }

  [[noreturn]] void fail(const std::string& message) {
    dead_ = std::make_exception_ptr(CommError(message));
    std::rethrow_exception(dead_);
  }

  // Waits (polling, without blocking inside NCCL) until the group's pending calls are enqueued and,
  // with `stream`, the stream has run them; past the deadline the group is aborted.
  void settle(const std::string& what, bool stream = false) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_);
    for (;;) {
      ncclResult_t state = ncclSuccess;
      check("ncclCommGetAsyncError", nccl().get_async_error(comm_, &state));
      if (state != ncclSuccess && state != ncclInProgress)
        fail(fmt::format("NCCL group: {} failed: {}{}", what, nccl().error_string(state), last_error()));
      if (state == ncclSuccess) {
        if (!stream) return;
        const cudaError_t q = cudaStreamQuery(stream_);
        if (q == cudaSuccess) return;
        if (q != cudaErrorNotReady) check_cuda(q, what.c_str());
      }
      if (std::chrono::steady_clock::now() > deadline) {
        nccl().abort(comm_);
        comm_ = nullptr;
        fail(fmt::format("NCCL group: {} did not finish within {} s on rank {} (a replica died or is stuck; "
                         "--comm-timeout sets the limit)",
                         what, timeout_, rank()));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  // The device buffer holds `floats` (+ `extra`) floats; the pinned one the larger of input/output.
  void reserve(size_t device_floats, size_t pinned_floats) {
    if (device_floats > device_cap_) {
      if (device_buf_ != nullptr) check_cuda(cudaFree(device_buf_), "cudaFree");
      device_buf_ = nullptr;
      check_cuda(cudaMalloc(reinterpret_cast<void**>(&device_buf_), device_floats * sizeof(float)), "cudaMalloc");
      device_cap_ = device_floats;
    }
    if (pinned_floats > pinned_cap_) {
      if (pinned_ != nullptr) check_cuda(cudaFreeHost(pinned_), "cudaFreeHost");
      pinned_ = nullptr;
      check_cuda(cudaMallocHost(reinterpret_cast<void**>(&pinned_), pinned_floats * sizeof(float)), "cudaMallocHost");
      pinned_cap_ = pinned_floats;
    }
  }

  // One staged collective: `in` (n_in floats) to the front of the device buffer, `launch` on it,
  // then n_out floats from result_offset back to `out`. Synchronous; the Work it returns is done.
  template <class Launch>
  Work run(OpKind kind, const std::string& what, size_t floats, const float* in, size_t n_in, float* out,
           size_t n_out, uint64_t wire, Launch&& launch, size_t extra = 0, size_t result_offset = 0) {
    if (dead_) std::rethrow_exception(dead_);
    try {
      reserve(std::max<size_t>(floats + extra, 1), std::max<size_t>({n_in, n_out, 1}));
      check_cuda(cudaSetDevice(device_), "cudaSetDevice");
      if (n_in > 0) {
        std::memcpy(pinned_, in, n_in * sizeof(float));
        check_cuda(cudaMemcpyAsync(device_buf_, pinned_, n_in * sizeof(float), cudaMemcpyHostToDevice, stream_),
                   "cudaMemcpyAsync (to the device)");
      }
      check(what.c_str(), launch(device_buf_));
      if (n_out > 0)
        check_cuda(cudaMemcpyAsync(pinned_, device_buf_ + result_offset, n_out * sizeof(float),
                                   cudaMemcpyDeviceToHost, stream_),
                   "cudaMemcpyAsync (to the host)");
      settle(what, /*stream=*/true);
      if (n_out > 0) std::memcpy(out, pinned_, n_out * sizeof(float));
    } catch (const CommError&) {
      throw;
    } catch (const std::exception& e) {
      fail(e.what());
    }
    if (size() > 1) {
      const int next = (rank() + 1) % size(), prev = (rank() + size() - 1) % size();
      counter_.add_sent(kind, next, wire);
      counter_.add_received(kind, prev, wire);
    }
    return Work();
  }

  std::unique_ptr<Communicator> host_;
  int device_;
  double timeout_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  float* device_buf_ = nullptr;
  size_t device_cap_ = 0;
  float* pinned_ = nullptr;
  size_t pinned_cap_ = 0;
  comm::StatsCounter counter_;
  std::exception_ptr dead_;  // after a failure every call fails with it
};

}  // namespace

bool nccl_built() { return true; }

std::unique_ptr<comm::Communicator> make_nccl_communicator(std::unique_ptr<comm::Communicator> host, int device,
                                                           double timeout_seconds) {
  FRUGAL_CHECK(host != nullptr, "make_nccl_communicator: no host communicator");
  FRUGAL_CHECK(timeout_seconds > 0, fmt::format("NCCL group: the timeout must be positive, not {}", timeout_seconds));
  detail::require_nccl(*host, device);
  return std::make_unique<NcclCommunicator>(std::move(host), device, timeout_seconds);
}

}  // namespace frugal::gpu
