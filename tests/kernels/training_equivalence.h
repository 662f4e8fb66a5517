// Whole trainings on one backend against another, bit for bit: the check that a device backend
// (the counting device, the CUDA backend's mirror) computes what the CPU backend computes. A small
// synthetic XMC problem, a few setups (samplers, optimizers, precisions), two epochs, optionally a
// checkpoint resumed in between, and a 2x2 grid (replicas x slices, ranks as threads) with one rank
// on the backend under test.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/data/synth_xmc.h"
#include "comm/exchange.h"
#include "core/model.h"
#include "train/trainer.h"
#include "layers/softmax_output.h"

namespace frugal::testing {

inline constexpr size_t kFeatures = 3000, kLabels = 500, kBatch = 64;

// The problem every training here learns (generated once).
const data::SynthXmc& problem();

struct Setup {
  std::string name;
  layers::Sampler sampler = layers::Sampler::lsh;
  std::vector<size_t> hidden{64};
  optim::Options optimizer{};
  Dtype precision = Dtype::f32;
};

// The setups every device backend must train as the CPU backend does.
std::vector<Setup> standard_setups();

struct Outcome {
  std::vector<double> losses;
  double p1 = 0;
  std::vector<Tensor> weights;  // parameters, then each parameter's optimizer state (m, v), on the host
};

bool same_bits(const Tensor& a, const Tensor& b);
std::unique_ptr<Model> build(const Setup& s);
// The model's layers and the trainer's optimizer compute on `be`.
void use(Backend& be, Model& model, train::Trainer& trainer);
// Two epochs; with `resume_dir`, the second runs on a model and trainer loaded from the first's
// checkpoint (on the same backend).
Outcome run_training(Backend& be, const Setup& s, const std::string& resume_dir = {});
void require_same(const Outcome& a, const Outcome& b);
// A replicas x 2 grid (replicas of a model sliced over 2 ranks), ranks as threads: rank 0 computes
// on `first`, the others on "cpu". Rank 0's losses, P@1 and weights.
Outcome train_grid(Backend& first, std::optional<comm::DpCompression> dp, int replicas = 2);

}  // namespace frugal::testing
