#include "train/dct_state_file.h"

#include <fstream>
#include <sstream>

#include <cereal/archives/binary.hpp>
#include <fmt/format.h>

#include "core/check.h"
#include "core/regular_file.h"

namespace frugal::train {
namespace {
constexpr char kMagic[8] = {'F', 'R', 'U', 'G', 'A', 'L', 'D', 'C'};
// 1: residuals only; 2: then, under DpTarget::updates, this replica's optimizer state; 3: each
// residual followed by its momentum-correction velocity (0 entries without it); 4: then the
// automatic keep's controller (--compress auto: kept fraction, carried energy, back-offs).
constexpr uint32_t kVersion = 4;

bool local_optimizer_state(const Trainer& trainer) {
  return trainer.options().dp && trainer.options().dp->target == comm::DpTarget::updates;
}

void save_tensor(cereal::BinaryOutputArchive& ar, const Tensor& t) {
  ar(static_cast<uint64_t>(t.rows()), static_cast<uint64_t>(t.cols()));
  ar(cereal::binary_data(t.data(), t.size() * sizeof(float)));
}

// Into `t`, whose shape the run already fixed: a saved shape that differs is an error (checked
// before reading, so a forged size cannot make it allocate).
void load_tensor(cereal::BinaryInputArchive& ar, Tensor& t, const std::string& path, const std::string& what) {
  uint64_t rows = 0, cols = 0;
  ar(rows, cols);
  FRUGAL_CHECK(rows == t.rows() && cols == t.cols(),
               fmt::format("{}: {} is {} x {}, this run's is {} x {}", path, what, rows, cols, t.rows(), t.cols()));
  ar(cereal::binary_data(t.data(), t.size() * sizeof(float)));
}
}  // namespace

std::string dct_state_file_name(int replica, int slice) {
  return fmt::format("dct-replica{}-slice{}.ckpt", replica, slice);
}

std::string encode_dct_state(const Trainer& trainer) {
  std::ostringstream buf(std::ios::binary);
  cereal::BinaryOutputArchive ar(buf);
  ar(cereal::binary_data(kMagic, sizeof kMagic), kVersion);
  const comm::ReplicaReducer* reducer = trainer.reducer();
  const size_t count = reducer != nullptr ? reducer->feedback_states() : 0;
  ar(static_cast<uint64_t>(count));
  for (size_t i = 0; i < count; ++i) {
    const comm::ThresholderState s = reducer->feedback_state(i);
    ar(static_cast<uint64_t>(s.residual.size()));
    ar(cereal::binary_data(s.residual.data(), s.residual.size() * sizeof(float)));
    ar(s.tau, s.steps, s.estimate_pending, s.rng);
    ar(static_cast<uint64_t>(s.velocity.size()));
    ar(cereal::binary_data(s.velocity.data(), s.velocity.size() * sizeof(float)));
    ar(s.auto_keep, s.carried_energy, s.backoffs);
  }
  // Under DpTarget::updates each replica's optimizer moments follow its own gradients: the model
  // slice files hold replica 0's, so every replica keeps its own here.
  const bool local = local_optimizer_state(trainer);
  ar(local);
  if (local) {
    const optim::Optimizer& opt = trainer.optimizer();
    ar(static_cast<uint64_t>(opt.size()));
    for (size_t i = 0; i < opt.size(); ++i) {
      const optim::Optimizer::State& st = opt.state(i);
      save_tensor(ar, st.m);
      save_tensor(ar, st.v);
      ar(static_cast<uint64_t>(st.row_steps.size()));
      ar(cereal::binary_data(st.row_steps.data(), st.row_steps.size() * sizeof(uint32_t)));
    }
  }
  return buf.str();
}

void load_dct_state(const std::string& path, Trainer& trainer) {
  require_regular_file(path, "a DCT residual file");
  std::ifstream in(path, std::ios::binary);
  FRUGAL_CHECK(in.good(), fmt::format("{}: cannot open the DCT-DP residual file", path));
  comm::ReplicaReducer* reducer = trainer.reducer();
  const size_t states = reducer != nullptr ? reducer->feedback_states() : 0;
  try {
    cereal::BinaryInputArchive ar(in);
    char magic[8];
    uint32_t version = 0;
    ar(cereal::binary_data(magic, sizeof magic), version);
    FRUGAL_CHECK(std::equal(magic, magic + 8, kMagic) && version >= 1 && version <= kVersion,
                 fmt::format("{}: not a frugal DCT-DP residual file (version 1 to {})", path, kVersion));
    uint64_t count = 0;
    ar(count);
    FRUGAL_CHECK(count == states, fmt::format("{}: holds {} parameters' residuals, the model has {}", path,
                                              count, states));
    for (size_t i = 0; i < states; ++i) {
      comm::ThresholderState s;
      uint64_t n = 0;
      ar(n);
      // Checked before allocating: a forged length must not make us allocate terabytes.
      FRUGAL_CHECK(n == reducer->feedback_size(i),
                   fmt::format("{}: a residual of {} entries, the parameter has {}", path, n,
                               reducer->feedback_size(i)));
      s.residual.resize(n);
      ar(cereal::binary_data(s.residual.data(), n * sizeof(float)));
      ar(s.tau, s.steps, s.estimate_pending, s.rng);
      if (version >= 3) {
        ar(n);
        FRUGAL_CHECK(n == 0 || n == s.residual.size(),
                     fmt::format("{}: a velocity of {} entries, the parameter has {}", path, n, s.residual.size()));
        s.velocity.resize(n);
        ar(cereal::binary_data(s.velocity.data(), n * sizeof(float)));
      }
      if (version >= 4) {
        ar(s.auto_keep, s.carried_energy, s.backoffs);
        FRUGAL_CHECK(s.auto_keep > 0.0f && s.auto_keep <= 1.0f && s.carried_energy >= 0.0 && s.carried_energy <= 1.0,
                     fmt::format("{}: an automatic keep of {} with a carried energy of {} (both in (0, 1])", path,
                                 s.auto_keep, s.carried_energy));
      }
      reducer->restore_feedback(i, s);
    }
    bool local = false;
    if (version >= 2) ar(local);
    // A run that exchanges updates resumed from one that exchanged gradients (or the reverse)
    // keeps the slice files' optimizer state: the replicas' moments were identical there.
    if (local && local_optimizer_state(trainer)) {
      optim::Optimizer& opt = trainer.optimizer();
      uint64_t params = 0;
      ar(params);
      FRUGAL_CHECK(params == opt.size(), fmt::format("{}: optimizer state of {} parameters, the model has {}", path,
                                                     params, opt.size()));
      for (size_t i = 0; i < opt.size(); ++i) {
        optim::Optimizer::State& st = opt.state(i);
        load_tensor(ar, st.m, path, fmt::format("the first moment of parameter {}", i));
        load_tensor(ar, st.v, path, fmt::format("the second moment of parameter {}", i));
        uint64_t n = 0;
        ar(n);
        FRUGAL_CHECK(n == st.row_steps.size(), fmt::format("{}: {} row step counts for parameter {}, it has {} rows",
                                                           path, n, i, st.row_steps.size()));
        ar(cereal::binary_data(st.row_steps.data(), n * sizeof(uint32_t)));
      }
    }
  } catch (const cereal::Exception&) {
    throw Error(fmt::format("{}: truncated or corrupt DCT-DP residual file", path));
  }
}

}  // namespace frugal::train
