#include "core/train/checkpoint_manifest.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <cereal/archives/binary.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>
#include <fmt/format.h>

#include "core/communicator.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "core/train/dct_state_file.h"
#include "core/tensor_io.h"

namespace frugal {
namespace fs = std::filesystem;
namespace {

constexpr char kMagic[8] = {'F', 'R', 'U', 'G', 'A', 'L', 'C', 'K'};

void check_config(const nlohmann::json& saved, const nlohmann::json& wanted, const std::string& dir) {
  if (!saved.is_object() || !wanted.is_object()) return;
  for (const auto& [key, value] : wanted.items()) {
    const auto it = saved.find(key);
    if (it != saved.end() && *it != value)
      throw Error(fmt::format("{}: checkpoint was made with {} = {}, this run has {} = {}", dir, key, it->dump(),
                              key, value.dump()));
  }
}

comm::Communicator* group_of(comm::Communicator* c) { return comm::is_active(c) ? c : nullptr; }

// One parameter slice as stored in a slice file.
struct StoredParam {
  std::string name;
  int axis = -1;
  uint64_t offset = 0, full_rows = 0, full_cols = 0;
  Tensor value, m, v;
  std::vector<uint32_t> row_steps;
};

struct SliceFile {
  std::vector<StoredParam> params;
  uint64_t step = 0, epoch = 0;
  std::vector<std::string> layer_states;
};

std::string encode_slice(const Model& model, const Trainer& trainer) {
  std::ostringstream buf(std::ios::binary);
  cereal::BinaryOutputArchive ar(buf);
  save_file_header(ar, kMagic, kCheckpointVersion);
  const auto params = model.parameters();
  ar(static_cast<uint64_t>(params.size()));
  for (size_t i = 0; i < params.size(); ++i) {
    const Parameter& p = *params[i];
    const auto& s = trainer.optimizer().state(i);
    ar(p.name, static_cast<int32_t>(p.sliced_axis), static_cast<uint64_t>(p.offset),
       static_cast<uint64_t>(p.full_rows), static_cast<uint64_t>(p.full_cols));
    save_tensor(ar, p.value);
    save_tensor(ar, s.m);
    save_tensor(ar, s.v);
    ar(s.row_steps);
  }
  ar(trainer.step(), trainer.epoch());
  std::vector<std::string> states;
  for (const auto& layer : model.layers()) {
    std::ostringstream ls(std::ios::binary);
    {
      cereal::BinaryOutputArchive lar(ls);
      layer->save_state(lar);
    }
    states.push_back(ls.str());
  }
  ar(states);
  return buf.str();
}

// Reads past `bytes` bytes of the archive (moments that weights-only loading does not keep)
// without holding them in memory.
void skip_bytes(cereal::BinaryInputArchive& ar, uint64_t bytes) {
  char scratch[1 << 16];
  for (uint64_t left = bytes; left > 0;) {
    const uint64_t n = std::min<uint64_t>(left, sizeof scratch);
    ar(cereal::binary_data(scratch, n));
    left -= n;
  }
}

// `full`: also the Adam moments and the layer states (resume); else the weights only (inference).
SliceFile decode_slice(const fs::path& path, bool full) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open", path.string()));
  SliceFile f;
  try {
    cereal::BinaryInputArchive ar(in);
    check_file_header(ar, kMagic, kCheckpointVersion, path.string(), "a frugal checkpoint");
    uint64_t n = 0;
    ar(n);
    FRUGAL_CHECK(n < 4096, fmt::format("{}: implausible parameter count {}", path.string(), n));
    f.params.resize(n);
    for (StoredParam& p : f.params) {
      int32_t axis = 0;
      ar(p.name, axis, p.offset, p.full_rows, p.full_cols);
      p.axis = axis;
      uint64_t r = 0, c = 0;
      // Shapes are read from the file itself: this is what reslicing needs.
      for (Tensor* t : {&p.value, &p.m, &p.v}) {
        ar(r, c);
        FRUGAL_CHECK(r * c < (uint64_t{1} << 40), path.string() + ": implausible tensor shape");
        if (!full && t != &p.value) {
          skip_bytes(ar, r * c * sizeof(float));
          continue;
        }
        t->resize(r, c);
        if (!t->empty()) ar(cereal::binary_data(t->data(), t->size() * sizeof(float)));
      }
      ar(p.row_steps);
    }
    ar(f.step, f.epoch);
    if (full) ar(f.layer_states);
  } catch (const cereal::Exception& e) {
    throw Error(fmt::format("{}: truncated or corrupt checkpoint ({})", path.string(), e.what()));
  }
  return f;
}

// Copies the part of `from` (an old slice) that overlaps `to` (this rank's new slice) along the
// sliced axis, for the value and (with `state`) the optimizer state (whichever moments it has).
void copy_overlap(const StoredParam& from, Parameter& to, optim::Optimizer::State* state) {
  std::vector<std::pair<const Tensor*, Tensor*>> pairs{{&from.value, &to.value}};
  if (state != nullptr) pairs.emplace_back(&from.m, &state->m);
  if (state != nullptr && !state->v.empty()) pairs.emplace_back(&from.v, &state->v);
  const size_t local = to.sliced_axis == 0 ? to.value.rows() : to.value.cols();
  const size_t from_len = from.axis == 0 ? from.value.rows() : from.value.cols();
  const size_t lo = std::max<size_t>(to.offset, from.offset), hi = std::min<size_t>(to.offset + local, from.offset + from_len);
  for (size_t g = lo; g < hi; ++g) {
    const size_t a = g - from.offset, b = g - to.offset;
    if (to.sliced_axis == 0) {
      for (const auto& [src, dst] : pairs) std::copy_n(src->row(a), to.value.cols(), dst->row(b));
      if (state != nullptr) state->row_steps[b] = from.row_steps[a];
    } else {
      for (size_t r = 0; r < to.value.rows(); ++r)
        for (const auto& [src, dst] : pairs) dst->at(r, b) = src->at(r, a);
    }
  }
  if (to.sliced_axis == 1 && state != nullptr) state->row_steps = from.row_steps;  // rows are not sliced: equal everywhere
}

// Whether this rank's slices are exactly the saved slice `slice` of every parameter: the same
// number of slices and the same bounds (slice weights may differ between runs).
bool same_slicing(const std::string& dir, const CheckpointManifest& info, const Model& model, int slices, int slice) {
  if (info.model_slices != slices) return false;
  const auto params = model.parameters();
  if (!info.parameters.is_array() || info.parameters.size() != params.size()) return true;  // the files will say
  for (size_t i = 0; i < params.size(); ++i) {
    const Parameter& p = *params[i];
    if (p.sliced_axis < 0) continue;
    std::vector<size_t> bounds;
    try {
      bounds = info.parameters[i].value("slice_bounds", std::vector<size_t>{});
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("{}/manifest.json: damaged parameter list ({})", dir, e.what()));
    }
    const size_t local = p.sliced_axis == 0 ? p.value.rows() : p.value.cols();
    if (bounds.size() == static_cast<size_t>(slices) + 1 &&
        (bounds[slice] != p.offset || bounds[slice + 1] != p.offset + local))
      return false;
  }
  return true;
}

// Reads this rank's slices of every parameter from the checkpoint's slice files: its own file when
// the slicing is the same, else every old file, each contributing its overlap. With a trainer
// (resume: `trainer`) also the Adam state, the layer states (same slicing only), the step and
// the epoch.
// Returns whether the slicing was the same (see same_slicing).
// The optimizer a checkpoint's state belongs to, as its manifest records it (checkpoints from
// before the record hold lazy Adam state).
nlohmann::json optimizer_record(const optim::Options& o) {
  return {{"method", optim::to_string(o.method)}, {"sparse_updates", optim::to_string(o.updates)}};
}

// Row step counts mean "updates so far" (lazy) or "step of the last update" (catchup). A checkpoint
// of one mode resumed in the other: lazy rows owe nothing, so they count as caught up at the
// checkpoint's step; catch-up rows have in effect been updated at every step up to their last one.
void convert_row_steps(const nlohmann::json& saved, Trainer& trainer, uint64_t step) {
  if (saved.value("sparse_updates", "lazy") == "lazy" &&
      trainer.optimizer().options().updates == optim::SparseUpdates::catchup)
    for (size_t i = 0; i < trainer.optimizer().size(); ++i) {
      auto& steps = trainer.optimizer().state(i).row_steps;
      std::fill(steps.begin(), steps.end(), static_cast<uint32_t>(step));
    }
}

bool restore_slices(const std::string& dir, const CheckpointManifest& info, Model& model, comm::Communicator* mp,
                    Trainer* trainer) {
  const int slices = mp != nullptr ? mp->size() : 1, slice = mp != nullptr ? mp->rank() : 0;
  auto params = model.parameters();
  const bool same_layout = same_slicing(dir, info, model, slices, slice);
  std::vector<int> sources;
  if (same_layout) sources.push_back(slice);
  else for (int s = 0; s < info.model_slices; ++s) sources.push_back(s);
  for (const int s : sources) {
    const fs::path path = fs::path(dir) / info.folder / fmt::format("slice{}.ckpt", s);
    const SliceFile f = decode_slice(path, trainer != nullptr);
    FRUGAL_CHECK(f.params.size() == params.size(),
                 fmt::format("{}: has {} parameters, the model {}", path.string(), f.params.size(), params.size()));
    for (size_t i = 0; i < params.size(); ++i) {
      Parameter& p = *params[i];
      const StoredParam& sp = f.params[i];
      FRUGAL_CHECK(sp.name == p.name, fmt::format("{}: parameter {} found where {} was expected", path.string(), sp.name, p.name));
      FRUGAL_CHECK(sp.axis == p.sliced_axis && sp.full_rows == (p.sliced_axis < 0 ? p.value.rows() : p.full_rows) &&
                       sp.full_cols == (p.sliced_axis < 0 ? p.value.cols() : p.full_cols),
                   fmt::format("{}: parameter {} has another shape or slicing than the model's", path.string(), p.name));
      auto* st = trainer != nullptr ? &trainer->optimizer().state(i) : nullptr;
      // Adam has two moments, SGD one: the state must be the kind this run's optimizer keeps.
      FRUGAL_CHECK(st == nullptr || (sp.m.rows() == sp.value.rows() && sp.m.cols() == sp.value.cols() &&
                                     sp.v.empty() == st->v.empty()),
                   fmt::format("{}: the optimizer state of {} does not fit this run's optimizer ({})", path.string(),
                               p.name, optim::to_string(trainer->optimizer().options().method)));
      if (same_layout || p.sliced_axis < 0) {
        FRUGAL_CHECK(sp.value.rows() == p.value.rows() && sp.value.cols() == p.value.cols() &&
                         sp.row_steps.size() == p.value.rows(),
                     fmt::format("{}: parameter {} is {}x{}, expected {}x{}", path.string(), p.name, sp.value.rows(),
                                 sp.value.cols(), p.value.rows(), p.value.cols()));
        p.value = sp.value;
        if (st == nullptr) continue;
        st->m = sp.m;
        st->v = sp.v;
        st->row_steps = sp.row_steps;
      } else {
        copy_overlap(sp, p, st);
      }
    }
    if (trainer == nullptr) continue;
    trainer->set_step(f.step);
    trainer->set_epoch(f.epoch);
    if (same_layout) {
      FRUGAL_CHECK(f.layer_states.size() == model.layers().size(), path.string() + ": layer count differs");
      for (size_t l = 0; l < f.layer_states.size(); ++l) {
        std::istringstream ls(f.layer_states[l], std::ios::binary);
        try {
          cereal::BinaryInputArchive lar(ls);
          model.layers()[l]->load_state(lar);
        } catch (const cereal::Exception& e) {
          throw Error(fmt::format("{}: truncated or corrupt layer state ({})", path.string(), e.what()));
        }
      }
    }
  }
  return same_layout;
}

}  // namespace

void save_checkpoint(const std::string& dir, const Model& model, const Trainer& trainer, const nlohmann::json& config,
                     const nlohmann::json& run_state) {
  comm::Communicator* mp = group_of(trainer.parallel().model);
  comm::Communicator* dp = group_of(trainer.parallel().data);
  const int slices = mp != nullptr ? mp->size() : 1, slice = mp != nullptr ? mp->rank() : 0;
  const bool writer = dp == nullptr || dp->rank() == 0;  // replicas are identical: replica 0 writes
  const std::string folder = fmt::format("epoch-{}-step-{}", trainer.epoch(), trainer.step());
  const int replicas = dp != nullptr ? dp->size() : 1, replica = dp != nullptr ? dp->rank() : 0;
  const bool dct = trainer.has_feedback_state();
  if (dct) {
    // Residuals differ between replicas: every rank writes its own, and replica 0 of each slice
    // goes on only once its replicas' files are on disk.
    fs::create_directories(fs::path(dir) / folder);
    write_atomically(fs::path(dir) / folder / dct_state_file_name(replica, slice), encode_dct_state(trainer));
    dp->barrier().wait();
  }
  if (writer) {
    fs::create_directories(fs::path(dir) / folder);
    write_atomically(fs::path(dir) / folder / fmt::format("slice{}.ckpt", slice), encode_slice(model, trainer));
    if (mp != nullptr) mp->barrier().wait();  // every slice is on disk before the manifest names them
  }
  if (writer && slice == 0) {
    // Every sliced layer of a model shares one group and its slice weights.
    const auto& weights = slices > 1 ? model.input().placement().weights : std::vector<double>{};
    nlohmann::json params = nlohmann::json::array();
    for (const Parameter* p : model.parameters()) {
      const size_t len = p->sliced_axis == 0 ? p->full_rows : p->sliced_axis == 1 ? p->full_cols : 0;
      params.push_back({{"name", p->name},
                        {"sliced_axis", p->sliced_axis},
                        {"shape", {p->full_rows, p->full_cols}},
                        {"slice_bounds", p->sliced_axis < 0 ? std::vector<size_t>{} : slice_bounds(len, slices, weights)}});
    }
    nlohmann::json files = nlohmann::json::array();
    for (int s = 0; s < slices; ++s) files.push_back(folder + "/" + fmt::format("slice{}.ckpt", s));
    nlohmann::json dct_files = nlohmann::json::array();
    if (dct)
      for (int r = 0; r < replicas; ++r)
        for (int s = 0; s < slices; ++s) dct_files.push_back(folder + "/" + dct_state_file_name(r, s));
    const int world = (mp != nullptr ? mp->size() : 1) * (dp != nullptr ? dp->size() : 1);
    const nlohmann::json manifest = {{"format", "frugal-checkpoint"}, {"version", kCheckpointVersion},
                                     {"epoch", trainer.epoch()},      {"step", trainer.step()},
                                     {"world_size", world},           {"grid", {world / slices, slices}},
                                     {"model_slices", slices},        {"folder", folder},
                                     {"files", files},                {"parameters", params},
                                     {"dct_residual_files", dct_files}, {"config", config},
                                     {"optimizer", optimizer_record(trainer.optimizer().options())},
                                     {"run_state", run_state}};
    write_atomically(fs::path(dir) / "manifest.json", manifest.dump(2) + "\n");
    // Older epochs are no longer referenced: remove them (the new one is committed).
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.is_directory() && entry.path().filename() != folder &&
          entry.path().filename().string().rfind("epoch-", 0) == 0)
        fs::remove_all(entry.path());
  }
}

CheckpointManifest read_manifest(const std::string& dir) {
  const fs::path path = fs::path(dir) / "manifest.json";
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("{}: no checkpoint here (cannot read manifest.json)", dir));
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: corrupt manifest: {}", path.string(), e.what()));
  }
  if (!m.is_object() || m.value("format", "") != "frugal-checkpoint")
    throw Error(fmt::format("{}: not a frugal checkpoint manifest", path.string()));
  const auto version = m.value("version", 0u);
  if (version != kCheckpointVersion)
    throw Error(fmt::format("{}: checkpoint format version {} is not supported (this build reads {})", path.string(),
                            version, kCheckpointVersion));
  CheckpointManifest info;
  info.epoch = m.value("epoch", uint64_t{0});
  info.step = m.value("step", uint64_t{0});
  info.world_size = m.value("world_size", 1);
  info.model_slices = m.value("model_slices", 1);
  info.config = m.value("config", nlohmann::json::object());
  info.parameters = m.value("parameters", nlohmann::json::array());
  info.optimizer = m.value("optimizer", nlohmann::json::object());
  info.run_state = m.value("run_state", nlohmann::json::object());
  FRUGAL_CHECK(info.model_slices >= 1 && m.contains("folder"), path.string() + ": manifest lacks its slices");
  info.folder = m.at("folder").get<std::string>();
  const auto grid = m.value("grid", nlohmann::json::array());
  info.replicas = grid.is_array() && grid.size() == 2 ? grid[0].get<int>() : 1;
  info.has_dct_residuals = !m.value("dct_residual_files", nlohmann::json::array()).empty();
  return info;
}

CheckpointManifest load_checkpoint(const std::string& dir, Model& model, Trainer& trainer,
                                   const nlohmann::json& config) {
  CheckpointManifest info = read_manifest(dir);
  check_config(info.config, config, dir);
  const std::string method = info.optimizer.value("method", "adam"),
                    wanted = optim::to_string(trainer.optimizer().options().method);
  FRUGAL_CHECK(method == wanted, fmt::format("{}: checkpoint holds {} state, this run uses {}", dir, method, wanted));
  comm::Communicator* mp = group_of(trainer.parallel().model);
  const int slice = mp != nullptr ? mp->rank() : 0;
  const bool same_layout = restore_slices(dir, info, model, mp, &trainer);
  convert_row_steps(info.optimizer, trainer, info.step);
  // DCT-DP residuals belong to one rank of one grid; on another grid the run starts them empty.
  comm::Communicator* dp = group_of(trainer.parallel().data);
  const int replicas = dp != nullptr ? dp->size() : 1, replica = dp != nullptr ? dp->rank() : 0;
  if (trainer.has_feedback_state() && info.has_dct_residuals && same_layout && info.replicas == replicas) {
    load_dct_state((fs::path(dir) / info.folder / dct_state_file_name(replica, slice)).string(), trainer);
    info.dct_residuals_restored = true;
  }
  return info;
}

void save_checkpoint(const std::string& dir, const Model& model, const Trainer& trainer) {
  save_checkpoint(dir, model, trainer, nlohmann::json::object());
}

CheckpointInfo load_checkpoint(const std::string& dir, Model& model, Trainer& trainer) {
  return load_checkpoint(dir, model, trainer, nlohmann::json::object());
}

CheckpointInfo read_checkpoint_manifest(const std::string& dir) { return read_manifest(dir); }

CheckpointInfo load_weights(const std::string& dir, Model& model, comm::Communicator* group) {
  CheckpointManifest info = read_manifest(dir);
  restore_slices(dir, info, model, group_of(group), nullptr);
  return info;
}

}  // namespace frugal
