#include "core/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <cereal/archives/binary.hpp>
#include <cereal/types/string.hpp>
#include <fmt/format.h>

#include "core/check.h"
#include "core/tensor_io.h"

namespace frugal {
namespace fs = std::filesystem;
namespace {

constexpr char kMagic[8] = {'F', 'R', 'U', 'G', 'A', 'L', 'C', 'K'};

void fsync_path(const fs::path& p, bool directory) {
  const int fd = ::open(p.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) throw Error(fmt::format("{}: cannot open to sync", p.string()));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw Error(fmt::format("{}: fsync failed", p.string()));
}

// Writes `bytes` to `target` atomically: temp file in the same directory, fsync, rename, fsync dir.
void write_atomically(const fs::path& target, const std::string& bytes) {
  const fs::path tmp = target.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(fmt::format("{}: cannot open for writing", tmp.string()));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) throw Error(fmt::format("{}: write failed (disk full?)", tmp.string()));
  }
  fsync_path(tmp, false);
  fs::rename(tmp, target);
  fsync_path(target.parent_path().empty() ? fs::path(".") : target.parent_path(), true);
}

void check_config(const nlohmann::json& saved, const nlohmann::json& wanted, const std::string& dir) {
  if (!saved.is_object() || !wanted.is_object()) return;
  for (const auto& [key, value] : wanted.items()) {
    const auto it = saved.find(key);
    if (it != saved.end() && *it != value)
      throw Error(fmt::format("{}: checkpoint was made with {} = {}, this run has {} = {}", dir, key, it->dump(),
                              key, value.dump()));
  }
}

}  // namespace

void save_checkpoint(const std::string& dir, const Model& model, const Trainer& trainer, const nlohmann::json& config) {
  fs::create_directories(dir);
  std::ostringstream buf(std::ios::binary);
  {
    cereal::BinaryOutputArchive ar(buf);
    ar(cereal::binary_data(kMagic, sizeof kMagic), kCheckpointVersion);
    const auto params = model.parameters();
    ar(static_cast<uint64_t>(params.size()));
    for (const Parameter* p : params) {
      ar(p->name);
      save_tensor(ar, p->value);
    }
    for (const auto& layer : model.layers()) layer->save_state(ar);
    trainer.save_state(ar);
  }
  write_atomically(fs::path(dir) / "model.ckpt", buf.str());
  const nlohmann::json manifest = {{"format", "frugal-checkpoint"}, {"version", kCheckpointVersion},
                                   {"epoch", trainer.epoch()},      {"step", trainer.step()},
                                   {"world_size", 1},               {"files", {"model.ckpt"}},
                                   {"config", config}};
  write_atomically(fs::path(dir) / "manifest.json", manifest.dump(2) + "\n");
}

CheckpointInfo read_checkpoint_manifest(const std::string& dir) {
  const fs::path path = fs::path(dir) / "manifest.json";
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("{}: no checkpoint here (cannot read manifest.json)", dir));
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: corrupt manifest: {}", path.string(), e.what()));
  }
  if (m.value("format", "") != "frugal-checkpoint")
    throw Error(fmt::format("{}: not a frugal checkpoint manifest", path.string()));
  const auto version = m.value("version", 0u);
  if (version != kCheckpointVersion)
    throw Error(fmt::format("{}: checkpoint format version {} is not supported (this build reads {})", path.string(),
                            version, kCheckpointVersion));
  return {m.value("epoch", uint64_t{0}), m.value("step", uint64_t{0}), m.value("config", nlohmann::json::object())};
}

CheckpointInfo load_checkpoint(const std::string& dir, Model& model, Trainer& trainer, const nlohmann::json& config) {
  CheckpointInfo info = read_checkpoint_manifest(dir);
  check_config(info.config, config, dir);
  const fs::path path = fs::path(dir) / "model.ckpt";
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open", path.string()));
  try {
    cereal::BinaryInputArchive ar(in);
    char magic[8] = {};
    uint32_t version = 0;
    ar(cereal::binary_data(magic, sizeof magic), version);
    FRUGAL_CHECK(std::equal(magic, magic + 8, kMagic), path.string() + ": not a frugal checkpoint");
    FRUGAL_CHECK(version == kCheckpointVersion, fmt::format("{}: unsupported version {}", path.string(), version));
    uint64_t count = 0;
    ar(count);
    const auto params = model.parameters();
    FRUGAL_CHECK(count == params.size(), fmt::format("{}: has {} parameters, the model {}", path.string(), count, params.size()));
    for (Parameter* p : params) {
      std::string name;
      ar(name);
      FRUGAL_CHECK(name == p->name, fmt::format("{}: parameter {} found where {} was expected", path.string(), name, p->name));
      load_tensor(ar, p->value, p->value.rows(), p->value.cols(), name);
    }
    for (const auto& layer : model.layers()) layer->load_state(ar);
    trainer.load_state(ar);
  } catch (const cereal::Exception& e) {
    throw Error(fmt::format("{}: truncated or corrupt checkpoint ({})", path.string(), e.what()));
  }
  return info;
}

}  // namespace frugal
