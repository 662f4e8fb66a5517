#include "comm/zmq_transport.h"
#include "core/say.h"
#include "comm/environment.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <zmq.h>

namespace frugal::comm::detail {
namespace {

std::string wall_time(std::chrono::system_clock::time_point t) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()) % 1000;
  return fmt::format("{:%Y-%m-%d %H:%M:%S}.{:03d} UTC", fmt::gmtime(secs), ms.count());
}

void set_int(void* s, int option, int value) { zmq_setsockopt(s, option, &value, sizeof value); }

}  // namespace

int rank_of_routing_id(std::string_view id, int size) {
  // At most 10 digits: an int's range; no leading zero, so every rank has one spelling.
  if (id.size() < 2 || id.size() > 11 || id[0] != 'r' || (id[1] == '0' && id.size() > 2)) return -1;
  int64_t r = 0;
  for (size_t i = 1; i < id.size(); ++i) {
    if (id[i] < '0' || id[i] > '9') return -1;
    r = r * 10 + (id[i] - '0');
  }
  return r < size ? static_cast<int>(r) : -1;
}

void DropLog::drop(std::string_view reason, Clock::time_point now) {
  ++total_;
  ++pending_;
  latest_ = reason;
  if (!reported_any_ || now - last_line_ >= kEvery) report(now);
}

void DropLog::tick(Clock::time_point now) {
  if (pending_ > 0 && now - last_line_ >= kEvery) report(now);
}

void DropLog::report(Clock::time_point now) {
  if (!reported_any_) {
    say_notice("frugal: rank {}: dropped a message from an unknown sender: {} (further ones are "
               "counted and reported at most every {} s)\n", rank_, latest_, kEvery.count());
  } else {
    say_notice("frugal: rank {}: dropped {} more message(s) from unknown senders ({} in all; the "
               "latest: {})\n", rank_, pending_, total_, latest_);
  }
  reported_any_ = true;
  pending_ = 0;
  last_line_ = now;
}

ZmqTransport::ZmqTransport(const ZmqOptions& o)
    : Transport(o.rank, o.size),
      opt_(o),
      dealers_(o.size, nullptr),
      links_(std::make_unique<Link[]>(o.size)),
      last_heard_(o.size),
      last_heard_wall_(o.size),
      quota_(std::make_shared<PeerQuota>(
          o.size, std::max(o.max_queued_bytes, o.max_message_bytes + PeerQuota::kFrameOverhead))),
      drops_(o.rank) {
  FRUGAL_CHECK(o.size >= 1 && o.rank >= 0 && o.rank < o.size,
               fmt::format("ZeroMQ communicator: rank {} of size {} is not valid", o.rank, o.size));
  FRUGAL_CHECK(o.timeout.count() > 0, "ZeroMQ communicator: the timeout must be positive");
  heartbeat_every_ = std::clamp(o.timeout / 5, std::chrono::milliseconds(10),
                                std::chrono::milliseconds(1000));
  ctx_ = zmq_ctx_new();
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  try {
    FRUGAL_CHECK(ctx_ && wake_fd_ >= 0, "ZeroMQ communicator: cannot create context or eventfd");
    FRUGAL_CHECK(opt_.run_token.size() <= kMaxRunTokenBytes,
                 fmt::format("ZmqOptions::run_token: {} bytes, more than ZeroMQ's PLAIN mechanism carries ({})",
                             opt_.run_token.size(), kMaxRunTokenBytes));
    if (authenticated()) {
      // The ZAP handler decides which clients a server accepts: only the cluster key (CURVE) or
      // the run token (PLAIN).
      zap_ = zmq_socket(ctx_, ZMQ_REP);
      set_int(zap_, ZMQ_LINGER, 0);
      FRUGAL_CHECK(zmq_bind(zap_, "inproc://zeromq.zap.01") == 0,
                   fmt::format("cannot bind the ZAP handler: {}", zmq_strerror(zmq_errno())));
    }
    rendezvous();
  } catch (...) {
    for (void* d : dealers_) {
      if (d) zmq_close(d);
    }
    if (router_) zmq_close(router_);
    if (zap_) zmq_close(zap_);
    if (ctx_) zmq_ctx_term(ctx_);
    if (wake_fd_ >= 0) ::close(wake_fd_);
    throw;
  }
  const auto now = Clock::now();
  const auto wall = std::chrono::system_clock::now();
  size_t fd_len = sizeof router_fd_;
  zmq_getsockopt(router_, ZMQ_FD, &router_fd_, &fd_len);
  std::fill(last_heard_.begin(), last_heard_.end(), now);
  for (int p = 0; p < o.size; ++p) links_[p].last_sent = now.time_since_epoch().count();
  std::fill(last_heard_wall_.begin(), last_heard_wall_.end(), wall);
  thread_ = std::thread([this] { progress(); });
}

ZmqTransport::~ZmqTransport() {
  stop_ = true;
  const uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
  thread_.join();
  // Every communicator (each holds this transport) is gone, so nothing else sends: the goodbye is
  // the last frame on each link, after all data.
  FrameHeader h;
  h.kind = FrameKind::goodbye;
  h.op = static_cast<uint8_t>(OpKind::control);
  h.src = static_cast<uint32_t>(world_rank());
  const auto goodbye = encode_header(h, {});
  for (int p = 0; p < world_size(); ++p) {
    if (p == world_rank()) continue;
    std::lock_guard lock(links_[p].mutex);
    if (!links_[p].left) send_now(p, goodbye, {});
  }
  for (void* d : dealers_) {
    if (!d) continue;
    // After a failure, frames queued for dead peers must not hold up the exit.
    if (failed_) set_int(d, ZMQ_LINGER, 0);
    zmq_close(d);
  }
  zmq_close(router_);
  if (zap_) zmq_close(zap_);
  zmq_ctx_term(ctx_);  // waits up to ZMQ_LINGER for queued frames (the goodbyes) to leave
  ::close(wake_fd_);
}

void* ZmqTransport::make_socket(int type, bool server) {
  void* s = zmq_socket(ctx_, type);
  FRUGAL_CHECK(s != nullptr, fmt::format("zmq_socket: {}", zmq_strerror(zmq_errno())));
  set_int(s, ZMQ_LINGER, 1000);
  // Sending never blocks: a full send queue would stall the sending thread while it holds the
  // peer's dealer, and with it the I/O thread's heartbeats to that peer; what this rank sends is
  // bounded by its own collectives.
  set_int(s, ZMQ_SNDHWM, 0);
  // Receiving is bounded per connection: past kReceiveHwm messages waiting in ZeroMQ, it stops
  // reading that peer's socket (TCP pushes back; nothing is dropped). It is drained soon anyway: at
  // once by the I/O thread or a waiting operation's thread, at the latest at the I/O thread's next
  // heartbeat round; what is drained is bounded per peer by quota_ (FRUGAL_MAX_QUEUED_BYTES).
  set_int(s, ZMQ_RCVHWM, kReceiveHwm);
  // A peer announcing a larger message part is disconnected before anything is allocated for it
  // (frames are two parts: the 56-byte header and the payload).
  const int64_t max_bytes = std::max<int64_t>(opt_.max_message_bytes, static_cast<int64_t>(kFrameHeaderBytes));
  zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max_bytes, sizeof max_bytes);
  if (opt_.cluster_key) {
    const auto& k = *opt_.cluster_key;
    if (server) {
      set_int(s, ZMQ_CURVE_SERVER, 1);
      zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, k.secret_z85.c_str(), 41);
    } else {
      zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, k.public_z85.c_str(), 41);
      zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, k.public_z85.c_str(), 41);
      zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, k.secret_z85.c_str(), 41);
    }
  } else if (!opt_.run_token.empty()) {
    if (server) {
      set_int(s, ZMQ_PLAIN_SERVER, 1);
    } else {
      zmq_setsockopt(s, ZMQ_PLAIN_USERNAME, kRunTokenUser.data(), kRunTokenUser.size());
      zmq_setsockopt(s, ZMQ_PLAIN_PASSWORD, opt_.run_token.data(), opt_.run_token.size());
    }
  }
  return s;
}

namespace {
// Compares in time that does not depend on where the strings first differ.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}
}  // namespace

// ZAP (RFC 27): accept a CURVE client only if its public key is the cluster's, a PLAIN client only
// if its password is the run token.
void ZmqTransport::service_zap() {
  if (!zap_) return;
  uint8_t cluster_public[32] = {};
  if (opt_.cluster_key) zmq_z85_decode(cluster_public, opt_.cluster_key->public_z85.c_str());
  for (;;) {
    std::vector<std::string> parts;
    int more = 1;
    while (more) {
      zmq_msg_t m;
      zmq_msg_init(&m);
      if (zmq_msg_recv(&m, zap_, parts.empty() ? ZMQ_DONTWAIT : 0) < 0) {
        zmq_msg_close(&m);
        return;
      }
      parts.emplace_back(static_cast<const char*>(zmq_msg_data(&m)), zmq_msg_size(&m));
      more = zmq_msg_more(&m);
      zmq_msg_close(&m);
    }
    const bool ok =
        opt_.cluster_key ? parts.size() >= 7 && parts[5] == "CURVE" && parts[6].size() == 32 &&
                               std::memcmp(parts[6].data(), cluster_public, 32) == 0
                         : parts.size() >= 8 && parts[5] == "PLAIN" && same_secret(parts[7], opt_.run_token);
    const char* refusal = opt_.cluster_key ? "its key is not the cluster key" : "its run token is not this run's";
    if (!ok) {
      say_notice("frugal: rank {}: refused a connection from {}: {}\n", world_rank(),
                 parts.size() > 3 ? parts[3] : "?", refusal);
    }
    const std::string reply[] = {"1.0", parts.size() > 1 ? parts[1] : "", ok ? "200" : "400",
                                 ok ? "OK" : refusal, "", ""};
    for (size_t i = 0; i < 6; ++i) {
      zmq_send(zap_, reply[i].data(), reply[i].size(), i < 5 ? ZMQ_SNDMORE : 0);
    }
  }
}

uint64_t ZmqTransport::send(int dst, const FrameHeader& header, Payload payload) {
  const uint64_t bytes = kFrameHeaderBytes + payload.size();
  // The receiver would drop the connection (ZMQ_MAXMSGSIZE) and this rank would wait in vain.
  FRUGAL_CHECK(payload.size() <= static_cast<uint64_t>(opt_.max_message_bytes),
               fmt::format("a {}-byte message to rank {} exceeds the {}-byte limit ({})", payload.size(), dst,
                           opt_.max_message_bytes, env::kMaxMessageBytes));
  if (dst == world_rank()) {
    deliver({header, std::move(payload), true});
    return bytes;
  }
  // The calling thread (a collective's) computes the CRCs and puts the frame on the socket itself.
  const auto head = encode_header(header, payload.bytes());
  std::lock_guard lock(links_[dst].mutex);
  if (!links_[dst].left) send_now(dst, head, payload);
  return bytes;
}

void ZmqTransport::claim_receive() { ++receivers_; }

void ZmqTransport::release_receive() {
  // The last claimant gone: the I/O thread must watch the ROUTER again. Either it sees
  // receivers_ == 0 before it polls, or this sees io_parked_ and wakes it (both seq_cst).
  if (--receivers_ == 0 && io_parked_) {
    const uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
  }
}

void ZmqTransport::poll_incoming() {
  std::unique_lock lock(router_mutex_, std::try_to_lock);
  if (lock.owns_lock()) receive_all();
}

void ZmqTransport::send_now(int dst, const std::array<std::byte, kFrameHeaderBytes>& header,
                            const Payload& payload) {
  zmq_msg_t h, p;
  zmq_msg_init_size(&h, header.size());
  std::memcpy(zmq_msg_data(&h), header.data(), header.size());
  if (payload.size() == 0) {
    zmq_msg_init(&p);
  } else {
    // Zero copy: ZeroMQ keeps a reference to the payload until its I/O thread has written it.
    auto* hold = new Payload(payload);
    zmq_msg_init_data(&p, const_cast<std::byte*>(hold->bytes().data()), hold->size(),
                      [](void*, void* hint) { delete static_cast<Payload*>(hint); }, hold);
  }
  void* s = dealers_[dst];
  if (zmq_msg_send(&h, s, ZMQ_SNDMORE) < 0 || zmq_msg_send(&p, s, 0) < 0) {
    const std::string err = zmq_strerror(zmq_errno());
    zmq_msg_close(&h);
    zmq_msg_close(&p);
    if (!failed_.exchange(true)) {
      fail_all(fmt::format("rank {}: sending to rank {} failed: {}", world_rank(), dst, err));
    }
    return;
  }
  links_[dst].last_sent = Clock::now().time_since_epoch().count();
}

void ZmqTransport::drop_link(int p) {
  std::lock_guard lock(links_[p].mutex);
  links_[p].left = true;
  if (void* d = dealers_[p]) {
    // Linger 0: ZeroMQ discards what is queued for the peer (closing each message, which releases
    // its payload) as it tears the socket down, instead of keeping it for a reconnection.
    set_int(d, ZMQ_LINGER, 0);
    zmq_close(d);
    dealers_[p] = nullptr;
  }
}

void ZmqTransport::send_control(int dst, FrameKind kind) {
  FrameHeader h;
  h.kind = kind;
  h.op = static_cast<uint8_t>(OpKind::control);
  h.src = static_cast<uint32_t>(world_rank());
  {
    std::lock_guard lock(links_[dst].mutex);
    if (links_[dst].left) return;
    send_now(dst, encode_header(h, {}), {});
  }
  control_stats().add_sent(OpKind::control, dst, kFrameHeaderBytes);
}

void ZmqTransport::receive_all() {
  for (;;) {
    std::vector<zmq_msg_t> parts;
    int more = 1;
    while (more) {
      parts.emplace_back();
      zmq_msg_init(&parts.back());
      if (zmq_msg_recv(&parts.back(), router_, parts.size() == 1 ? ZMQ_DONTWAIT : 0) < 0) {
        for (auto& m : parts) zmq_msg_close(&m);
        return;  // nothing more to read
      }
      more = zmq_msg_more(&parts.back());
    }
    const int src = rank_of_routing_id({static_cast<const char*>(zmq_msg_data(&parts[0])), zmq_msg_size(&parts[0])},
                                       world_size());
    std::string problem;
    FrameHeader h;
    if (parts.size() != 3) {
      problem = fmt::format("bad frame: {} parts, expected header and payload", parts.size() - 1);
    } else {
      try {
        h = decode_header({static_cast<const std::byte*>(zmq_msg_data(&parts[1])),
                           zmq_msg_size(&parts[1])});
        if (static_cast<int>(h.src) != src) {
          problem = src < 0 ? fmt::format("bad frame: claims to come from rank {} but arrived on a connection "
                                          "that is no rank's", h.src)
                            : fmt::format("bad frame: claims to come from rank {} but arrived on rank {}'s "
                                          "connection", h.src, src);
        }
      } catch (const FrameError& e) {
        problem = e.what();
      }
    }
    if (src < 0) {
      // Not one of ours (a stray client; with a cluster key it could not even connect).
      drops_.drop(problem.empty() ? "not a member of this run" : problem);
      for (auto& m : parts) zmq_msg_close(&m);
      continue;
    }
    zmq_msg_close(&parts[0]);
    zmq_msg_close(&parts[1]);
    if (!problem.empty()) {
      for (size_t i = 2; i < parts.size(); ++i) zmq_msg_close(&parts[i]);
      failed_ = true;
      fail_all(fmt::format("rank {} rejected a frame from rank {}: {}", world_rank(), src, problem));
      continue;
    }
    // The payload stays in ZeroMQ's buffer; the Message shares ownership of it.
    std::shared_ptr<zmq_msg_t> msg(new zmq_msg_t, [](zmq_msg_t* m) {
      zmq_msg_close(m);
      delete m;
    });
    zmq_msg_init(msg.get());
    zmq_msg_move(msg.get(), &parts[2]);
    zmq_msg_close(&parts[2]);
    Payload payload(msg, static_cast<const std::byte*>(zmq_msg_data(msg.get())), zmq_msg_size(msg.get()));
    last_heard_[src] = Clock::now();
    last_heard_wall_[src] = std::chrono::system_clock::now();
    switch (h.kind) {
      case FrameKind::collective:
      case FrameKind::p2p: {
        Message m{h, std::move(payload), false};
        if (!quota_->charge(src, static_cast<int64_t>(m.payload.size()), m.quota)) {
          if (!failed_.exchange(true)) {
            fail_all(fmt::format("rank {} holds {} bytes of frames from rank {} that no operation has taken yet, "
                                 "and a {}-byte frame would exceed the limit of {} bytes per peer ({}): rank {} "
                                 "runs far ahead of this rank or sends frames no operation asks for",
                                 world_rank(), quota_->held(src), src, m.payload.size(), quota_->limit(),
                                 env::kMaxQueuedBytes, src));
          }
          break;
        }
        deliver(std::move(m));
        break;
      }
      case FrameKind::abort:
      case FrameKind::goodbye:
        control_stats().add_received(OpKind::control, src, kFrameHeaderBytes + payload.size());
        try {
          check_payload(h, payload.bytes());
        } catch (const FrameError& e) {
          failed_ = true;
          fail_all(fmt::format("rank {} rejected a frame from rank {}: {}", world_rank(), src, e.what()));
          break;
        }
        if (h.kind == FrameKind::goodbye) drop_link(src);
        deliver({h, std::move(payload), true});
        break;
      case FrameKind::heartbeat:
        control_stats().add_received(OpKind::control, src, kFrameHeaderBytes);
        break;
      default: break;  // late rendezvous frames
    }
  }
}

void ZmqTransport::heartbeat_and_watch(Clock::time_point now) {
  for (int p = 0; p < world_size(); ++p) {
    if (p == world_rank() || links_[p].left) continue;
    if (now - Clock::time_point(Clock::duration(links_[p].last_sent.load())) >= heartbeat_every_) {
      send_control(p, FrameKind::heartbeat);
    }
    const auto silent = now - last_heard_[p];
    if (silent > opt_.timeout) {
      // Every silent peer is dropped, not only the first that fails the run: no goodbye to a dead
      // peer, nothing more to watch, and the caller's memory that frames queued for it hold
      // (SendLoans) released, so that the failed collective can return.
      drop_link(p);
      if (failed_.exchange(true)) continue;  // the run has failed already: reported once
      using secs = std::chrono::duration<double>;
      fail_all(fmt::format("rank {} unreachable since {} (nothing heard from it for {:.1f} s, "
                           "timeout {:.1f} s; seen from rank {})", p, wall_time(last_heard_wall_[p]),
                           secs(silent).count(), secs(opt_.timeout).count(), world_rank()));
    }
  }
}

void ZmqTransport::progress() {
  set_error_rank(world_rank());
  for (;;) {
    // router_fd_ is ZeroMQ's signal that the ROUTER has news (edge-like: receive_all, here or in
    // a waiting collective's poll_incoming, reads until ZeroMQ has nothing more, which clears it).
    // Polled as a plain descriptor, so that the ROUTER itself is only touched under its mutex.
    // While collective threads claim the network (claim_receive), they drain the ROUTER and the
    // I/O thread only wakes for heartbeats, ZAP and stop: not once more for every frame.
    io_parked_ = true;
    const bool watch = receivers_ == 0;
    zmq_pollitem_t items[3] = {{nullptr, wake_fd_, ZMQ_POLLIN, 0}};
    int n = 1;
    if (zap_) items[n++] = {zap_, 0, ZMQ_POLLIN, 0};
    if (watch) items[n++] = {nullptr, router_fd_, ZMQ_POLLIN, 0};
    const int rc = zmq_poll(items, n, static_cast<long>(heartbeat_every_.count()));
    io_parked_ = false;
    if (rc < 0 && zmq_errno() != EINTR) {
      fail_all(fmt::format("rank {}: zmq_poll failed: {}", world_rank(), zmq_strerror(zmq_errno())));
      return;
    }
    if (items[0].revents & ZMQ_POLLIN) {
      uint64_t v;
      [[maybe_unused]] auto n = ::read(wake_fd_, &v, sizeof v);
    }
    if (zap_ && (items[1].revents & ZMQ_POLLIN)) service_zap();
    std::lock_guard lock(router_mutex_);
    receive_all();  // also after a timeout: cheap, and nothing waits on a missed signal
    if (stop_) return;
    heartbeat_and_watch(Clock::now());
    drops_.tick();
  }
}

}  // namespace frugal::comm::detail
