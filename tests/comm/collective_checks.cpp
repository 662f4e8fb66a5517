#include "collective_checks.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace frugal::comm::testing {
namespace {

void expect_equal(std::span<const float> got, std::span<const float> want, const std::string& what,
                  const Communicator& c) {
  FRUGAL_CHECK(got.size() == want.size(),
               fmt::format("{}: {} values, expected {}", what, got.size(), want.size()));
  for (size_t i = 0; i < got.size(); ++i) {
    FRUGAL_CHECK(got[i] == want[i], fmt::format("{} on rank {}/{}: [{}] = {}, expected {}", what,
                                                c.rank(), c.size(), i, got[i], want[i]));
  }
}

std::vector<float> inputs(int rank, size_t n, size_t offset = 0) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = input(rank, offset + i);
  return v;
}

std::vector<size_t> uneven_counts(int p, size_t n) {
  std::vector<size_t> counts(p);
  for (int r = 0; r < p; ++r) counts[r] = n * static_cast<size_t>(r + 1) / static_cast<size_t>(p);
  return counts;
}

}  // namespace

float input(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((i * 7919 + static_cast<size_t>(rank) * 104729) % 2001) - 1000);
}

void check_all_reduce(Communicator& c, size_t n) {
  const int p = c.size();
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
    std::vector<float> data = inputs(c.rank(), n);
    c.all_reduce(data, op).wait();
    std::vector<float> want = inputs(0, n);
    for (int r = 1; r < p; ++r) {
      const auto in = inputs(r, n);
      for (size_t i = 0; i < n; ++i) {
        want[i] = op == ReduceOp::sum ? want[i] + in[i]
                  : op == ReduceOp::max ? std::max(want[i], in[i])
                                        : std::min(want[i], in[i]);
      }
    }
    expect_equal(data, want, fmt::format("all_reduce({}, n={})", to_string(op), n), c);
  }
}

void check_all_gather(Communicator& c, size_t n) {
  const int p = c.size();
  {
    const auto mine = inputs(c.rank(), n);
    std::vector<float> all(n * p, -1.0f);
    c.all_gather(mine, all).wait();
    std::vector<float> want;
    for (int r = 0; r < p; ++r) {
      const auto in = inputs(r, n);
      want.insert(want.end(), in.begin(), in.end());
    }
    expect_equal(all, want, fmt::format("all_gather(n={})", n), c);
  }
  const auto counts = uneven_counts(p, n);
  const auto d = displacements(counts);
  const auto mine = inputs(c.rank(), counts[c.rank()], d[c.rank()]);
  std::vector<float> all(d.back(), -1.0f);
  c.all_gatherv(mine, all, counts).wait();
  std::vector<float> want;
  for (int r = 0; r < p; ++r) {
    const auto in = inputs(r, counts[r], d[r]);
    want.insert(want.end(), in.begin(), in.end());
  }
  expect_equal(all, want, fmt::format("all_gatherv(uneven, n={})", n), c);
}

void check_reduce_scatter(Communicator& c, size_t n) {
  const int p = c.size();
  auto run = [&](const std::vector<size_t>& counts, ReduceOp op, const char* name) {
    const auto d = displacements(counts);
    const auto all = inputs(c.rank(), d.back());
    std::vector<float> mine(counts[c.rank()], -1.0f);
    c.reduce_scatterv(all, mine, counts, op).wait();
    std::vector<float> want = inputs(0, d.back());
    for (int r = 1; r < p; ++r) {
      const auto in = inputs(r, d.back());
      for (size_t i = 0; i < want.size(); ++i) {
        want[i] = op == ReduceOp::sum ? want[i] + in[i] : std::max(want[i], in[i]);
      }
    }
    expect_equal(mine, std::span<const float>(want).subspan(d[c.rank()], counts[c.rank()]),
                 fmt::format("{}({}, n={})", name, to_string(op), n), c);
  };
  run(std::vector<size_t>(p, n), ReduceOp::sum, "reduce_scatter");
  run(uneven_counts(p, n), ReduceOp::sum, "reduce_scatterv(uneven)");
  run(uneven_counts(p, n), ReduceOp::max, "reduce_scatterv(uneven)");
}

void check_broadcast(Communicator& c, size_t n) {
  for (int root : {0, c.size() - 1}) {
    std::vector<float> data = c.rank() == root ? inputs(root, n) : std::vector<float>(n, -1.0f);
    c.broadcast(data, root).wait();
    expect_equal(data, inputs(root, n), fmt::format("broadcast(n={}, root={})", n, root), c);
  }
}

void check_bytes_and_barrier(Communicator& c, size_t n) {
  const int root = c.size() / 2;
  std::vector<std::byte> b;
  if (c.rank() == root) {
    for (size_t i = 0; i < n; ++i) b.push_back(static_cast<std::byte>(i * 31 + 7));
  }
  c.broadcast_bytes(b, root).wait();
  FRUGAL_CHECK(b.size() == n, fmt::format("broadcast_bytes: {} bytes, expected {}", b.size(), n));
  for (size_t i = 0; i < n; ++i) {
    FRUGAL_CHECK(b[i] == static_cast<std::byte>(i * 31 + 7), "broadcast_bytes: wrong content");
  }
  // Ranks contribute different lengths: rank r sends n + r bytes of value r.
  std::vector<std::byte> mine(n + c.rank(), static_cast<std::byte>(c.rank()));
  std::vector<std::vector<std::byte>> all;
  c.all_gather_bytes(mine, all).wait();
  FRUGAL_CHECK(all.size() == static_cast<size_t>(c.size()), "all_gather_bytes: wrong rank count");
  for (int r = 0; r < c.size(); ++r) {
    FRUGAL_CHECK(all[r] == std::vector<std::byte>(n + r, static_cast<std::byte>(r)),
                 fmt::format("all_gather_bytes: wrong bytes from rank {}", r));
  }
  c.barrier().wait();
}

void check_send_recv(Communicator& c, size_t n) {
  const int p = c.size(), right = (c.rank() + 1) % p, left = (c.rank() + p - 1) % p;
  std::vector<std::byte> out(n, static_cast<std::byte>(c.rank() + 1));
  std::vector<std::byte> got, got2;
  Work r1 = c.recv(left, 7, got);
  Work r2 = c.recv(left, 8, got2);
  // Sent in the other tag order: matching is by tag, not by arrival.
  c.send(right, 8, std::vector<std::byte>(3, std::byte{42})).wait();
  c.send(right, 7, out).wait();
  r1.wait();
  r2.wait();
  FRUGAL_CHECK(got == std::vector<std::byte>(n, static_cast<std::byte>(left + 1)),
               fmt::format("send/recv: wrong {} bytes from rank {}", got.size(), left));
  FRUGAL_CHECK(got2 == std::vector<std::byte>(3, std::byte{42}), "send/recv: wrong tag-8 message");
}

void check_split(Communicator& c) {
  // Two interleaved halves, ordered by descending parent rank via the key.
  const int color = c.rank() % 2;
  auto sub = c.split(color, -c.rank());
  FRUGAL_CHECK(sub != nullptr, "split returned no communicator for a non-negative color");
  std::vector<int> members;
  for (int r = c.size() - 1; r >= 0; --r) {
    if (r % 2 == color) members.push_back(r);
  }
  FRUGAL_CHECK(sub->size() == static_cast<int>(members.size()),
               fmt::format("split: group of {} ranks, expected {}", sub->size(), members.size()));
  const auto me = std::find(members.begin(), members.end(), c.rank()) - members.begin();
  FRUGAL_CHECK(sub->rank() == me, fmt::format("split: sub rank {}, expected {}", sub->rank(), me));
  // The sub-communicator sums over its own members only; the parent still works in between.
  std::vector<float> v{static_cast<float>(c.rank()), 1.0f};
  Work w = sub->all_reduce(v);
  std::vector<float> parent{1.0f};
  c.all_reduce(parent).wait();
  w.wait();
  float want = 0;
  for (int m : members) want += static_cast<float>(m);
  FRUGAL_CHECK(v[0] == want && v[1] == static_cast<float>(members.size()),
               fmt::format("split: sub all_reduce gave {} {}, expected {} {}", v[0], v[1], want,
                           members.size()));
  FRUGAL_CHECK(parent[0] == static_cast<float>(c.size()), "split: parent all_reduce wrong");
  check_all_gather(*sub, 5);
  // A negative color is "no group".
  auto none = c.split(c.rank() == 0 ? -1 : 0, 0);
  FRUGAL_CHECK((c.rank() == 0) == (none == nullptr), "split: negative color must give nullptr");
  if (none) FRUGAL_CHECK(none->size() == c.size() - 1, "split: wrong size without rank 0");
}

void check_collectives(Communicator& c, size_t n) {
  check_all_reduce(c, n);
  check_all_gather(c, n);
  check_reduce_scatter(c, n);
  check_broadcast(c, n);
  check_bytes_and_barrier(c, n);
  check_send_recv(c, n);
}

}  // namespace frugal::comm::testing
