#include "core/train/dct_state_file.h"

#include <fstream>
#include <sstream>

#include <cereal/archives/binary.hpp>
#include <fmt/format.h>

#include "core/check.h"

namespace frugal {
namespace {
constexpr char kMagic[8] = {'F', 'R', 'U', 'G', 'A', 'L', 'D', 'C'};
constexpr uint32_t kVersion = 1;
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
  }
  return buf.str();
}

void load_dct_state(const std::string& path, Trainer& trainer) {
  std::ifstream in(path, std::ios::binary);
  FRUGAL_CHECK(in.good(), fmt::format("{}: cannot open the DCT-DP residual file", path));
  comm::ReplicaReducer* reducer = trainer.reducer();
  const size_t states = reducer != nullptr ? reducer->feedback_states() : 0;
  try {
    cereal::BinaryInputArchive ar(in);
    char magic[8];
    uint32_t version = 0;
    ar(cereal::binary_data(magic, sizeof magic), version);
    FRUGAL_CHECK(std::equal(magic, magic + 8, kMagic) && version == kVersion,
                 fmt::format("{}: not a frugal DCT-DP residual file (version {})", path, kVersion));
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
      reducer->restore_feedback(i, s);
    }
  } catch (const cereal::Exception& e) {
    throw Error(fmt::format("{}: truncated or corrupt DCT-DP residual file ({})", path, e.what()));
  }
}

}  // namespace frugal
