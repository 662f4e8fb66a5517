#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "collective_checks.h"
#include "comm/local_communicator.h"
#include "comm/transport.h"
#include "comm/transport_communicator.h"

using namespace frugal::comm;

namespace {
// Tiny thresholds make the ring algorithms (and their segmenting) run on small inputs too.
constexpr CollectiveTuning kRingAlways{.ring_threshold_bytes = 0, .segment_bytes = 12};
}  // namespace

TEST_CASE("local: every collective, world sizes 1..4, small sizes, direct and ring") {
  for (int p = 1; p <= 4; ++p) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}}) {
      for (auto tuning : {CollectiveTuning{}, kRingAlways}) {
        INFO("world " << p << ", n " << n << ", ring threshold " << tuning.ring_threshold_bytes);
        REQUIRE_NOTHROW(run_local(p, [&](Communicator& c) { testing::check_collectives(c, n); },
                                  tuning));
      }
    }
  }
}

TEST_CASE("local: 1M floats, world sizes 2..4") {
  for (int p = 2; p <= 4; ++p) {
    INFO("world " << p);
    REQUIRE_NOTHROW(run_local(p, [&](Communicator& c) {
      testing::check_all_reduce(c, 1 << 20);
      testing::check_all_gather(c, 1 << 20);
      testing::check_reduce_scatter(c, 1 << 20);
      testing::check_broadcast(c, 1 << 20);
    }));
  }
}

TEST_CASE("local: 64 MB all_reduce on 2 ranks") {
  REQUIRE_NOTHROW(run_local(2, [](Communicator& c) { testing::check_all_reduce(c, 16 << 20); }));
}

TEST_CASE("local: split into sub-communicators") {
  for (int p = 1; p <= 4; ++p) {
    INFO("world " << p);
    REQUIRE_NOTHROW(run_local(p, [](Communicator& c) { testing::check_split(c); }));
  }
}

TEST_CASE("local: mismatched collectives fail on every rank instead of hanging") {
  std::atomic<int> failures{0};
  std::string message;
  std::mutex m;
  auto comms = make_local_communicators(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      frugal::set_error_rank(r);
      Communicator& c = *comms[r];
      std::vector<float> v(10 + (r == 2 ? 1 : 0), 1.0f);  // rank 2 passes 11 floats
      try {
        c.all_reduce(v).wait();
      } catch (const CommError& e) {
        ++failures;
        std::lock_guard lock(m);
        message += std::string(e.what()) + "\n";
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures == 3);
  CHECK_THAT(message, Catch::Contains("collective mismatch"));
}

TEST_CASE("local: a different collective on one rank is reported, and the communicator stays dead") {
  auto comms = make_local_communicators(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      Communicator& c = *comms[r];
      std::vector<float> v(4, 1.0f);
      try {
        if (r == 0) c.all_reduce(v).wait(); else c.broadcast(v, 1).wait();
      } catch (const CommError& e) {
        errors[r] = e.what();
      }
      try {
        c.barrier().wait();
        errors[r] += "\nbarrier succeeded";
      } catch (const CommError& e) {
        errors[r] += "\nlater: " + std::string(e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    INFO(errors[r]);
    CHECK_THAT(errors[r], Catch::Contains("mismatch"));
    CHECK_THAT(errors[r], Catch::Contains("later: barrier"));
  }
}

TEST_CASE("local: a rank that throws makes the others fail, not hang") {
  try {
    run_local(3, [](Communicator& c) {
      if (c.rank() == 1) throw frugal::Error("rank 1 gave up");
      std::vector<float> v(100, 1.0f);
      c.all_reduce(v).wait();
    });
    FAIL("no exception");
  } catch (const frugal::Error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("rank 1 gave up"));
  }
}

TEST_CASE("local: byte accounting per kind and per peer") {
  run_local(2, [](Communicator& c) {
    const CommStats before = c.stats();
    std::vector<float> v(1000, 1.0f);  // 4000 bytes, direct: one frame to the other rank
    c.all_reduce(v).wait();
    const CommStats d = c.stats() - before;
    const auto& ar = d.kind(OpKind::all_reduce);
    FRUGAL_CHECK(ar.sent == 4000 + 56 && ar.received == 4000 + 56 && ar.messages_sent == 1,
                 "all_reduce bytes: " + std::to_string(ar.sent) + " / " + std::to_string(ar.received));
    FRUGAL_CHECK(d.by_peer.at(1 - c.rank()).sent == 4056, "per-peer bytes wrong");
    FRUGAL_CHECK(d.kind(OpKind::all_gather).sent == 0, "other kinds must stay zero");
    c.reset_stats();
    FRUGAL_CHECK(c.stats().total().sent == 0, "reset_stats left bytes");
  });
}

namespace {
// Delivers in process, as the local transport does, and keeps count of the receive claims its
// communicators' threads hold (Transport::claim_receive): a transport with a receive spin is
// claimed while operations run, one without is never claimed, and no thread lets go of a claim it
// does not hold.
class ClaimCountingTransport final : public detail::Transport {
 public:
  ClaimCountingTransport(int rank, int size, std::chrono::microseconds spin) : Transport(rank, size), spin_(spin) {}
  std::string_view name() const override { return "claim-counting"; }
  uint64_t send(int dst, const FrameHeader& header, detail::Payload payload) override {
    const uint64_t bytes = kFrameHeaderBytes + payload.size();
    peers->at(static_cast<size_t>(dst))->deliver({header, std::move(payload), true});
    return bytes;
  }
  std::chrono::microseconds receive_spin() const override { return spin_; }
  void claim_receive() override {
    std::lock_guard lock(mutex_);
    ++held_;
    ++claims_;
  }
  void release_receive() override {
    std::lock_guard lock(mutex_);
    lowest_ = std::min(lowest_, --held_);
  }
  int held() const {
    std::lock_guard lock(mutex_);
    return held_;
  }
  int lowest() const {
    std::lock_guard lock(mutex_);
    return lowest_;
  }
  int claims() const {
    std::lock_guard lock(mutex_);
    return claims_;
  }
  std::vector<ClaimCountingTransport*>* peers = nullptr;

 private:
  const std::chrono::microseconds spin_;
  mutable std::mutex mutex_;
  int held_ = 0, lowest_ = 0, claims_ = 0;
};
}  // namespace

TEST_CASE("transport: an operation that sleeps lets go only of a receive claim it holds") {
  for (const auto spin : {std::chrono::microseconds(0), std::chrono::microseconds(20)}) {
    INFO("receive spin " << spin.count() << " us");
    auto a = std::make_shared<ClaimCountingTransport>(0, 2, spin);
    auto b = std::make_shared<ClaimCountingTransport>(1, 2, spin);
    std::vector<ClaimCountingTransport*> peers{a.get(), b.get()};
    a->peers = b->peers = &peers;
    {
      detail::TransportCommunicator t0(a, {0, 1}, 0), t1(b, {0, 1}, 0);
      Communicator &c0 = t0, &c1 = t1;
      // Rank 0 comes late to every operation, so rank 1's threads wait past any spin and sleep on
      // their mailboxes: collectives on one thread, a point-to-point receive on the other.
      std::thread late([&] {
        std::vector<float> v(1000, 1.0f);
        for (int i = 0; i < 5; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
          c0.all_reduce(v).wait();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        const std::vector<std::byte> bytes(10, std::byte{7});
        c0.send(1, 3, bytes).wait();
      });
      std::vector<float> v(1000, 1.0f);
      for (int i = 0; i < 5; ++i) c1.all_reduce(v).wait();
      std::vector<std::byte> got;
      c1.recv(0, 3, got).wait();
      late.join();
      CHECK(v[0] == 32.0f);  // doubled five times
      CHECK(got.size() == 10);
    }
    // The communicators' threads are gone: every claim was let go, and none below zero.
    for (const auto* t : {a.get(), b.get()}) {
      CHECK(t->lowest() == 0);
      CHECK(t->held() == 0);
      CHECK((t->claims() > 0) == (spin.count() > 0));
    }
  }
}
