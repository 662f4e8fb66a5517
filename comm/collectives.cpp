// The collective algorithms of TransportCommunicator (see transport_communicator.h).
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "comm/transport_communicator.h"

namespace frugal::comm::detail {
namespace {

// out[i] := f(own[i], received[i]) in one pass, the received floats read through an aligned tile.
template <class F>
void combine_tiles(float* out, const float* own, const std::byte* received, size_t n, F f) {
  constexpr size_t kTile = 1024;
  float tile[kTile];
  for (size_t at = 0; at < n; at += kTile) {
    const size_t m = std::min(kTile, n - at);
    std::memcpy(tile, received + at * sizeof(float), m * sizeof(float));
    for (size_t i = 0; i < m; ++i) out[at + i] = f(own[at + i], tile[i]);
  }
}

// out := own op received (received op own with `received_first`: the operand order of max and min
// decides which of two equal-comparing values, +0 and -0, or a NaN, wins, so each algorithm keeps
// its own). out may be own. The received floats may be unaligned: they are read through a tile.
void combine(std::span<float> out, std::span<const float> own, std::span<const std::byte> received, ReduceOp op,
             bool received_first) {
  FRUGAL_CHECK(own.size() == out.size() && received.size() == out.size_bytes(), "collective: segment of unexpected size");
  float* o = out.data();
  const float* a = own.data();
  const std::byte* r = received.data();
  const size_t n = out.size();
  switch (op) {
    case ReduceOp::sum:  // IEEE addition commutes (bit for bit, but for which of two NaNs' payloads survives)
      combine_tiles(o, a, r, n, [](float x, float y) { return x + y; });
      break;
    case ReduceOp::max:
      if (received_first) combine_tiles(o, a, r, n, [](float x, float y) { return std::max(y, x); });
      else combine_tiles(o, a, r, n, [](float x, float y) { return std::max(x, y); });
      break;
    case ReduceOp::min:
      if (received_first) combine_tiles(o, a, r, n, [](float x, float y) { return std::min(y, x); });
      else combine_tiles(o, a, r, n, [](float x, float y) { return std::min(x, y); });
      break;
  }
}

// dst := dst op src, src being received bytes.
void reduce_bytes(std::span<float> dst, std::span<const std::byte> src, ReduceOp op) {
  combine(dst, dst, src, op, false);
}

// A payload of `floats` floats, left uninitialized for the caller to fill (`data`).
Payload fresh_payload(size_t floats, float*& data) {
  std::shared_ptr<float[]> buffer(new float[floats]);
  data = buffer.get();
  return Payload(std::move(buffer), reinterpret_cast<const std::byte*>(data), floats * sizeof(float));
}

std::vector<size_t> even_displs(size_t n, int p) {
  std::vector<size_t> d(p + 1);
  for (int i = 0; i <= p; ++i) d[i] = n * static_cast<size_t>(i) / static_cast<size_t>(p);
  return d;
}

std::string floats(size_t n) { return fmt::format("{} floats", n); }

}  // namespace

// ---- frame helpers ----------------------------------------------------------------------------

Payload TransportCommunicator::own_floats(std::span<const float> v) {
  if (transport_->releases_sent_payloads()) return loans_.lend(std::as_bytes(v));
  return Payload::copy_of(std::as_bytes(v));
}

void TransportCommunicator::send_to(const Op& op, int peer, uint32_t step, uint32_t part,
                                    Payload payload) {
  FrameHeader h;
  h.kind = FrameKind::collective;
  h.op = static_cast<uint8_t>(op.kind);
  h.src = static_cast<uint32_t>(transport_->world_rank());
  h.step = step;
  h.comm_id = comm_id_;
  h.seq = op.info.seq;
  h.part = part;
  h.sig = op.info.sig;
  h.payload_bytes = payload.size();
  stats_.add_sent(op.kind, peer, transport_->send(members_[peer], h, std::move(payload)));
}

Message TransportCommunicator::recv_from(const Op& op, int peer, uint32_t step, uint32_t part) {
  const int src = members_[peer];
  Message m;
  if (spin_until([&] { return mailbox_->collective_ready(src); })) {
    m = mailbox_->take_collective(src, op.info, step, part);
  } else {
    SleepingReceiver sleeping(*transport_);
    m = mailbox_->take_collective(src, op.info, step, part);
  }
  stats_.add_received(op.kind, peer, kFrameHeaderBytes + m.payload.size());
  return m;
}

size_t TransportCommunicator::segments(size_t n) const {
  const size_t seg = std::max<size_t>(tuning_.segment_bytes / sizeof(float), 1);
  return (n + seg - 1) / seg;
}

std::span<float> TransportCommunicator::segment(std::span<float> block, size_t j) const {
  const size_t seg = std::max<size_t>(tuning_.segment_bytes / sizeof(float), 1);
  const size_t at = j * seg;
  return block.subspan(at, std::min(seg, block.size() - at));
}

void TransportCommunicator::send_floats(const Op& op, int peer, uint32_t step,
                                        std::span<const float> block) {
  std::span<float> b(const_cast<float*>(block.data()), block.size());  // read only below
  for (size_t j = 0; j < segments(block.size()); ++j) {
    send_to(op, peer, step, static_cast<uint32_t>(j), own_floats(segment(b, j)));
  }
}

void TransportCommunicator::recv_floats(const Op& op, int peer, uint32_t step,
                                        std::span<float> block) {
  for (size_t j = 0; j < segments(block.size()); ++j) {
    const auto s = segment(block, j);
    Message m = recv_from(op, peer, step, static_cast<uint32_t>(j));
    FRUGAL_CHECK(m.payload.size() == s.size_bytes(), "collective: segment of unexpected size");
    std::memcpy(s.data(), m.payload.bytes().data(), s.size_bytes());
  }
}

void TransportCommunicator::recv_reduce(const Op& op, int peer, uint32_t step, uint32_t part,
                                        std::span<float> seg, ReduceOp rop) {
  Message m = recv_from(op, peer, step, part);
  FRUGAL_CHECK(m.payload.size() == seg.size_bytes(), "collective: segment of unexpected size");
  reduce_bytes(seg, m.payload.bytes(), rop);
}

bool TransportCommunicator::use_ring(size_t bytes) const {
  return size() > 1 && bytes >= tuning_.ring_threshold_bytes;
}

// ---- all_reduce -------------------------------------------------------------------------------

Work TransportCommunicator::all_reduce(std::span<float> data, ReduceOp rop) {
  return submit(OpKind::all_reduce, fmt::format("all_reduce({}, {})", to_string(rop), floats(data.size())),
                {data.size(), static_cast<uint64_t>(rop)}, [this, data, rop](const Op& op) {
                  if (size() == 1 || data.empty()) return;
                  // Two ranks whose blocks fit one segment each: the ring's two rounds move the same
                  // bytes as one direct exchange, with nothing to pipeline, so one round it is.
                  const bool one_round = size() == 2 && data.size_bytes() <= 2 * tuning_.segment_bytes;
                  if (use_ring(data.size_bytes()) && !one_round) {
                    ring_all_reduce(op, data, rop);
                  } else {
                    direct_all_reduce(op, data, rop);
                  }
                });
}

// Reduce-scatter then all-gather around the ring. Block b ends up reduced at rank b-1 and is then
// copied to everyone, so every rank holds bitwise the same result. Steps 0..p-2 reduce, p-1..2p-3
// gather; a segment is forwarded as soon as it has been received (and reduced).
void TransportCommunicator::ring_all_reduce(const Op& op, std::span<float> data, ReduceOp rop) {
  const int p = size(), r = rank_, right = (r + 1) % p, left = (r + p - 1) % p;
  const auto d = even_displs(data.size(), p);
  auto block = [&](int b) { return data.subspan(d[b], d[b + 1] - d[b]); };
  send_floats(op, right, 0, block(r));
  for (int s = 0; s <= p - 2; ++s) {
    const auto blk = block((r - s - 1 + 2 * p) % p);
    for (size_t j = 0; j < segments(blk.size()); ++j) {
      const auto seg = segment(blk, j);
      if (s == p - 2) {  // this rank's finished block: kept, and the first to travel back around
        recv_reduce(op, left, s, static_cast<uint32_t>(j), seg, rop);
        send_to(op, right, s + 1, static_cast<uint32_t>(j), own_floats(seg));
        continue;
      }
      // A partial sum this rank only passes on (the gather overwrites its block): summed straight
      // into the frame it leaves in.
      Message m = recv_from(op, left, s, static_cast<uint32_t>(j));
      float* out = nullptr;
      Payload partial = fresh_payload(seg.size(), out);
      combine({out, seg.size()}, seg, m.payload.bytes(), rop, false);
      send_to(op, right, s + 1, static_cast<uint32_t>(j), std::move(partial));
    }
  }
  // The gather's first block (t = 0) is this rank's own block r, lent to the right neighbour at
  // step 0 and not necessarily released yet. Overwriting it is safe: its finished sum can only
  // arrive after that neighbour received the step-0 frame, so ZeroMQ has written it out.
  for (int t = 0; t <= p - 2; ++t) {
    const auto blk = block((r - t + p) % p);
    for (size_t j = 0; j < segments(blk.size()); ++j) {
      const auto seg = segment(blk, j);
      Message m = recv_from(op, left, p - 1 + t, static_cast<uint32_t>(j));
      FRUGAL_CHECK(m.payload.size() == seg.size_bytes(), "all_reduce: segment of unexpected size");
      std::memcpy(seg.data(), m.payload.bytes().data(), seg.size_bytes());
      if (t < p - 2) send_to(op, right, p + t, static_cast<uint32_t>(j), m.payload);  // no copy
    }
  }
}

// Everyone sends everything to everyone and reduces in rank order (identical on every rank).
void TransportCommunicator::direct_all_reduce(const Op& op, std::span<float> data, ReduceOp rop) {
  const int p = size();
  if (p == 2) {
    // Each rank sends its data as it is and, once that frame is out, folds the other's into it in
    // rank order (combine's operand order): the same bits on both, and no copy of its own data.
    const int other = 1 - rank_;
    send_to(op, other, 0, 0, own_floats(data));
    Message m = recv_from(op, other, 0, 0);
    FRUGAL_CHECK(m.payload.size() == data.size_bytes(), "all_reduce: message of unexpected size");
    loans_.wait_returned();
    combine(data, data, m.payload.bytes(), rop, rank_ == 1);
    return;
  }
  const Payload mine = Payload::copy_of(std::as_bytes(data));  // data is overwritten below
  for (int q = 0; q < p; ++q) {
    if (q != rank_) send_to(op, q, 0, 0, mine);
  }
  std::vector<Message> in(p);
  for (int q = 0; q < p; ++q) {
    if (q == rank_) continue;
    in[q] = recv_from(op, q, 0, 0);
    FRUGAL_CHECK(in[q].payload.size() == data.size_bytes(), "all_reduce: message of unexpected size");
  }
  auto bytes_of = [&](int q) { return q == rank_ ? mine.bytes() : in[q].payload.bytes(); };
  std::memcpy(data.data(), bytes_of(0).data(), data.size_bytes());
  for (int q = 1; q < p; ++q) reduce_bytes(data, bytes_of(q), rop);
}

// ---- all_gather -------------------------------------------------------------------------------

Work TransportCommunicator::all_gatherv(std::span<const float> mine, std::span<float> all,
                                        std::span<const size_t> counts) {
  FRUGAL_CHECK(counts.size() == static_cast<size_t>(size()),
               fmt::format("all_gatherv: {} counts for {} ranks", counts.size(), size()));
  auto displs = displacements(counts);
  FRUGAL_CHECK(mine.size() == counts[rank_],
               fmt::format("all_gatherv: rank {} passes {} floats but counts[{}] = {}", rank_,
                           mine.size(), rank_, counts[rank_]));
  FRUGAL_CHECK(all.size() == displs.back(), fmt::format("all_gatherv: output has {} floats, counts "
                                                        "sum to {}", all.size(), displs.back()));
  std::vector<uint64_t> sig(counts.begin(), counts.end());
  return submit(OpKind::all_gather, fmt::format("all_gather({} in total)", floats(all.size())),
                std::move(sig), [this, mine, all, displs = std::move(displs)](const Op& op) {
                  std::copy(mine.begin(), mine.end(), all.begin() + displs[rank_]);
                  if (size() == 1 || all.empty()) return;
                  if (use_ring(all.size_bytes())) {
                    ring_all_gather(op, all, displs);
                  } else {
                    direct_all_gather(op, all, displs);
                  }
                });
}

void TransportCommunicator::ring_all_gather(const Op& op, std::span<float> all,
                                            const std::vector<size_t>& d) {
  const int p = size(), r = rank_, right = (r + 1) % p, left = (r + p - 1) % p;
  auto block = [&](int b) { return all.subspan(d[b], d[b + 1] - d[b]); };
  send_floats(op, right, 0, block(r));
  for (int t = 0; t <= p - 2; ++t) {
    const auto blk = block((r - t - 1 + 2 * p) % p);
    for (size_t j = 0; j < segments(blk.size()); ++j) {
      const auto seg = segment(blk, j);
      Message m = recv_from(op, left, t, static_cast<uint32_t>(j));
      FRUGAL_CHECK(m.payload.size() == seg.size_bytes(), "all_gather: segment of unexpected size");
      std::memcpy(seg.data(), m.payload.bytes().data(), seg.size_bytes());
      if (t < p - 2) send_to(op, right, t + 1, static_cast<uint32_t>(j), m.payload);  // no copy
    }
  }
}

void TransportCommunicator::direct_all_gather(const Op& op, std::span<float> all,
                                              const std::vector<size_t>& d) {
  const int p = size();
  auto block = [&](int b) { return all.subspan(d[b], d[b + 1] - d[b]); };
  if (!block(rank_).empty()) {
    const Payload mine = own_floats(block(rank_));
    for (int q = 0; q < p; ++q) {
      if (q != rank_) send_to(op, q, 0, 0, mine);
    }
  }
  for (int q = 0; q < p; ++q) {
    if (q != rank_ && !block(q).empty()) recv_floats(op, q, 0, block(q));
  }
}

// ---- reduce_scatter ---------------------------------------------------------------------------

Work TransportCommunicator::reduce_scatterv(std::span<const float> all, std::span<float> mine,
                                            std::span<const size_t> counts, ReduceOp rop) {
  FRUGAL_CHECK(counts.size() == static_cast<size_t>(size()),
               fmt::format("reduce_scatterv: {} counts for {} ranks", counts.size(), size()));
  auto displs = displacements(counts);
  FRUGAL_CHECK(mine.size() == counts[rank_],
               fmt::format("reduce_scatterv: rank {} output has {} floats but counts[{}] = {}",
                           rank_, mine.size(), rank_, counts[rank_]));
  FRUGAL_CHECK(all.size() == displs.back(), fmt::format("reduce_scatterv: input has {} floats, "
                                                        "counts sum to {}", all.size(), displs.back()));
  std::vector<uint64_t> sig(counts.begin(), counts.end());
  sig.push_back(static_cast<uint64_t>(rop));
  return submit(OpKind::reduce_scatter,
                fmt::format("reduce_scatter({}, {} in total)", to_string(rop), floats(all.size())),
                std::move(sig), [this, all, mine, rop, displs = std::move(displs)](const Op& op) {
                  if (size() == 1) {
                    std::copy(all.begin(), all.end(), mine.begin());
                  } else if (use_ring(all.size_bytes())) {
                    ring_reduce_scatter(op, all, mine, displs, rop);
                  } else {
                    direct_reduce_scatter(op, all, mine, displs, rop);
                  }
                });
}

// Partial sums of block b start at rank b+1 and travel right, each rank adding its own part,
// until they reach rank b.
void TransportCommunicator::ring_reduce_scatter(const Op& op, std::span<const float> all,
                                                std::span<float> mine,
                                                const std::vector<size_t>& d, ReduceOp rop) {
  const int p = size(), r = rank_, right = (r + 1) % p, left = (r + p - 1) % p;
  auto block = [&](int b) { return all.subspan(d[b], d[b + 1] - d[b]); };
  send_floats(op, right, 0, block((r + p - 1) % p));
  for (int s = 0; s <= p - 2; ++s) {
    const int b = (r - s - 2 + 2 * p) % p;
    const auto own = block(b);
    for (size_t j = 0; j < segments(own.size()); ++j) {
      const auto own_seg = segment(std::span<float>(const_cast<float*>(own.data()), own.size()), j);
      Message m = recv_from(op, left, s, static_cast<uint32_t>(j));
      // The received partial sum, then this rank's part: into `mine` at the last step, else straight
      // into the frame that carries it on.
      if (s == p - 2) {
        combine(mine.subspan(own_seg.data() - own.data(), own_seg.size()), own_seg, m.payload.bytes(), rop, true);
        continue;
      }
      float* out = nullptr;
      Payload partial = fresh_payload(own_seg.size(), out);
      combine({out, own_seg.size()}, own_seg, m.payload.bytes(), rop, true);
      send_to(op, right, s + 1, static_cast<uint32_t>(j), std::move(partial));
    }
  }
}

void TransportCommunicator::direct_reduce_scatter(const Op& op, std::span<const float> all,
                                                  std::span<float> mine,
                                                  const std::vector<size_t>& d, ReduceOp rop) {
  const int p = size();
  auto block = [&](int b) { return all.subspan(d[b], d[b + 1] - d[b]); };
  for (int q = 0; q < p; ++q) {
    if (q != rank_ && !block(q).empty()) send_to(op, q, 0, 0, own_floats(block(q)));
  }
  if (mine.empty()) return;
  std::vector<Message> in(p);
  for (int q = 0; q < p; ++q) {
    if (q == rank_) continue;
    in[q] = recv_from(op, q, 0, 0);
    FRUGAL_CHECK(in[q].payload.size() == mine.size_bytes(), "reduce_scatter: message of unexpected size");
  }
  auto bytes_of = [&](int q) {
    return q == rank_ ? std::as_bytes(block(rank_)) : in[q].payload.bytes();
  };
  std::memcpy(mine.data(), bytes_of(0).data(), mine.size_bytes());
  for (int q = 1; q < p; ++q) reduce_bytes(mine, bytes_of(q), rop);
}

// ---- broadcast, bytes, barrier ----------------------------------------------------------------

Work TransportCommunicator::broadcast(std::span<float> data, int root) {
  FRUGAL_CHECK(root >= 0 && root < size(), fmt::format("broadcast: root {} is not a rank of this "
                                                       "{}-rank communicator", root, size()));
  return submit(OpKind::broadcast, fmt::format("broadcast({}, root {})", floats(data.size()), root),
                {data.size(), static_cast<uint64_t>(root)}, [this, data, root](const Op& op) {
                  const int p = size();
                  if (p == 1 || data.empty()) return;
                  if (!use_ring(data.size_bytes())) {
                    if (rank_ == root) {
                      for (int q = 0; q < p; ++q) {
                        if (q != root) send_floats(op, q, 0, data);
                      }
                    } else {
                      recv_floats(op, root, 0, data);
                    }
                    return;
                  }
                  // A chain from the root, segment by segment: every link carries the data once.
                  const int pos = (rank_ - root + p) % p;
                  for (size_t j = 0; j < segments(data.size()); ++j) {
                    const auto seg = segment(data, j);
                    Payload out;
                    if (pos > 0) {
                      Message m = recv_from(op, (rank_ + p - 1) % p, 0, static_cast<uint32_t>(j));
                      FRUGAL_CHECK(m.payload.size() == seg.size_bytes(), "broadcast: segment of unexpected size");
                      std::memcpy(seg.data(), m.payload.bytes().data(), seg.size_bytes());
                      out = m.payload;  // forwarded as received, without a copy
                    } else {
                      out = own_floats(seg);
                    }
                    if (pos < p - 1) send_to(op, (rank_ + 1) % p, 0, static_cast<uint32_t>(j), out);
                  }
                });
}

Work TransportCommunicator::broadcast_bytes(std::vector<std::byte>& data, int root) {
  FRUGAL_CHECK(root >= 0 && root < size(), fmt::format("broadcast_bytes: root {} is not a rank of "
                                                       "this {}-rank communicator", root, size()));
  return submit(OpKind::broadcast, fmt::format("broadcast_bytes(root {})", root),
                {static_cast<uint64_t>(root)}, [this, &data, root](const Op& op) {
                  if (rank_ == root) {
                    const Payload p = Payload::copy_of(data);
                    for (int q = 0; q < size(); ++q) {
                      if (q != root) send_to(op, q, 0, 0, p);
                    }
                  } else {
                    Message m = recv_from(op, root, 0, 0);
                    const auto b = m.payload.bytes();
                    data.assign(b.begin(), b.end());
                  }
                });
}

void TransportCommunicator::exchange_bytes(const Op& op, std::span<const std::byte> mine,
                                           std::vector<std::vector<std::byte>>& all) {
  const Payload p = Payload::copy_of(mine);
  for (int q = 0; q < size(); ++q) {
    if (q != rank_) send_to(op, q, 0, 0, p);
  }
  all.assign(size(), {});
  all[rank_].assign(mine.begin(), mine.end());
  for (int q = 0; q < size(); ++q) {
    if (q == rank_) continue;
    Message m = recv_from(op, q, 0, 0);
    const auto b = m.payload.bytes();
    all[q].assign(b.begin(), b.end());
  }
}

Work TransportCommunicator::all_gather_bytes(std::span<const std::byte> mine,
                                             std::vector<std::vector<std::byte>>& all) {
  return submit(OpKind::all_gather, "all_gather_bytes", {},
                [this, mine, &all](const Op& op) { exchange_bytes(op, mine, all); });
}

Work TransportCommunicator::barrier() {
  return submit(OpKind::barrier, "barrier", {}, [this](const Op& op) {
    std::vector<std::vector<std::byte>> unused;
    exchange_bytes(op, {}, unused);
  });
}

}  // namespace frugal::comm::detail
