// --device (core/device.h) and device-independent checkpoints: the device names resolve through
// the backend registry; a checkpoint holds host floats and nothing of the device that trained it;
// asking for CUDA where no CUDA backend is registered fails with a message that says why.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "core/backend.h"
#include "core/check.h"
#include "core/data/batch_loader.h"
#include "core/data/synth_xmc.h"
#include "core/device.h"
#include "train/checkpoint.h"
#include "train/trainer.h"
#include "layers/xmc_network.h"

using namespace frugal;
using Catch::Matchers::Contains;

namespace {

const data::SynthXmc& problem() {
  static const data::SynthXmc d = data::generate_synth_xmc(
      {.features = 500, .labels = 100, .train = 256, .test = 64, .nnz = 10, .labels_per_point = 2, .seed = 3});
  return d;
}

void build(Model& m) {
  layers::build_xmc_network(m, {.features = 500, .labels = 100, .hidden = 16, .sampler = layers::Sampler::exact,
                                .seed = 4});
}

bool have_cuda() { return find_backend("cuda") != nullptr; }

}  // namespace

TEST_CASE("device: names resolve through the backend registry", "[device]") {
  CHECK(is_device_spec("cpu"));
  CHECK(is_device_spec("auto"));
  CHECK(is_device_spec("cuda"));
  CHECK(is_device_spec("cuda:0"));
  CHECK(is_device_spec("cuda:12"));
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:x", "cuda:1x", "CPU", ""}) {
    INFO(bad);
    CHECK_FALSE(is_device_spec(bad));
    CHECK_THROWS_WITH(resolve_device(bad), Contains("is not one of cpu, cuda, cuda:N, auto"));
  }
  CHECK(&resolve_device("cpu") == find_backend("cpu"));
  CHECK(device_name(resolve_device("cpu")) == "cpu");
  // auto: the CUDA backend when one is registered, else the CPU.
  CHECK(device_name(resolve_device("auto")) == (have_cuda() ? "cuda" : "cpu"));
  if (!have_cuda()) {
    CHECK_THROWS_WITH(resolve_device("cuda"), Contains("device cuda: no CUDA backend is registered") &&
                                                  Contains("no GPU is visible") && Contains("registered backends: cpu"));
    CHECK_THROWS_WITH(resolve_device("cuda:0"), Contains("device cuda:0: no CUDA backend"));
  } else {
    // The CUDA backend drives one device: cuda:0; another index names itself in the error.
    CHECK(&resolve_device("cuda:0") == find_backend("cuda"));
    CHECK_THROWS_WITH(resolve_device("cuda:7"), Contains("no CUDA device 7"));
  }
}

TEST_CASE("checkpoint: saved from the CPU backend, device-independent; loading for CUDA without one fails clearly",
          "[device][checkpoint]") {
  const std::string dir = "device_checkpoint_test";
  std::filesystem::remove_all(dir);
  Model m;
  build(m);
  m.set_backend(&resolve_device("cpu"));
  train::Trainer t(m, {});
  data::BatchLoader loader(problem().train, {.batch = 32, .seed = 1});
  SparseBatch batch;
  for (int i = 0; i < 3 && loader.next(batch); ++i) t.train_step(batch);
  train::save_checkpoint(dir, m, t);
  // Weights are host floats: the tensors say so, and the manifest names no device.
  for (const Parameter* p : m.parameters()) CHECK(p->value.device().is_host());
  std::ifstream manifest(std::filesystem::path(dir) / "manifest.json");
  const std::string text((std::istreambuf_iterator<char>(manifest)), std::istreambuf_iterator<char>());
  CHECK(text.find("device") == std::string::npos);
  CHECK(text.find("cpu") == std::string::npos);

  // A model meant for CUDA: where no CUDA backend is registered, choosing the device fails, before
  // anything is loaded, naming why (what `frugal predict --device cuda` reports).
  Model for_cuda;
  build(for_cuda);
  if (!have_cuda()) {
    CHECK_THROWS_WITH(for_cuda.set_backend(&resolve_device("cuda")),
                      Contains("no CUDA backend is registered") && Contains("use cpu or auto"));
  }
  // The same files load onto whatever backend the machine has, with the same weights.
  for_cuda.set_backend(&resolve_device("auto"));
  train::load_weights(dir, for_cuda);
  const auto saved = m.parameters(), loaded = for_cuda.parameters();
  REQUIRE(saved.size() == loaded.size());
  for (size_t i = 0; i < saved.size(); ++i) {
    INFO(saved[i]->name);
    REQUIRE(saved[i]->value.size() == loaded[i]->value.size());
    CHECK(std::equal(saved[i]->value.data(), saved[i]->value.data() + saved[i]->value.size(), loaded[i]->value.data()));
  }
  std::filesystem::remove_all(dir);
}
