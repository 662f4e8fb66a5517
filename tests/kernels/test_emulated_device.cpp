// The `emulated_device` test: the counting device (kernels/emulated_backend.h), a device emulated on
// the host whose memory host code may not touch, which counts every byte that crosses. It checks
//  - buffers and tensors: a tensor in a backend's buffer knows its device; host accessors refuse a
//    device tensor naming it; set / get / copy / clear move and count bytes; copies of a device
//    tensor stay on the device; integer dtypes;
//  - every op passes the parity harness on the device;
//  - whole trainings on the device equal the CPU backend's bit for bit (exact and LSH samplers,
//    Adam / SGD / Adagrad, bf16 storage, a checkpoint resumed, and a 2x2 grid of ranks with one
//    rank on the device next to CPU ranks);
//  - the bytes a step moves between the host and the device, per sample: printed for the exact and
//    the LSH softmax (bench/REPORT.md records them), and 0 on the CPU backend;
//  - an evaluation counts its metrics on the device: only the sums come down.
#include <catch2/catch.hpp>

#include <cstdio>
#include <algorithm>
#include <cstring>
#include <memory>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/check.h"
#include "core/device.h"
#include "core/optim/optimizer.h"
#include "core/propensity.h"
#include "core/ranking_counts.h"
#include "kernels/emulated_backend.h"
#include "tests/kernels/backend_harness.h"
#include "tests/kernels/training_equivalence.h"

using namespace frugal;
using namespace frugal::testing;

namespace {

Backend& emulated() {
  Backend* be = find_backend("emulated");
  REQUIRE(be != nullptr);
  return *be;
}

uint64_t crossed(const Backend& be) { return be.transfers().crossed_bytes(); }

}  // namespace

TEST_CASE("tensors: host tensors, views, wrapped memory and integer dtypes") {
  Tensor t(3, 4);
  CHECK(t.device().is_host());
  CHECK(t.is_host());
  CHECK(t.owner() == nullptr);
  t.at(2, 3) = 5.0f;
  const Tensor rows = t.rows_view(1, 2);
  CHECK(rows.rows() == 2);
  CHECK(rows.at(1, 3) == 5.0f);  // the same memory
  std::vector<uint32_t> ids = {7, 8, 9};
  const Tensor wrapped = Tensor::wrap(ids.data(), 3, 1, Dtype::u32);
  CHECK(wrapped.u32()[2] == 9u);
  Tensor offsets(1, 4, Dtype::u64);
  CHECK(offsets.bytes() == 32);
  offsets.u64()[3] = uint64_t{1} << 40;
  CHECK(Tensor(offsets).u64()[3] == uint64_t{1} << 40);
  CHECK_THROWS_WITH(offsets.data(), Catch::Contains("u64") && Catch::Contains("used as f32"));
  CHECK_THROWS_WITH(t.u32(), Catch::Contains("f32") && Catch::Contains("used as u32"));
  CHECK(dtype_name(Dtype::u32) == "u32");
}

TEST_CASE("emulated device: its tensors are refused to host code and move through set / get / copy, counted") {
  Backend& be = emulated();
  CHECK(be.device().name() == "emulated:0");
  CHECK(&resolve_device("emulated") == &be);
  const Backend::Transfers before = be.transfers();
  Tensor w(4, 3, Dtype::f32, be);
  w.set_name("softmax.weight");
  CHECK(w.device().kind == DeviceKind::emulated);
  CHECK_FALSE(w.is_host());
  CHECK(w.owner() == &be);
  // Every host accessor refuses it, naming the tensor and its device.
  CHECK_THROWS_WITH(w.data(), Catch::Contains("softmax.weight") && Catch::Contains("emulated:0"));
  CHECK_THROWS_WITH(std::as_const(w).row(1), Catch::Contains("emulated:0"));
  CHECK_THROWS_WITH(w.value_at(0, 0), Catch::Contains("emulated:0"));
  CHECK_THROWS_WITH(w.raw(), Catch::Contains("softmax.weight"));
  // Zero-initialized on the device (cleared there: nothing crossed).
  CHECK(crossed(be) == before.crossed_bytes());
  std::vector<float> host(12);
  copy_to_host(w, host.data());
  CHECK(host == std::vector<float>(12, 0.0f));
  std::iota(host.begin(), host.end(), 1.0f);
  copy_from_host(w, host.data());
  const Backend::Transfers after = be.transfers();
  CHECK(after.to_device_bytes - before.to_device_bytes == 48);
  CHECK(after.to_host_bytes - before.to_host_bytes == 48);
  // A copy stays on the device (copied there), and a row view shares the buffer.
  const Tensor copy = w;
  CHECK(copy.owner() == &be);
  CHECK(be.transfers().on_device_bytes - after.on_device_bytes == 48);
  CHECK(be.transfers().crossed_bytes() == after.crossed_bytes());
  const Tensor host_copy = to_host(copy.rows_view(2, 2));
  CHECK(host_copy.is_host());
  CHECK(host_copy.at(0, 0) == 7.0f);
  CHECK(host_copy.at(1, 2) == 12.0f);
  // Resizing keeps the place; zero() clears on the device.
  w.resize(100, 3);
  CHECK(w.owner() == &be);
  w.zero();
  CHECK(to_host(w).at(99, 2) == 0.0f);
  // A host tensor goes to the device and back unchanged.
  Tensor h(2, 2);
  h.at(1, 1) = -3.5f;
  const Tensor d = to_backend(h, &be);
  CHECK(d.owner() == &be);
  CHECK(to_host(d).at(1, 1) == -3.5f);
  // Out-of-range byte copies are refused, naming the range.
  CHECK_THROWS_WITH(be.set(*d.buffer(), d.buffer()->bytes(), host.data(), 4), Catch::Contains("of a buffer of"));
  // The CPU backend's buffers are host memory and it counts nothing.
  Backend& cpu = *find_backend("cpu");
  Tensor c(2, 2, Dtype::f32, cpu);
  CHECK(c.is_host());
  copy_from_host(c, host.data());
  CHECK(c.at(1, 1) == 4.0f);
  CHECK(cpu.transfers().crossed_bytes() == 0);
}

TEST_CASE("emulated device: every op passes the parity harness") {
  const harness::Tally t = harness::run_all(emulated(), false);
  CHECK(t.fail == 0);
  CHECK(t.skip == 0);
  CHECK(t.ok > 0);
}

TEST_CASE("emulated device: trainings equal the CPU backend's bit for bit") {
  Backend& cpu = *find_backend("cpu");
  cpu.set_num_threads(2);
  Backend& be = emulated();
  be.set_num_threads(2);
  const std::string dir = (std::filesystem::temp_directory_path() / "frugal_emulated_ckpt").string();
  for (const Setup& s : standard_setups()) {
    SECTION(s.name) {
      const Outcome want = run_training(cpu, s);
      require_same(run_training(be, s), want);
      std::filesystem::remove_all(dir);
      require_same(run_training(be, s, dir), want);
      std::filesystem::remove_all(dir);
    }
  }
}

// One model sliced over 2 ranks (the model-parallel step: exchanges, the sliced normalizer, the
// optimizer stepping while dLoss/dh travels), rank 0 on the device and rank 1 on the CPU.
TEST_CASE("emulated device: a 2-rank model-parallel group with rank 0 on the device equals one on the CPU backend") {
  Backend& cpu = *find_backend("cpu");
  cpu.set_num_threads(1);
  emulated().set_num_threads(1);
  require_same(train_grid(emulated(), std::nullopt, 1), train_grid(cpu, std::nullopt, 1));
}

TEST_CASE("emulated device: a 2x2 grid with rank 0 on the device equals one on the CPU backend") {
  Backend& cpu = *find_backend("cpu");
  cpu.set_num_threads(1);
  emulated().set_num_threads(1);
  for (const auto& dp : {std::optional<comm::DpCompression>{},
                         std::optional<comm::DpCompression>{comm::DpCompression{.keep = 0.05f}}}) {
    INFO((!dp ? "plain" : "dct-dp gradients"));
    require_same(train_grid(emulated(), dp), train_grid(cpu, dp));
  }
}

// The optimizer on a device finds a gradient's row list where the gradient was computed
// (RowGrad::device_rows) and raises Adam's lazy update counts there (RowUpdate::row_counts). A list
// that changed after the device made it (an exchange, a selection) is sent instead, and counts the
// host changed (a checkpoint load) are sent again before they are used; the weights and moments
// stay the CPU backend's bits throughout. (The emulated device checks every list and count it is
// given against the host's, so a stale copy would throw.)
TEST_CASE("emulated device: the optimizer's row lists and update counts stay on the device until the host changes them") {
  Backend& dev = emulated();
  Backend& cpu = *find_backend("cpu");
  constexpr size_t kRows = 10, kCols = 4;
  Tensor start(kRows, kCols);
  for (size_t i = 0; i < start.size(); ++i) start.data()[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
  struct Run {
    Parameter p;
    std::unique_ptr<optim::Optimizer> opt;
  };
  const auto make = [&](Backend& b) {
    auto run = std::make_unique<Run>();
    run->p.name = "table";
    run->p.value = to_backend(start, &b);
    run->opt = optim::Optimizer::create(optim::Adam{.lr = 0.01f}, {&run->p});
    run->opt->set_backend(&b);
    return run;
  };
  auto on_device = make(dev), on_cpu = make(cpu);
  // A gradient for `rows`; on the device, with the device's own list of `listed` (as
  // sparse_input_backward leaves it).
  const auto gradient = [&](Run& run, Backend& b, const std::vector<uint32_t>& rows,
                            const std::vector<uint32_t>& listed, int step) {
    Tensor g(rows.size(), kCols);
    for (size_t i = 0; i < g.size(); ++i) g.data()[i] = 0.01f * static_cast<float>((i * 5 + step) % 11) - 0.05f;
    run.p.grad.rows = rows;
    run.p.grad.values = to_backend(g, &b);
    if (&b == &dev) {
      Tensor ids(1, listed.size(), Dtype::u32);
      std::copy(listed.begin(), listed.end(), ids.u32().begin());
      run.p.grad.device_rows_tensor = to_backend(ids, &b);
      run.p.grad.device_rows_of = listed;
    }
  };
  // Runs a step on both; returns the bytes the device's step moved.
  const auto step = [&](const std::vector<uint32_t>& rows, const std::vector<uint32_t>& listed, int k) {
    gradient(*on_cpu, cpu, rows, listed, k);
    gradient(*on_device, dev, rows, listed, k);
    on_cpu->opt->step();
    const uint64_t before = crossed(dev);
    on_device->opt->step();
    return crossed(dev) - before;
  };
  step({1, 3, 5}, {1, 3, 5}, 0);  // the first sends the counts (and starts Adam's table)
  const uint64_t current = step({1, 3, 5, 7}, {1, 3, 5, 7}, 1);
  // The gradient's rows changed after the device listed others: the 2 ids are sent.
  CHECK(step({2, 3}, {1, 3, 5}, 2) == current + 2 * sizeof(uint32_t));
  CHECK(on_device->p.grad.device_rows(&dev) == nullptr);
  // A checkpoint load writes the host's counts: all 10 are sent again before the next step. (Row
  // 7's count 3 + 1 is the step's highest, as every step's here, so Adam's table grows by its one
  // row, 8 B, in every step measured.)
  on_cpu->opt->state(0).row_steps[7] = 3;
  on_device->opt->state(0).row_steps[7] = 3;
  CHECK(step({3, 7, 9}, {3, 7, 9}, 3) == current + kRows * sizeof(uint32_t));
  CHECK(step({0, 7}, {0, 7}, 4) == current);
  // The same bits as the CPU backend's.
  const Tensor w_dev = to_host(on_device->p.value), w_cpu = to_host(on_cpu->p.value);
  const Tensor v_dev = to_host(on_device->opt->state(0).v), v_cpu = to_host(on_cpu->opt->state(0).v);
  CHECK(std::memcmp(w_dev.data(), w_cpu.data(), w_cpu.bytes()) == 0);
  CHECK(std::memcmp(v_dev.data(), v_cpu.data(), v_cpu.bytes()) == 0);
  CHECK(on_device->opt->state(0).row_steps == on_cpu->opt->state(0).row_steps);
}

// What a steady-state epoch moves between the host and the device, per training sample. The
// design's goal (DESIGN.md "Devices") is the input batch, its labels and a few scalars: the exact
// softmax and the LSH sampler (its codes, union, top-up and negatives made on the device) both
// meet it; this prints the figures (bench/REPORT.md). The CPU backend moves nothing.
TEST_CASE("emulated device: host <-> device bytes per sample of a steady-state epoch") {
  Backend& be = emulated();
  be.set_num_threads(2);
  for (const auto sampler : {layers::Sampler::exact, layers::Sampler::lsh}) {
    Setup s;
    s.sampler = sampler;
    auto model = build(s);
    train::Trainer trainer(*model, {});
    use(be, *model, trainer);
    // The model lives on the device: host code reading a weight is refused, naming it.
    const Parameter& first = *model->parameters().front();
    CHECK_THROWS_WITH(first.value.data(), Catch::Contains("'" + first.name + "'") && Catch::Contains("emulated:0"));
    trainer.fit_epoch(problem().train, {.batch = kBatch, .seed = 1, .progress = false});
    const uint64_t allocations = dynamic_cast<kernels::EmulatedBackend&>(be).memory_stats().device_allocations;
    const train::FitResult fit = trainer.fit_epoch(problem().train, {.batch = kBatch, .seed = 2, .progress = false});
    // After the first epoch a step allocates nothing from the device: the caching allocator's
    // blocks are reused (core/caching_allocator.h).
    CHECK(dynamic_cast<kernels::EmulatedBackend&>(be).memory_stats().device_allocations == allocations);
    // The input batch (CSR: offsets, ids, values) and the labels (offsets, ids) per sample.
    const SparseBatch& points = problem().train.points;
    const double n = static_cast<double>(points.size());
    const double input = static_cast<double>(8 * points.feature_ids.size()) / n + 8.0;
    const double labels = static_cast<double>(4 * points.label_ids.size()) / n + 8.0;
    std::printf("emulated device, %s softmax, batch %zu: %.0f B/sample host <-> device (input %.0f + labels %.0f + "
                "64 B of scalars = %.0f B/sample is the goal)\n",
                sampler == layers::Sampler::exact ? "exact" : "LSH", kBatch, fit.host_device_bytes_per_sample(),
                input, labels, input + labels + 64.0);
    CHECK(fit.host_device_bytes > 0);
    CHECK(fit.host_device_bytes_per_sample() ==
          Approx(static_cast<double>(fit.host_device_bytes) / static_cast<double>(fit.group_samples)));
    // The exact step moves the input, the labels, and a few scalars (the loss, the labels'
    // positions among the logits), and nothing else: the optimizers find their row lists where
    // the gradients were computed and keep Adam's update counts there (RowGrad::device_rows,
    // RowUpdate::row_counts); a parameter whose every row changes sends one count a step
    // (RowUpdate::all_rows); Adam's bias-correction table stays on the device and grows by one row
    // (8 B) a step. An activation, a logit, a gradient, a row list or a table sent every step
    // would exceed this: the target, input + labels + 64 B a sample.
    // The LSH step sends its labels (first in each set: no positions) and the hash family's
    // coordinates once; the sets, codes, negatives' tables and the output layer's row list
    // (RowGrad::rows_on_device: the optimizer's lazy update reads it there) stay on the device.
    // What comes down besides the loss: two set totals and the row count (20 B a step).
    CHECK(fit.host_device_bytes_per_sample() <= input + labels + 64.0);
    // Nothing that grows with the training's length crosses (Adam's bias-correction tables once
    // did, whole, every step: +6.5% from the first epoch to the second): a later epoch moves what
    // this one did, to within 3% (its batches touch other rows).
    const train::FitResult later = trainer.fit_epoch(problem().train, {.batch = kBatch, .seed = 3, .progress = false});
    std::printf("  a third epoch: %.1f B/sample (the second: %.1f)\n", later.host_device_bytes_per_sample(),
                fit.host_device_bytes_per_sample());
    CHECK(later.host_device_bytes_per_sample() <= 1.03 * fit.host_device_bytes_per_sample());
    if (sampler != layers::Sampler::lsh) continue;
    // A table rebuild runs on the device (the codes of every row, then bucket_build): the epoch
    // that holds the first rebuild after the initial build (step 50) moves what a steady one does.
    const auto& output = dynamic_cast<const layers::SoftmaxOutput&>(model->output());
    const uint64_t rebuilds = output.sampler()->rebuilds();
    train::FitResult with_rebuild;
    for (uint64_t seed = 4; output.sampler()->rebuilds() == rebuilds; ++seed) {
      REQUIRE(seed < 12);
      with_rebuild = trainer.fit_epoch(problem().train, {.batch = kBatch, .seed = seed, .progress = false});
    }
    std::printf("  an epoch with a table rebuild: %.1f B/sample\n", with_rebuild.host_device_bytes_per_sample());
    CHECK(with_rebuild.host_device_bytes_per_sample() <= 1.03 * fit.host_device_bytes_per_sample());
  }
  // The same training on the CPU backend crosses nothing.
  auto model = build(Setup{});
  train::Trainer trainer(*model, {});
  use(*find_backend("cpu"), *model, trainer);
  CHECK(trainer.fit_epoch(problem().train, {.batch = kBatch, .seed = 1, .progress = false}).host_device_bytes == 0);
}

// --clip-norm on the device: the norm is summed where the gradients are (sum_squares: 8 bytes a
// parameter come down) and they are scaled there (scale): the CPU backend's bits, and no gradient
// crosses.
TEST_CASE("emulated device: gradient clipping runs where the gradients are") {
  Backend& be = emulated();
  be.set_num_threads(2);
  const auto run = [](Backend& b, train::FitResult& fit) {
    auto model = build(Setup{});
    train::Trainer trainer(*model, {.clip_norm = 0.05f});
    use(b, *model, trainer);
    trainer.fit_epoch(problem().train, {.batch = kBatch, .seed = 1, .progress = false});
    fit = trainer.fit_epoch(problem().train, {.batch = kBatch, .seed = 2, .progress = false});
    return model->parameters().size();
  };
  train::FitResult on_device, on_cpu;
  const size_t params = run(be, on_device);
  run(*find_backend("cpu"), on_cpu);
  CHECK(on_device.loss == on_cpu.loss);  // the same bits
  CHECK(on_device.clipped_steps == on_cpu.clipped_steps);
  CHECK(on_device.clipped_steps > 0);  // the limit acts
  const SparseBatch& points = problem().train.points;
  const double n = static_cast<double>(points.size());
  const double input = static_cast<double>(8 * points.feature_ids.size()) / n + 8.0;
  const double labels = static_cast<double>(4 * points.label_ids.size()) / n + 8.0;
  const double norms = 8.0 * static_cast<double>(params) / static_cast<double>(kBatch);
  std::printf("emulated device, LSH softmax with --clip-norm: %.0f B/sample (%.1f of them the norms' sums)\n",
              on_device.host_device_bytes_per_sample(), norms);
  CHECK(on_device.host_device_bytes_per_sample() <= input + labels + 64.0 + norms);
}

// An evaluation counts its metrics where the output layer ranks (Backend::ranking_add): the top k
// never come down, only the sums do, once; the scores are the CPU backend's bits, with exact and
// with LSH inference, with propensities.
TEST_CASE("emulated device: evaluation counts its metrics on the device; only the sums come down") {
  Backend& be = emulated();
  be.set_num_threads(2);
  const data::Dataset& test = problem().test;
  const LabelCounts counts = LabelCounts::of(problem().train);
  const Propensities propensities(counts);
  for (const Inference inference : {Inference::exact, Inference::lsh}) {
    const auto evaluate = [&](Backend& b, uint64_t& down, uint64_t& up) {
      auto model = build(Setup{});
      train::Trainer trainer(*model, {});
      use(b, *model, trainer);
      trainer.fit_epoch(problem().train, {.batch = kBatch, .seed = 1, .progress = false});
      const Backend::Transfers before = b.transfers();
      const train::EvalResult r = trainer.evaluate(test, {.batch = 64, .inference = inference, .propensities = &propensities});
      down = b.transfers().to_host_bytes - before.to_host_bytes;
      up = b.transfers().to_device_bytes - before.to_device_bytes;
      return r;
    };
    uint64_t down = 0, up = 0, cpu_down = 0, cpu_up = 0;
    const train::EvalResult on_device = evaluate(be, down, up);
    const train::EvalResult on_cpu = evaluate(*find_backend("cpu"), cpu_down, cpu_up);
    REQUIRE(on_device.named().size() == on_cpu.named().size());
    for (size_t m = 0; m < on_cpu.named().size(); ++m) {
      INFO(on_cpu.named()[m].first);
      CHECK(on_device.named()[m].second == on_cpu.named()[m].second);  // the same bits
    }
    CHECK(on_cpu.p(1) > 0.0);
    CHECK(cpu_down + cpu_up == 0);
    const size_t ks = train::EvalOptions{}.k.size(), batches = (test.size() + 63) / 64;
    const uint64_t sums = (ks * ranking::kSums + ks + 1) * sizeof(double);
    std::printf("emulated device, evaluation with %s inference: %.1f B/sample down (the sums: %llu B in all), "
                "%.1f B/sample up\n", inference == Inference::exact ? "exact" : "LSH",
                static_cast<double>(down) / static_cast<double>(test.size()), static_cast<unsigned long long>(sums),
                static_cast<double>(up) / static_cast<double>(test.size()));
    // Exact inference brings down the sums and nothing else; LSH inference also the sets' totals
    // (8 B each, two per batch).
    CHECK(down <= sums + (inference == Inference::lsh ? 16 * batches : 0));
  }
}
