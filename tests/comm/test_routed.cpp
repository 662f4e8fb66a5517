// RoutedCommunicator (comm/routed_communicator.h): every collective of the contract holds over two
// groups of in-process ranks standing for MPI and ZeroMQ, whatever the map; each kind's bytes appear
// on the transport the map names and nowhere else; split() routes alike; the map's text parses and
// its errors name the source.
#include <catch2/catch.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collective_checks.h"
#include "comm/local_communicator.h"
#include "comm/routed_communicator.h"
#include "comm/transport_map.h"
#include "comm/transport_table.h"
#include "core/check.h"

using namespace frugal;
using namespace frugal::comm;

namespace {
// `ranks` routed communicators over two sets of in-process ones (the first for mpi, the second zmq).
std::vector<std::unique_ptr<RoutedCommunicator>> routed(int ranks, const TransportMap& map) {
  auto mpi = make_local_communicators(ranks), zmq = make_local_communicators(ranks);
  std::vector<std::unique_ptr<RoutedCommunicator>> out;
  for (int r = 0; r < ranks; ++r)
    out.push_back(std::make_unique<RoutedCommunicator>(map, std::move(mpi[r]), std::move(zmq[r])));
  return out;
}

template <class F>
void on_every_rank(std::vector<std::unique_ptr<RoutedCommunicator>>& comms, F&& body) {
  std::vector<std::thread> threads;
  std::vector<std::string> errors(comms.size());
  for (size_t r = 0; r < comms.size(); ++r)
    threads.emplace_back([&, r] {
      try {
        body(*comms[r]);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (size_t r = 0; r < comms.size(); ++r) {
    INFO("rank " << r);
    CHECK(errors[r].empty());
    if (!errors[r].empty()) FAIL(errors[r]);
  }
}
}  // namespace

TEST_CASE("routed: every collective is right whatever the map") {
  for (const char* text : {"all_reduce=mpi,all_gather=zmq,p2p=zmq", "all_reduce=zmq,reduce_scatter=zmq,broadcast=zmq,barrier=zmq",
                           "all_gather=mpi"}) {
    INFO(text);
    auto comms = routed(3, parse_transport_map(text, "test"));
    on_every_rank(comms, [](Communicator& c) { testing::check_collectives(c, 1000); });
  }
}

TEST_CASE("routed: each kind's bytes are on the transport the map names") {
  const TransportMap map = parse_transport_map("all_reduce=mpi,all_gather=zmq,reduce_scatter=zmq,p2p=zmq", "test");
  auto comms = routed(2, map);
  on_every_rank(comms, [](Communicator& c) {
    std::vector<float> v(256, 1.0f), all(512);
    c.all_reduce(v).wait();
    c.all_gather(std::span<const float>(v), all).wait();
  });
  for (const auto& c : comms) {
    const CommStats mpi = c->stats_of(Transport::mpi), zmq = c->stats_of(Transport::zmq);
    CHECK(mpi.kind(OpKind::all_reduce).sent > 0);
    CHECK(zmq.kind(OpKind::all_reduce).sent == 0);
    CHECK(zmq.kind(OpKind::all_gather).sent > 0);
    CHECK(mpi.kind(OpKind::all_gather).sent == 0);
    CHECK(c->stats().total().sent == mpi.total().sent + zmq.total().sent);  // both together
  }
  // split() keeps the map: a sub-group's all-gather goes over zmq too.
  std::vector<std::unique_ptr<Communicator>> halves(2);
  on_every_rank(comms, [&](Communicator& c) {
    auto half = c.split(0, c.rank());
    std::vector<float> v(64, 2.0f), all(128);
    half->all_gather(std::span<const float>(v), all).wait();
    halves[static_cast<size_t>(c.rank())] = std::move(half);
  });
  for (const auto& h : halves) {
    const auto* r = dynamic_cast<const RoutedCommunicator*>(h.get());
    REQUIRE(r != nullptr);
    CHECK(r->stats_of(Transport::zmq).kind(OpKind::all_gather).sent > 0);
    CHECK(r->stats_of(Transport::mpi).kind(OpKind::all_gather).sent == 0);
  }
}

TEST_CASE("transport map: the text, its defaults and its errors") {
  const TransportMap m = parse_transport_map("all_gather=zmq,p2p=zmq", "--transport-map");
  CHECK(m.of(OpRoute::all_gather) == Transport::zmq);
  CHECK(m.of(OpRoute::all_reduce) == Transport::mpi);  // unnamed: MPI, the transport that started the job
  CHECK(m.uses(Transport::zmq));
  CHECK(m.to_string() == "all_reduce=mpi,all_gather=zmq,reduce_scatter=mpi,broadcast=mpi,p2p=zmq,barrier=mpi");
  CHECK(parse_transport_map(m.to_string(), "x").route == m.route);
  CHECK_THROWS_WITH(parse_transport_map("allreduce=mpi", "--transport-map"),
                    Catch::Contains("--transport-map: unknown kind 'allreduce'"));
  CHECK_THROWS_WITH(parse_transport_map("all_reduce=nccl", "FRUGAL_TRANSPORT_MAP"),
                    Catch::Contains("FRUGAL_TRANSPORT_MAP: all_reduce=nccl: the transport is mpi or zmq"));
  CHECK_THROWS_WITH(parse_transport_map("all_reduce=mpi,all_reduce=zmq", "--transport-map"),
                    Catch::Contains("'all_reduce' is named twice"));
  CHECK_THROWS_WITH(parse_transport_map("all_reduce", "--transport-map"), Catch::Contains("is not KIND=TRANSPORT"));
}

TEST_CASE("transport table: the faster transport at the nearest size; per kind by wins; the file round-trips") {
  TransportTable t;
  t.ranks = 4;
  auto& ar = t.by_kind[static_cast<size_t>(OpRoute::all_reduce)];
  ar = {{.bytes = 4096, .mpi_seconds = 1e-5, .zmq_seconds = 5e-5},
        {.bytes = 1 << 20, .mpi_seconds = 9e-4, .zmq_seconds = 4e-4},
        {.bytes = 16 << 20, .mpi_seconds = 9e-3, .zmq_seconds = 5e-3}};
  CHECK(t.best(OpRoute::all_reduce, 1000) == Transport::mpi);
  CHECK(t.best(OpRoute::all_reduce, 8 << 10) == Transport::mpi);   // nearer 4 KiB than 1 MiB (log scale)
  CHECK(t.best(OpRoute::all_reduce, 256 << 10) == Transport::zmq);  // nearer 1 MiB
  CHECK(t.best(OpRoute::all_gather, 1 << 20) == Transport::mpi);    // no timings: MPI
  CHECK(t.per_kind().of(OpRoute::all_reduce) == Transport::zmq);    // faster at 2 of 3 sizes
  const std::string path = "test_routed_table.json";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    REQUIRE(f != nullptr);
    const std::string text = t.to_json();
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  const TransportTable back = load_transport_table(path);
  CHECK(back.digest() == t.digest());
  CHECK(back.best(OpRoute::all_reduce, 256 << 10) == Transport::zmq);
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("{\"ranks\": 2, \"kinds\": {\"all_reduce\": [{\"bytes\": 1, \"mpi_seconds\": -1, \"zmq_seconds\": 1}]}}", f);
    std::fclose(f);
  }
  CHECK_THROWS_WITH(load_transport_table(path), Catch::Contains("timings must be non-negative seconds"));
  std::remove(path.c_str());
  CHECK_THROWS_WITH(load_transport_table(path), Catch::Contains("no transport table there"));
}
