// Cluster key (CURVE) and run token (PLAIN) admission and frame validation on the real TCP transport.
#include <catch2/catch.hpp>

#include <zmq.h>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>
#include <thread>

#include <fmt/format.h>

#include "collective_checks.h"
#include "comm/frame.h"
#include "comm/zmq_transport.h"
#include "zmq_harness.h"

using namespace frugal::comm;
using namespace frugal::comm::testing;

TEST_CASE("zmq+curve: ranks sharing the cluster key run every collective") {
  const ClusterKey key = generate_cluster_key();
  REQUIRE_NOTHROW(run_zmq(3, [](Communicator& c) {
    for (size_t n : {size_t{1}, size_t{1001}, size_t{100000}}) check_collectives(c, n);
    check_split(c);
  }, [&](ZmqOptions& o) { o.cluster_key = key; }));
}

TEST_CASE("zmq+curve: a process without the cluster key is refused") {
  const ClusterKey key = generate_cluster_key();
  const auto errors = run_zmq_collect(2, [](Communicator&) {}, [&](ZmqOptions& o) {
    if (o.rank == 0) o.cluster_key = key;
    o.rendezvous_timeout = std::chrono::seconds(3);
  });
  INFO(errors[0] << "\n" << errors[1]);
  // Rank 0 drops the connection when the security mechanisms differ, so rank 1 usually learns only
  // that the handshake ended ("... if rank 0 uses one (ZmqOptions::cluster_key), that may be why").
  // When rank 0 drops it before rank 1's side of the handshake has started, ZeroMQ reports a failed
  // connect, not a handshake, and retries: rank 1 then waits for its rendezvous timeout, whose
  // message names the key as well. Either way its error must point at the cluster key.
  CHECK_THAT(errors[1], Catch::Contains("cluster key"));
  CHECK_THAT(errors[1], Catch::Contains("requires a cluster key") || Catch::Contains("if rank 0 uses one") ||
                            Catch::Contains("no answer from the coordinator"));
  CHECK_THAT(errors[0], Catch::Contains("rank(s) 1 never said hello"));
}

namespace {
// Rank 1 of a 2-rank run whose coordinator address is a plain TCP listener that reads what comes
// and closes the connection (not a frugal rank 0 at all); returns rank 1's error.
std::string error_against_closing_listener(bool keyed) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  REQUIRE(::listen(fd, 8) == 0);
  std::atomic<bool> done{false};
  std::thread listener([&] {
    while (!done) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int c = ::accept(fd, nullptr, nullptr);
      if (c < 0) continue;
      char buf[64];
      [[maybe_unused]] auto n = ::recv(c, buf, sizeof buf, 0);  // the greeting's first bytes
      ::close(c);
    }
  });
  std::string error;
  try {
    ZmqOptions o;
    o.rank = 1;
    o.size = 2;
    o.coordinator = fmt::format("127.0.0.1:{}", ntohs(a.sin_port));
    o.rendezvous_timeout = std::chrono::seconds(20);
    if (keyed) o.cluster_key = generate_cluster_key();
    make_zmq_communicator(o);
  } catch (const std::exception& e) {
    error = e.what();
  }
  done = true;
  listener.join();
  ::close(fd);
  return error;
}
}  // namespace

TEST_CASE("zmq: a coordinator address that accepts and closes is reported as that, not as a missing key") {
  const std::string unkeyed = error_against_closing_listener(false);
  INFO(unkeyed);
  CHECK_THAT(unkeyed, Catch::Contains("closed the connection during the handshake"));
  CHECK_THAT(unkeyed, Catch::Contains("this process uses no cluster key: if rank 0 uses one"));
  CHECK_THAT(unkeyed, Catch::Contains("or a run token"));
  CHECK_THAT(unkeyed, !Catch::Contains("requires a cluster key"));
  CHECK_THAT(unkeyed, !Catch::Contains("no answer from the coordinator"));  // not the 20 s timeout
  const std::string keyed = error_against_closing_listener(true);
  INFO(keyed);
  CHECK_THAT(keyed, Catch::Contains("closed the connection during the handshake"));
  CHECK_THAT(keyed, Catch::Contains("this process uses a cluster key: if rank 0 uses another one or none"));
}

TEST_CASE("zmq+curve: a process with another key is refused") {
  const ClusterKey key = generate_cluster_key(), other = generate_cluster_key();
  const auto errors = run_zmq_collect(2, [](Communicator&) {}, [&](ZmqOptions& o) {
    o.cluster_key = o.rank == 0 ? key : other;
    o.rendezvous_timeout = std::chrono::seconds(3);
  });
  INFO(errors[0] << "\n" << errors[1]);
  CHECK_FALSE(errors[1].empty());
  CHECK_THAT(errors[0], Catch::Contains("never said hello"));
}

namespace {
// An intruder without the run's credential keeps sending well-formed frames, claiming to be rank 1
// (routing id r1), to rank 0's address, then streams one endless multipart message, while a 2-rank
// run configured by `secure` keeps working: returns the run's error ("" when nothing reached it).
std::string run_beside_intruder(const std::function<void(ZmqOptions&)>& secure) {
  const int port = free_port();
  std::atomic<bool> done{false};
  std::atomic<int> sent{0};
  std::thread intruder([&] {
    void* ctx = zmq_ctx_new();
    void* s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_ROUTING_ID, "r1", 2);
    zmq_connect(s, fmt::format("tcp://127.0.0.1:{}", port).c_str());
    FrameHeader h;
    h.src = 1;
    h.seq = 1;
    const std::vector<std::byte> payload(400, std::byte{1});
    const auto header = encode_header(h, payload);
    while (!done && sent < 40) {
      zmq_send(s, header.data(), header.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT);
      zmq_send(s, payload.data(), payload.size(), ZMQ_DONTWAIT);
      ++sent;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    // Parts that never end the message: unauthenticated, none of them may reach a rank's buffers.
    const std::vector<char> part(1 << 16, 'x');
    while (!done) {
      zmq_send(s, part.data(), part.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT);
      ++sent;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    zmq_close(s);
    zmq_ctx_term(ctx);
  });
  std::string error;
  try {
    run_zmq(2, [&sent](Communicator& c) {
      // Keep working while the intruder has had time to try (~40 frames, then ~200 parts; bounded
      // either way).
      for (int i = 0; i < 4000; ++i) {
        check_all_reduce(c, 100);
        std::vector<float> go(1, sent >= 240 ? 1.0f : 0.0f);
        c.all_reduce(go, ReduceOp::min).wait();
        if (go[0] == 1.0f) break;
      }
    }, [&](ZmqOptions& o) {
      secure(o);
      o.coordinator = fmt::format("127.0.0.1:{}", port);
    });
  } catch (const std::exception& e) {
    error = e.what();
  }
  done = true;
  intruder.join();
  CHECK(sent >= 240);
  return error;
}
}  // namespace

TEST_CASE("zmq+curve: frames injected by a process without the key never arrive") {
  const ClusterKey key = generate_cluster_key();
  CHECK(run_beside_intruder([&](ZmqOptions& o) { o.cluster_key = key; }) == "");
}

TEST_CASE("zmq+token: ranks sharing a run token run every collective") {
  REQUIRE_NOTHROW(run_zmq(3, [](Communicator& c) {
    for (size_t n : {size_t{1}, size_t{1001}, size_t{100000}}) check_collectives(c, n);
    check_split(c);
  }, [](ZmqOptions& o) { o.run_token = "a shared secret"; }));
}

TEST_CASE("zmq+token: frames and endless messages from a process without the token never arrive") {
  // Without a token, the same intruder's frames with routing id r1 end the run (a malformed one is
  // rank 1's error) or take rank 1's place: the test above and "only the exact routing id" below.
  CHECK(run_beside_intruder([](ZmqOptions& o) { o.run_token = "0123456789abcdef"; }) == "");
}

TEST_CASE("zmq+token: a process with another run token, or none, is refused at once, naming the token") {
  const auto wrong = run_zmq_collect(2, [](Communicator&) {}, [](ZmqOptions& o) {
    o.run_token = o.rank == 0 ? "right" : "wrong";
    o.rendezvous_timeout = std::chrono::seconds(3);
  });
  INFO(wrong[0] << "\n" << wrong[1]);
  CHECK_THAT(wrong[1], Catch::Contains("authentication refused") &&
                           Catch::Contains("run token (ZmqOptions::run_token) is not the one rank 0 uses"));
  CHECK_THAT(wrong[0], Catch::Contains("rank(s) 1 never said hello") && Catch::Contains("run token"));
  const auto none = run_zmq_collect(2, [](Communicator&) {}, [](ZmqOptions& o) {
    if (o.rank == 0) o.run_token = "right";
    o.rendezvous_timeout = std::chrono::seconds(3);
  });
  INFO(none[0] << "\n" << none[1]);
  // As with a missing cluster key: a mechanism mismatch, or a dropped handshake, or (when rank 0
  // drops the connection first) the rendezvous timeout; each names the token.
  CHECK_THAT(none[1], Catch::Contains("run token"));
  const auto extra = run_zmq_collect(2, [](Communicator&) {}, [](ZmqOptions& o) {
    if (o.rank == 1) o.run_token = "mine";
    o.rendezvous_timeout = std::chrono::seconds(3);
  });
  INFO(extra[0] << "\n" << extra[1]);
  CHECK_THAT(extra[1], Catch::Contains("run token"));
}

TEST_CASE("zmq+token: a token longer than PLAIN carries is refused before anything starts") {
  ZmqOptions o;
  o.run_token = std::string(256, 't');
  REQUIRE_THROWS_WITH(make_zmq_communicator(o), Catch::Contains("ZmqOptions::run_token: 256 bytes"));
}

namespace {
// A hand-made rank 1 for a 2-rank run without a key: joins properly, then sends one bad frame.
void fake_rank_one(int port, const std::function<void(void*)>& misbehave) {
  void* ctx = zmq_ctx_new();
  void* s = zmq_socket(ctx, ZMQ_DEALER);
  int zero = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(s, ZMQ_ROUTING_ID, "r1", 2);
  zmq_connect(s, fmt::format("tcp://127.0.0.1:{}", port).c_str());
  void* r = zmq_socket(ctx, ZMQ_ROUTER);
  zmq_setsockopt(r, ZMQ_LINGER, &zero, sizeof zero);
  zmq_bind(r, "tcp://127.0.0.1:*");
  char ep[256];
  size_t len = sizeof ep;
  zmq_getsockopt(r, ZMQ_LAST_ENDPOINT, ep, &len);
  const std::string hello = fmt::format(
      R"({{"rank":1,"size":2,"address":"{}","pid":1,"host":"fake","config":{{}},"config_hash":"0000000000000000"}})", ep);
  FrameHeader h;
  h.kind = FrameKind::hello;
  h.src = 1;
  const auto hb = std::as_bytes(std::span<const char>(hello.data(), hello.size()));
  const auto header = encode_header(h, hb);
  zmq_send(s, header.data(), header.size(), ZMQ_SNDMORE);
  zmq_send(s, hello.data(), hello.size(), 0);
  char buf[4096];
  zmq_recv(s, buf, sizeof buf, 0);  // welcome header
  zmq_recv(s, buf, sizeof buf, 0);  // welcome payload
  misbehave(s);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  zmq_close(r);
  zmq_close(s);
  zmq_ctx_term(ctx);
}

std::string rank_zero_error(int port, const std::function<void(ZmqOptions&)>& configure = {}) {
  try {
    ZmqOptions o;
    o.rank = 0;
    o.size = 2;
    o.coordinator = fmt::format("127.0.0.1:{}", port);
    o.rendezvous_timeout = std::chrono::seconds(10);
    if (configure) configure(o);
    auto c = make_zmq_communicator(o);
    std::vector<float> v(100, 1.0f);
    c->all_reduce(v).wait();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("zmq: a truncated frame from a peer is rejected with a clear error") {
  const int port = free_port();
  std::thread fake([&] {
    fake_rank_one(port, [](void* s) {
      FrameHeader h;
      h.src = 1;
      h.seq = 1;
      const std::vector<std::byte> payload(400, std::byte{1});
      const auto header = encode_header(h, payload);
      zmq_send(s, header.data(), header.size(), ZMQ_SNDMORE);
      zmq_send(s, payload.data(), 100, 0);  // only a quarter of the announced payload
    });
  });
  const std::string error = rank_zero_error(port);
  fake.join();
  CHECK_THAT(error, Catch::Contains("payload is 100 bytes, header says 400 (truncated)"));
}

TEST_CASE("zmq: a forged frame (bad header checksum) is rejected with a clear error") {
  const int port = free_port();
  std::thread fake([&] {
    fake_rank_one(port, [](void* s) {
      FrameHeader h;
      h.src = 1;
      h.seq = 1;
      const std::vector<std::byte> payload(400, std::byte{1});
      auto header = encode_header(h, payload);
      header[24] = std::byte{7};  // change the sequence number without fixing the checksum
      zmq_send(s, header.data(), header.size(), ZMQ_SNDMORE);
      zmq_send(s, payload.data(), payload.size(), 0);
    });
  });
  const std::string error = rank_zero_error(port);
  fake.join();
  CHECK_THAT(error, Catch::Contains("header checksum"));
  CHECK_THAT(error, Catch::Contains("rejected a frame from rank 1"));
}

TEST_CASE("zmq: a peer flooding frames that no operation takes fails the run at the per-peer limit") {
  // Rank 1 floods well-formed frames for a communicator rank 0 has not created (frames may come
  // before their communicator, so they are kept): 3.2 MB against a 1 MiB limit. Without the limit
  // rank 0 would hold all of them, and any amount more.
  const int port = free_port();
  std::thread fake([&] {
    fake_rank_one(port, [](void* s) {
      const std::vector<std::byte> payload(16 << 10, std::byte{1});
      for (uint32_t i = 0; i < 200; ++i) {
        FrameHeader h;
        h.src = 1;
        h.comm_id = 12345;
        h.seq = 1;
        h.part = i;
        const auto header = encode_header(h, payload);
        zmq_send(s, header.data(), header.size(), ZMQ_SNDMORE);
        zmq_send(s, payload.data(), payload.size(), 0);
      }
    });
  });
  const std::string error = rank_zero_error(port, [](ZmqOptions& o) {
    o.max_message_bytes = 64 << 10;
    o.max_queued_bytes = 1 << 20;
  });
  fake.join();
  CHECK_THAT(error, Catch::Contains("bytes of frames from rank 1 that no operation has taken yet"));
  CHECK_THAT(error, Catch::Contains("exceed the limit of 1048576 bytes per peer (FRUGAL_MAX_QUEUED_BYTES)"));
}

TEST_CASE("zmq: a stranger sending an oversized frame is disconnected; the ranks keep working") {
  const int port = free_port();
  constexpr int64_t kLimit = int64_t{1} << 20;
  std::atomic<bool> started{false}, stranger_done{false}, disconnected{false};
  // After the ranks started, a stranger connects to rank 0's address and sends a frame whose
  // payload is twice the limit: ZeroMQ (ZMQ_MAXMSGSIZE) drops the connection before allocating it.
  std::thread stranger([&] {
    while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    void* ctx = zmq_ctx_new();
    void* s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_ROUTING_ID, "x9", 2);
    zmq_socket_monitor(s, "inproc://stranger-monitor", ZMQ_EVENT_DISCONNECTED);
    void* mon = zmq_socket(ctx, ZMQ_PAIR);
    zmq_setsockopt(mon, ZMQ_LINGER, &zero, sizeof zero);
    zmq_connect(mon, "inproc://stranger-monitor");
    zmq_connect(s, fmt::format("tcp://127.0.0.1:{}", port).c_str());
    FrameHeader h;
    h.src = 1;
    h.seq = 1;
    const std::vector<std::byte> payload(2 * kLimit, std::byte{1});
    const auto header = encode_header(h, payload);
    zmq_send(s, header.data(), header.size(), ZMQ_SNDMORE);
    zmq_send(s, payload.data(), payload.size(), 0);
    zmq_pollitem_t item{mon, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, 10000) == 1) {
      zmq_msg_t event;
      zmq_msg_init(&event);
      if (zmq_msg_recv(&event, mon, 0) >= 6) {
        uint16_t id = 0;
        std::memcpy(&id, zmq_msg_data(&event), sizeof id);
        disconnected = id == ZMQ_EVENT_DISCONNECTED;
      }
      zmq_msg_close(&event);
    }
    zmq_socket_monitor(s, nullptr, 0);
    zmq_close(mon);
    zmq_close(s);
    zmq_ctx_term(ctx);
    stranger_done = true;
  });
  std::string error;
  try {
    run_zmq(2, [&](Communicator& c) {
      check_all_reduce(c, 100);
      started = true;
      // Keep working until the stranger is done (bounded either way), then once more.
      for (int i = 0; i < 20000; ++i) {
        std::vector<float> go(1, stranger_done ? 1.0f : 0.0f);
        c.all_reduce(go, ReduceOp::min).wait();
        if (go[0] == 1.0f) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      check_all_reduce(c, 1000);
    }, [&](ZmqOptions& o) {
      o.coordinator = fmt::format("127.0.0.1:{}", port);
      o.max_message_bytes = kLimit;
    });
  } catch (const std::exception& e) {
    error = e.what();
  }
  started = true;
  stranger.join();
  CHECK(error == "");
  CHECK(disconnected);
}

TEST_CASE("zmq: a rank refuses to send a frame over the message-size limit, naming the variable") {
  std::string error;
  run_zmq(2, [&](Communicator& c) {
    if (c.rank() != 0) return;
    const std::vector<std::byte> big((1 << 20) + 1, std::byte{1});
    try {
      c.send(1, 0, big);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }, [](ZmqOptions& o) { o.max_message_bytes = int64_t{1} << 20; });
  CHECK_THAT(error, Catch::Contains("FRUGAL_MAX_MESSAGE_BYTES"));
  CHECK_THAT(error, Catch::Contains("1048577-byte message to rank 1"));
}

namespace {

// Sends `frames` (header, payload) from a DEALER with routing id `id` to 127.0.0.1:port, then
// closes it, waiting up to a second for them to leave.
void send_as_stranger(int port, const std::string& id,
                      const std::vector<std::pair<std::vector<std::byte>, std::vector<std::byte>>>& frames) {
  void* ctx = zmq_ctx_new();
  void* s = zmq_socket(ctx, ZMQ_DEALER);
  int linger = 1000;
  zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(s, ZMQ_ROUTING_ID, id.data(), id.size());
  zmq_connect(s, fmt::format("tcp://127.0.0.1:{}", port).c_str());
  for (const auto& [header, payload] : frames) {
    zmq_send(s, header.data(), header.size(), ZMQ_SNDMORE);
    zmq_send(s, payload.data(), payload.size(), 0);
  }
  zmq_close(s);
  zmq_ctx_term(ctx);
}

// Redirects this process's stderr into a file while alive; text() reads what was written.
class CapturedStderr {
 public:
  CapturedStderr() : file_(std::tmpfile()), saved_(dup(2)) {
    std::fflush(stderr);
    dup2(fileno(file_), 2);
  }
  ~CapturedStderr() {
    restore();
    std::fclose(file_);
  }
  std::string text() {
    restore();
    std::string out;
    std::rewind(file_);
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, file_)) > 0;) out.append(buf, n);
    return out;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    saved_ = -1;
  }
  std::FILE* file_;
  int saved_;
};

size_t count_lines(const std::string& text, const std::string& with) {
  size_t n = 0;
  for (size_t at = 0; (at = text.find(with, at)) != std::string::npos; at += with.size()) ++n;
  return n;
}

}  // namespace

TEST_CASE("zmq: only the exact routing id r<rank> is a member's") {
  CHECK(detail::rank_of_routing_id("r0", 4) == 0);
  CHECK(detail::rank_of_routing_id("r3", 4) == 3);
  CHECK(detail::rank_of_routing_id("r12", 13) == 12);
  // Other spellings of a member's number are other routing ids to the ROUTER, hence strangers.
  for (const char* id : {"r4", "r01", "r00", "r003", "r", "", "x1", "r1x", "r-1", "r+1", "r 1", "1",
                         "r2147483648", "r99999999999", "r999999999999999"}) {
    INFO(id);
    CHECK(detail::rank_of_routing_id(id, 4) == -1);
  }
}

TEST_CASE("zmq: drops from strangers are logged once, then counted at most every 10 s") {
  using namespace std::chrono_literals;
  CapturedStderr captured;
  detail::DropLog log(2);
  const auto t0 = detail::DropLog::Clock::now();
  log.drop("bad frame: one", t0);
  for (int i = 0; i < 1000; ++i) log.drop("bad frame: many", t0 + 1ms * i);
  log.tick(t0 + 9s);  // too early for another line
  log.tick(t0 + 11s);
  log.tick(t0 + 30s);  // nothing new to report
  log.drop("bad frame: later", t0 + 31s);
  const std::string text = captured.text();
  INFO(text);
  CHECK(count_lines(text, "\n") == 3);
  CHECK_THAT(text, Catch::Contains("rank 2: dropped a message from an unknown sender: bad frame: one (further ones"));
  CHECK_THAT(text, Catch::Contains("rank 2: dropped 1000 more message(s) from unknown senders (1001 in all; the "
                                   "latest: bad frame: many)"));
  CHECK_THAT(text, Catch::Contains("dropped 1 more message(s) from unknown senders (1002 in all; the latest: bad "
                                   "frame: later)"));
  CHECK(log.dropped() == 1002);
}

TEST_CASE("zmq: garbage from strangers with near-member routing ids is dropped; the run goes on") {
  const int port = free_port();
  std::atomic<bool> started{false}, stranger_done{false};
  // Frames claiming to be rank 1's, every checksum right or the payload's wrong, from routing ids
  // that only look like rank 1's ("r01" parsed as rank 1 before: a bad frame from it ended the run,
  // a good one was taken as rank 1's), and a burst of malformed frames that must not flood the log.
  std::thread stranger([&] {
    while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::vector<std::pair<std::vector<std::byte>, std::vector<std::byte>>> frames;
    for (int i = 0; i < 200; ++i) {
      FrameHeader h;
      h.kind = i % 2 ? FrameKind::collective : FrameKind::abort;
      h.src = 1;
      h.comm_id = static_cast<uint64_t>(i % 3);
      h.seq = static_cast<uint64_t>(i / 3 + 1);
      std::vector<std::byte> payload(64, std::byte{static_cast<unsigned char>(i)});
      const auto header = encode_header(h, payload);
      if (i % 4 == 3) payload[0] ^= std::byte{1};  // the payload's checksum no longer matches
      frames.emplace_back(std::vector<std::byte>(header.begin(), header.end()), payload);
    }
    for (const char* id : {"r01", "r001", "r1x", "r99999999999", "r4", "stranger"}) send_as_stranger(port, id, frames);
    stranger_done = true;
  });
  std::string error, log;
  {
    CapturedStderr captured;
    try {
      run_zmq(2, [&](Communicator& c) {
        check_all_reduce(c, 100);
        started = true;
        for (int i = 0; i < 20000; ++i) {
          std::vector<float> go(1, stranger_done ? 1.0f : 0.0f);
          c.all_reduce(go, ReduceOp::min).wait();
          if (go[0] == 1.0f) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the last garbage arrives
        check_all_reduce(c, 1000);
        check_collectives(c, 1001);
      }, [&](ZmqOptions& o) { o.coordinator = fmt::format("127.0.0.1:{}", port); });
    } catch (const std::exception& e) {
      error = e.what();
    }
    started = true;
    stranger.join();
    log = captured.text();
  }
  INFO(log);
  CHECK(error == "");
  // 1200 dropped frames, one line (the first drop) within the run's few seconds.
  CHECK(count_lines(log, "dropped a message from an unknown sender") == 1);
  CHECK(count_lines(log, "unknown sender") <= 2);
}
