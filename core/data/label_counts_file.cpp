#include "core/data/label_counts_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <cereal/archives/binary.hpp>
#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/tensor_io.h"

namespace frugal {
namespace fs = std::filesystem;
namespace {
constexpr char kMagic[8] = {'F', 'R', 'U', 'G', 'A', 'L', 'L', 'C'};
constexpr uint32_t kVersion = 1;
}  // namespace

void save_label_counts(const std::string& dir, const LabelCounts& counts) {
  std::ostringstream buf(std::ios::binary);
  {
    cereal::BinaryOutputArchive ar(buf);
    save_file_header(ar, kMagic, kVersion);
    ar(counts.points, uint64_t{counts.per_label.size()});
    ar(cereal::binary_data(counts.per_label.data(), counts.per_label.size() * sizeof(uint64_t)));
  }
  fs::create_directories(dir);
  write_atomically(fs::path(dir) / kLabelCountsFile, buf.str());
}

std::optional<LabelCounts> load_label_counts(const std::string& dir) {
  const fs::path path = fs::path(dir) / kLabelCountsFile;
  if (!fs::exists(path)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open", path.string()));
  LabelCounts counts;
  try {
    cereal::BinaryInputArchive ar(in);
    check_file_header(ar, kMagic, kVersion, path.string(), "a frugal label-count file");
    uint64_t labels = 0;
    ar(counts.points, labels);
    FRUGAL_CHECK(labels < (uint64_t{1} << 32), fmt::format("{}: implausible label count {}", path.string(), labels));
    counts.per_label.resize(labels);
    ar(cereal::binary_data(counts.per_label.data(), labels * sizeof(uint64_t)));
  } catch (const cereal::Exception& e) {
    throw Error(fmt::format("{}: truncated or corrupt label counts ({})", path.string(), e.what()));
  }
  return counts;
}

}  // namespace frugal
