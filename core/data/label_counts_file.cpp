#include "core/data/label_counts_file.h"

#include <cstring>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "core/check.h"
#include "core/data/checked_file.h"

namespace frugal {
namespace fs = std::filesystem;
namespace {
constexpr char kMagic[8] = {'F', 'R', 'U', 'G', 'A', 'L', 'L', 'C'};
// Version 1 (cereal, no checksum) is no longer read: a flipped bit there changed PSP@k unseen.
constexpr uint32_t kVersion = 2;
}  // namespace

void save_label_counts(const std::string& dir, const LabelCounts& counts) {
  data::save_checked_file(dir, kLabelCountsFile, kMagic, kVersion, [&](std::ostream& out) {
    const uint64_t head[2] = {counts.points, counts.per_label.size()};
    out.write(reinterpret_cast<const char*>(head), sizeof head);
    out.write(reinterpret_cast<const char*>(counts.per_label.data()),
              static_cast<std::streamsize>(counts.per_label.size() * sizeof(uint64_t)));
  });
}

std::optional<LabelCounts> load_label_counts(const std::string& dir) {
  const fs::path path = fs::path(dir) / kLabelCountsFile;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return std::nullopt;
  if (data::checked_file_version(dir, kLabelCountsFile, kMagic) == 1)
    throw Error(fmt::format("{}: label counts of format version 1, which has no checksum: delete the file to score "
                            "without propensities, or retrain to write a checked one",
                            path.string()));
  const std::string bytes = data::load_checked_file(dir, kLabelCountsFile, kMagic, kVersion, "a frugal label-count file");
  const std::string name = path.string();
  uint64_t head[2] = {};
  FRUGAL_CHECK(bytes.size() >= sizeof head, fmt::format("{}: truncated label counts", name));
  std::memcpy(head, bytes.data(), sizeof head);
  const uint64_t labels = head[1];
  FRUGAL_CHECK(labels < (uint64_t{1} << 32) && bytes.size() - sizeof head == labels * sizeof(uint64_t),
               fmt::format("{}: {} labels do not fit its {} bytes", name, labels, bytes.size()));
  LabelCounts counts;
  counts.points = head[0];
  counts.per_label.resize(labels);
  if (labels > 0)  // an empty vector's data() may be null, which memcpy must not get even for 0 bytes
    std::memcpy(counts.per_label.data(), bytes.data() + sizeof head, labels * sizeof(uint64_t));
  for (size_t l = 0; l < labels; ++l)
    FRUGAL_CHECK(counts.per_label[l] <= counts.points,
                 fmt::format("{}: label {} has {} points, more than the {} training points", name, l,
                             counts.per_label[l], counts.points));
  return counts;
}

}  // namespace frugal
