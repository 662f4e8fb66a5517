// The model of `frugal predict` and `frugal evaluate` (and the Python module's Model): a checkpoint
// loaded for inference the way its run was trained to infer (--infer auto: the checkpoint's choice),
// on every rank of the launch (all slice it).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "train/run/infer_settings.h"
#include "train/run/train_options.h"
#include "comm/init.h"
#include "core/communicator.h"
#include "train/predictor.h"

namespace frugal::run {

struct Session {
  std::unique_ptr<comm::Communicator> world;
  std::unique_ptr<train::Predictor> predictor;
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

// The options of SessionArgs as `frugal predict` / `evaluate` and Python's frugal.load take them,
// declared once (as train/run/train_options.h declares training's): --model, --device, --threads,
// --batch, --accept-unchecked-checkpoint and the inference options; `auto_help` ends --infer's
// help.
std::vector<Option<SessionArgs>> session_options(const std::string& auto_help);
// Sets `flag` of `a` from its text, checked as the command line checks it (throws naming the flag).
void set_session_option(SessionArgs& a, std::string_view flag, const std::string& value);

// Loads --model on every rank; `config` is what the ranks compare at start (the command and its
// inputs). The options are checked against their declarations first (a C++ caller's too).
Session open_session(const SessionArgs& a, comm::RunConfig config);

}  // namespace frugal::run
