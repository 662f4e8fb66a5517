// The `cuda_end_to_end` test (issue 12): whole trainings on the CUDA backend against the CPU one.
//  - the same 3 epochs of the XMC network with the exact softmax, once on "cpu" and once on
//    "cuda" (layers and optimizer): the epoch losses agree to 1e-4 (relative);
//  - a mixed model-parallel group of 2 ranks (threads), rank 0 on "cuda" and rank 1 on "cpu", with
//    the exact softmax: its losses equal 1 rank's on "cpu" to 1e-4 (the wire and the normalizer's
//    all-reduce do not care which device a rank computes on).
// Without a visible CUDA device it exits 77, which Meson reports as SKIP: never a pass.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <mutex>
#include <vector>

#include "comm/local_communicator.h"
#include "core/backend.h"
#include "core/data/synth_xmc.h"
#include "core/train/trainer.h"
#include "gpu/cuda_info.h"
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
void use(Backend& backend, Model& model, Trainer& trainer) {
  model.set_backend(&backend);
  trainer.optimizer().set_backend(&backend);
}

std::vector<double> train_alone(Backend& backend) {
  Model model;
  layers::build_xmc_network(model, network());
  Trainer trainer(model, {});
  use(backend, model, trainer);
  std::vector<double> losses;
  for (int e = 1; e <= kEpochs; ++e)
    losses.push_back(trainer.fit_epoch(problem().train, {.batch = kBatch, .seed = static_cast<uint64_t>(e),
                                                         .progress = false}).loss);
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
    Trainer trainer(model, {.parallel = {.model = &c}});
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

int main(int argc, char** argv) {
  if (find_backend("cuda") == nullptr) {
    std::printf("SKIP: no CUDA device visible (CUDA backend %s, device_count() = %d): nothing was checked\n",
                gpu::cuda_built() ? "built" : "not built", gpu::device_count());
    return kSkip;
  }
  return Catch::Session().run(argc, argv);
}
