// The `cuda_end_to_end` test (issue 12): whole trainings on the CUDA backend against the CPU one.
//  - the same 3 epochs of the XMC network with the exact softmax, once on "cpu" and once on
//    "cuda" (layers and optimizer): the epoch losses agree to 1e-4 (relative);
//  - the NCCL data-parallel group (gpu/nccl_communicator.h) of one GPU rank: every float collective
//    goes through the staging and NCCL and gives the host transport's result (one GPU: NCCL refuses
//    two ranks on one device, so more ranks need a machine with more GPUs);
//  - a mixed model-parallel group of 2 ranks (threads), rank 0 on "cuda" and rank 1 on "cpu", with
//    the exact softmax: its losses equal 1 rank's on "cpu" to 1e-4 (the wire and the normalizer's
//    all-reduce do not care which device a rank computes on);
//  - the model stays on the device: its parameters live in the backend's device buffers, a second
//    epoch allocates nothing from the device (the caching allocator's blocks are reused) and moves
//    at most the input, the labels and 64 B of scalars per sample (the figure is printed); a
//    checkpoint saved from "cuda" resumes on "cpu" and one saved from "cpu" resumes on "cuda", each
//    equal to 3 epochs on "cpu" to 1e-4.
// Without a visible CUDA device it exits 77, which Meson reports as SKIP: never a pass.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <vector>

#include "comm/local_communicator.h"
#include "core/backend.h"
#include "train/checkpoint.h"
#include "gpu/cuda_backend.h"
#include "core/data/synth_xmc.h"
#include "train/trainer.h"
#include "gpu/cuda_info.h"
#include "gpu/nccl_communicator.h"
#include "layers/xmc_network.h"

using namespace frugal;

namespace {

constexpr int kSkip = 77;  // Meson's exit code for a skipped test
constexpr size_t kFeatures = 2000, kLabels = 300, kHidden = 64, kBatch = 64;
constexpr int kEpochs = 3;

const data::SynthXmc& problem() {
  static const data::SynthXmc d = data::generate_synth_xmc(
      {.features = kFeatures, .labels = kLabels, .train = 16 * kBatch, .test = 200, .nnz = 20,
       .labels_per_point = 2, .seed = 11});
  return d;
}

layers::XmcNetworkOptions network(const Placement& placement = {}) {
  return {.features = kFeatures, .labels = kLabels, .hidden = kHidden, .sampler = layers::Sampler::exact,
          .seed = 3, .placement = placement};
}

// Every layer and the optimizer of this model/trainer compute on `backend`.
void use(Backend& backend, Model& model, train::Trainer& trainer) {
  model.set_backend(&backend);
  trainer.optimizer().set_backend(&backend);
}

std::vector<double> train_alone(Backend& backend) {
  Model model;
  layers::build_xmc_network(model, network());
  train::Trainer trainer(model, {});
  use(backend, model, trainer);
  std::vector<double> losses;
  for (int e = 1; e <= kEpochs; ++e)
    losses.push_back(trainer.fit_epoch(problem().train, {.batch = kBatch, .seed = static_cast<uint64_t>(e),
                                                         .progress = false}).loss);
  return losses;
}

// Epoch 1 on `first`, a checkpoint, then epochs 2..3 on `then` from a fresh model loading it.
std::vector<double> train_resumed(Backend& first, Backend& then) {
  const std::string dir = (std::filesystem::temp_directory_path() / "frugal_cuda_resume").string();
  std::filesystem::remove_all(dir);
  std::vector<double> losses;
  {
    Model model;
    layers::build_xmc_network(model, network());
    train::Trainer trainer(model, {});
    use(first, model, trainer);
    losses.push_back(trainer.fit_epoch(problem().train, {.batch = kBatch, .seed = 1, .progress = false}).loss);
    train::save_checkpoint(dir, model, trainer);
  }
  Model model;
  layers::build_xmc_network(model, network());
  train::Trainer trainer(model, {});
  use(then, model, trainer);
  train::load_checkpoint(dir, model, trainer);
  for (int e = 2; e <= kEpochs; ++e)
    losses.push_back(trainer.fit_epoch(problem().train, {.batch = kBatch, .seed = static_cast<uint64_t>(e),
                                                         .progress = false}).loss);
  std::filesystem::remove_all(dir);
  return losses;
}

void require_close(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("epoch " << i + 1 << ": " << a[i] << " vs " << b[i]);
    CHECK(std::isfinite(a[i]));
    CHECK(std::abs(a[i] - b[i]) <= 1e-4 * std::max(1.0, std::abs(b[i])));
  }
}

}  // namespace

TEST_CASE("cuda end to end: 3 epochs of the exact softmax agree with the CPU backend to 1e-4") {
  Backend* cuda = find_backend("cuda");
  Backend* cpu = find_backend("cpu");
  REQUIRE(cuda != nullptr);
  REQUIRE(cpu != nullptr);
  require_close(train_alone(*cuda), train_alone(*cpu));
}

TEST_CASE("cuda end to end: a mixed group (rank 0 on cuda, rank 1 on cpu) equals 1 rank on cpu") {
  Backend* cuda = find_backend("cuda");
  Backend* cpu = find_backend("cpu");
  REQUIRE(cuda != nullptr);
  const std::vector<double> alone = train_alone(*cpu);
  std::vector<double> mixed;
  std::mutex mu;
  comm::run_local(2, [&](comm::Communicator& c) {
    Model model;
    layers::build_xmc_network(model, network(Placement::sliced(c)));
    train::Trainer trainer(model, {.parallel = {.model = &c}});
    use(c.rank() == 0 ? *cuda : *cpu, model, trainer);
    std::vector<double> losses;
    for (int e = 1; e <= kEpochs; ++e)
      losses.push_back(trainer.fit_epoch(problem().train, {.batch = kBatch, .seed = static_cast<uint64_t>(e),
                                                           .progress = false}).loss);
    if (c.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      mixed = losses;
    }
  });
  require_close(mixed, alone);
}

TEST_CASE("cuda end to end: the model stays on the device, and checkpoints move between cuda and cpu") {
  Backend* cuda = find_backend("cuda");
  Backend* cpu = find_backend("cpu");
  REQUIRE(cuda != nullptr);
  const auto& gpu_backend = dynamic_cast<const gpu::CudaBackend&>(*cuda);
  const std::vector<double> alone = train_alone(*cpu);
  {
    Model model;
    layers::build_xmc_network(model, network());
    train::Trainer trainer(model, {});
    use(*cuda, model, trainer);
    trainer.fit_epoch(problem().train, {.batch = kBatch, .seed = 1, .progress = false});
    for (Parameter* p : model.parameters()) {
      INFO(p->name);
      CHECK(p->value.device() == cuda->device());
    }
    const uint64_t allocations = gpu_backend.memory_stats().device_allocations;
    const train::FitResult second = trainer.fit_epoch(problem().train, {.batch = kBatch, .seed = 2, .progress = false});
    CHECK(gpu_backend.memory_stats().device_allocations == allocations);
    // The input batch (CSR: offsets, ids, values) and the labels (offsets, ids) per sample.
    const SparseBatch& points = problem().train.points;
    const double n = static_cast<double>(points.size());
    const double input = static_cast<double>(8 * points.feature_ids.size()) / n + 8.0;
    const double labels = static_cast<double>(4 * points.label_ids.size()) / n + 8.0;
    std::printf("cuda end to end, exact softmax: %.0f B/sample host <-> device (input %.0f + labels %.0f + 64 B "
                "of scalars = %.0f B/sample is the goal)\n",
                second.host_device_bytes_per_sample(), input, labels, input + labels + 64.0);
  }
  require_close(train_resumed(*cuda, *cpu), alone);
  require_close(train_resumed(*cpu, *cuda), alone);
}

TEST_CASE("cuda end to end: an NCCL group of one GPU rank gives the host transport's results") {
  REQUIRE(gpu::nccl_built());  // a CUDA build finds nccl.h in the toolkit (gpu/meson.build)
  auto nccl = gpu::make_nccl_communicator(std::move(comm::make_local_communicators(1).at(0)), 0, 30.0);
  CHECK(nccl->backend() == "nccl");
  std::vector<float> x = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f};
  const std::vector<float> original = x;
  nccl->all_reduce(x).wait();
  CHECK(x == original);
  nccl->all_reduce(x, comm::ReduceOp::max).wait();
  CHECK(x == original);
  std::vector<float> all(x.size());
  const std::vector<size_t> counts = {x.size()};
  nccl->all_gatherv(x, all, counts).wait();
  CHECK(all == original);
  std::vector<float> mine(x.size());
  nccl->reduce_scatterv(all, mine, counts).wait();
  CHECK(mine == original);
  nccl->broadcast(x, 0).wait();
  CHECK(x == original);
  // Larger than the first staging buffers: they grow.
  std::vector<float> big(1 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 977) * 0.5f;
  const std::vector<float> big_before = big;
  nccl->all_reduce(big).wait();
  CHECK(big == big_before);
  const std::vector<size_t> wrong = {x.size() + 1};
  CHECK_THROWS_WITH(nccl->all_gatherv(x, all, wrong), Catch::Contains("the counts add up to 6"));
}

int main(int argc, char** argv) {
  if (find_backend("cuda") == nullptr) {
    std::printf("SKIP: no CUDA device visible (CUDA backend %s, device_count() = %d): nothing was checked\n",
                gpu::cuda_built() ? "built" : "not built", gpu::device_count());
    return kSkip;
  }
  return Catch::Session().run(argc, argv);
}
