#include "train/run/predict_session.h"

#include "core/device.h"
#include "train/run/option_builders.h"

#include <cstdio>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "train/run/infer_choice.h"
#include "train/run/rank_threads.h"
#include "core/backend.h"
#include "core/check.h"
#include "core/data/fingerprint.h"
#include "core/data/xmc_file.h"
#include "core/device.h"
#include "train/checkpoint_manifest.h"
#include "train/served_checkpoint.h"

namespace frugal::run {

std::vector<Option<SessionArgs>> session_options(const std::string& auto_help) {
  using namespace options;
  using S = SessionArgs;
  std::vector<Option<S>> out;
  out.push_back(text_option("--model", &S::model, "checkpoint directory (frugal train --checkpoint)", true));
  out.push_back(number("--batch", &S::batch, "points read and scored at a time", NumberBounds::positive()));
  out.push_back(threads_option(&S::threads));
  out.push_back(device_option(&S::device));
  out.push_back(accept_unchecked_option(&S::accept_unchecked));
  for (const Option<InferSettings>& o : infer_options(auto_help)) out.push_back(nested(o, &S::infer));
  return out;
}

void set_session_option(SessionArgs& a, std::string_view flag, const std::string& value) {
  for (const Option<SessionArgs>& o : session_options(""))
    if (o.flag == flag) return o.set(a, value);
  throw Error(fmt::format("frugal predict has no option {}", flag));
}

Session open_session(const SessionArgs& a, comm::RunConfig config) {
  for (const Option<SessionArgs>& o : session_options(""))
    if (const std::string problem = o.problem(a); !problem.empty()) throw Error(fmt::format("{}: {}", o.flag, problem));
  const std::string& model = a.model;
  const std::string& train = a.train;
  const InferSettings& flags = a.infer;
  const int threads = a.threads;
  const std::string& device = a.device;
  // The device is per rank (a mixed cluster may differ), so it is not in the run config.
  Backend& backend = resolve_device(device);
  backend.set_num_threads(threads_for_rank(threads));
  // --infer auto: as the checkpoint was trained to infer (a damaged manifest: Predictor says so).
  nlohmann::json saved = nlohmann::json::object();
  try {
    // The checkpoint the folder serves (its best epoch's): its config says how it infers.
    saved = train::read_manifest(train::served_checkpoint(model, true).dir, /*accept_unchecked=*/true).config;
  } catch (const std::exception&) {
  }
  const InferMode auto_mode = saved_infer_mode(saved) == InferMode::ensemble ? InferMode::ensemble : InferMode::exact;
  const InferChoice infer = resolve_infer(flags, auto_mode, saved);
  config["model"] = model;
  config["infer"] = std::string(to_string(infer.mode));
  config["infer_candidates"] = std::to_string(infer.candidates);
  if (infer.mode == InferMode::ensemble)
    config["ensemble"] = fmt::format("{:g},{:g},{:g},{}", infer.ensemble.weight, infer.ensemble.knn_weight,
                                     infer.ensemble.temperature, infer.ensemble.neighbours);
  // Ranks must read the same input (compared at rendezvous; see core/data/fingerprint.h).
  for (const char* key : {"input", "test"}) {
    const auto it = config.find(key);
    if (it != config.end() && std::filesystem::is_regular_file(it->second))
      config[std::string(key) + "_fingerprint"] = data::fingerprint(it->second).to_string();
  }
  Session s;
  s.world = comm::init({.run_config = config});
  // --train FILE: the ensemble's members a checkpoint lacks are built from it.
  std::optional<data::Dataset> train_set;
  if (infer.mode == InferMode::ensemble && !train.empty()) train_set = data::XmcFile::open(train);
  s.predictor = std::make_unique<train::Predictor>(
      model, train::PredictorOptions{.group = s.world.get(), .inference = infer.layer_mode(),
                              .inference_candidates = infer.candidates,
                              .ensemble = infer.mode == InferMode::ensemble ? std::optional(infer.ensemble) : std::nullopt,
                              .ensemble_train = train_set ? &*train_set : nullptr,
                              .backend = &backend,
                              .accept_unchecked_checkpoint = a.accept_unchecked});
  s.infer = infer.mode;
  // Which checkpoint this is (a copy of an older epoch's manifest put in place is otherwise silent).
  if (s.world->rank() == 0) {
    const train::CheckpointInfo& info = s.predictor->checkpoint();
    const train::ServedCheckpoint& served = s.predictor->served();
    fmt::print(stderr, "{}: epoch {}, step {}{}{}\n", model, info.epoch, info.step,
               info.run.empty() ? std::string() : fmt::format(" of run {}", info.run),
               served.best ? fmt::format(" (the best epoch on validation, from {}; the newest is epoch {})", served.dir,
                                         served.newest_epoch)
                           : std::string());
  }
  return s;
}

}  // namespace frugal::run
