#include <catch2/catch.hpp>

#include <chrono>
#include <exception>
#include <limits>
#include <thread>

#include <fmt/format.h>

#include "collective_checks.h"
#include "zmq_harness.h"

using namespace frugal::comm;
using frugal::comm::testing::run_zmq;
using frugal::comm::testing::run_zmq_collect;

TEST_CASE("zmq: every collective, world sizes 1..4, small sizes, direct and ring") {
  for (int p = 1; p <= 4; ++p) {
    INFO("world " << p);
    REQUIRE_NOTHROW(run_zmq(p, [](Communicator& c) {
      for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}}) testing::check_collectives(c, n);
    }));
    REQUIRE_NOTHROW(run_zmq(p, [](Communicator& c) {
      for (size_t n : {size_t{1}, size_t{7}, size_t{1001}}) testing::check_collectives(c, n);
    }, [](ZmqOptions& o) { o.tuning = {.ring_threshold_bytes = 0, .segment_bytes = 12}; }));
  }
}

TEST_CASE("zmq: 1M floats, world sizes 2..4") {
  for (int p = 2; p <= 4; ++p) {
    INFO("world " << p);
    REQUIRE_NOTHROW(run_zmq(p, [](Communicator& c) {
      testing::check_all_reduce(c, 1 << 20);
      testing::check_all_gather(c, 1 << 20);
      testing::check_reduce_scatter(c, 1 << 20);
      testing::check_broadcast(c, 1 << 20);
    }));
  }
}

TEST_CASE("zmq: 64 MB all_reduce on 2 ranks") {
  REQUIRE_NOTHROW(run_zmq(2, [](Communicator& c) { testing::check_all_reduce(c, 16 << 20); }));
}

TEST_CASE("zmq: split into sub-communicators") {
  for (int p = 1; p <= 4; ++p) {
    INFO("world " << p);
    REQUIRE_NOTHROW(run_zmq(p, [](Communicator& c) { testing::check_split(c); }));
  }
}

TEST_CASE("zmq: ranks with different run configurations refuse to start, naming the setting") {
  try {
    run_zmq(3, [](Communicator&) { FAIL("started"); }, [](ZmqOptions& o) {
      o.run_config = {{"hidden", "128"}, {"lr", o.rank == 2 ? "0.01" : "0.001"}};
    });
    FAIL("no exception");
  } catch (const frugal::Error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("setting 'lr' differs: rank 0 has '0.001', "
                                                      "rank 2 has '0.01'"));
  }
}

TEST_CASE("zmq: a configuration mismatch fails every rank at once, also one whose hello comes after it") {
  // Rank 2 differs; rank 1 says hello only after rank 0 has found that out. Before rank 0 kept
  // answering late hellos, rank 1 waited for its whole rendezvous timeout (here 20 s).
  const auto start = std::chrono::steady_clock::now();
  const auto errors = run_zmq_collect(3, [](Communicator&) {}, [](ZmqOptions& o) {
    o.run_config = {{"hidden", "128"}, {"lr", o.rank == 2 ? "0.01" : "0.001"}};
    if (o.rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    CHECK_THAT(errors[r], Catch::Contains("ranks 0 and 2 were started with different configurations: setting "
                                          "'lr' differs: rank 0 has '0.001', rank 2 has '0.01'"));
  }
  CHECK(seconds < 10);  // about 1 s; the old behaviour took the 20 s rendezvous timeout
}

TEST_CASE("zmq: byte accounting counts header and payload per peer") {
  run_zmq(3, [](Communicator& c) {
    const CommStats before = c.stats();
    std::vector<float> v(100, 1.0f);  // direct: 400 bytes to each of 2 peers
    c.all_reduce(v).wait();
    const CommStats d = c.stats() - before;
    FRUGAL_CHECK(d.kind(OpKind::all_reduce).sent == 2 * (400 + 56), "all_reduce sent bytes");
    FRUGAL_CHECK(d.kind(OpKind::all_reduce).received == 2 * (400 + 56), "all_reduce received bytes");
    for (int p = 0; p < 3; ++p) {
      if (p != c.rank()) FRUGAL_CHECK(d.by_peer[p].sent >= 456, "per-peer bytes");
    }
  });
}

// Collective threads put their frames on the dealers themselves and drain the ROUTER while they
// wait, while the I/O thread sends heartbeats on the same dealers and drains when nobody waits:
// two communicators driven from two threads each, point-to-point traffic on a third, and
// heartbeats every 60 ms (timeout 300 ms) must all arrive intact, with no peer declared dead.
TEST_CASE("zmq: concurrent collectives, point-to-point and heartbeats share the sockets") {
  for (int p : {2, 3}) {
    INFO("world size " << p);
    REQUIRE_NOTHROW(run_zmq(p, [](Communicator& world) {
      auto sub = world.split(0, world.rank());  // the same ranks, another communicator
      auto drive = [](Communicator& c, size_t n, float salt) {
        for (int round = 0; round < 40; ++round) {  // the same collectives on every rank
          std::vector<float> v(n);
          for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((c.rank() + 1) * (i % 7)) + salt + round;
          c.all_reduce(v).wait();
          for (size_t i = 0; i < n; ++i) {
            const float r = static_cast<float>(c.size() * (c.size() + 1) / 2 * (i % 7)) +
                            static_cast<float>(c.size()) * (salt + round);
            FRUGAL_CHECK(v[i] == r, fmt::format("all_reduce element {} of round {}: {} != {}", i, round, v[i], r));
          }
          // Idle for longer than a heartbeat now and then, so that heartbeats interleave.
          if (round % 8 == 7) std::this_thread::sleep_for(std::chrono::milliseconds(65));
        }
      };
      std::exception_ptr ring_error, p2p_error;
      std::thread ring([&] {
        try {
          drive(*sub, 40000, 0.5f);  // ring algorithm
        } catch (...) {
          ring_error = std::current_exception();
        }
      });
      std::thread p2p([&] {
        try {
          const int next = (world.rank() + 1) % world.size(), prev = (world.rank() + world.size() - 1) % world.size();
          for (int i = 0; i < 200; ++i) {
            std::vector<std::byte> out(100 + i, std::byte(i)), in;
            world.send(next, 7, out).wait();
            world.recv(prev, 7, in).wait();
            FRUGAL_CHECK(in == out, fmt::format("p2p message {} damaged", i));
          }
        } catch (...) {
          p2p_error = std::current_exception();
        }
      });
      drive(world, 100, 0.25f);  // direct algorithm
      p2p.join();
      ring.join();
      if (ring_error) std::rethrow_exception(ring_error);
      if (p2p_error) std::rethrow_exception(p2p_error);
      std::this_thread::sleep_for(std::chrono::milliseconds(130));  // quiet: heartbeats go out
      world.barrier().wait();
      const CommStats s = world.stats();
      for (int q = 0; q < world.size(); ++q) {
        if (q != world.rank()) FRUGAL_CHECK(s.by_peer[q].messages_sent > 0, "frames to every peer");
      }
      FRUGAL_CHECK(s.kind(OpKind::control).messages_sent >= static_cast<uint64_t>(world.size() - 1),
                   "heartbeats were sent");
    }, [](ZmqOptions& o) { o.timeout = std::chrono::milliseconds(300); }));
  }
}

// Collectives send the caller's own data without copying it (SendLoans): a Work that completed
// while ZeroMQ still had to write such a frame would let the caller's next write reach the peer.
// Each rank overwrites every buffer with NaN the moment its Work completes, and then the next
// round's values: a peer that sees either got a frame read after the Work ended.
TEST_CASE("zmq: buffers the caller changes as soon as a collective completes reach no peer changed") {
  for (int p : {2, 3}) {
    INFO("world size " << p);
    REQUIRE_NOTHROW(run_zmq(p, [](Communicator& c) {
      const size_t n = 1 << 20;  // 4 MB a rank: several ring segments, and long writes
      const int P = c.size(), r = c.rank();
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::vector<float> mine(n), all(n * P), sum(n * P), part(n), bcast(n);
      for (int round = 0; round < 12; ++round) {
        const auto value = [&](int rank, size_t i) { return static_cast<float>(rank * 1000 + round * 10 + i % 5); };
        for (size_t i = 0; i < n; ++i) mine[i] = value(r, i);
        for (size_t i = 0; i < n * P; ++i) sum[i] = value(r, i);
        for (size_t i = 0; i < n; ++i) bcast[i] = r == 0 ? value(0, i) : nan;
        c.all_gather(mine, all).wait();
        std::fill(all.begin() + static_cast<long>(n * r), all.begin() + static_cast<long>(n * (r + 1)), nan);
        for (int q = 0; q < P; ++q) {
          for (size_t i = 0; i < n; i += 997) {
            if (q != r) FRUGAL_CHECK(all[q * n + i] == value(q, i), fmt::format("all_gather round {}: rank {}'s block", round, q));
          }
        }
        c.reduce_scatter(sum, part).wait();
        std::fill(sum.begin(), sum.end(), nan);
        c.broadcast(bcast, 0).wait();  // the root receives nothing: its Work ends with its sends
        for (size_t i = 0; i < n; i += 997) {
          FRUGAL_CHECK(bcast[i] == value(0, i), fmt::format("broadcast round {}: element {} is {}", round, i, bcast[i]));
        }
        std::fill(bcast.begin(), bcast.end(), nan);
        for (size_t i = 0; i < n; i += 997) {
          float want = 0;
          for (int q = 0; q < P; ++q) want += value(q, r * n + i);
          FRUGAL_CHECK(part[i] == want, fmt::format("reduce_scatter round {}: element {} is {}, not {}", round, i, part[i], want));
        }
        std::vector<float> v(n);
        for (size_t i = 0; i < n; ++i) v[i] = value(r, i);
        c.all_reduce(v).wait();
        const float first = v[0], last = v[n - 1];
        std::fill(v.begin(), v.end(), nan);
        float want0 = 0, want_last = 0;
        for (int q = 0; q < P; ++q) {
          want0 += value(q, 0);
          want_last += value(q, n - 1);
        }
        FRUGAL_CHECK(first == want0 && last == want_last, fmt::format("all_reduce round {}", round));
      }
    }));
  }
}
