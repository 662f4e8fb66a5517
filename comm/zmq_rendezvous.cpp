// Start-up of the ZeroMQ transport: rank 0 collects a hello from every rank, checks that they
// agree (size, protocol, run configuration) and answers with the table of addresses.
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <zmq.h>

#include "comm/zmq_transport.h"
#include "core/sealed_json.h"

namespace frugal::comm::detail {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::pair<std::string, std::string> split_host_port(const std::string& hp) {
  const auto colon = hp.rfind(':');
  FRUGAL_CHECK(colon != std::string::npos && colon > 0 && colon + 1 < hp.size(),
               fmt::format("coordinator address '{}' is not host:port", hp));
  return {hp.substr(0, colon), hp.substr(colon + 1)};
}

// The local address the kernel would use to reach `host`: the one peers can reach us at too.
std::string local_address_toward(const std::string& host) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  if (getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || !res) return "127.0.0.1";
  std::string out = "127.0.0.1";
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t len = sizeof local;
    char buf[INET_ADDRSTRLEN];
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        inet_ntop(AF_INET, &local.sin_addr, buf, sizeof buf)) {
      out = buf;
    }
  }
  if (fd >= 0) ::close(fd);
  freeaddrinfo(res);
  return out;
}

std::vector<std::string> recv_parts(void* s) {
  std::vector<std::string> parts;
  int more = 1;
  while (more) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, s, 0) < 0) {
      zmq_msg_close(&m);
      break;
    }
    parts.emplace_back(static_cast<const char*>(zmq_msg_data(&m)), zmq_msg_size(&m));
    more = zmq_msg_more(&m);
    zmq_msg_close(&m);
  }
  return parts;
}

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// Sends [identity?] header payload.
void send_frame(void* s, const std::string* identity, FrameKind kind, int src,
                const std::string& payload) {
  FrameHeader h;
  h.kind = kind;
  h.op = static_cast<uint8_t>(OpKind::control);
  h.src = static_cast<uint32_t>(src);
  const auto header = encode_header(h, as_bytes(payload));
  if (identity) zmq_send(s, identity->data(), identity->size(), ZMQ_SNDMORE);
  zmq_send(s, header.data(), header.size(), ZMQ_SNDMORE);
  zmq_send(s, payload.data(), payload.size(), 0);
}

// Decodes [header, payload]; nullopt (counted in `drops`, which notes it on stderr) for anything
// that is not a frame.
std::optional<std::pair<FrameHeader, std::string>> parse_frame(const std::vector<std::string>& p,
                                                               size_t at, DropLog& drops) {
  try {
    FRUGAL_CHECK(p.size() == at + 2, "bad frame: wrong number of parts");
    FrameHeader h = decode_header(as_bytes(p[at]));
    check_payload(h, as_bytes(p[at + 1]));
    return std::make_pair(h, p[at + 1]);
  } catch (const Error& e) {
    drops.drop(fmt::format("malformed message during start-up: {}", e.what()));
    return std::nullopt;
  }
}

// How this process authenticates its links, as the messages about a failed handshake describe it.
enum class Credential { cluster_key, run_token, none };

// What a monitor event on the link to the coordinator says, in words. Only this side's credential is
// known: a handshake that ends without a reason may be a credential on one side only, or no frugal
// rank 0 at that address at all, and the message says both.
std::string connection_failure(uint16_t event, uint32_t value, const std::string& coordinator, Credential mine) {
  const std::string hint =
      mine == Credential::cluster_key
          ? "this process uses a cluster key: if rank 0 uses another one or none, that may be why"
      : mine == Credential::run_token
          ? "this process uses a run token (ZmqOptions::run_token): if rank 0 uses another one, a cluster key or "
            "neither, that may be why"
          : "this process uses no cluster key: if rank 0 uses one (ZmqOptions::cluster_key) or a run token "
            "(ZmqOptions::run_token), that may be why";
  switch (event) {
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
      return fmt::format("the secure handshake with the coordinator at {} failed (authentication refused): this "
                         "process's {} is not the one rank 0 uses", coordinator,
                         mine == Credential::run_token ? "run token (ZmqOptions::run_token)" : "cluster key");
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
      if (value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
        return fmt::format(
            "the handshake with the coordinator at {} failed (security mechanism mismatch): {}", coordinator,
            mine == Credential::cluster_key
                ? "this process uses a cluster key and rank 0 does not (it uses a run token or neither)"
            : mine == Credential::run_token
                ? "this process uses a run token (ZmqOptions::run_token) and rank 0 does not (it uses a cluster "
                  "key or neither)"
                : "rank 0 requires a cluster key (ZmqOptions::cluster_key) or a run token "
                  "(ZmqOptions::run_token) and this process has neither");
      }
      return fmt::format("the handshake with the coordinator at {} failed (ZeroMQ protocol error 0x{:08x}): is "
                         "the process at that address a frugal rank 0? {}", coordinator, value, hint);
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
      return fmt::format("the process at the coordinator address {} closed the connection during the handshake "
                         "({}): is it a frugal rank 0 of this run? {}", coordinator,
                         value != 0 ? std::strerror(static_cast<int>(value)) : "no reason given", hint);
    default:
      return fmt::format("the coordinator at {} closed the connection before answering this rank's hello: rank "
                         "0 has stopped (its output says why)", coordinator);
  }
}

std::string config_hash_hex(const RunConfig& c) { return fmt::format("{:016x}", config_hash(c)); }

}  // namespace

void* ZmqTransport::make_dealer(int peer, const std::string& endpoint) {
  void* d = make_socket(ZMQ_DEALER, false);
  const std::string id = fmt::format("r{}", world_rank());
  zmq_setsockopt(d, ZMQ_ROUTING_ID, id.data(), id.size());
  FRUGAL_CHECK(zmq_connect(d, endpoint.c_str()) == 0,
               fmt::format("rank {} cannot connect to rank {} at {}: {}", world_rank(), peer,
                           endpoint, zmq_strerror(zmq_errno())));
  dealers_[peer] = d;
  return d;
}

void ZmqTransport::rendezvous() {
  if (world_rank() == 0) {
    rendezvous_as_coordinator();
  } else {
    rendezvous_as_member();
  }
}

void ZmqTransport::rendezvous_as_coordinator() {
  router_ = make_socket(ZMQ_ROUTER, true);
  const std::string ep = "tcp://" + opt_.coordinator;
  FRUGAL_CHECK(zmq_bind(router_, ep.c_str()) == 0,
               fmt::format("rank 0 cannot bind the coordinator address {}: {} (in use by another "
                           "run? wrong host?)", ep, zmq_strerror(zmq_errno())));
  endpoint_ = ep;
  if (world_size() == 1) return;

  struct Joined {
    std::string identity;
    std::string address;
  };
  std::map<int, Joined> joined;
  std::vector<std::string> identities;  // everyone who said hello, to tell them if we give up
  std::string problem;
  const auto deadline = Clock::now() + opt_.rendezvous_timeout;
  while (static_cast<int>(joined.size()) < world_size() - 1 && problem.empty()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      std::vector<int> missing;
      for (int r = 1; r < world_size(); ++r) {
        if (!joined.count(r)) missing.push_back(r);
      }
      problem = fmt::format("rendezvous timed out after {} s at {}: rank(s) {} never said hello "
                            "(not started, given another coordinator address, or a different cluster key or run token?)",
                            opt_.rendezvous_timeout.count() / 1000.0, ep, fmt::join(missing, ", "));
      break;
    }
    zmq_pollitem_t items[2] = {{router_, 0, ZMQ_POLLIN, 0}, {zap_, 0, ZMQ_POLLIN, 0}};
    zmq_poll(items, zap_ ? 2 : 1, std::min<long>(left.count(), 100));
    if (zap_ && (items[1].revents & ZMQ_POLLIN)) service_zap();
    if (!(items[0].revents & ZMQ_POLLIN)) continue;
    const auto parts = recv_parts(router_);
    auto frame = parse_frame(parts, 1, drops_);
    if (!frame || frame->first.kind != FrameKind::hello) continue;
    json hello;
    try {
      hello = json::parse(frame->second);
      const int r = hello.at("rank").get<int>();
      const int size = hello.at("size").get<int>();
      identities.push_back(parts[0]);
      const auto who = fmt::format("rank {} (pid {} on {})", r, hello.at("pid").get<int>(),
                                   hello.at("host").get<std::string>());
      if (size != world_size()) {
        problem = fmt::format("{} was started for {} ranks, rank 0 for {}", who, size, world_size());
      } else if (r < 1 || r >= world_size()) {
        problem = fmt::format("{} is not a valid rank of a {}-rank run", who, world_size());
      } else if (joined.count(r)) {
        problem = fmt::format("two processes claim rank {} (the second is {})", r, who);
      } else if (hello.at("config_hash").get<std::string>() != config_hash_hex(opt_.run_config)) {
        const auto theirs = hello.at("config").get<RunConfig>();
        problem = fmt::format("ranks 0 and {} were started with different configurations: {}", r,
                              config_difference(opt_.run_config, 0, theirs, r));
      } else if (parts[0] != fmt::format("r{}", r)) {
        problem = fmt::format("{} connected with identity '{}'", who, parts[0]);
      } else {
        joined[r] = {parts[0], hello.at("address").get<std::string>()};
      }
    } catch (const json::exception& e) {
      drops_.drop(fmt::format("malformed hello: {}", json_error_words(e)));
    }
  }
  if (!problem.empty()) {
    for (const auto& id : identities) send_frame(router_, &id, FrameKind::reject, 0, problem);
    reject_latecomers(problem, identities);
    throw CommError(fmt::format("rank 0 refuses to start: {}", problem));
  }
  std::vector<std::string> addresses(world_size());
  addresses[0] = ep;
  for (const auto& [r, j] : joined) addresses[r] = j.address;
  const std::string welcome = json{{"addresses", addresses}}.dump();
  for (const auto& [r, j] : joined) send_frame(router_, &j.identity, FrameKind::welcome, 0, welcome);
  for (int r = 1; r < world_size(); ++r) make_dealer(r, addresses[r]);
}

// After rank 0 has given up, the ranks that have not said hello yet would wait for an answer until
// their own rendezvous timeout. Rank 0 keeps answering hellos with the same reason for a short
// while, so that every rank started with the run fails at once with the same message; a rank whose
// hello comes later finds the connection closed (rendezvous_as_member reports that at once too).
void ZmqTransport::reject_latecomers(const std::string& problem, std::vector<std::string> told) {
  const auto until = Clock::now() + kRejectGrace;
  while (static_cast<int>(told.size()) < world_size() - 1) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    if (left.count() <= 0) return;
    zmq_pollitem_t items[2] = {{router_, 0, ZMQ_POLLIN, 0}, {zap_, 0, ZMQ_POLLIN, 0}};
    zmq_poll(items, zap_ ? 2 : 1, std::min<long>(left.count(), 50));
    if (zap_ && (items[1].revents & ZMQ_POLLIN)) service_zap();
    if (!(items[0].revents & ZMQ_POLLIN)) continue;
    const auto parts = recv_parts(router_);
    if (parts.empty() || std::find(told.begin(), told.end(), parts[0]) != told.end()) continue;
    auto frame = parse_frame(parts, 1, drops_);
    if (!frame || frame->first.kind != FrameKind::hello) continue;
    send_frame(router_, &parts[0], FrameKind::reject, 0, problem);
    told.push_back(parts[0]);
  }
}

void ZmqTransport::rendezvous_as_member() {
  const auto [host, port] = split_host_port(opt_.coordinator);
  const std::string coordinator = "tcp://" + opt_.coordinator;
  const std::string bind_host = opt_.bind_host.empty() ? local_address_toward(host) : opt_.bind_host;
  router_ = make_socket(ZMQ_ROUTER, true);
  FRUGAL_CHECK(zmq_bind(router_, ("tcp://" + bind_host + ":*").c_str()) == 0,
               fmt::format("rank {} cannot bind a port on {}: {}", world_rank(), bind_host,
                           zmq_strerror(zmq_errno())));
  char ep[256];
  size_t ep_len = sizeof ep;
  zmq_getsockopt(router_, ZMQ_LAST_ENDPOINT, ep, &ep_len);
  endpoint_ = ep;

  void* coord = make_dealer(0, coordinator);
  // Watch the connection so a failed handshake (a missing or wrong cluster key, something else on
  // the port) or a coordinator that stops before answering is reported at once, not as a timeout.
  const std::string mon_ep = fmt::format("inproc://frugal-monitor-{}", static_cast<void*>(this));
  zmq_socket_monitor(coord, mon_ep.c_str(),
                     ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                         ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_DISCONNECTED);
  void* mon = zmq_socket(ctx_, ZMQ_PAIR);
  zmq_connect(mon, mon_ep.c_str());
  struct MonitorCloser {
    void* coord;
    void* mon;
    ~MonitorCloser() {
      zmq_socket_monitor(coord, nullptr, 0);
      int zero = 0;
      zmq_setsockopt(mon, ZMQ_LINGER, &zero, sizeof zero);
      zmq_close(mon);
    }
  } closer{coord, mon};

  char hostname[256] = "?";
  gethostname(hostname, sizeof hostname - 1);
  const json hello = {{"rank", world_rank()}, {"size", world_size()}, {"address", endpoint_},
                      {"pid", static_cast<int>(getpid())}, {"host", hostname},
                      {"config", opt_.run_config}, {"config_hash", config_hash_hex(opt_.run_config)}};
  send_frame(coord, nullptr, FrameKind::hello, world_rank(), hello.dump(-1, ' ', false, json::error_handler_t::replace));

  const auto deadline = Clock::now() + opt_.rendezvous_timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      throw CommError(fmt::format("rank {}: no answer from the coordinator at {} within {} s (is "
                                  "rank 0 running, with the same coordinator address, cluster key and run token?)",
                                  world_rank(), coordinator, opt_.rendezvous_timeout.count() / 1000.0));
    }
    zmq_pollitem_t items[3] = {{coord, 0, ZMQ_POLLIN, 0}, {mon, 0, ZMQ_POLLIN, 0},
                               {zap_, 0, ZMQ_POLLIN, 0}};
    zmq_poll(items, zap_ ? 3 : 2, std::min<long>(left.count(), 100));
    if (zap_ && (items[2].revents & ZMQ_POLLIN)) service_zap();
    // Rank 0's answer first: a refusal it sent just before closing the connection arrives together
    // with the disconnect, and it says why.
    if ((items[0].revents & ZMQ_POLLIN) && take_answer(coord)) return;
    if (items[1].revents & ZMQ_POLLIN) {
      const auto ev = recv_parts(mon);
      uint16_t event = 0;
      uint32_t value = 0;
      if (!ev.empty() && ev[0].size() >= 6) {
        std::memcpy(&event, ev[0].data(), 2);
        std::memcpy(&value, ev[0].data() + 2, 4);
      }
      if (event == ZMQ_EVENT_DISCONNECTED) {  // an answer may still be on its way through the socket
        zmq_pollitem_t answer{coord, 0, ZMQ_POLLIN, 0};
        while (zmq_poll(&answer, 1, 200) > 0) {
          if (take_answer(coord)) return;
        }
      }
      throw CommError(fmt::format("rank {}: {}", world_rank(),
                                  connection_failure(event, value, coordinator,
                                                     opt_.cluster_key        ? Credential::cluster_key
                                                     : !opt_.run_token.empty() ? Credential::run_token
                                                                               : Credential::none)));
    }
  }
}

// One message from the coordinator: a welcome connects this rank to its peers (true), a refusal
// throws with rank 0's reason, anything else is ignored (false).
bool ZmqTransport::take_answer(void* coord) {
  const auto parts = recv_parts(coord);
  auto frame = parse_frame(parts, 0, drops_);
  if (!frame) return false;
  if (frame->first.kind == FrameKind::reject) {
    throw CommError(fmt::format("rank 0 refused to start the run: {}", frame->second));
  }
  if (frame->first.kind != FrameKind::welcome) return false;
  std::vector<std::string> addresses;
  try {
    addresses = json::parse(frame->second).at("addresses").get<std::vector<std::string>>();
  } catch (const json::exception& e) {
    throw CommError(fmt::format("rank {}: malformed welcome from rank 0: {}", world_rank(), json_error_words(e)));
  }
  FRUGAL_CHECK(static_cast<int>(addresses.size()) == world_size(),
               "welcome from rank 0 lists the wrong number of ranks");
  for (int r = 1; r < world_size(); ++r) {
    if (r != world_rank()) make_dealer(r, addresses[r]);
  }
  return true;
}

}  // namespace frugal::comm::detail
