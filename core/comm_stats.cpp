#include "core/comm_stats.h"

#include <algorithm>

namespace frugal::comm {

std::string_view to_string(OpKind kind) {
  switch (kind) {
    case OpKind::all_reduce: return "all_reduce";
    case OpKind::all_gather: return "all_gather";
    case OpKind::reduce_scatter: return "reduce_scatter";
    case OpKind::broadcast: return "broadcast";
    case OpKind::barrier: return "barrier";
    case OpKind::point_to_point: return "point_to_point";
    case OpKind::split: return "split";
    case OpKind::control: return "control";
  }
  return "unknown";
}

ByteCount& ByteCount::operator+=(const ByteCount& o) {
  sent += o.sent;
  received += o.received;
  messages_sent += o.messages_sent;
  messages_received += o.messages_received;
  return *this;
}

ByteCount& ByteCount::operator-=(const ByteCount& o) {
  sent -= o.sent;
  received -= o.received;
  messages_sent -= o.messages_sent;
  messages_received -= o.messages_received;
  return *this;
}

ByteCount CommStats::total() const {
  ByteCount t;
  for (const auto& k : by_kind) t += k;
  return t;
}

CommStats& CommStats::operator-=(const CommStats& o) {
  for (size_t i = 0; i < by_kind.size(); ++i) by_kind[i] -= o.by_kind[i];
  for (size_t i = 0; i < std::min(by_peer.size(), o.by_peer.size()); ++i) by_peer[i] -= o.by_peer[i];
  return *this;
}

CommStats& CommStats::operator+=(const CommStats& o) {
  for (size_t i = 0; i < by_kind.size(); ++i) by_kind[i] += o.by_kind[i];
  if (by_peer.size() < o.by_peer.size()) by_peer.resize(o.by_peer.size());
  for (size_t i = 0; i < o.by_peer.size(); ++i) by_peer[i] += o.by_peer[i];
  return *this;
}

CommStats operator-(CommStats a, const CommStats& b) { return a -= b; }

StatsCounter::StatsCounter(int peers) : by_peer_(new Cell[std::max(peers, 1)]), peers_(peers) {}

void StatsCounter::add_sent(OpKind kind, int peer, uint64_t bytes) {
  auto& k = by_kind_[static_cast<size_t>(kind)];
  k.sent.fetch_add(bytes, std::memory_order_relaxed);
  k.messages_sent.fetch_add(1, std::memory_order_relaxed);
  if (peer >= 0 && peer < peers_) {
    by_peer_[peer].sent.fetch_add(bytes, std::memory_order_relaxed);
    by_peer_[peer].messages_sent.fetch_add(1, std::memory_order_relaxed);
  }
}

void StatsCounter::add_received(OpKind kind, int peer, uint64_t bytes) {
  auto& k = by_kind_[static_cast<size_t>(kind)];
  k.received.fetch_add(bytes, std::memory_order_relaxed);
  k.messages_received.fetch_add(1, std::memory_order_relaxed);
  if (peer >= 0 && peer < peers_) {
    by_peer_[peer].received.fetch_add(bytes, std::memory_order_relaxed);
    by_peer_[peer].messages_received.fetch_add(1, std::memory_order_relaxed);
  }
}

namespace {
template <class Cell>
ByteCount load(const Cell& c) {
  return {c.sent.load(std::memory_order_relaxed), c.received.load(std::memory_order_relaxed),
          c.messages_sent.load(std::memory_order_relaxed),
          c.messages_received.load(std::memory_order_relaxed)};
}
template <class Cell>
void clear(Cell& c) {
  c.sent = 0;
  c.received = 0;
  c.messages_sent = 0;
  c.messages_received = 0;
}
}  // namespace

CommStats StatsCounter::snapshot() const {
  CommStats s;
  for (size_t i = 0; i < by_kind_.size(); ++i) s.by_kind[i] = load(by_kind_[i]);
  s.by_peer.resize(peers_);
  for (int p = 0; p < peers_; ++p) s.by_peer[p] = load(by_peer_[p]);
  return s;
}

void StatsCounter::reset() {
  for (auto& c : by_kind_) clear(c);
  for (int p = 0; p < peers_; ++p) clear(by_peer_[p]);
}

}  // namespace frugal::comm
