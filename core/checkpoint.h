// Checkpoints: DIR/model.ckpt (cereal binary: magic, format version, every parameter, every layer's
// extra state such as LSH tables, the trainer's step/epoch and the optimizer state) and
// DIR/manifest.json (format version, epoch, step, the run's configuration). Both are written to a
// temporary file, fsync'ed and renamed, manifest last, so an interrupted save leaves the previous
// checkpoint whole. Loading checks the configuration and names the first setting that differs.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/model.h"
#include "core/trainer.h"

namespace frugal {

inline constexpr uint32_t kCheckpointVersion = 1;

struct CheckpointInfo {
  uint64_t epoch = 0, step = 0;
  nlohmann::json config;
};

void save_checkpoint(const std::string& dir, const Model& model, const Trainer& trainer,
                     const nlohmann::json& config = nlohmann::json::object());
// Restores model and trainer. Settings present in both `config` and the checkpoint's must agree.
CheckpointInfo load_checkpoint(const std::string& dir, Model& model, Trainer& trainer,
                               const nlohmann::json& config = nlohmann::json::object());
// Reads only the manifest.
CheckpointInfo read_checkpoint_manifest(const std::string& dir);

}  // namespace frugal
