// DCT-MP at sliced-layer boundaries, on a multi-layer network (SparseDense -> Dense -> Dense ->
// softmax) sliced over 2-4 ranks (threads, LocalCommunicator):
//  - with everything kept it computes what 1 rank computes (sliced Dense layers included);
//  - keeping 100% through the compressed code path reproduces the uncompressed exchange exactly;
//  - with top-k masks, finite differences through the masked network match the gradients;
//  - bf16 and scaled int8 on the wire, payload accounting, and ranks that disagree on --mp-keep.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <functional>
#include <mutex>

#include "comm/dct/boundary_exchange.h"
#include "comm/local_communicator.h"
#include "core/data/batch_loader.h"
#include "core/data/synth_xmc.h"
#include "train/trainer.h"
#include "core/backend.h"
#include "layers/mlp_network.h"
#include "tests/distributed/whole_weights.h"

using namespace frugal;

namespace {

constexpr size_t kFeatures = 300, kLabels = 40, kBatch = 16, kSteps = 12;
const std::vector<size_t> kHidden{24, 20};

const data::SynthXmc& problem() {
  static const data::SynthXmc d = data::generate_synth_xmc(
      {.features = kFeatures, .labels = kLabels, .train = kSteps * kBatch, .test = 100, .nnz = 12,
       .labels_per_point = 2, .seed = 4});
  return d;
}

void build(Model& m, Placement placement) {
  layers::build_mlp_network(m, {.features = kFeatures, .labels = kLabels, .hidden = kHidden,
                                .sampler = layers::Sampler::exact, .seed = 9, .placement = placement});
}

struct Run {
  std::vector<double> losses;
  std::map<std::string, Tensor> weights;  // every parameter, gathered whole
  double p1 = 0;
  train::FitResult fit;
};

Run run_training(int ranks, comm::MpCompression mp) {
  Run run;
  std::mutex mu;
  comm::run_local(ranks, [&](comm::Communicator& c) {
    Model m;
    build(m, Placement::sliced(c));
    train::Trainer t(m, {.parallel = {.model = &c}, .mp = mp});
    const train::FitResult fit = t.fit_epoch(problem().train, {.batch = kBatch, .seed = 2, .progress = false});
    std::vector<double> losses{fit.loss};
    const double p1 = t.evaluate(problem().test, {}).p(1);
    std::lock_guard<std::mutex> lock(mu);
    testing::add_slices(m, run.weights);
    if (c.rank() == 0) {
      run.losses = losses;
      run.p1 = p1;
      run.fit = fit;
    }
  });
  return run;
}

void require_close(const Run& a, const Run& b, double rel) {
  REQUIRE(a.losses.front() == Approx(b.losses.front()).epsilon(rel));
  REQUIRE(a.weights.size() == b.weights.size());
  for (const auto& [name, w] : a.weights) {
    INFO(name << ": relative difference " << testing::relative_difference(w, b.weights.at(name)));
    REQUIRE(testing::relative_difference(w, b.weights.at(name)) <= rel);
  }
}

// What each of `ranks` ranks threw while running `body` (a rank that threw nothing adds nothing).
std::vector<std::string> errors_of(int ranks, const std::function<void(comm::Communicator&)>& body) {
  std::mutex mu;
  std::vector<std::string> errors;
  comm::run_local(ranks, [&](comm::Communicator& c) {
    try {
      body(c);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu);
      errors.push_back(e.what());
    }
  });
  return errors;
}

}  // namespace

TEST_CASE("DCT-MP: a sliced MLP (sliced Dense layers) on 2, 3, 4 ranks equals 1 rank when everything is kept") {
  host_backend().set_num_threads(1);
  const Run reference = run_training(1, {});
  for (const int ranks : {2, 3, 4}) {
    INFO(ranks << " ranks");
    const Run mp = run_training(ranks, {});
    require_close(mp, reference, 1e-5);
    REQUIRE(mp.fit.mp_compression() == 1.0);
  }
}

TEST_CASE("DCT-MP: keep = 100% through the top-k code path reproduces the uncompressed exchange exactly") {
  host_backend().set_num_threads(1);
  const double whole = static_cast<double>(*std::max_element(kHidden.begin(), kHidden.end()));  // a count >= every slice
  const Run plain = run_training(2, {.keep = 1.0}), topk = run_training(2, {.keep = whole});
  REQUIRE(topk.losses == plain.losses);
  for (const auto& [name, w] : plain.weights) {
    INFO(name);
    const Tensor& t = topk.weights.at(name);
    REQUIRE(std::equal(w.data(), w.data() + w.size(), t.data()));
  }
  REQUIRE(topk.p1 == plain.p1);
  // 3 ranks: the reduce-scatter's ring may add in another order than our rank-order sum.
  require_close(run_training(3, {.keep = whole}), run_training(3, {.keep = 1.0}), 1e-5);
}

namespace {
// Finite differences of the (summed) loss through the masked network on `ranks` ranks. Every rank
// takes part in every loss evaluation; rank `owner` perturbs one of its own weights at a time.
void check_masked_gradients(int ranks, comm::MpCompression mp) {
  Rng rng(17);
  SparseBatch batch;
  data::BatchLoader loader(problem().train, {.batch = 6, .seed = 3});
  REQUIRE(loader.next(batch));
  std::mutex mu;
  size_t checked = 0;
  comm::run_local(ranks, [&](comm::Communicator& c) {
    Model m;
    build(m, Placement::sliced(c));
    train::Trainer t(m, {.parallel = {.model = &c}, .mp = mp});
    // A few Adam steps first, so that activations are spread out rather than at initialization.
    data::BatchLoader warm(problem().train, {.batch = kBatch, .seed = 5});
    SparseBatch wb;
    for (int s = 0; s < 3 && warm.next(wb); ++s) t.train_step(wb);
    t.compute_gradients(batch, 1);  // gradients of the summed loss
    std::vector<RowGrad> grads;
    for (Parameter* p : m.parameters()) grads.push_back(p->grad);
    const float eps = 1e-3f;
    for (int owner = 0; owner < ranks; ++owner)
      for (size_t pi = 0; pi < grads.size(); ++pi)
        for (size_t probe = 0; probe < 4; ++probe) {
          Parameter* p = m.parameters()[pi];
          const RowGrad& g = grads[pi];
          const bool mine = c.rank() == owner;
          // The same choice on every rank is not needed: only the owner perturbs.
          const size_t j = (probe * 7 + 3) % std::max<size_t>(g.rows.size(), 1);
          const size_t col = (probe * 5 + 1) % p->value.cols();
          float* x = mine && !g.rows.empty() ? &p->value.at(g.rows[j], col) : nullptr;
          const float saved = x != nullptr ? *x : 0.0f;
          if (x != nullptr) *x = saved + eps;
          const double up = t.loss(batch);
          if (x != nullptr) *x = saved - eps;
          const double down = t.loss(batch);
          if (x == nullptr) continue;
          *x = saved;
          const double numeric = (up - down) / (2.0 * eps), analytic = g.values.at(j, col);
          std::lock_guard<std::mutex> lock(mu);
          INFO("rank " << owner << " " << p->name << " row " << g.rows[j] << " col " << col << ": analytic "
                       << analytic << " numeric " << numeric);
          REQUIRE(std::abs(analytic - numeric) <= 2e-2 * std::max(1.0, std::abs(numeric)) + 2e-3);
          ++checked;
        }
  });
  REQUIRE(checked > 0);
}
}  // namespace

TEST_CASE("DCT-MP: finite differences through the top-k masked network match its gradients") {
  host_backend().set_num_threads(1);
  // The exact gradient of the masked network: without the (default) local straight-through estimate.
  SECTION("2 ranks, keep 25% of each slice") { check_masked_gradients(2, {.keep = 0.25, .straight_through = comm::StraightThrough::off}); }
  SECTION("3 ranks, keep 3 per slice") { check_masked_gradients(3, {.keep = 3, .straight_through = comm::StraightThrough::off}); }
  SECTION("2 ranks, adaptive: 60% of each sample's mass, at most half the slice") {
    check_masked_gradients(2, {.keep = 0.5, .mass = 0.6, .straight_through = comm::StraightThrough::off});
  }
}

TEST_CASE("DCT-MP: top-k and bf16 cut the payload; the masked network still learns; runs reproduce") {
  host_backend().set_num_threads(1);
  const Run full = run_training(2, {});
  const Run topk = run_training(2, {.keep = 0.25, .wire = comm::ValueType::bf16});
  // Forward: 2-byte position + 2-byte value for a quarter of the activations instead of 4 bytes
  // for all of them (~4x); backward: 2 bytes for a quarter (~8x).
  INFO("mp compression " << topk.fit.mp_compression());
  REQUIRE(topk.fit.mp_compression() > 4.0);
  REQUIRE(topk.fit.mp_bytes_sent < full.fit.mp_bytes_sent);
  REQUIRE(std::isfinite(topk.losses.front()));
  REQUIRE(topk.p1 > 0.0);
  const Run again = run_training(2, {.keep = 0.25, .wire = comm::ValueType::bf16});
  REQUIRE(again.losses == topk.losses);
}

TEST_CASE("DCT-MP: ranks that disagree on --mp-keep fail with a clear error, not garbage") {
  host_backend().set_num_threads(1);
  const auto errors = errors_of(2, [](comm::Communicator& c) {
    Model m;
    build(m, Placement::sliced(c));
    train::Trainer t(m, {.parallel = {.model = &c}, .mp = {.keep = c.rank() == 0 ? 0.5 : 0.25}});
    SparseBatch batch;
    data::BatchLoader loader(problem().train, {.batch = kBatch});
    REQUIRE(loader.next(batch));
    t.train_step(batch);
  });
  REQUIRE(errors.size() == 2);
  for (const auto& e : errors) REQUIRE_THAT(e, Catch::Contains("MpCompression::keep"));
}

TEST_CASE("DCT-MP: the warm-up keeps everything at first and falls geometrically to --mp-keep") {
  const comm::MpCompression fraction{.keep = 0.01, .warmup_steps = 100}, count{.keep = 10, .warmup_steps = 100};
  REQUIRE(fraction.kept_of(1000, 0) == 1000);
  REQUIRE(fraction.kept_of(1000, 50) == 100);  // sqrt(0.01) of the slice halfway
  REQUIRE(fraction.kept_of(1000, 100) == 10);
  REQUIRE(fraction.kept_of(1000, 5000) == 10);
  REQUIRE(count.kept_of(1000, 0) == 1000);
  REQUIRE(count.kept_of(1000, 50) == 100);
  REQUIRE(count.kept_of(1000, 100) == 10);
  REQUIRE(count.kept_of(4, 100) == 4);  // a count never exceeds the slice
  // During the warm-up's first step everything travels: the run starts exactly as an uncompressed one.
  host_backend().set_num_threads(1);
  const Run warm = run_training(2, {.keep = 0.25, .warmup_steps = 1000}), plain = run_training(2, {});
  REQUIRE(warm.losses == plain.losses);  // f32 and everything kept for all kSteps steps
  const Run short_warmup = run_training(2, {.keep = 0.25, .warmup_steps = 4});
  REQUIRE(short_warmup.fit.mp_compression() > 1.5);
  REQUIRE(short_warmup.fit.mp_compression() < run_training(2, {.keep = 0.25}).fit.mp_compression());
}

TEST_CASE("DCT-MP: positions travel gap-coded, one byte each, escaped when a gap reaches 255") {
  // Slices of 700 neurons: the kept positions 0, 400 and 699 of each sample take 1 byte (gap 0)
  // and 3 bytes each (escape + 2-byte position); values are 4 bytes (f32).
  host_backend().set_num_threads(1);
  constexpr size_t kSlice = 700, kRows = 3;
  const std::vector<uint32_t> kept{0, 400, 699};
  std::mutex mu;
  std::vector<Tensor> gathered;
  std::vector<uint64_t> sent;
  comm::run_local(2, [&](comm::Communicator& c) {
    comm::BoundaryExchange exchange(Placement::sliced(c), 2 * kSlice, {.keep = 3}, 7);
    Tensor local(kRows, kSlice);
    local.zero();
    for (size_t i = 0; i < kRows; ++i)
      for (const uint32_t p : kept) local.at(i, p) = static_cast<float>(1 + i + p + 1000 * c.rank());
    local.at(1, 10) = 0.5f;  // small: not among the top 3
    const Tensor out = exchange.gather(local);
    std::lock_guard<std::mutex> lock(mu);
    if (c.rank() == 0) gathered.push_back(out);
    sent.push_back(exchange.payload_sent());
  });
  REQUIRE(sent.size() == 2);
  for (const uint64_t s : sent) REQUIRE(s == kRows * (1 + 3 + 3 + 3 * 4));
  const Tensor& out = gathered.at(0);
  for (size_t i = 0; i < kRows; ++i)
    for (size_t j = 0; j < 2 * kSlice; ++j) {
      const size_t r = j / kSlice, p = j % kSlice;
      const bool is_kept = std::find(kept.begin(), kept.end(), p) != kept.end();
      INFO("row " << i << " column " << j);
      REQUIRE(out.at(i, j) == (is_kept ? static_cast<float>(1 + i + p + 1000 * r) : 0.0f));
    }
}

TEST_CASE("the exact boundary gathers in row parts with gather()'s bits; a compressed one gathers whole") {
  // Uneven slices over 3 ranks; parts of 2, 0 and 5 rows (one empty) must give gather()'s result
  // and payload, twice in a row, and parts out of order fail naming the rows.
  host_backend().set_num_threads(1);
  constexpr size_t kWidth = 11, kRows = 7;
  struct Outcome {
    bool splits = false, compressed_splits = true, same = false, compressed_same = false;
    uint64_t sent = 0, sent_whole = 0, uncompressed = 0, uncompressed_whole = 0;
    std::string skipped, short_finish, in_flight;
  };
  std::mutex mu;
  std::vector<Outcome> outcomes;
  const auto equal = [](const Tensor& a, const Tensor& b) {
    return a.rows() == b.rows() && a.cols() == b.cols() && std::equal(a.data(), a.data() + a.size(), b.data());
  };
  comm::run_local(3, [&](comm::Communicator& c) {
    Outcome o;
    const Placement placement = Placement::sliced(c, {1, 2, 3});
    const auto bounds = placement.bounds(kWidth);
    const size_t w = bounds[c.rank() + 1] - bounds[c.rank()];
    Tensor local(kRows, w);
    for (size_t i = 0; i < local.size(); ++i) local.data()[i] = static_cast<float>(i) * 0.5f + 100.0f * c.rank();
    comm::BoundaryExchange whole(placement, kWidth, {}, 7), parts(placement, kWidth, {}, 8);
    const Tensor expected = whole.gather(local);
    o.splits = parts.gathers_in_parts();
    Tensor got;
    for (int round = 0; round < 2; ++round) {  // the second batch starts again at row 0
      parts.gather_rows(local, 0, 2);
      parts.gather_rows(local, 2, 0);
      parts.gather_rows(local, 2, 5);
      got = parts.finish_gather(local);
    }
    o.same = equal(got, expected);
    o.sent = parts.payload_sent();
    o.sent_whole = whole.payload_sent();
    o.uncompressed = parts.payload_uncompressed();
    o.uncompressed_whole = whole.payload_uncompressed();
    parts.gather_rows(local, 0, 2);
    try {
      parts.gather_rows(local, 3, 4);  // skips row 2
    } catch (const Error& e) {
      o.skipped = e.what();
    }
    try {
      parts.finish_gather(local);  // only rows 0..2 went
    } catch (const Error& e) {
      o.short_finish = e.what();
    }
    // A reduce-scatter while a part travels would reuse its buffer: refused, until it is abandoned.
    parts.gather_rows(local, 0, 3);
    Tensor grad(kRows, kWidth);
    grad.zero();
    try {
      parts.reduce_scatter(grad);
    } catch (const Error& e) {
      o.in_flight = e.what();
    }
    parts.abandon_gather();
    parts.reduce_scatter(grad);
    comm::BoundaryExchange top_k(placement, kWidth, {.keep = 0.5}, 9), top_k_whole(placement, kWidth, {.keep = 0.5}, 10);
    o.compressed_splits = top_k.gathers_in_parts();
    const Tensor masked = top_k_whole.gather(local);
    o.compressed_same = equal(top_k.finish_gather(local), masked);
    std::lock_guard<std::mutex> lock(mu);
    outcomes.push_back(o);
  });
  REQUIRE(outcomes.size() == 3);
  for (const Outcome& o : outcomes) {
    REQUIRE(o.splits);
    REQUIRE(o.same);
    REQUIRE(o.sent == 2 * o.sent_whole);
    REQUIRE(o.uncompressed == 2 * o.uncompressed_whole);
    REQUIRE_THAT(o.skipped, Catch::Contains("rows 3..7 of a batch of 7 do not follow the part before"));
    REQUIRE_THAT(o.short_finish, Catch::Contains("the parts gathered cover 2 of 7 rows"));
    REQUIRE_THAT(o.in_flight, Catch::Contains("a reduce-scatter while a gather in parts is unfinished"));
    REQUIRE_FALSE(o.compressed_splits);
    REQUIRE(o.compressed_same);
  }
}

TEST_CASE("DCT-MP: i8 values travel as one byte each plus a bf16 scale per sample, within half a step") {
  // Same slices and kept positions as above: per sample 1 + 3 + 3 position bytes, a 2-byte scale
  // and 3 value bytes. Decoded values are within half a step (the row's largest / 254).
  host_backend().set_num_threads(1);
  constexpr size_t kSlice = 700, kRows = 3;
  const std::vector<uint32_t> kept{0, 400, 699};
  std::mutex mu;
  Tensor gathered;
  std::vector<uint64_t> sent;
  comm::run_local(2, [&](comm::Communicator& c) {
    comm::BoundaryExchange exchange(Placement::sliced(c), 2 * kSlice, {.keep = 3, .wire = comm::ValueType::i8}, 7);
    Tensor local(kRows, kSlice);
    local.zero();
    for (size_t i = 0; i < kRows; ++i)
      for (const uint32_t p : kept) local.at(i, p) = static_cast<float>(1 + i + p + 1000 * c.rank()) * 0.01f;
    const Tensor out = exchange.gather(local);
    std::lock_guard<std::mutex> lock(mu);
    if (c.rank() == 0) gathered = out;
    sent.push_back(exchange.payload_sent());
  });
  for (const uint64_t s : sent) REQUIRE(s == kRows * (1 + 3 + 3 + 2 + 3));
  for (size_t i = 0; i < kRows; ++i)
    for (size_t r = 0; r < 2; ++r) {
      const float peak = static_cast<float>(1 + i + 699 + 1000 * r) * 0.01f;
      for (const uint32_t p : kept) {
        const float exact = static_cast<float>(1 + i + p + 1000 * r) * 0.01f;
        INFO("row " << i << " rank " << r << " position " << p);
        REQUIRE(std::abs(gathered.at(i, r * kSlice + p) - exact) <= peak / 254.0f * 1.01f);
      }
    }
}

TEST_CASE("DCT-MP: i8 on the wire trains like bf16 at about 3/5 of its bytes and reproduces") {
  host_backend().set_num_threads(1);
  const Run bf16 = run_training(2, {.keep = 0.25, .wire = comm::ValueType::bf16});
  const Run i8 = run_training(2, {.keep = 0.25, .wire = comm::ValueType::i8});
  INFO("mp compression bf16 " << bf16.fit.mp_compression() << ", i8 " << i8.fit.mp_compression());
  // Per sample and slice (3 kept of 10-12): bf16 3 + 6 bytes forward and 6 backward; i8 3 + 2 + 3
  // and 2 + 3 (the scale weighs on such short rows): 15 / 13 of bf16's ratio.
  REQUIRE(i8.fit.mp_compression() > 1.1 * bf16.fit.mp_compression());
  REQUIRE(std::isfinite(i8.losses.front()));
  REQUIRE(i8.losses.front() == Approx(bf16.losses.front()).epsilon(0.02));
  for (const auto& [name, w] : bf16.weights) {
    INFO(name << ": relative difference " << testing::relative_difference(w, i8.weights.at(name)));
    REQUIRE(testing::relative_difference(w, i8.weights.at(name)) <= 0.05);
  }
  const Run again = run_training(2, {.keep = 0.25, .wire = comm::ValueType::i8});
  REQUIRE(again.losses == i8.losses);
  REQUIRE(again.p1 == i8.p1);
}

TEST_CASE("DCT-MP: a truncated i8 message fails naming the rank, not with garbage") {
  // Rank 1 believes each sample keeps 2 values, rank 0 3: each rank's decoder finds the other's
  // message of the wrong shape (positions or value bytes) and says so, naming the rank.
  host_backend().set_num_threads(1);
  const auto errors = errors_of(2, [](comm::Communicator& c) {
    comm::BoundaryExchange exchange(Placement::sliced(c), 40,
                                    {.keep = c.rank() == 0 ? 3.0 : 2.0, .wire = comm::ValueType::i8}, 7);
    Tensor local(4, 20);
    for (size_t i = 0; i < local.size(); ++i) local.data()[i] = static_cast<float>(i % 7);
    exchange.gather(local);
  });
  REQUIRE(errors.size() == 2);
  for (const auto& e : errors) REQUIRE_THAT(e, Catch::Contains("bad activation message") && Catch::Contains("rank "));
}

TEST_CASE("DCT-MP: an adaptive k keeps per sample the fewest activations covering the asked L1 mass") {
  // Slices of 20, at most 5 kept, 80% of the mass: a sample whose mass sits in one unit sends that
  // unit; a flat one hits the cap; an all-zero one sends its count alone.
  host_backend().set_num_threads(1);
  constexpr size_t kSlice = 20;
  std::mutex mu;
  Tensor gathered;
  std::vector<uint64_t> sent;
  comm::run_local(2, [&](comm::Communicator& c) {
    comm::BoundaryExchange exchange(Placement::sliced(c), 2 * kSlice, {.keep = 5, .mass = 0.8}, 7);
    Tensor local(3, kSlice);
    local.zero();
    for (size_t j = 0; j < kSlice; ++j) local.at(0, j) = 0.1f;
    local.at(0, 7 + c.rank()) = 10.0f;                                           // 10 of 11.9
    for (size_t j = 0; j < kSlice; ++j) local.at(1, j) = 1.0f + 0.01f * static_cast<float>(j);  // flat
    const Tensor out = exchange.gather(local);
    std::lock_guard<std::mutex> lock(mu);
    if (c.rank() == 0) gathered = out;
    sent.push_back(exchange.payload_sent());
  });
  // Count byte, gap bytes and f32 values: 1 + 1 + 4, 1 + 5 + 20, 1.
  for (const uint64_t s : sent) REQUIRE(s == (1 + 1 + 4) + (1 + 5 + 20) + 1);
  for (size_t r = 0; r < 2; ++r) {
    INFO("rank " << r);
    for (size_t j = 0; j < kSlice; ++j) {
      REQUIRE(gathered.at(0, r * kSlice + j) == (j == 7 + r ? 10.0f : 0.0f));
      REQUIRE(gathered.at(1, r * kSlice + j) == (j >= 15 ? 1.0f + 0.01f * static_cast<float>(j) : 0.0f));
      REQUIRE(gathered.at(2, r * kSlice + j) == 0.0f);
    }
  }
}

TEST_CASE("DCT-MP: an adaptive k sends less than its cap, learns, and reproduces") {
  host_backend().set_num_threads(1);
  const Run fixed = run_training(2, {.keep = 0.5, .wire = comm::ValueType::i8});
  const Run adaptive = run_training(2, {.keep = 0.5, .wire = comm::ValueType::i8, .mass = 0.7});
  INFO("mp compression fixed " << fixed.fit.mp_compression() << ", adaptive " << adaptive.fit.mp_compression());
  REQUIRE(adaptive.fit.mp_compression() > fixed.fit.mp_compression());
  REQUIRE(std::isfinite(adaptive.losses.front()));
  REQUIRE(adaptive.p1 > 0.0);
  const Run again = run_training(2, {.keep = 0.5, .wire = comm::ValueType::i8, .mass = 0.7});
  REQUIRE(again.losses == adaptive.losses);
  REQUIRE_THROWS_WITH((comm::MpCompression{.mass = 0.0}.validate()), Catch::Contains("MpCompression::mass"));
  REQUIRE_THROWS_WITH((comm::MpCompression{.mass = 1.5}.validate()), Catch::Contains("MpCompression::mass"));
}

TEST_CASE("DCT-MP: local straight-through adds this rank's own gradient share at the positions the mask dropped") {
  // 2 ranks, slices of 6, 2 kept per sample. Backward: kept positions get the sum over both ranks
  // (as without the option); dropped ones get this rank's own share only (nothing travels for them).
  host_backend().set_num_threads(1);
  constexpr size_t kSlice = 6, kRows = 2;
  std::mutex mu;
  std::vector<Tensor> results(2), plain_results(2);
  for (const bool ste : {false, true})
    comm::run_local(2, [&](comm::Communicator& c) {
      comm::BoundaryExchange exchange(Placement::sliced(c), 2 * kSlice,
                                      {.keep = 2, .straight_through = ste ? comm::StraightThrough::all : comm::StraightThrough::off}, 7);
      Tensor local(kRows, kSlice);
      for (size_t i = 0; i < kRows; ++i)
        for (size_t j = 0; j < kSlice; ++j) local.at(i, j) = j == 1 + i || j == 4 ? 5.0f + static_cast<float>(j) : 0.1f;
      exchange.gather(local);
      Tensor partial(kRows, 2 * kSlice);  // rank r's share: (r + 1) * (column + 1)
      for (size_t i = 0; i < kRows; ++i)
        for (size_t j = 0; j < 2 * kSlice; ++j) partial.at(i, j) = static_cast<float>((c.rank() + 1) * (j + 1));
      const Tensor out = exchange.reduce_scatter(partial);
      std::lock_guard<std::mutex> lock(mu);
      (ste ? results : plain_results)[c.rank()] = out;
    });
  for (int r = 0; r < 2; ++r)
    for (size_t i = 0; i < kRows; ++i)
      for (size_t j = 0; j < kSlice; ++j) {
        const bool kept = j == 1 + i || j == 4;
        const float column = static_cast<float>(r * kSlice + j + 1);
        INFO("rank " << r << " row " << i << " position " << j);
        REQUIRE(plain_results[r].at(i, j) == (kept ? 3.0f * column : 0.0f));
        REQUIRE(results[r].at(i, j) == (kept ? 3.0f * column : static_cast<float>(r + 1) * column));
      }
  // Everything kept: the straight-through path is the exact exchange, bit for bit.
  const double whole = static_cast<double>(*std::max_element(kHidden.begin(), kHidden.end()));
  const Run exact = run_training(2, {.keep = 1.0}), ste = run_training(2, {.keep = whole, .straight_through = comm::StraightThrough::all});
  REQUIRE(ste.losses == exact.losses);
  REQUIRE(ste.p1 == exact.p1);
}

TEST_CASE("DCT-MP: straight-through at the input boundary only, at all of them, or for the first steps only") {
  // The MLP has three boundaries (input layer and two hidden layers): `input` differs from both
  // `off` and `all`; a window of 0 steps means the whole run, a window past the run's steps is the
  // same, and a window that ends inside the run differs from both ends.
  host_backend().set_num_threads(1);
  using comm::StraightThrough;
  const Run off = run_training(2, {.keep = 0.25, .straight_through = StraightThrough::off});
  const Run input = run_training(2, {.keep = 0.25, .straight_through = StraightThrough::input});
  const Run all = run_training(2, {.keep = 0.25, .straight_through = StraightThrough::all});
  REQUIRE(input.losses != off.losses);
  REQUIRE(input.losses != all.losses);
  const Run long_window = run_training(2, {.keep = 0.25, .straight_through = StraightThrough::all,
                                    .straight_through_steps = 1000});
  REQUIRE(long_window.losses == all.losses);
  const Run short_window = run_training(2, {.keep = 0.25, .straight_through = StraightThrough::all,
                                     .straight_through_steps = kSteps / 2});
  REQUIRE(short_window.losses != all.losses);
  REQUIRE(short_window.losses != off.losses);
  const comm::MpCompression window{.straight_through = StraightThrough::input, .straight_through_steps = 5};
  REQUIRE(window.straight_through_at(4));
  REQUIRE_FALSE(window.straight_through_at(5));
  REQUIRE_FALSE((comm::MpCompression{.straight_through = StraightThrough::off}.straight_through_at(0)));
  REQUIRE(std::string(comm::to_string(StraightThrough::input)) == "input");
}

TEST_CASE("DCT-MP error feedback: what a backward message left out is added at the same row and position next step") {
  // 2 ranks, slices of 6, 2 kept per sample, f32 values. Step 1 keeps positions {1 + row, 4}, step 2
  // {0, 4}: at position 0 the peer's share of step 1 (dropped then) arrives with its share of step 2;
  // at 4 (sent both times) nothing was held back.
  host_backend().set_num_threads(1);
  constexpr size_t kSlice = 6, kRows = 2;
  std::mutex mu;
  std::vector<Tensor> second(2);
  comm::run_local(2, [&](comm::Communicator& c) {
    comm::BoundaryExchange exchange(Placement::sliced(c), 2 * kSlice,
                                    {.keep = 2, .straight_through = comm::StraightThrough::off, .error_feedback = true}, 7);
    Tensor partial(kRows, 2 * kSlice);  // rank r's share: (r + 1) * (column + 1), both steps
    for (size_t i = 0; i < kRows; ++i)
      for (size_t j = 0; j < 2 * kSlice; ++j) partial.at(i, j) = static_cast<float>((c.rank() + 1) * (j + 1));
    for (int step = 0; step < 2; ++step) {
      exchange.set_step(static_cast<uint64_t>(step));
      Tensor local(kRows, kSlice);
      for (size_t i = 0; i < kRows; ++i)
        for (size_t j = 0; j < kSlice; ++j) {
          const bool kept = (step == 0 ? j == 1 + i : j == 0) || j == 4;
          local.at(i, j) = kept ? 5.0f + static_cast<float>(j) : 0.1f;
        }
      exchange.gather(local);
      const Tensor out = exchange.reduce_scatter(partial);
      std::lock_guard<std::mutex> lock(mu);
      if (step == 1) second[c.rank()] = out;
    }
  });
  for (int r = 0; r < 2; ++r)
    for (size_t i = 0; i < kRows; ++i)
      for (size_t j = 0; j < kSlice; ++j) {
        const float column = static_cast<float>(r * kSlice + j + 1), own = static_cast<float>(r + 1) * column,
                    peer = static_cast<float>(2 - r) * column;
        INFO("rank " << r << " row " << i << " position " << j);
        REQUIRE(second[r].at(i, j) == (j == 0 ? own + 2.0f * peer : j == 4 ? own + peer : 0.0f));
      }
  // In training: deterministic, learns, and not the run without it.
  const comm::MpCompression mp{.keep = 0.25, .wire = comm::ValueType::i8, .error_feedback = true};
  const Run a = run_training(2, mp), b = run_training(2, mp);
  REQUIRE(a.losses == b.losses);
  REQUIRE(std::isfinite(a.losses.front()));
  REQUIRE(a.p1 > 0.0);
  REQUIRE(run_training(2, {.keep = 0.25, .wire = comm::ValueType::i8}).losses != a.losses);
}
