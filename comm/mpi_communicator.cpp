#include "comm/mpi_communicator.h"

#include <mpi.h>

#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "comm/environment.h"

namespace frugal::comm {
namespace {

using detail::WorkState;

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, len);
}

void check_mpi(int rc, const char* call, const std::string& what) {
  if (rc != MPI_SUCCESS) {
    throw CommError(fmt::format("{} failed in {} on rank {}: {}", call, what, error_rank(), mpi_error(rc)));
  }
}

int as_int(size_t n, const char* what) {
  FRUGAL_CHECK(n <= static_cast<size_t>(INT_MAX),
               fmt::format("{}: {} elements exceed MPI's int counts", what, n));
  return static_cast<int>(n);
}

// The thread that owns MPI: initializes it, makes every call, finalizes it at process exit.
class MpiRuntime {
 public:
  static std::shared_ptr<MpiRuntime> get() {
    static std::shared_ptr<MpiRuntime> runtime(new MpiRuntime());
    return runtime;
  }
  ~MpiRuntime() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // Runs fn on the MPI thread; the Work fails with whatever fn throws.
  Work submit(std::function<void()> fn) {
    auto state = std::make_shared<WorkState>();
    {
      std::lock_guard lock(mutex_);
      tasks_.push_back({std::move(fn), state});
    }
    cv_.notify_all();
    return Work(state);
  }
  // A request that completes later (p2p); `poll` returns true when done (and may throw).
  void add_pending(std::function<bool()> poll, std::shared_ptr<WorkState> state) {
    pending_.push_back({std::move(poll), std::move(state)});  // MPI thread only
  }
  int world_rank() const { return world_rank_; }
  int tag_ub() const { return tag_ub_; }

 private:
  struct Task {
    std::function<void()> fn;
    std::shared_ptr<WorkState> state;
  };
  struct Pending {
    std::function<bool()> poll;
    std::shared_ptr<WorkState> state;
  };

  MpiRuntime() {
    thread_ = std::thread([this] { loop(); });
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return started_; });
    if (!init_error_.empty()) throw CommError(init_error_);
  }

  void loop() {
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc == MPI_SUCCESS) {
      MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
      MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
      int* ub = nullptr;
      int flag = 0;
      MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
      if (flag && ub) tag_ub_ = *ub;
      set_error_rank(world_rank_);
    }
    {
      std::lock_guard lock(mutex_);
      started_ = true;
      if (rc != MPI_SUCCESS) init_error_ = "MPI_Init_thread failed: " + mpi_error(rc);
    }
    cv_.notify_all();
    if (rc != MPI_SUCCESS) return;
    for (;;) {
      std::unique_lock lock(mutex_);
      if (pending_.empty()) {
        cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
      } else {
        cv_.wait_for(lock, std::chrono::microseconds(50), [&] { return stop_ || !tasks_.empty(); });
      }
      if (stop_ && tasks_.empty()) break;
      std::deque<Task> batch;
      batch.swap(tasks_);
      lock.unlock();
      for (auto& t : batch) {
        try {
          t.fn();
          t.state->complete();
        } catch (...) {
          t.state->fail(std::current_exception());
        }
      }
      for (auto it = pending_.begin(); it != pending_.end();) {
        try {
          if (it->poll()) {
            it->state->complete();
            it = pending_.erase(it);
          } else {
            ++it;
          }
        } catch (...) {
          it->state->fail(std::current_exception());
          it = pending_.erase(it);
        }
      }
    }
    MPI_Finalize();
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;
  std::list<Pending> pending_;
  bool stop_ = false, started_ = false;
  std::string init_error_;
  int world_rank_ = 0;
  int tag_ub_ = 32767;
  std::thread thread_;
};


MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
  }
  return MPI_SUM;
}

uint64_t signature(std::initializer_list<uint64_t> words, std::span<const size_t> counts = {}) {
  uint64_t h = 0x84222325cbf29ce4ULL;
  auto mix = [&](uint64_t w) {
    h ^= w;
    h *= 0x100000001b3ULL;
    h ^= h >> 29;
  };
  for (uint64_t w : words) mix(w);
  for (size_t c : counts) mix(c);
  return h & 0x3fffffffffffffffULL;  // positive, so that -sig is too
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(std::shared_ptr<MpiRuntime> runtime, MPI_Comm comm, int rank, int size)
      : runtime_(std::move(runtime)), comm_(comm), rank_(rank), size_(size), stats_(size) {}
  ~MpiCommunicator() override {
    if (comm_ != MPI_COMM_WORLD) {
      MPI_Comm c = comm_;
      runtime_->submit([c]() mutable { MPI_Comm_free(&c); }).wait();
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view backend() const override { return "mpi"; }

  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm out = MPI_COMM_NULL;
    collective(OpKind::split, "split", signature({1}), [&] {
      check_mpi(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &out), "MPI_Comm_split", "split");
    }).wait();
    if (out == MPI_COMM_NULL) return nullptr;
    int r = 0, n = 0;
    runtime_->submit([&] {
      MPI_Comm_set_errhandler(out, MPI_ERRORS_RETURN);
      MPI_Comm_rank(out, &r);
      MPI_Comm_size(out, &n);
    }).wait();
    return std::make_unique<MpiCommunicator>(runtime_, out, r, n);
  }

  Work all_reduce(std::span<float> data, ReduceOp op) override {
    const int n = as_int(data.size(), "all_reduce");
    const uint64_t wire = ring_all_reduce_bytes(data.size_bytes(), size_);
    return collective(OpKind::all_reduce, fmt::format("all_reduce({}, {} floats)", to_string(op), n),
                      signature({1, data.size(), static_cast<uint64_t>(op)}), [=, this] {
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, data.data(), n, MPI_FLOAT, mpi_op(op), comm_),
                "MPI_Allreduce", "all_reduce");
      count(OpKind::all_reduce, wire, wire);
    });
  }

  Work all_gatherv(std::span<const float> mine, std::span<float> all,
                   std::span<const size_t> counts) override {
    auto [c, d] = counts_displs(counts, mine.size(), all.size(), "all_gatherv");
    const uint64_t wire = (all.size() - mine.size()) * sizeof(float);
    return collective(OpKind::all_gather, fmt::format("all_gather({} floats in total)", all.size()),
                      signature({2}, counts), [=, this, c = std::move(c), d = std::move(d)] {
      check_mpi(MPI_Allgatherv(mine.data(), c[rank_], MPI_FLOAT, all.data(), c.data(), d.data(),
                               MPI_FLOAT, comm_), "MPI_Allgatherv", "all_gather");
      count(OpKind::all_gather, wire, wire);
    });
  }

  Work reduce_scatterv(std::span<const float> all, std::span<float> mine,
                       std::span<const size_t> counts, ReduceOp op) override {
    auto [c, d] = counts_displs(counts, mine.size(), all.size(), "reduce_scatterv");
    const uint64_t wire = (all.size() - mine.size()) * sizeof(float);
    return collective(OpKind::reduce_scatter,
                      fmt::format("reduce_scatter({}, {} floats in total)", to_string(op), all.size()),
                      signature({3, static_cast<uint64_t>(op)}, counts), [=, this, c = std::move(c)] {
      check_mpi(MPI_Reduce_scatter(all.data(), mine.data(), c.data(), MPI_FLOAT, mpi_op(op), comm_),
                "MPI_Reduce_scatter", "reduce_scatter");
      count(OpKind::reduce_scatter, wire, wire);
    });
  }

  Work broadcast(std::span<float> data, int root) override {
    check_root(root, "broadcast");
    const int n = as_int(data.size(), "broadcast");
    return collective(OpKind::broadcast, fmt::format("broadcast({} floats, root {})", n, root),
                      signature({4, data.size(), static_cast<uint64_t>(root)}), [=, this] {
      check_mpi(MPI_Bcast(data.data(), n, MPI_FLOAT, root, comm_), "MPI_Bcast", "broadcast");
      count(OpKind::broadcast, rank_ == root ? data.size_bytes() : 0, rank_ == root ? 0 : data.size_bytes());
    });
  }

  Work broadcast_bytes(std::vector<std::byte>& data, int root) override {
    check_root(root, "broadcast_bytes");
    return collective(OpKind::broadcast, fmt::format("broadcast_bytes(root {})", root),
                      signature({5, static_cast<uint64_t>(root)}), [&data, root, this] {
      uint64_t n = data.size();
      check_mpi(MPI_Bcast(&n, 1, MPI_UINT64_T, root, comm_), "MPI_Bcast", "broadcast_bytes");
      if (rank_ != root) data.resize(n);
      check_mpi(MPI_Bcast(data.data(), as_int(n, "broadcast_bytes"), MPI_BYTE, root, comm_),
                "MPI_Bcast", "broadcast_bytes");
      count(OpKind::broadcast, rank_ == root ? n : 0, rank_ == root ? 0 : n);
    });
  }

  Work all_gather_bytes(std::span<const std::byte> mine,
                        std::vector<std::vector<std::byte>>& all) override {
    return collective(OpKind::all_gather, "all_gather_bytes", signature({6}), [mine, &all, this] {
      int n = as_int(mine.size(), "all_gather_bytes");
      std::vector<int> sizes(size_), displs(size_ + 1, 0);
      check_mpi(MPI_Allgather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, comm_), "MPI_Allgather",
                "all_gather_bytes");
      for (int r = 0; r < size_; ++r) {
        FRUGAL_CHECK(static_cast<int64_t>(displs[r]) + sizes[r] <= INT_MAX,
                     "all_gather_bytes: more than 2 GB in total");
        displs[r + 1] = displs[r] + sizes[r];
      }
      std::vector<std::byte> flat(displs[size_]);
      check_mpi(MPI_Allgatherv(mine.data(), n, MPI_BYTE, flat.data(), sizes.data(), displs.data(),
                               MPI_BYTE, comm_), "MPI_Allgatherv", "all_gather_bytes");
      all.assign(size_, {});
      for (int r = 0; r < size_; ++r) all[r].assign(flat.begin() + displs[r], flat.begin() + displs[r + 1]);
      count(OpKind::all_gather, static_cast<uint64_t>(n) * (size_ - 1), flat.size() - n);
    });
  }

  Work barrier() override {
    return collective(OpKind::barrier, "barrier", signature({7}), [this] {
      check_mpi(MPI_Barrier(comm_), "MPI_Barrier", "barrier");
    });
  }

  Work send(int dst, int tag, std::span<const std::byte> bytes) override {
    check_peer(dst, tag, "send");
    auto buf = std::make_shared<std::vector<std::byte>>(bytes.begin(), bytes.end());
    stats_.add_sent(OpKind::point_to_point, dst, buf->size());
    auto state = std::make_shared<WorkState>();
    runtime_->submit([=, this] {
      auto req = std::make_shared<MPI_Request>();
      check_mpi(MPI_Isend(buf->data(), as_int(buf->size(), "send"), MPI_BYTE, dst, tag, comm_, req.get()),
                "MPI_Isend", "send");
      runtime_->add_pending([req, buf] {
        int done = 0;
        check_mpi(MPI_Test(req.get(), &done, MPI_STATUS_IGNORE), "MPI_Test", "send");
        return done != 0;
      }, state);
    });
    return Work(state);
  }

  Work recv(int src, int tag, std::vector<std::byte>& out) override {
    check_peer(src, tag, "recv");
    auto state = std::make_shared<WorkState>();
    runtime_->submit([=, &out, this] {
      runtime_->add_pending([=, &out, this] {
        int found = 0;
        MPI_Message msg;
        MPI_Status st;
        check_mpi(MPI_Improbe(src, tag, comm_, &found, &msg, &st), "MPI_Improbe", "recv");
        if (!found) return false;
        int n = 0;
        MPI_Get_count(&st, MPI_BYTE, &n);
        out.resize(n);
        check_mpi(MPI_Mrecv(out.data(), n, MPI_BYTE, &msg, MPI_STATUS_IGNORE), "MPI_Mrecv", "recv");
        stats_.add_received(OpKind::point_to_point, src, static_cast<uint64_t>(n));
        return true;
      }, state);
    });
    return Work(state);
  }

  CommStats stats() const override { return stats_.snapshot(); }
  void reset_stats() override { stats_.reset(); }

 private:
  // Runs body on the MPI thread after checking that every rank is at the same collective: one
  // 2-word MPI_Allreduce(MAX) of (sig, -sig) shows whether min and max of the signatures agree.
  Work collective(OpKind, std::string description, uint64_t sig, std::function<void()> body) {
    const uint64_t seq = ++seq_;
    return runtime_->submit([this, sig, seq, description = std::move(description), body = std::move(body)] {
      if (!failure_.empty()) throw CommError(failure_);
      try {
        int64_t words[2] = {static_cast<int64_t>(sig), -static_cast<int64_t>(sig)};
        check_mpi(MPI_Allreduce(MPI_IN_PLACE, words, 2, MPI_INT64_T, MPI_MAX, comm_),
                  "MPI_Allreduce", "the collective check");
        if (words[0] != static_cast<int64_t>(sig) || -words[1] != static_cast<int64_t>(sig)) {
          throw CommError(fmt::format("collective mismatch: this rank's collective #{} is {}, but "
                                      "another rank issued a different collective or other sizes "
                                      "(every rank must issue the same collectives in the same "
                                      "order)", seq, description));
        }
        body();
      } catch (const std::exception& e) {
        failure_ = fmt::format("{} (collective #{}) failed on rank {} of {} (mpi): {}", description,
                               seq, rank_, size_, e.what());
        throw CommError(failure_);
      }
    });
  }

  std::pair<std::vector<int>, std::vector<int>> counts_displs(std::span<const size_t> counts,
                                                              size_t mine, size_t all,
                                                              const char* what) const {
    FRUGAL_CHECK(counts.size() == static_cast<size_t>(size_),
                 fmt::format("{}: {} counts for {} ranks", what, counts.size(), size_));
    const auto d = displacements(counts);
    FRUGAL_CHECK(mine == counts[rank_] && all == d.back(),
                 fmt::format("{}: buffers of {} and {} floats do not match counts[{}] = {} and the "
                             "total {}", what, mine, all, rank_, counts[rank_], d.back()));
    std::vector<int> c(size_), di(size_);
    for (int r = 0; r < size_; ++r) {
      c[r] = as_int(counts[r], what);
      di[r] = as_int(d[r], what);
    }
    return {c, di};
  }
  void check_root(int root, const char* what) const {
    FRUGAL_CHECK(root >= 0 && root < size_,
                 fmt::format("{}: root {} is not a rank of this {}-rank communicator", what, root, size_));
  }
  void check_peer(int peer, int tag, const char* what) const {
    FRUGAL_CHECK(peer >= 0 && peer < size_,
                 fmt::format("{}: rank {} is not in this {}-rank communicator", what, peer, size_));
    FRUGAL_CHECK(tag >= 0 && tag <= runtime_->tag_ub(),
                 fmt::format("{}: tag {} outside 0..{}", what, tag, runtime_->tag_ub()));
  }
  void count(OpKind kind, uint64_t sent, uint64_t received) {
    stats_.add_sent(kind, -1, sent);
    stats_.add_received(kind, -1, received);
  }

  std::shared_ptr<MpiRuntime> runtime_;
  MPI_Comm comm_;
  int rank_, size_;
  StatsCounter stats_;
  uint64_t seq_ = 0;
  std::string failure_;  // MPI thread only
};

}  // namespace

bool started_by_mpirun() { return std::getenv(std::string(env::kMpiWorldSize).c_str()) != nullptr; }

std::unique_ptr<Communicator> make_mpi_communicator(const RunConfig& run_config) {
  auto runtime = MpiRuntime::get();
  int rank = 0, size = 0;
  runtime->submit([&] {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }).wait();
  set_error_rank(rank);
  auto comm = std::make_unique<MpiCommunicator>(runtime, MPI_COMM_WORLD, rank, size);
  // Compare run configurations: rank 0's goes to everyone; the lowest differing rank explains.
  std::vector<std::byte> zero;
  if (rank == 0) {
    for (const auto& [k, v] : run_config) {
      for (const std::string& s : {k, v}) {
        const uint32_t n = static_cast<uint32_t>(s.size());
        const auto* p = reinterpret_cast<const std::byte*>(&n);
        zero.insert(zero.end(), p, p + 4);
        const auto* c = reinterpret_cast<const std::byte*>(s.data());
        zero.insert(zero.end(), c, c + s.size());
      }
    }
  }
  comm->broadcast_bytes(zero, 0).wait();
  RunConfig theirs;
  for (size_t at = 0; at + 4 <= zero.size();) {
    std::string kv[2];
    for (auto& s : kv) {
      uint32_t n;
      std::memcpy(&n, zero.data() + at, 4);
      s.assign(reinterpret_cast<const char*>(zero.data() + at + 4), n);
      at += 4 + n;
    }
    theirs[kv[0]] = kv[1];
  }
  std::string diff = config_difference(theirs, 0, run_config, rank);
  std::vector<std::vector<std::byte>> diffs;
  comm->all_gather_bytes(std::as_bytes(std::span<const char>(diff.data(), diff.size())), diffs).wait();
  for (int r = 0; r < size; ++r) {
    if (!diffs[r].empty()) {
      throw CommError(fmt::format("ranks 0 and {} were started with different configurations: {}", r,
                                  std::string(reinterpret_cast<const char*>(diffs[r].data()), diffs[r].size())));
    }
  }
  comm->reset_stats();
  return comm;
}

}  // namespace frugal::comm
