// The manifest side of checkpoint_manifest.h: reading manifest.json and checking every field. Apart
// from checkpoint.cpp (which needs the model and the trainer) so that the fuzz target
// tests/fuzz/fuzz_manifest.cpp builds from this file alone.
#include "train/checkpoint_manifest.h"

#include <algorithm>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "core/check.h"
#include "core/sealed_json.h"

namespace frugal::train {
namespace fs = std::filesystem;

CheckpointManifest read_manifest(const std::string& dir, bool accept_unchecked) {
  return read_manifest(dir, fs::path(dir) / "manifest.json", accept_unchecked);
}

CheckpointManifest read_manifest(const std::string& dir, const std::filesystem::path& path, bool accept_unchecked) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!fs::exists(status)) throw Error(fmt::format("{}: no checkpoint here (no {})", dir, path.filename().string()));
  if (!fs::is_regular_file(status))
    throw Error(fmt::format("{}: not a regular file (a manifest is a JSON file frugal writes)", path.string()));
  // A manifest is a few kB; one far larger is not one (and is not read into memory whole).
  constexpr uintmax_t kMaxManifestBytes = uintmax_t{256} << 20;
  if (fs::file_size(path, ec) > kMaxManifestBytes)
    throw Error(fmt::format("{}: {} bytes, too large for a checkpoint manifest", path.string(), fs::file_size(path, ec)));
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("{}: cannot open", path.string()));
  return parse_manifest(in, path.string(), accept_unchecked);
}

CheckpointManifest parse_manifest(std::istream& in, const std::string& file, bool accept_unchecked) {
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: corrupt manifest: {}", file, json_error_words(e)));
  }
  if (!m.is_object() || !m.contains("format") || m["format"] != "frugal-checkpoint")
    throw Error(fmt::format("{}: not a frugal checkpoint manifest", file));
  const bool sealed = check_json_seal(m, file, accept_unchecked);
  const auto fail = [&](const std::string& field, const std::string& what) {
    throw Error(fmt::format("{}: field '{}' {}", file, field, what));
  };
  // An absent field takes its default (older manifests); a present one must have the right type and range.
  const auto unsigned_field = [&](const char* field, uint64_t fallback, uint64_t lo, uint64_t hi) {
    if (!m.contains(field)) return fallback;
    const auto& v = m[field];
    if (!v.is_number_unsigned()) fail(field, fmt::format("must be an unsigned integer (found {})", v.dump()));
    const auto x = v.get<uint64_t>();
    if (x < lo || x > hi) fail(field, fmt::format("is {}, outside [{}, {}]", x, lo, hi));
    return x;
  };
  const auto typed_field = [&](const char* field, nlohmann::json fallback, bool array) {
    if (!m.contains(field)) return fallback;
    const auto& v = m[field];
    if (array ? !v.is_array() : !v.is_object()) fail(field, array ? "must be an array" : "must be an object");
    return v;
  };
  const auto plain_name = [](const std::string& s) {
    return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
           s.find('\\') == std::string::npos && s.find('\0') == std::string::npos;
  };
  const auto version = unsigned_field("version", 0, 0, UINT32_MAX);
  if (version != kCheckpointVersion)
    throw Error(fmt::format("{}: checkpoint format version {} is not supported (this build reads {})", file, version,
                            kCheckpointVersion));
  // Row step counts are 32-bit: no step (nor epoch) beyond that is real.
  constexpr uint64_t kMaxStep = UINT32_MAX, kMaxRanks = 1 << 20;
  CheckpointManifest info;
  info.epoch = unsigned_field("epoch", 0, 0, kMaxStep);
  info.step = unsigned_field("step", 0, 0, kMaxStep);
  info.world_size = static_cast<int>(unsigned_field("world_size", 1, 1, kMaxRanks));
  info.model_slices = static_cast<int>(unsigned_field("model_slices", 1, 1, kMaxRanks));
  if (info.model_slices > info.world_size)
    fail("model_slices", fmt::format("is {}, more than world_size {}", info.model_slices, info.world_size));
  info.config = typed_field("config", nlohmann::json::object(), false);
  info.parameters = typed_field("parameters", nlohmann::json::array(), true);
  info.optimizer = typed_field("optimizer", nlohmann::json::object(), false);
  info.run_state = typed_field("run_state", nlohmann::json::object(), false);
  if (!m.contains("folder")) fail("folder", "is missing: the manifest lacks its slices");
  if (!m["folder"].is_string()) fail("folder", "must be a string");
  info.folder = m["folder"].get<std::string>();
  if (m.contains("run")) {
    const auto& r = m["run"];
    if (!r.is_string() || r.get<std::string>().size() > 64) fail("run", "must be a run id (a short string)");
    info.run = r.get<std::string>();
  }
  if (!plain_name(info.folder))
    fail("folder", fmt::format("must be a plain folder name (no '/', not '..'), found \"{}\"", info.folder));
  if (m.contains("grid")) {
    const auto& g = m["grid"];
    // A pipeline run's grid has a third entry: its stages (one slice file holds every stage's part).
    if (!g.is_array() || g.size() < 2 || g.size() > 3 || !g[0].is_number_unsigned() || !g[1].is_number_unsigned() ||
        (g.size() == 3 && !g[2].is_number_unsigned()))
      fail("grid", "must be [replicas, model_slices] or [replicas, model_slices, pipeline_stages], unsigned integers");
    const auto replicas = g[0].get<uint64_t>(), slices = g[1].get<uint64_t>();
    const uint64_t stages = g.size() == 3 ? g[2].get<uint64_t>() : 1;
    if (replicas < 1 || stages < 1 || slices != static_cast<uint64_t>(info.model_slices) ||
        replicas * slices * stages != static_cast<uint64_t>(info.world_size))
      fail("grid", fmt::format("is {}, inconsistent with world_size {} and model_slices {}", g.dump(),
                               info.world_size, info.model_slices));
    info.replicas = static_cast<int>(replicas);
    info.pipeline_stages = static_cast<int>(stages);
  }
  // Files the manifest names: each "<folder>/<plain name>", inside the epoch folder.
  const auto file_list = [&](const char* field) {
    std::vector<std::string> names;
    const nlohmann::json list = typed_field(field, nlohmann::json::array(), true);
    for (const auto& f : list) {
      const std::string prefix = info.folder + "/";
      if (!f.is_string() || f.get<std::string>().rfind(prefix, 0) != 0 ||
          !plain_name(f.get<std::string>().substr(prefix.size())))
        fail(field, fmt::format("entry {} is not a file inside the folder \"{}\"", f.dump(), info.folder));
      names.push_back(f.get<std::string>());
    }
    return names;
  };
  const auto files = file_list("files"), dct_files = file_list("dct_residual_files");
  if (m.contains("files") && files.size() != static_cast<size_t>(info.model_slices))
    fail("files", fmt::format("names {} files, model_slices is {}", files.size(), info.model_slices));
  info.has_dct_residuals = !dct_files.empty();
  // Every file of the checkpoint (older manifests list no slice files: their names are fixed).
  for (int s = 0; s < info.model_slices; ++s)
    info.files.push_back(files.empty() ? info.folder + "/" + fmt::format("slice{}.ckpt", s) : files[s]);
  info.files.insert(info.files.end(), dct_files.begin(), dct_files.end());
  // Only a manifest the user accepted unchecked may lack its files' checksums (then they load unchecked).
  if (sealed && !m.contains("checksums")) fail("checksums", "is missing");
  if (m.contains("checksums")) {
    const nlohmann::json checksums = typed_field("checksums", nlohmann::json::object(), false);
    for (const auto& [name, crc] : checksums.items()) {
      const std::string text = crc.is_string() ? crc.get<std::string>() : "";
      if (text.size() != 8 || text.find_first_not_of("0123456789abcdef") != std::string::npos)
        fail("checksums", fmt::format("entry \"{}\" must be 8 lowercase hex digits, found {}", name, crc.dump()));
      if (std::find(files.begin(), files.end(), name) == files.end() &&
          std::find(dct_files.begin(), dct_files.end(), name) == dct_files.end())
        fail("checksums", fmt::format("names \"{}\", which is not among the manifest's files", name));
      info.checksums[name] = static_cast<uint32_t>(std::stoul(text, nullptr, 16));
    }
    for (const auto& list : {files, dct_files})
      for (const auto& name : list)
        if (!info.checksums.contains(name)) fail("checksums", fmt::format("lacks the file \"{}\"", name));
  }
  if (m.contains("member_checksums")) {
    const nlohmann::json members = typed_field("member_checksums", nlohmann::json::object(), false);
    for (const auto& [name, crc] : members.items()) {
      const std::string text = crc.is_string() ? crc.get<std::string>() : "";
      if (std::find(std::begin(kCheckpointMemberFiles), std::end(kCheckpointMemberFiles), name) ==
          std::end(kCheckpointMemberFiles))
        fail("member_checksums", fmt::format("names \"{}\", which is not a file kept beside a checkpoint", name));
      if (text.size() != 16 || text.find_first_not_of("0123456789abcdef") != std::string::npos)
        fail("member_checksums", fmt::format("entry \"{}\" must be 16 lowercase hex digits, found {}", name, crc.dump()));
      info.member_checksums[name] = text;
    }
    info.has_member_checksums = true;
  }
  return info;
}

}  // namespace frugal::train
