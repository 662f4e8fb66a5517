#include "train/dlrm_checkpoint.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <cereal/archives/binary.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/sealed_json.h"
#include "core/regular_file.h"
#include "core/optim/optimizer.h"
#include "core/crc32c.h"
#include "train/best_epoch.h"

namespace frugal::train {
namespace fs = std::filesystem;
namespace {

// The folder of a checkpoint saved `step` steps into the run, within the epoch after `epoch`.
std::string mid_epoch_folder(uint64_t epoch, uint64_t step) { return fmt::format("dlrm-epoch-{}-step-{}", epoch, step); }

constexpr const char* kFormat = "frugal-dlrm";
constexpr int kVersion = 1;

struct StoredParam {
  std::string name;
  uint64_t offset = 0, rows = 0, full_rows = 0, cols = 0;
  std::vector<float> value, m, v;
  std::vector<uint32_t> row_steps;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(name, offset, rows, full_rows, cols, value, m, v, row_steps);
  }
};

std::string read_file(const fs::path& path) { return read_regular_file(path, "a DLRM checkpoint file"); }

uint32_t crc_of(const std::string& bytes) {
  return crc32c(std::as_bytes(std::span<const char>(bytes.data(), bytes.size())));
}

std::vector<StoredParam> decode_rank_file(const fs::path& path, uint64_t& steps) {
  const std::string bytes = read_file(path);
  std::vector<StoredParam> params;
  try {
    std::istringstream in(bytes);
    cereal::BinaryInputArchive ar(in);
    ar(steps, params);
  } catch (const cereal::Exception&) {
    throw Error(fmt::format("{}: truncated or corrupt (it ends before the data it declares)", path.string()));
  }
  for (const StoredParam& p : params)
    FRUGAL_CHECK(p.value.size() == p.rows * p.cols && p.offset + p.rows <= p.full_rows &&
                     // (m and v: one value per element, one per row (row-wise state), or none)
                     (p.m.empty() || p.m.size() == p.value.size() || p.m.size() == p.rows) &&
                     (p.v.empty() || p.v.size() == p.value.size() || p.v.size() == p.rows) &&
                     (p.row_steps.empty() || p.row_steps.size() == p.rows),
                 fmt::format("{}: parameter '{}' has inconsistent sizes", path.string(), p.name));
  return params;
}

}  // namespace

void save_dlrm_checkpoint(const std::string& dir, const std::string& config_text, uint64_t epoch, const layers::IdMap& ids,
                          layers::DlrmNetwork& network, const optim::Optimizer& optimizer, comm::Communicator* group,
                          const std::string& run, const std::string& run_state_text) {
  nlohmann::json config, run_state;
  try {
    config = nlohmann::json::parse(config_text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("DLRM checkpoint: the configuration is not JSON ({})", json_error_words(e)));
  }
  FRUGAL_CHECK(config.is_object(), "DLRM checkpoint: the configuration is not a JSON object");
  try {
    run_state = nlohmann::json::parse(run_state_text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("DLRM checkpoint: the run state is not JSON ({})", json_error_words(e)));
  }
  const int rank = comm::is_active(group) ? group->rank() : 0, ranks = comm::is_active(group) ? group->size() : 1;
  // A checkpoint saved within an epoch (its run state says how far: --checkpoint-every) has a folder
  // of its own beside the last epoch's, which stays whole until the manifest has moved on.
  const std::string folder = epoch_step_of(run_state) > 0 ? mid_epoch_folder(epoch, optimizer.steps())
                                                           : fmt::format("dlrm-epoch-{}", epoch);
  const fs::path root(dir), path = root / folder;
  fs::create_directories(path);
  // This rank's slices with their optimizer state.
  std::vector<StoredParam> params;
  const std::vector<Parameter*> list = network.parameters();
  FRUGAL_CHECK(list.size() == optimizer.size(), "DLRM checkpoint: the optimizer does not hold the network's parameters");
  for (size_t i = 0; i < list.size(); ++i) {
    const Parameter& p = *list[i];
    const optim::Optimizer::State& st = optimizer.state(i);
    StoredParam s{p.name, p.offset, p.value.rows(), p.sliced_axis == 0 ? p.full_rows : p.value.rows(), p.value.cols(),
                  std::vector<float>(p.value.data(), p.value.data() + p.value.size()), {}, {}, st.row_steps};
    // m and v: one per element, one per row (row-wise Adagrad's m, row-wise Adam's v), or none.
    for (const auto& [state, stored] : {std::pair{&st.m, &s.m}, std::pair{&st.v, &s.v}}) {
      const optim::StateLayout layout = optim::state_layout(*state, p.value);
      if (layout == optim::StateLayout::per_element || layout == optim::StateLayout::per_row)
        stored->assign(state->data(), state->data() + state->size());
    }
    params.push_back(std::move(s));
  }
  std::ostringstream out;
  {
    cereal::BinaryOutputArchive ar(out);
    ar(static_cast<uint64_t>(optimizer.steps()), params);
  }
  const std::string mine = out.str();
  const std::string file = fmt::format("rank{}.bin", rank);
  write_atomically(path / file, mine);
  std::vector<std::pair<std::string, uint32_t>> files = {{file, crc_of(mine)}};
  if (rank == 0) {
    const std::string id_bytes = ids.to_bytes();
    write_atomically(path / "ids.bin", id_bytes);
    files.emplace_back("ids.bin", crc_of(id_bytes));
  }
  // Every rank's checksums to rank 0, which commits the manifest.
  nlohmann::json sums = nlohmann::json::object();
  if (comm::is_active(group)) {
    const uint32_t crc = files[0].second;
    std::vector<std::vector<std::byte>> all;
    group->all_gather_bytes(std::as_bytes(std::span<const uint32_t>(&crc, 1)), all).wait();
    for (size_t r = 0; r < all.size(); ++r) {
      FRUGAL_CHECK(all[r].size() == sizeof(uint32_t), fmt::format("DLRM checkpoint: rank {} sent a bad checksum", r));
      uint32_t c = 0;
      std::memcpy(&c, all[r].data(), sizeof(c));
      sums[fmt::format("rank{}.bin", r)] = c;
    }
  } else {
    sums[file] = files[0].second;
  }
  if (rank == 0) {
    sums["ids.bin"] = files.back().second;
    nlohmann::json manifest = {{"format", kFormat}, {"version", kVersion}, {"epoch", epoch},
                               {"world_size", ranks}, {"folder", folder},  {"config", config},
                               {"checksums", sums}, {"run", run}, {"run_state", run_state},
                               {"step", static_cast<uint64_t>(optimizer.steps())}};
    seal_json(manifest);  // an edited or damaged manifest is refused, not trusted
    std::string previous;
    if (fs::exists(root / "manifest.json")) {
      try {
        previous = nlohmann::json::parse(read_file(root / "manifest.json")).value("folder", "");
      } catch (const std::exception&) {
        previous.clear();  // an unreadable old manifest: nothing to clean up by name
      }
    }
    write_atomically(root / "manifest.json", manifest.dump(1, ' ', false, nlohmann::json::error_handler_t::replace));
    if (!previous.empty() && previous != folder && previous.find('/') == std::string::npos &&
        previous.rfind("dlrm-epoch-", 0) == 0)
      fs::remove_all(root / previous);
  }
  if (comm::is_active(group)) group->barrier().wait();  // the manifest is in place for every rank
}

bool is_dlrm_checkpoint(const std::string& dir) {
  const fs::path p = fs::path(dir) / "manifest.json";
  if (!fs::exists(p)) return false;
  try {
    return nlohmann::json::parse(read_file(p)).value("format", "") == kFormat;
  } catch (const std::exception&) {
    return false;
  }
}

namespace {

// The manifest (checked) and what it says.
std::pair<DlrmCheckpointInfo, nlohmann::json> read_manifest_json(const std::string& dir, bool accept_unchecked) {
  const fs::path mpath = fs::path(dir) / "manifest.json";
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(read_file(mpath));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: not JSON ({})", mpath.string(), json_error_words(e)));
  }
  const auto field = [&](const char* name) -> const nlohmann::json& {
    FRUGAL_CHECK(m.contains(name), fmt::format("{}: no field '{}'", mpath.string(), name));
    return m.at(name);
  };
  FRUGAL_CHECK(field("format").is_string() && m["format"] == kFormat,
               fmt::format("{}: field 'format' is not \"{}\" (not a DLRM checkpoint)", mpath.string(), kFormat));
  FRUGAL_CHECK(field("version").is_number_integer() && m["version"] == kVersion,
               fmt::format("{}: field 'version' is not {}", mpath.string(), kVersion));
  check_json_seal(m, mpath.string(), accept_unchecked);
  DlrmCheckpointInfo info;
  FRUGAL_CHECK(field("epoch").is_number_unsigned(), fmt::format("{}: field 'epoch' is not a count", mpath.string()));
  info.epoch = m["epoch"].get<uint64_t>();
  FRUGAL_CHECK(field("world_size").is_number_integer() && m["world_size"].get<int64_t>() >= 1 &&
                   m["world_size"].get<int64_t>() <= 65536,
               fmt::format("{}: field 'world_size' is not a rank count", mpath.string()));
  info.world_size = m["world_size"].get<int>();
  FRUGAL_CHECK(field("folder").is_string() && m["folder"].get<std::string>().rfind("dlrm-epoch-", 0) == 0 &&
                   m["folder"].get<std::string>().find('/') == std::string::npos,
               fmt::format("{}: field 'folder' is not an epoch folder", mpath.string()));
  info.folder = m["folder"];
  const uint64_t saved_step = m.contains("step") && m["step"].is_number_unsigned() ? m["step"].get<uint64_t>() : 0;
  FRUGAL_CHECK(info.folder == fmt::format("dlrm-epoch-{}", info.epoch) ||
                   info.folder == mid_epoch_folder(info.epoch, saved_step),
               fmt::format("{}: field 'folder' (\"{}\") is not the folder of its epoch {}", mpath.string(), info.folder,
                           info.epoch));
  FRUGAL_CHECK(field("config").is_object(), fmt::format("{}: field 'config' is not an object", mpath.string()));
  info.config = m["config"].dump();
  if (m.contains("run")) {
    FRUGAL_CHECK(m["run"].is_string() && m["run"].get<std::string>().size() <= 64,
                 fmt::format("{}: field 'run' is not a run id (a short string)", mpath.string()));
    info.run = m["run"];
  }
  if (m.contains("step")) {
    FRUGAL_CHECK(m["step"].is_number_unsigned(), fmt::format("{}: field 'step' is not a count", mpath.string()));
    info.step = m["step"];
  }
  if (m.contains("run_state")) {
    FRUGAL_CHECK(m["run_state"].is_object(), fmt::format("{}: field 'run_state' is not an object", mpath.string()));
    info.run_state = m["run_state"].dump();
  }
  return {info, m};
}

}  // namespace

DlrmCheckpointInfo read_dlrm_manifest(const std::string& dir, bool accept_unchecked) {
  return read_manifest_json(dir, accept_unchecked).first;
}

DlrmCheckpointInfo read_dlrm_checkpoint(const std::string& dir, bool accept_unchecked) {
  const fs::path mpath = fs::path(dir) / "manifest.json";
  auto [info, m] = read_manifest_json(dir, accept_unchecked);
  FRUGAL_CHECK(m.contains("checksums"), fmt::format("{}: no field 'checksums'", mpath.string()));
  FRUGAL_CHECK(m["checksums"].is_object(), fmt::format("{}: field 'checksums' is not an object", mpath.string()));
  std::vector<std::string> needed = {"ids.bin"};
  for (int r = 0; r < info.world_size; ++r) needed.push_back(fmt::format("rank{}.bin", r));
  for (const std::string& name : needed) {
    FRUGAL_CHECK(m["checksums"].contains(name) && m["checksums"][name].is_number_unsigned(),
                 fmt::format("{}: no checksum for {}", mpath.string(), name));
    const fs::path file = fs::path(dir) / info.folder / name;
    FRUGAL_CHECK(fs::exists(file), fmt::format("{}: missing (named by {})", file.string(), mpath.string()));
    FRUGAL_CHECK(crc_of(read_file(file)) == m["checksums"][name].get<uint32_t>(),
                 fmt::format("{}: checksum mismatch (the file is damaged)", file.string()));
  }
  return info;
}

layers::IdMap load_dlrm_ids(const std::string& dir, const DlrmCheckpointInfo& info) {
  const fs::path file = fs::path(dir) / info.folder / "ids.bin";
  return layers::IdMap::from_bytes(read_file(file), file.string());
}

void load_dlrm_state(const std::string& dir, const DlrmCheckpointInfo& info, layers::DlrmNetwork& network,
                     optim::Optimizer* optimizer) {
  // Every saved slice, by parameter name.
  std::map<std::string, std::vector<StoredParam>> saved;
  uint64_t steps = 0;
  for (int r = 0; r < info.world_size; ++r) {
    const fs::path file = fs::path(dir) / info.folder / fmt::format("rank{}.bin", r);
    uint64_t file_steps = 0;
    for (StoredParam& p : decode_rank_file(file, file_steps)) saved[p.name].push_back(std::move(p));
    FRUGAL_CHECK(r == 0 || file_steps == steps,
                 fmt::format("{}: {} optimizer steps, rank 0's file {}", file.string(), file_steps, steps));
    steps = file_steps;
  }
  if (optimizer != nullptr) optimizer->set_steps(steps);
  const std::vector<Parameter*> list = network.parameters();
  for (size_t i = 0; i < list.size(); ++i) {
    Parameter& p = *list[i];
    const auto it = saved.find(p.name);
    FRUGAL_CHECK(it != saved.end(), fmt::format("{}: no parameter '{}' (saved by another model?)", dir, p.name));
    const size_t cols = p.value.cols(), full = p.sliced_axis == 0 ? p.full_rows : p.value.rows();
    optim::Optimizer::State* st = optimizer != nullptr ? &optimizer->state(i) : nullptr;
    size_t filled = 0;
    for (const StoredParam& s : it->second) {
      FRUGAL_CHECK(s.cols == cols && s.full_rows == full,
                   fmt::format("{}: parameter '{}' is {} x {} there, {} x {} here", dir, p.name, s.full_rows, s.cols,
                               full, cols));
      const size_t lo = std::max<size_t>(s.offset, p.offset), hi = std::min<size_t>(s.offset + s.rows, p.offset + p.value.rows());
      for (size_t g = lo; g < hi; ++g) {
        const size_t from = g - s.offset, to = g - p.offset;
        std::memcpy(p.value.row(to), s.value.data() + from * cols, cols * sizeof(float));
        if (st != nullptr) {
          // m and v are as wide as the weights, or one value per row (row-wise): the saved ones must be too.
          for (const auto& [state, stored] : {std::pair{&st->m, &s.m}, std::pair{&st->v, &s.v}}) {
            const size_t width = !state->empty() && state->rows() == p.value.rows() ? state->cols() : 0;
            if (stored->empty() || width == 0) continue;
            FRUGAL_CHECK(stored->size() == s.rows * width,
                         fmt::format("{}: the optimizer state of '{}' does not fit this run's optimizer ({} values "
                                     "for {} rows of {})", dir, p.name, stored->size(), s.rows, width));
            std::memcpy(state->row(to), stored->data() + from * width, width * sizeof(float));
          }
          if (!s.row_steps.empty() && to < st->row_steps.size()) st->row_steps[to] = s.row_steps[from];
        }
        ++filled;
      }
      if (p.sliced_axis != 0 && filled >= p.value.rows()) break;  // a replicated parameter: one copy
    }
    FRUGAL_CHECK(filled >= p.value.rows(), fmt::format("{}: parameter '{}' has rows no file holds", dir, p.name));
  }
}

}  // namespace frugal::train
