#include "train/checkpoint_manifest.h"

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
#include "core/regular_file.h"
#include "core/crc32c.h"
#include "core/data/fingerprint.h"
#include "core/sealed_json.h"
#include "core/warnings.h"
#include "core/optim/optimizer.h"
#include "train/checkpoint_history.h"
#include "train/checkpoint_slice.h"
#include "train/pipeline_checkpoint.h"
#include "train/dct_state_file.h"
#include "core/tensor_io.h"

namespace frugal::train {
namespace fs = std::filesystem;
namespace {

// The CRC32C of a whole file, read in chunks.
uint32_t file_crc32c(const fs::path& path) {
  require_regular_file(path, "a checkpoint file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open", path.string()));
  std::vector<char> buf(1 << 20);
  uint32_t crc = 0;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto n = static_cast<size_t>(in.gcount());
    if (n > 0) crc = crc32c(std::as_bytes(std::span<const char>(buf.data(), n)), crc);
  }
  if (in.bad()) throw Error(fmt::format("{}: read failed", path.string()));
  return crc;
}

// What the manifest records of a file kept beside the checkpoint: the data fingerprint's 64-bit
// hash (core/data/fingerprint.h: the size and sampled blocks, the last one always). Not the file's
// CRC32C: each member file ends with the CRC32C of its contents, and the CRC of data followed by its
// own CRC is the same constant for every file. The fingerprint's last block holds that embedded
// CRC, so any change the file's own check would not refuse changes the fingerprint.
std::string member_fingerprint(const fs::path& path) {
  require_regular_file(path, "a file kept beside a checkpoint");
  return fmt::format("{:016x}", data::fingerprint(path.string()).hash);
}

// Checks `relative` (a path under `dir` the manifest names) against its recorded CRC32C before it is
// decoded. Manifests from before checksums record none: their files load unchecked.
void verify_checksum(const std::string& dir, const CheckpointManifest& info, const std::string& relative) {
  if (info.checksums.empty()) return;
  const fs::path path = fs::path(dir) / relative;
  const auto it = info.checksums.find(relative);
  if (it == info.checksums.end())
    throw Error(fmt::format("{}: manifest.json records no checksum for this file", path.string()));
  check_checksum(path.string(), it->second, file_crc32c(path));
}

}  // namespace

bool verify_member_file(const std::string& dir, const CheckpointManifest& info, const std::string& name,
                        bool accept_unchecked) {
  const fs::path path = fs::path(dir) / name;
  if (!fs::exists(fs::symlink_status(path))) return false;
  const std::string print = member_fingerprint(path);
  const auto it = info.member_checksums.find(name);
  std::string problem;
  if (!info.has_member_checksums)
    problem = "the checkpoint's manifest.json was written before frugal recorded the files beside it, so this "
              "file cannot be tied to the run";
  else if (it == info.member_checksums.end())
    problem = "manifest.json does not list it: it was not written by the run that saved this checkpoint";
  else if (it->second != print)
    problem = fmt::format("its checksum {} is not the {} manifest.json records: it belongs to another run or was "
                          "changed", print, it->second);
  if (problem.empty()) return true;
  if (!accept_unchecked)
    throw Error(fmt::format("{}: {} (--accept-unchecked-checkpoint uses it all the same, with a warning)",
                            path.string(), problem));
  warn(fmt::format("{}: {}; used unchecked (--accept-unchecked-checkpoint)", path.string(), problem));
  return true;
}

void require_same_settings(const nlohmann::json& saved, const nlohmann::json& wanted, const std::string& where) {
  if (!saved.is_object() || !wanted.is_object()) return;
  for (const auto& [key, value] : wanted.items()) {
    if (key == "precision") continue;  // files hold f32: either storage resumes them
    const auto it = saved.find(key);
    if (it != saved.end() && *it != value)
      throw Error(fmt::format("{}: the checkpoint was saved with {} = {}, this run has {} = {}", where, key, it->dump(),
                              key, value.dump()));
  }
}

void verify_checkpoint_files(const std::string& dir, const CheckpointManifest& info) {
  for (const std::string& relative : info.files) {
    const fs::path path = fs::path(dir) / relative;
    if (!fs::is_regular_file(path)) throw Error(fmt::format("{}: missing (manifest.json names it)", path.string()));
    verify_checksum(dir, info, relative);
  }
}

namespace {

comm::Communicator* group_of(comm::Communicator* c) { return comm::is_active(c) ? c : nullptr; }

// Every parameter's record of a slice file (name, slicing, value, optimizer state), as cereal
// writes them one after the other: a slice file is the count, these, the step, the epoch and the
// layer states, so that a pipeline's stages can each encode their own and the first concatenate them.
std::string encode_params(const Model& model, const optim::Optimizer& optimizer) {
  std::ostringstream buf(std::ios::binary);
  cereal::BinaryOutputArchive ar(buf);
  const auto params = model.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const Parameter& p = *params[i];
    const auto& s = optimizer.state(i);
    ar(p.name, static_cast<int32_t>(p.sliced_axis), static_cast<uint64_t>(p.offset),
       static_cast<uint64_t>(p.full_rows), static_cast<uint64_t>(p.full_cols));
    save_tensor(ar, p.value);
    save_tensor(ar, s.m);
    save_tensor(ar, s.v);
    ar(s.row_steps);
  }
  return buf.str();
}

std::vector<std::string> encode_layer_states(const Model& model) {
  std::vector<std::string> states;
  for (const auto& layer : model.layers()) {
    std::ostringstream ls(std::ios::binary);
    {
      cereal::BinaryOutputArchive lar(ls);
      layer->save_state(lar);
    }
    states.push_back(ls.str());
  }
  return states;
}

// A slice file from its parts (encode_params' records of `count` parameters, in order).
std::string assemble_slice(uint64_t count, const std::string& records, uint64_t step, uint64_t epoch,
                           const std::vector<std::string>& states) {
  std::ostringstream buf(std::ios::binary);
  {
    cereal::BinaryOutputArchive ar(buf);
    save_file_header(ar, kSliceFileMagic, kCheckpointVersion);
    ar(count);
  }
  buf.write(records.data(), static_cast<std::streamsize>(records.size()));
  {
    cereal::BinaryOutputArchive ar(buf);
    ar(step, epoch);
    ar(states);
  }
  return buf.str();
}

std::string encode_slice(const Model& model, const Trainer& trainer) {
  return assemble_slice(model.parameters().size(), encode_params(model, trainer.optimizer()), trainer.step(),
                        trainer.epoch(), encode_layer_states(model));
}

// Copies the part of `from` (an old slice) that overlaps `to` (this rank's new slice) along the
// sliced axis, for the value and (with `state`) the optimizer state (whichever moments it has).
// A state tensor may be laid out otherwise than the stored one when a row-sparse parameter's rows
// became whole or split (a row-wise optimizer keeps per-element state for a column slice,
// optim::Optimizer::row_wise): one value per row becomes that value for each of the row's elements,
// per-element values become their mean over the whole row (exact for a second moment or Adagrad's
// sum: the row-wise one is the mean of the squares), and a first moment one side lacks starts at 0
// or is left out. first: the first stored slice copied into `to` (a per-row value summed over
// several column slices starts from 0 there).
void copy_overlap(const StoredParam& from, Parameter& to, optim::Optimizer::State* state, bool first) {
  using optim::StateLayout;
  struct Pair {
    const Tensor* src;
    Tensor* dst;
    StateLayout in, out;
  };
  std::vector<Pair> pairs{{&from.value, &to.value, StateLayout::per_element, StateLayout::per_element}};
  if (state != nullptr)
    for (const auto& [src, dst] : {std::pair{&from.m, &state->m}, std::pair{&from.v, &state->v}})
      if (!dst->empty())
        pairs.push_back({src, dst, optim::state_layout(*src, from.value), optim::state_layout(*dst, to.value)});
  const size_t local = to.sliced_axis == 0 ? to.value.rows() : to.value.cols();
  const size_t from_len = from.axis == 0 ? from.value.rows() : from.value.cols();
  const size_t full_cols = to.sliced_axis == 1 ? to.full_cols : to.value.cols();
  std::vector<float> row(std::max(to.value.cols(), from.value.cols()));
  const size_t lo = std::max<size_t>(to.offset, from.offset), hi = std::min<size_t>(to.offset + local, from.offset + from_len);
  if (first && to.sliced_axis == 1)
    for (const Pair& p : pairs)
      if (p.out == StateLayout::per_row && p.in != StateLayout::per_row) p.dst->zero();
  for (size_t g = lo; g < hi; ++g) {
    const size_t a = g - from.offset, b = g - to.offset;
    if (to.sliced_axis == 0) {
      for (const Pair& p : pairs) {
        // The stored row as the value's width (the stored slice is f32; the model's may be bf16).
        if (p.in == StateLayout::per_row)
          std::fill_n(row.data(), to.value.cols(), p.src->value_at(a, 0));
        else if (p.in == StateLayout::none)
          std::fill_n(row.data(), to.value.cols(), 0.0f);
        else
          p.src->read_row(a, row.data());
        if (p.out == StateLayout::per_row) {
          double sum = 0;
          for (size_t c = 0; c < to.value.cols(); ++c) sum += row[c];
          p.dst->set_value(b, 0, p.in == StateLayout::per_row ? row[0] : static_cast<float>(sum / to.value.cols()));
        } else {
          p.dst->write_row(b, row.data());
        }
      }
      if (state != nullptr) state->row_steps[b] = from.row_steps[a];
    } else {
      for (size_t r = 0; r < to.value.rows(); ++r)
        for (const Pair& p : pairs) {
          const float v = p.in == StateLayout::per_row ? p.src->value_at(r, 0)
                          : p.in == StateLayout::none  ? 0.0f
                                                       : p.src->value_at(r, a);
          if (p.out != StateLayout::per_row)
            p.dst->set_value(r, b, v);
          else if (p.in == StateLayout::per_row)
            p.dst->set_value(r, 0, v);
          else  // this column's share of the row's mean
            p.dst->set_value(r, 0, p.dst->value_at(r, 0) + v / static_cast<float>(full_cols));
        }
    }
  }
  if (to.sliced_axis == 1 && state != nullptr) state->row_steps = from.row_steps;  // rows are not sliced: equal everywhere
}

// Whether this rank's slices are exactly the saved slice `slice` of every parameter: the same
// number of slices and the same bounds (slice weights may differ between runs).
bool same_slicing(const std::string& dir, const CheckpointManifest& info, const Model& model, int slices, int slice,
                  size_t first_param) {
  if (info.model_slices != slices) return false;
  const auto params = model.parameters();
  if (!info.parameters.is_array() || info.parameters.size() < first_param + params.size()) return true;  // the files will say
  for (size_t i = 0; i < params.size(); ++i) {
    const Parameter& p = *params[i];
    if (p.sliced_axis < 0) continue;
    std::vector<size_t> bounds;
    try {
      bounds = info.parameters[first_param + i].value("slice_bounds", std::vector<size_t>{});
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("{}/manifest.json: damaged parameter list ({})", dir, json_error_words(e)));
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

// What restore_slices fills: the model's weights, and with an optimizer its state, the step and the
// epoch. A pipeline stage's model is part of the stored one: its parameters and layers start at
// first_param and first_layer of the files'.
struct RestoreTarget {
  optim::Optimizer* optimizer = nullptr;
  size_t first_param = 0, first_layer = 0;
  bool part = false;
  uint64_t step = 0, epoch = 0;  // read back (with an optimizer)
};

bool restore_slices(const std::string& dir, const CheckpointManifest& info, Model& model, comm::Communicator* mp,
                    RestoreTarget& target) {
  const int slices = mp != nullptr ? mp->size() : 1, slice = mp != nullptr ? mp->rank() : 0;
  auto params = model.parameters();
  const size_t first = target.first_param;
  optim::Optimizer* optimizer = target.optimizer;
  const bool same_layout = same_slicing(dir, info, model, slices, slice, first);
  std::vector<int> sources;
  if (same_layout) sources.push_back(slice);
  else for (int s = 0; s < info.model_slices; ++s) sources.push_back(s);
  for (const int s : sources) {
    const std::string relative = info.folder + "/" + fmt::format("slice{}.ckpt", s);
    const fs::path path = fs::path(dir) / relative;
    require_regular_file(path, "a checkpoint slice");
    verify_checksum(dir, info, relative);
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(fmt::format("{}: cannot open", path.string()));
    const SliceFile f = decode_slice(in, path.string(), optimizer != nullptr);
    FRUGAL_CHECK(target.part ? f.params.size() >= first + params.size() : f.params.size() == params.size(),
                 fmt::format("{}: has {} parameters, the model {}", path.string(), f.params.size(),
                             first + params.size()));
    for (size_t i = 0; i < params.size(); ++i) {
      Parameter& p = *params[i];
      const StoredParam& sp = f.params[first + i];
      FRUGAL_CHECK(sp.name == p.name, fmt::format("{}: parameter {} found where {} was expected", path.string(), sp.name, p.name));
      FRUGAL_CHECK(sp.axis == p.sliced_axis && sp.full_rows == (p.sliced_axis < 0 ? p.value.rows() : p.full_rows) &&
                       sp.full_cols == (p.sliced_axis < 0 ? p.value.cols() : p.full_cols),
                   fmt::format("{}: parameter {} has another shape or slicing than the model's", path.string(), p.name));
      auto* st = optimizer != nullptr ? &optimizer->state(i) : nullptr;
      // A row's step count never exceeds the checkpoint's step (the optimizer sizes its per-step
      // tables by it): a larger one is damage, not a long run.
      if (st != nullptr)
        for (size_t r = 0; r < sp.row_steps.size(); ++r)
          FRUGAL_CHECK(sp.row_steps[r] <= info.step,
                       fmt::format("{}: parameter {} row {} has step count {}, beyond the checkpoint's step {}: the "
                                   "file is corrupt",
                                   path.string(), p.name, r, sp.row_steps[r], info.step));
      // Adam has two moments, SGD one, row-wise Adagrad one value per row of a row-sparse
      // parameter, row-wise Adam one per row and (with momentum) one per element: the state must be
      // the kind this run's optimizer keeps. (An empty slice, of a rank left out, saved or loading,
      // has empty moments whatever the optimizer.)
      // (The slice stored and this rank's may have other widths: a resliced column-sliced parameter.)
      // Resliced (copy_overlap), a row-sparse parameter's rows may have become whole or split, and its
      // state per row or per element with them: it is converted. The same slicing keeps the layouts.
      const auto layouts_match = [&](const Tensor& stored, const Tensor& own) {
        const optim::StateLayout l = optim::state_layout(stored, sp.value), o = optim::state_layout(own, p.value);
        return l != optim::StateLayout::invalid && (l == o || !(same_layout || p.sliced_axis < 0));
      };
      FRUGAL_CHECK(st == nullptr || sp.value.size() == 0 || p.value.size() == 0 ||
                       (layouts_match(sp.m, st->m) && layouts_match(sp.v, st->v)),
                   fmt::format("{}: the optimizer state of {} does not fit this run's optimizer ({})", path.string(),
                               p.name, optim::to_string(optimizer->options().method)));
      if (same_layout || p.sliced_axis < 0) {
        FRUGAL_CHECK(sp.value.rows() == p.value.rows() && sp.value.cols() == p.value.cols() &&
                         sp.row_steps.size() == p.value.rows(),
                     fmt::format("{}: parameter {} is {}x{}, expected {}x{}", path.string(), p.name, sp.value.rows(),
                                 sp.value.cols(), p.value.rows(), p.value.cols()));
        // assign: the stored f32 values in the model's precision.
        p.value.assign(sp.value);
        if (st == nullptr) continue;
        st->m.assign(sp.m);
        st->v.assign(sp.v);
        st->row_steps = sp.row_steps;
      } else {
        copy_overlap(sp, p, st, s == sources.front());
      }
    }
    if (optimizer == nullptr) continue;
    target.step = f.step;
    target.epoch = f.epoch;
    if (same_layout) {
      const size_t layers = model.layers().size();
      FRUGAL_CHECK(target.part ? f.layer_states.size() >= target.first_layer + layers : f.layer_states.size() == layers,
                   path.string() + ": layer count differs");
      for (size_t l = 0; l < layers; ++l) {
        std::istringstream ls(f.layer_states[target.first_layer + l], std::ios::binary);
        try {
          cereal::BinaryInputArchive lar(ls);
          model.layers()[l]->load_state(lar);
        } catch (const cereal::Exception&) {
          throw Error(fmt::format("{}: truncated or corrupt layer state", path.string()));
        }
      }
    }
  }
  return same_layout;
}

// The manifest's record of each parameter: name, slicing, whole shape, every slice's bounds.
nlohmann::json parameter_records(const Model& model, int slices, const std::vector<double>& weights) {
  nlohmann::json params = nlohmann::json::array();
  for (const Parameter* p : model.parameters()) {
    const size_t len = p->sliced_axis == 0 ? p->full_rows : p->sliced_axis == 1 ? p->full_cols : 0;
    params.push_back({{"name", p->name},
                      {"sliced_axis", p->sliced_axis},
                      {"shape", {p->full_rows, p->full_cols}},
                      {"slice_bounds", p->sliced_axis < 0 ? std::vector<size_t>{} : slice_bounds(len, slices, weights)}});
  }
  return params;
}

// Writes the manifest of a checkpoint whose files are all on disk: `fields` (run, epoch, step, grid,
// parameters, config, ...) with the format, the files and their checksums, sealed; first its copy in
// the epoch folder, then the top one (the commit point); then older checkpoints beyond `keep` go.
void commit_checkpoint(const std::string& dir, const std::string& folder, nlohmann::json fields,
                       const nlohmann::json& files, const nlohmann::json& dct_files, size_t keep) {
  nlohmann::json checksums = nlohmann::json::object();
  for (const auto& list : {files, dct_files})
    for (const auto& f : list)
      checksums[f.get<std::string>()] = fmt::format("{:08x}", file_crc32c(fs::path(dir) / f.get<std::string>()));
  // The files kept beside the checkpoint (label counts, the ensemble's members) belong to this run:
  // their checksums go into the sealed manifest, and a reader refuses one that differs
  // (verify_member_file), so another run's file of the same shape is never used.
  nlohmann::json members = nlohmann::json::object();
  for (const char* name : kCheckpointMemberFiles)
    if (fs::is_regular_file(fs::path(dir) / name))
      members[name] = member_fingerprint(fs::path(dir) / name);
  nlohmann::json manifest = {{"format", "frugal-checkpoint"}, {"version", kCheckpointVersion}, {"folder", folder},
                             {"files", files}, {"dct_residual_files", dct_files}, {"checksums", checksums},
                             {"member_checksums", members}};
  for (const auto& [key, value] : fields.items()) manifest[key] = value;
  seal_json(manifest);  // an edited or damaged manifest is refused, not trusted
  // A copy inside the epoch folder first, so that the checkpoint stays findable (for --resume's
  // fallback) once the top manifest has moved on to a newer one; the top one is the commit point.
  const std::string text = manifest.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  write_atomically(fs::path(dir) / folder / "manifest.json", text);
  keep_folder_manifest(dir);
  write_atomically(fs::path(dir) / "manifest.json", text);
  prune_checkpoints(dir, folder, keep);
}

}  // namespace

void save_checkpoint(const std::string& dir, const Model& model, const Trainer& trainer, const nlohmann::json& config,
                     const nlohmann::json& run_state, size_t keep) {
  FRUGAL_CHECK(keep >= 1, fmt::format("{}: a checkpoint directory must keep at least 1 checkpoint (keep = {})", dir, keep));
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
    const nlohmann::json params = parameter_records(model, slices, weights);
    nlohmann::json files = nlohmann::json::array();
    for (int s = 0; s < slices; ++s) files.push_back(folder + "/" + fmt::format("slice{}.ckpt", s));
    nlohmann::json dct_files = nlohmann::json::array();
    if (dct)
      for (int r = 0; r < replicas; ++r)
        for (int s = 0; s < slices; ++s) dct_files.push_back(folder + "/" + dct_state_file_name(r, s));
    const int world = (mp != nullptr ? mp->size() : 1) * (dp != nullptr ? dp->size() : 1);
    commit_checkpoint(dir, folder,
                      {{"run", trainer.run_id()}, {"epoch", trainer.epoch()}, {"step", trainer.step()},
                       {"world_size", world}, {"grid", {world / slices, slices}}, {"model_slices", slices},
                       {"parameters", params}, {"config", config},
                       {"optimizer", optimizer_record(trainer.optimizer().options())}, {"run_state", run_state}},
                      files, dct_files, keep);
  }
}

CheckpointManifest load_checkpoint(const std::string& dir, Model& model, Trainer& trainer,
                                   const nlohmann::json& config) {
  return load_checkpoint(dir, read_manifest(dir), model, trainer, config);
}

CheckpointManifest load_checkpoint(const std::string& dir, CheckpointManifest info, Model& model, Trainer& trainer,
                                   const nlohmann::json& config) {
  require_same_settings(info.config, config, dir);
  const std::string method = info.optimizer.value("method", "adam"),
                    wanted = optim::to_string(trainer.optimizer().options().method);
  FRUGAL_CHECK(method == wanted, fmt::format("{}: checkpoint holds {} state, this run uses {}", dir, method, wanted));
  comm::Communicator* mp = group_of(trainer.parallel().model);
  const int slice = mp != nullptr ? mp->rank() : 0;
  RestoreTarget target{.optimizer = &trainer.optimizer()};
  const bool same_layout = restore_slices(dir, info, model, mp, target);
  trainer.set_step(target.step);
  trainer.set_epoch(target.epoch);
  convert_row_steps(info.optimizer, trainer, info.step);
  if (!info.run.empty()) trainer.set_run_id(info.run);  // a resumed run goes on as the same run
  // DCT-DP residuals belong to one rank of one grid; on another grid the run starts them empty.
  comm::Communicator* dp = group_of(trainer.parallel().data);
  const int replicas = dp != nullptr ? dp->size() : 1, replica = dp != nullptr ? dp->rank() : 0;
  if (trainer.has_feedback_state() && info.has_dct_residuals && same_layout && info.replicas == replicas) {
    const std::string relative = info.folder + "/" + dct_state_file_name(replica, slice);
    verify_checksum(dir, info, relative);
    load_dct_state((fs::path(dir) / relative).string(), trainer);
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
  return load_weights(dir, read_manifest(dir), model, group);
}

CheckpointInfo load_weights(const std::string& dir, const CheckpointManifest& manifest, Model& model,
                            comm::Communicator* group) {
  RestoreTarget weights_only;
  restore_slices(dir, manifest, model, group_of(group), weights_only);
  return manifest;
}

}  // namespace frugal::train

namespace frugal::train {
namespace {
// Point-to-point tag of a stage's part of a pipeline checkpoint (sent to the first stage).
constexpr int kCheckpointPartTag = 0x434b;
// The first parameter of a stage in the whole model: the parameters of the stages before it.
size_t first_parameter(const PipelineTrainer& trainer) {
  const std::vector<uint64_t> counts = comm::all_gather_value(
      *trainer.options().pipeline, static_cast<uint64_t>(trainer.model().parameters().size()), "parameter count");
  size_t first = 0;
  for (int s = 0; s < trainer.stage(); ++s) first += counts[static_cast<size_t>(s)];
  return first;
}
}  // namespace

void save_pipeline_checkpoint(const std::string& dir, const PipelineTrainer& trainer, const nlohmann::json& config,
                              const nlohmann::json& run_state, size_t keep) {
  FRUGAL_CHECK(keep >= 1, fmt::format("{}: a checkpoint directory must keep at least 1 checkpoint (keep = {})", dir, keep));
  comm::Communicator& pipe = *trainer.options().pipeline;
  comm::Communicator* dp = group_of(trainer.options().data);
  comm::Communicator* mp = group_of(trainer.options().model);
  if (dp != nullptr && dp->rank() != 0) return;  // replicas are identical: replica 0's stages write
  const int slices = mp != nullptr ? mp->size() : 1, slice = mp != nullptr ? mp->rank() : 0;
  const Model& model = trainer.model();
  // This stage's part of slice `slice`: its parameters' records, their manifest entries and its
  // layers' states; the first stage's rank of the same slice writes the slice file.
  std::string part;
  {
    std::ostringstream buf(std::ios::binary);
    cereal::BinaryOutputArchive ar(buf);
    ar(static_cast<uint64_t>(model.parameters().size()), encode_params(model, trainer.optimizer()),
       parameter_records(model, slices, {}).dump(), encode_layer_states(model));
    part = buf.str();
  }
  if (trainer.stage() != 0) {
    pipe.send(0, kCheckpointPartTag, std::as_bytes(std::span<const char>(part.data(), part.size()))).wait();
    return;
  }
  uint64_t count = 0;
  std::string records;
  nlohmann::json params = nlohmann::json::array();
  std::vector<std::string> states;
  std::vector<std::byte> bytes;
  for (int s = 0; s < trainer.stages(); ++s) {
    std::string text;
    if (s == 0) {
      text = part;
    } else {
      pipe.recv(s, kCheckpointPartTag, bytes).wait();
      text.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    }
    std::istringstream in(text, std::ios::binary);
    uint64_t n = 0;
    std::string r, meta;
    std::vector<std::string> st;
    try {
      cereal::BinaryInputArchive ar(in);
      ar(n, r, meta, st);
    } catch (const cereal::Exception&) {
      throw Error(fmt::format("pipeline checkpoint: stage {} sent a truncated part", s));
    }
    count += n;
    records += r;
    for (const auto& p : nlohmann::json::parse(meta)) params.push_back(p);
    states.insert(states.end(), st.begin(), st.end());
  }
  const std::string folder = fmt::format("epoch-{}-step-{}", trainer.epoch(), trainer.step());
  fs::create_directories(fs::path(dir) / folder);
  write_atomically(fs::path(dir) / folder / fmt::format("slice{}.ckpt", slice),
                   assemble_slice(count, records, trainer.step(), trainer.epoch(), states));
  if (mp != nullptr) mp->barrier().wait();  // every slice file is on disk before the manifest names them
  if (slice != 0) return;
  const int replicas = dp != nullptr ? dp->size() : 1;
  nlohmann::json files = nlohmann::json::array();
  for (int m = 0; m < slices; ++m) files.push_back(folder + "/" + fmt::format("slice{}.ckpt", m));
  commit_checkpoint(dir, folder,
                    {{"run", trainer.run_id()}, {"epoch", trainer.epoch()}, {"step", trainer.step()},
                     {"world_size", replicas * slices * trainer.stages()},
                     {"grid", {replicas, slices, trainer.stages()}}, {"model_slices", slices},
                     {"parameters", params}, {"config", config},
                     {"optimizer", optimizer_record(trainer.optimizer().options())}, {"run_state", run_state}},
                    files, nlohmann::json::array(), keep);
}

CheckpointManifest load_pipeline_checkpoint(const std::string& dir, CheckpointManifest info, PipelineTrainer& trainer,
                                            const nlohmann::json& config) {
  require_same_settings(info.config, config, dir);
  const std::string method = info.optimizer.value("method", "adam"),
                    wanted = optim::to_string(trainer.optimizer().options().method);
  FRUGAL_CHECK(method == wanted, fmt::format("{}: checkpoint holds {} state, this run uses {}", dir, method, wanted));
  RestoreTarget target{.optimizer = &trainer.optimizer(), .first_param = first_parameter(trainer),
                       .first_layer = trainer.options().first_layer, .part = true};
  restore_slices(dir, info, trainer.model(), group_of(trainer.options().model), target);
  trainer.set_step(target.step);
  trainer.set_epoch(target.epoch);
  if (!info.run.empty()) trainer.set_run_id(info.run);
  return info;
}

}  // namespace frugal::train
