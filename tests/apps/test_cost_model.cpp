// The cost model of `frugal plan` (apps/plan/cost_model.h): its byte counts against what the collectives
// of comm/ really send (run in-process here), its compute scaling, and its choice of grid.
#include <catch2/catch.hpp>

#include <functional>
#include <vector>

#include "apps/plan/cost_model.h"
#include "comm/local_communicator.h"

using namespace frugal;
using namespace frugal::plan;

namespace {

// Bytes rank 0 sends in one collective over `ranks` in-process ranks.
double measured_bytes(int ranks, const std::function<void(comm::Communicator&)>& op) {
  double sent = 0;
  comm::run_local(ranks, [&](comm::Communicator& c) {
    op(c);
    if (c.rank() == 0) sent = static_cast<double>(c.stats().total().sent);
  });
  return sent;
}

Calibration xmc_calibration() {
  Calibration c;
  c.batch = 128;
  c.threads = 1;
  c.sliced_seconds_per_sample = 300e-6;
  c.replicated_seconds_per_sample = 30e-6;
  c.boundaries = {128};
  c.parameters = {{"sparse_dense.weight", 100000, 128, 1, 9000, true},
                  {"sparse_dense.bias", 1, 128, 1, 1, true},
                  {"softmax.weight", 100000, 128, 0, 90000, false},
                  {"softmax.bias", 100000, 1, 0, 90000, false}};
  return c;
}

}  // namespace

TEST_CASE("the model's collective byte counts equal what the in-process collectives send", "[plan]") {
  const ModelOptions o;
  for (const int p : {2, 3, 4}) {
    for (const size_t floats : {size_t{100}, size_t{30000}, size_t{400000}}) {
      INFO(p << " ranks, " << floats << " floats");
      const double gather = measured_bytes(p, [&](comm::Communicator& c) {
        std::vector<float> mine(floats / p), all(mine.size() * p);
        c.all_gather(mine, all).wait();
      });
      CHECK(all_gather_cost(static_cast<double>(floats / p * p) * 4, p, o).bytes == Approx(gather).epsilon(1e-9));
      const double reduce = measured_bytes(p, [&](comm::Communicator& c) {
        std::vector<float> v(floats, 1.0f);
        c.all_reduce(v).wait();
      });
      // Uneven blocks round the ring's share; within a frame header per message.
      CHECK(std::abs(all_reduce_cost(static_cast<double>(floats) * 4, p, o).bytes - reduce) <= 8.0 * p);
      const double scatter = measured_bytes(p, [&](comm::Communicator& c) {
        std::vector<float> all(floats / p * p, 1.0f), mine(floats / p);
        c.reduce_scatter(all, mine).wait();
      });
      CHECK(reduce_scatter_cost(static_cast<double>(floats / p * p) * 4, p, o).bytes == Approx(scatter).epsilon(1e-9));
    }
  }
}

TEST_CASE("model-parallel bytes per sample match the measured XMC exchange", "[plan]") {
  // bench/REPORT.md "The softmax normalizer in one collective": 525.3 (2 ranks) and 807.9 (4 ranks)
  // bytes sent per sample per rank, hidden 128, batch 128, measured before --overlap split the
  // activations' all-gather in two (one frame header more per peer: +0.4 and +1.3 bytes per sample).
  const CostModel m(xmc_calibration(), {});
  CHECK(m.model_parallel_wire(1, 2, 128).bytes / 128 == Approx(525.3).epsilon(0.002));
  CHECK(m.model_parallel_wire(1, 4, 128).bytes / 128 == Approx(807.9).epsilon(0.002));
  CHECK(m.model_parallel_wire(1, 1, 128).bytes == 0);
}

TEST_CASE("a narrow model-parallel wire at --mp-keep 1 is priced at its value bytes, without positions or overlap",
          "[plan]") {
  // Measured (2 ranks, XMC 20k, hidden 128, batch 128, --mp-keep 1): 525.3 bytes sent per sample per
  // rank with --mp-wire-dtype f32, 269.3 with bf16, 145.3 with i8 (a byte a value and a bf16 scale
  // per sample); the model priced all three at 525.3 before.
  Calibration c = xmc_calibration();
  c.optimizer_seconds_per_step = 0.030;
  const Cluster link{.nodes = 2, .cores = 1, .link = {.bytes_per_s = 12.5e6, .latency_s = 0}};
  for (const auto& [value_bytes, per_sample] : {std::pair{4.0, 525.3}, {2.0, 269.3}, {1.0, 145.3}}) {
    c.mp_value_bytes = value_bytes;
    c.mp_keep = 1.0;
    const CostModel m(c, {});
    INFO(value_bytes << " bytes a value");
    CHECK(m.model_parallel_wire(1, 2, 128).bytes / 128 == Approx(per_sample).epsilon(0.002));
    CHECK(m.exact_model_exchange() == (value_bytes == 4.0));
    // DCT-MP's exchange runs whole: neither half of --overlap.
    CHECK((m.predict(Scheme::mp_sparse, 1, 2, link, 128).overlapped_seconds_per_step > 0) == (value_bytes == 4.0));
  }
  // DCT-MP (i8, the default below --mp-keep 1), measured alike: 38.3 bytes a sample at --mp-keep
  // 0.1 (7 of a 64-wide slice: 7 one-byte position gaps, 7 values and a 2-byte scale forward; the
  // values and the scale backward), 77.3 at 0.3 (20 kept). Priced before at 47.3 and 99.3 (a
  // 2-byte position and a count per sample).
  c.mp_value_bytes = 1.0;
  for (const auto& [keep, per_sample] : {std::pair{0.1, 38.3}, {0.3, 77.3}}) {
    c.mp_keep = keep;
    INFO("--mp-keep " << keep);
    CHECK(CostModel(c, {}).model_parallel_wire(1, 2, 128).bytes / 128 == Approx(per_sample).epsilon(0.002));
  }
}

TEST_CASE("compute shrinks with the slice and the replicas' share of the batch, not with what every rank does",
          "[plan]") {
  const CostModel m(xmc_calibration(), {});
  const double one = m.compute_seconds(Scheme::mp_sparse, 1, 1, 1, 128);
  CHECK(one == Approx(128 * 330e-6));
  CHECK(m.compute_seconds(Scheme::mp_sparse, 1, 2, 1, 128) == Approx(128 * (30e-6 + 150e-6)));
  CHECK(m.compute_seconds(Scheme::mp_sparse, 2, 1, 1, 128) == Approx(one / 2));
  // Half a core (two ranks a core): twice the time.
  CHECK(m.compute_seconds(Scheme::mp_sparse, 1, 1, 0.5, 128) == Approx(2 * one));
}

TEST_CASE("Amdahl's serial fraction is recovered from two thread counts", "[plan]") {
  const double f = 0.2, s1 = 10.0;
  const auto at = [&](int t) { return s1 * (f + (1 - f) / t); };
  const ThreadScaling s = ThreadScaling::fit(1, at(1), 4, at(4));
  CHECK(s.serial_fraction == Approx(f));
  CHECK(s.speed(16) == Approx(1 / (f + (1 - f) / 16)));
  CHECK(ThreadScaling{}.speed(8) == Approx(8));
  CHECK(ThreadScaling::fit(1, 10, 2, 5).serial_fraction == Approx(0).margin(1e-12));
  CHECK_THROWS(ThreadScaling::fit(2, 1, 2, 1));
}

TEST_CASE("touched rows grow with the points as independent draws", "[plan]") {
  CHECK(touched_rows_at(1000, 100, 128, 128) == Approx(100));
  CHECK(touched_rows_at(1000, 100, 128, 256) == Approx(1000 * (1 - 0.9 * 0.9)));
  CHECK(touched_rows_at(1000, 1000, 128, 64) == Approx(1000));
  CHECK(touched_rows_at(1000, 0, 128, 64) == 0);
}

TEST_CASE("the dense baseline all-reduces every parameter; DCT-DP sends a fraction of the touched rows", "[plan]") {
  CostModel m(xmc_calibration(), {});
  m.set_dense({.batch = 128, .threads = 1, .seconds_per_sample = 3e-3, .parameter_floats = {12800000, 12800000}});
  const ModelOptions o;
  CHECK(m.replica_wire(Scheme::dp_dense, 2, 1, 128).bytes ==
        Approx(2 * all_reduce_cost(12800000 * 4.0, 2, o).bytes));
  const double exact = m.replica_wire(Scheme::mp_sparse, 2, 1, 128).bytes;
  const double dct = m.replica_wire(Scheme::dct_dp, 2, 1, 128).bytes;
  CHECK(dct < exact / 10);
  CHECK(dct > 0);
  // On a slow link the dense baseline is the slowest scheme, and on 1 node no scheme talks.
  const Cluster slow{.nodes = 4, .cores = 2, .link = {.bytes_per_s = 12.5e6, .latency_s = 1e-4}};
  double best_sparse = 0, dense = 0;
  for (const Prediction& p : m.all_grids(slow)) {
    if (p.scheme == Scheme::dp_dense) dense = p.samples_per_s;
    else best_sparse = std::max(best_sparse, p.samples_per_s);
    CHECK(p.data * p.model == 4);
  }
  CHECK(dense > 0);
  CHECK(best_sparse > 10 * dense);
  const Prediction single = m.predict(Scheme::mp_sparse, 1, 1, {.nodes = 1, .cores = 1, .link = {}}, 128);
  CHECK(single.wire_seconds_per_step == 0);
  CHECK(single.samples_per_s == Approx(1 / 330e-6));
  CHECK_THROWS(m.predict(Scheme::mp_sparse, 2, 1, slow));  // 2 x 1 does not cover 4 nodes
  CHECK_THROWS(m.predict(Scheme::dp_dense, 2, 2, slow));
}

TEST_CASE("per-step work stays whole under replicas; probed CPU costs are charged where they arise", "[plan]") {
  Calibration c = xmc_calibration();
  c.rebuild_seconds_per_step = 0.010;
  c.optimizer_seconds_per_step = 0.020;
  const CostModel plain(c, {});
  // One replica: rebuild and optimizer per step, sliced with the model.
  CHECK(plain.compute_seconds(Scheme::mp_sparse, 1, 2, 1, 128) == Approx(128 * (30e-6 + 150e-6) + 0.005 + 0.010));
  // Two replicas: half the points each, but the tables and the union of the rows are every replica's.
  CHECK(plain.compute_seconds(Scheme::mp_sparse, 2, 1, 1, 128) == Approx(64 * 330e-6 + 0.010 + 0.020));
  const CpuCosts cpu{.compress_seconds_per_entry = 1e-8, .merge_seconds_per_entry = 2e-8,
                     .collective_seconds_per_byte = 1e-9};
  const CostModel probed(c, {}, {}, cpu);
  const double own = probed.touched_entries(1, 64);
  CHECK(own > 0);
  CHECK(probed.compute_seconds(Scheme::dct_dp, 2, 1, 1, 128) ==
        Approx(plain.compute_seconds(Scheme::dct_dp, 2, 1, 1, 128) + own * 1e-8 + own * c.dp_keep * 2e-8));
  // The collectives' CPU per byte sent joins the step's compute.
  const Cluster two{.nodes = 2, .cores = 1, .link = {}};
  const Prediction p = probed.predict(Scheme::mp_sparse, 1, 2, two, 128);
  CHECK(p.compute_seconds_per_step ==
        Approx(probed.compute_seconds(Scheme::mp_sparse, 1, 2, 1, 128) + p.bytes_per_step_per_rank * 1e-9));
}

TEST_CASE("cores_for_speed inverts speed", "[plan]") {
  const ThreadScaling s{.serial_fraction = 0.25};
  for (const double cores : {0.3, 1.0, 1.5, 2.0, 8.0}) CHECK(s.cores_for_speed(s.speed(cores)) == Approx(cores));
  CHECK(s.cores_for_speed(5.0) > 1e8);  // beyond 1 / serial fraction: no core count reaches it
}

TEST_CASE("ranks sharing a host: a core each to themselves, and the fitted scaling once they take turns", "[plan]") {
  const ThreadScaling s{.serial_fraction = 0.4};
  // Up to a rank a core: whole cores (no serial fraction between processes), at most their threads.
  CHECK(s.rank_cores(2, 2, 1) == 1.0);
  CHECK(s.rank_cores(2, 1, 1) == 1.0);
  CHECK(s.rank_cores(2, 1, 2) == 2.0);
  CHECK(s.rank_cores(16, 4, 2) == 2.0);
  CHECK(s.rank_cores(16, 4, 8) == 4.0);
  // More ranks than cores: 1/R of the host's fitted speed each, below a fair share of its cores.
  const double four_on_two = s.rank_cores(2, 4, 1);
  CHECK(s.speed(four_on_two) == Approx(s.speed(2) / 4));
  CHECK(four_on_two < 0.5);
  // Without a serial fraction, taking turns is a fair share.
  CHECK(ThreadScaling{}.rank_cores(2, 4, 1) == Approx(0.5));
  CHECK_THROWS_WITH(s.rank_cores(2, 0, 1), Catch::Matchers::Contains("positive"));
}

TEST_CASE("--overlap hides the input boundary's reduce-scatter behind the optimizer above it, never more", "[plan]") {
  Calibration c = xmc_calibration();
  c.optimizer_seconds_per_step = 0.030;
  const CostModel on(c, {}), off(c, {}, {.overlap = false});
  const Cluster slow{.nodes = 2, .cores = 1, .link = {.bytes_per_s = 12.5e6, .latency_s = 0}};
  const Prediction a = on.predict(Scheme::mp_sparse, 1, 2, slow, 128), b = off.predict(Scheme::mp_sparse, 1, 2, slow, 128);
  CHECK(b.overlapped_seconds_per_step == 0);
  CHECK(a.overlapped_seconds_per_step > 0);
  // The reduce-scatter of 128 x 128 floats over 2 ranks: 32 KB + a header at 12.5 MB/s, one round.
  const double rs = (128 * 128 * 4 / 2 + 56) / 12.5e6 + ModelOptions{}.message_overhead_s;
  CHECK(a.overlapped_seconds_per_step == Approx(std::min(rs, on.overlapped_seconds(Scheme::mp_sparse, 1, 2, 1, 128,
                                                                                    slow.link))));
  CHECK(a.overlapped_seconds_per_step <= rs + 1e-12);
  CHECK(a.samples_per_s > b.samples_per_s);
  // Replicas: the backward half does not overlap (without an input layer time, nothing does);
  // DCT-MP: nothing overlaps.
  const Cluster four{.nodes = 4, .cores = 1, .link = slow.link};
  CHECK(on.predict(Scheme::mp_sparse, 2, 2, four, 128).overlapped_seconds_per_step == 0);
  c.mp_keep = 0.1;
  CHECK(CostModel(c, {}).predict(Scheme::mp_sparse, 1, 2, slow, 128).overlapped_seconds_per_step == 0);
}

TEST_CASE("--overlap hides the first half's all-gather behind the input layer's second half, never more", "[plan]") {
  Calibration c = xmc_calibration();
  c.optimizer_seconds_per_step = 0;  // only the forward half
  const Cluster slow{.nodes = 2, .cores = 1, .link = {.bytes_per_s = 12.5e6, .latency_s = 0}};
  // The first half's all-gather of 64 x 128 floats over 2 ranks: 16 KB + a header, one round.
  const double half = (64 * 128 * 4 / 2 + 56) / 12.5e6 + ModelOptions{}.message_overhead_s;
  // 40,000 multiply-adds a point: 64 points on a slice of half the layer do 1.28M (auto splits).
  c.input_multiply_adds_per_sample = 40000;
  for (const double per_sample : {1e-6, 1e-3}) {  // the input layer shorter, then longer than the wire
    c.input_forward_seconds_per_sample = per_sample;
    const CostModel on(c, {}), off(c, {}, {.overlap = false});
    CHECK(on.splits_forward(1, 2, 128));
    const Prediction a = on.predict(Scheme::mp_sparse, 1, 2, slow, 128), b = off.predict(Scheme::mp_sparse, 1, 2, slow, 128);
    CHECK(a.overlapped_seconds_per_step == Approx(std::min(half, 64 * per_sample / 2)));
    CHECK(b.overlapped_seconds_per_step == 0);
    // Two half all-gathers instead of one: the same payload and one frame header more, one round more.
    CHECK(a.bytes_per_step_per_rank == Approx(b.bytes_per_step_per_rank + ModelOptions{}.frame_header_bytes));
    CHECK(a.wire_seconds_per_step == Approx(b.wire_seconds_per_step + ModelOptions{}.message_overhead_s +
                                            ModelOptions{}.frame_header_bytes / 12.5e6));
  }
  // The trainer's rule: 2 replicas halve each one's batch, and 32 points do 0.64M on a slice (whole),
  // unless --overlap-forward on; off never splits.
  const Cluster four{.nodes = 4, .cores = 1, .link = slow.link};
  const CostModel automatic(c, {}), always(c, {}, {.forward_split = train::ForwardSplit::always}),
      never(c, {}, {.forward_split = train::ForwardSplit::never});
  CHECK_FALSE(automatic.splits_forward(2, 2, 128));
  CHECK(automatic.predict(Scheme::mp_sparse, 2, 2, four, 128).overlapped_seconds_per_step == 0);
  CHECK(always.splits_forward(2, 2, 128));
  const double quarter = (32 * 128 * 4 / 2 + 56) / 12.5e6 + ModelOptions{}.message_overhead_s;
  CHECK(always.predict(Scheme::mp_sparse, 2, 2, four, 128).overlapped_seconds_per_step ==
        Approx(std::min(quarter, 32 * 1e-3 / 2)));
  CHECK_FALSE(never.splits_forward(1, 2, 128));
  CHECK_FALSE(automatic.splits_forward(1, 1, 128));  // one model rank: nothing is gathered
}


namespace {
// A 4-layer MLP calibration (input, two dense layers, output) with per-layer times for pipelines.
Calibration mlp_calibration() {
  Calibration c = xmc_calibration();
  c.boundaries = {128, 128, 128};
  c.layer_seconds_per_sample = {100e-6, 100e-6, 100e-6, 100e-6};
  c.layer_forward_seconds_per_sample = {0.0, 0.0, 0.0, 0.0};  // no recomputation cost: the formula alone
  c.parameters = {{"sparse_dense.weight", 100000, 128, 1, 0, true, 0}, {"softmax.weight", 1000, 128, 0, 0, false, 3}};
  return c;
}
}  // namespace

TEST_CASE("a pipeline plan's step is the 1F1B schedule's fill and bottleneck", "[plan]") {
  const CostModel model(mlp_calibration(), {});
  // A link too fast to matter: 4 stages of one layer, 8 micro-batches of 16 points.
  const Cluster cluster{.nodes = 4, .cores = 1, .link = {.bytes_per_s = 1e15, .latency_s = 0}};
  ModelOptions no_overhead;
  no_overhead.message_overhead_s = 0;
  const CostModel quiet(mlp_calibration(), {}, no_overhead);
  const Prediction p = quiet.predict_pipeline(1, 1, 4, 8, {}, cluster, 128);
  REQUIRE(p.stage_split == std::vector<size_t>{1, 1, 1, 1});
  const double c = 16 * 100e-6;  // one stage, one micro-batch
  REQUIRE(p.samples_per_s == Approx(128.0 / ((8 - 1) * c + 4 * c)).epsilon(1e-3));
  // The bubble: (S - 1) / (N + S - 1) of the stages' time.
  REQUIRE(p.bubble_fraction == Approx(3.0 / 11.0).epsilon(1e-3));
  // More micro-batches, a smaller bubble and a faster step.
  const Prediction more = quiet.predict_pipeline(1, 1, 4, 32, {}, cluster, 128);
  REQUIRE(more.bubble_fraction < p.bubble_fraction);
  REQUIRE(more.samples_per_s > p.samples_per_s);
  // A given split is taken as given; an unbalanced one is slower.
  const Prediction lopsided = quiet.predict_pipeline(1, 1, 2, 8, {3, 1}, {.nodes = 2, .cores = 1, .link = cluster.link}, 128);
  const Prediction balanced = quiet.predict_pipeline(1, 1, 2, 8, {}, {.nodes = 2, .cores = 1, .link = cluster.link}, 128);
  REQUIRE(balanced.stage_split == std::vector<size_t>{2, 2});
  REQUIRE(lopsided.samples_per_s < balanced.samples_per_s);
  // Every grid search offers the pipelines that divide the nodes, named pipeline.
  bool found = false;
  for (const Prediction& q : model.all_grids(cluster, 128)) found = found || (q.scheme == Scheme::pipeline && q.stages == 4);
  REQUIRE(found);
  REQUIRE(to_string(Scheme::pipeline) == "pipeline");
}

TEST_CASE("a pipeline's boundary bytes: DCT-MP's top-k sends a fraction of the activations", "[plan]") {
  Calibration cal = mlp_calibration();
  const Cluster slow{.nodes = 2, .cores = 1, .link = {.bytes_per_s = 12.5e6, .latency_s = 50e-6}};
  const Prediction whole = CostModel(cal, {}).predict_pipeline(1, 1, 2, 4, {}, slow, 128);
  cal.mp_keep = 0.1;
  cal.mp_value_bytes = 1.0;
  const Prediction kept = CostModel(cal, {}).predict_pipeline(1, 1, 2, 4, {}, slow, 128);
  // Whole: 32 points x 128 floats each way per micro-batch, 4 micro-batches, one direction a side.
  REQUIRE(whole.bytes_per_step_per_rank == Approx(4 * (2 * (32 * 128 * 4.0 + 68)) / 2).epsilon(1e-9));
  REQUIRE(kept.bytes_per_step_per_rank < whole.bytes_per_step_per_rank / 8);
  REQUIRE(kept.samples_per_s > whole.samples_per_s);
}

TEST_CASE("a pipeline's micro-batches are priced between the calibrations' two batch sizes", "[plan]") {
  Calibration cal = mlp_calibration();
  cal.small_batch = 32;
  cal.small_layer_seconds_per_sample = {200e-6, 200e-6, 200e-6, 200e-6};
  cal.small_layer_forward_seconds_per_sample = {0.0, 0.0, 0.0, 0.0};
  const CostModel model(cal, {});
  REQUIRE(model.layer_seconds_at(128).first[1] == Approx(100e-6));
  REQUIRE(model.layer_seconds_at(32).first[1] == Approx(200e-6));
  // a + b / rows through both: at 64 rows, 100 + 100 * (1/64 - 1/128) / (1/32 - 1/128) = 133.3 us.
  REQUIRE(model.layer_seconds_at(64).first[1] == Approx(133.333e-6).epsilon(1e-4));
  // Without a small-batch calibration every micro-batch costs the calibration's per sample.
  REQUIRE(CostModel(mlp_calibration(), {}).layer_seconds_at(16).first[1] == Approx(100e-6));
}

TEST_CASE("a pipeline of sliced stages: each rank computes 1/M, the stage's boundaries cross its group", "[plan]") {
  ModelOptions no_overhead;
  no_overhead.message_overhead_s = 0;
  const CostModel quiet(mlp_calibration(), {}, no_overhead);
  const Cluster fast{.nodes = 4, .cores = 1, .link = {.bytes_per_s = 1e15, .latency_s = 0}};
  const Prediction sliced = quiet.predict_pipeline(1, 2, 2, 4, {}, fast, 128);
  REQUIRE(sliced.model == 2);
  REQUIRE(sliced.stage_split == std::vector<size_t>{2, 2});
  const double c = 32 * 200e-6 / 2;  // a stage of two 100 us layers, one micro-batch of 32, half a slice
  REQUIRE(sliced.samples_per_s == Approx(128.0 / ((4 - 1) * c + 2 * c)).epsilon(1e-3));
  // Over a slow link the slices' all-gathers and reduce-scatters cost their bytes.
  const Cluster slow{.nodes = 4, .cores = 1, .link = {.bytes_per_s = 12.5e6, .latency_s = 50e-6}};
  const Prediction over_slow = quiet.predict_pipeline(1, 2, 2, 4, {}, slow, 128);
  REQUIRE(over_slow.samples_per_s < sliced.samples_per_s);
  REQUIRE(over_slow.bytes_per_step_per_rank > quiet.predict_pipeline(1, 1, 2, 4, {}, {.nodes = 2, .cores = 1,
                                                                                       .link = slow.link}, 128)
                                                  .bytes_per_step_per_rank);
  // The grid search offers them: D x M x S with M > 1.
  bool found = false;
  for (const Prediction& q : quiet.all_grids(fast, 128)) found = found || (q.scheme == Scheme::pipeline && q.model == 2);
  REQUIRE(found);
}
