// The model of `frugal predict` and `frugal evaluate` (and the Python module's Model): a checkpoint
// loaded for inference the way its run was trained to infer (--infer auto: the checkpoint's choice),
// on every rank of the launch (all slice it).
#pragma once

#include <memory>
#include <string>

#include "train/run/infer_settings.h"
#include "comm/init.h"
#include "core/communicator.h"
#include "train/predictor.h"

namespace frugal::run {

struct Session {
  std::unique_ptr<comm::Communicator> world;
  std::unique_ptr<Predictor> predictor;
  InferMode infer = InferMode::exact;
};

// What predict and evaluate share: the model, how it computes and how its checkpoint is read.
struct SessionArgs {
  std::string model, device = "auto", train;
  size_t batch = 512;
  int threads = 0;
  InferSettings infer;
  bool accept_unchecked = false;  // --accept-unchecked-checkpoint
};

// Loads --model on every rank; `config` is what the ranks compare at start (the command and its inputs).
Session open_session(const SessionArgs& a, comm::RunConfig config);

}  // namespace frugal::run
