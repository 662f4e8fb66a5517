#include "core/data/idx_file.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <zlib.h>

#include "core/check.h"
#include "core/warnings.h"
#include "core/regular_file.h"

namespace frugal::data {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension
// A corrupt header must not make us allocate terabytes: no IDX data set comes near this.
constexpr uint64_t kMaxBytes = uint64_t{1} << 34;

class GzReader {
 public:
  explicit GzReader(std::string path)
      : path_(std::move(path)), file_(gzdopen(open_regular_fd(path_, "an IDX file"), "rb")) {
    if (file_ == nullptr) throw Error(fmt::format("{}: cannot open for reading", path_));
    gzbuffer(file_, 1 << 17);  // 128 KiB: plenty for MNIST's files, and cheap for a small one
  }
  ~GzReader() { gzclose(file_); }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Reads up to n bytes; returns how many were read (fewer only at the end of the data).
  size_t read(uint8_t* out, size_t n) {
    size_t done = 0;
    while (done < n) {
      const auto chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
      const int got = gzread(file_, out + done, chunk);
      if (got < 0) {
        int code = 0;
        const char* msg = gzerror(file_, &code);
        throw Error(fmt::format("{}: truncated or corrupt gzip data at byte {}: {}", path_, offset_ + done, msg));
      }
      if (got == 0) break;
      done += static_cast<size_t>(got);
    }
    // A truncated gzip stream ends with a zlib error rather than a short read: report it as such.
    if (done < n) {
      int code = 0;
      const char* msg = gzerror(file_, &code);
      if (code != Z_OK && code != Z_STREAM_END)
        throw Error(fmt::format("{}: truncated or corrupt gzip data at byte {}: {}", path_, offset_ + done, msg));
    }
    offset_ += done;
    return done;
  }

  void read_exactly(uint8_t* out, size_t n, const std::string& what) {
    const size_t got = read(out, n);
    if (got != n)
      throw Error(fmt::format("{}: truncated file: expected {} ({} bytes from byte {}), the file ends after {}",
                              path_, what, n, offset_ - got, got));
  }

  uint32_t read_u32(const std::string& what) {
    std::array<uint8_t, 4> b{};
    read_exactly(b.data(), 4, what);
    return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];  // big-endian
  }

  void expect_end() {
    uint8_t extra = 0;
    if (read(&extra, 1) != 0)
      throw Error(fmt::format("{}: the file is longer than its header says: expected {} bytes in all", path_,
                              offset_ - 1));
  }

  const std::string& path() const { return path_; }
  size_t offset() const { return offset_; }
  bool direct() { return gzdirect(file_) == 1; }  // the file is not compressed

 private:
  std::string path_;
  gzFile file_;
  size_t offset_ = 0;
};

void check_magic(GzReader& in, uint32_t expected, const char* what) {
  const uint32_t magic = in.read_u32("the magic number");
  if (magic != expected)
    throw Error(fmt::format("{}: bad magic number 0x{:08x}: expected 0x{:08x} ({}); is this an IDX file of the "
                            "right kind, or is it still compressed twice?",
                            in.path(), magic, expected, what));
}

std::vector<uint8_t> read_payload(GzReader& in, uint64_t bytes, const std::string& what) {
  if (bytes > kMaxBytes)
    throw Error(fmt::format("{}: implausible size in the header: {} bytes of {}", in.path(), bytes, what));
  // An uncompressed file's size is known: hold the header to it before reading.
  std::error_code ec;
  const uint64_t file_bytes = std::filesystem::file_size(in.path(), ec);
  if (!ec && in.direct() && in.offset() + bytes > file_bytes)
    throw Error(fmt::format("{}: truncated file: the header says {} ({} bytes from byte {}) but the file has {} bytes",
                            in.path(), what, bytes, in.offset(), file_bytes));
  // A gzip file's is not: grow as the data comes rather than trust the header with the allocation.
  std::vector<uint8_t> out;
  const size_t start = in.offset();
  while (out.size() < bytes) {
    // Doubling from 1 MiB: a header that lies costs at most twice the data actually there (fixed
    // 64 MiB chunks made every small gzip file with a large header allocate and clear 64 MiB).
    const size_t chunk =
        static_cast<size_t>(std::min<uint64_t>(bytes - out.size(), std::max<uint64_t>(uint64_t{1} << 20, out.size())));
    const size_t have = out.size();
    out.resize(have + chunk);
    const size_t got = in.read(out.data() + have, chunk);
    if (got != chunk)
      throw Error(fmt::format("{}: truncated file: expected {} ({} bytes from byte {}), the file ends after {}",
                              in.path(), what, bytes, start, have + got));
  }
  in.expect_end();
  return out;
}

std::string pick(const std::string& prefix, const char* suffix) {
  const std::string gz = prefix + suffix + ".gz";
  return std::filesystem::exists(gz) ? gz : prefix + suffix;
}

// Accepts the path of one of the two files as well as the prefix.
std::string strip_suffix(std::string path) {
  for (const char* s : {"-images-idx3-ubyte.gz", "-labels-idx1-ubyte.gz", "-images-idx3-ubyte", "-labels-idx1-ubyte"}) {
    const std::string suffix = s;
    if (path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0)
      return path.substr(0, path.size() - suffix.size());
  }
  return path;
}

}  // namespace

IdxImages IdxFile::read_images(const std::string& path) {
  GzReader in(path);
  check_magic(in, kImagesMagic, "IDX images: unsigned bytes, 3 dimensions");
  IdxImages img;
  img.count = in.read_u32("the image count");
  img.rows = in.read_u32("the row count");
  img.cols = in.read_u32("the column count");
  if (img.rows == 0 || img.cols == 0)
    throw Error(fmt::format("{}: images of {} x {} pixels: expected both sizes > 0", path, img.rows, img.cols));
  const std::string what = fmt::format("{} images of {} x {} pixels", img.count, img.rows, img.cols);
  // rows x cols fits in 64 bits (each is below 2^32), but times the count it can wrap: 4178444288
  // images of 2^25 x 3 * 2^24 pixels made 0 bytes, an empty payload for 4e9 images (tests/fuzz/fuzz_idx).
  const uint64_t pixels = uint64_t{img.rows} * img.cols;
  if (img.count != 0 && pixels > kMaxBytes / img.count)
    throw Error(fmt::format("{}: implausible size in the header: {}", path, what));
  img.pixels = read_payload(in, img.count * pixels, what);
  return img;
}

std::vector<uint8_t> IdxFile::read_labels(const std::string& path) {
  GzReader in(path);
  check_magic(in, kLabelsMagic, "IDX labels: unsigned bytes, 1 dimension");
  const uint32_t count = in.read_u32("the label count");
  return read_payload(in, count, fmt::format("{} labels", count));
}

std::string IdxFile::images_path(const std::string& prefix) { return pick(strip_suffix(prefix), "-images-idx3-ubyte"); }
std::string IdxFile::labels_path(const std::string& prefix) { return pick(strip_suffix(prefix), "-labels-idx1-ubyte"); }

Dataset IdxFile::open(const std::string& prefix) {
  const std::string images_file = images_path(prefix), labels_file = labels_path(prefix);
  const std::string base = strip_suffix(prefix);
  for (const char* kind : {"-images-idx3-ubyte", "-labels-idx1-ubyte"})
    if (!std::filesystem::exists(base + kind) && !std::filesystem::exists(base + kind + ".gz"))
      throw Error(fmt::format("{}{}[.gz]: no such file: an IDX data set is named by its prefix, such as "
                              "/usr/share/datasets/fashion-mnist/train (apt-get install dataset-fashion-mnist)",
                              base, kind));
  const IdxImages images = read_images(images_file);
  const std::vector<uint8_t> labels = read_labels(labels_file);
  if (images.count != labels.size())
    throw Error(fmt::format("{} has {} images but {} has {} labels: expected one label per image", images_file,
                            images.count, labels_file, labels.size()));
  // Classes are a handful of values each held by many images: a class of one image (a label byte of
  // 255 among 0-9 makes 256 classes) is a damaged byte rather than a class.
  std::vector<size_t> per_class(256, 0);
  for (const uint8_t l : labels) ++per_class[l];
  for (size_t c = 0; c < per_class.size() && labels.size() >= 100; ++c)
    if (per_class[c] == 1)
      warn(fmt::format("{}: class {} has a single image of {} (label byte at offset {}): a damaged label? the model "
                       "gets {} classes",
                       labels_file, c, labels.size(),
                       8 + (std::find(labels.begin(), labels.end(), static_cast<uint8_t>(c)) - labels.begin()),
                       *std::max_element(labels.begin(), labels.end()) + 1));
  return to_dataset(images, labels, images_file);
}

Dataset IdxFile::to_dataset(const IdxImages& images, std::span<const uint8_t> labels, const std::string& source) {
  FRUGAL_CHECK(labels.size() == images.count,
               fmt::format("{}: {} images but {} labels", source, images.count, labels.size()));
  Dataset d;
  d.source = source;
  const size_t dim = images.rows * images.cols;
  FRUGAL_CHECK(dim <= UINT32_MAX, fmt::format("{}: images of {} pixels are too large", source, dim));
  d.num_features = static_cast<uint32_t>(dim);
  d.num_labels = labels.empty() ? 0 : uint32_t{*std::max_element(labels.begin(), labels.end())} + 1;
  size_t nonzero = 0;
  for (const uint8_t p : images.pixels) nonzero += p != 0;
  d.points.feature_ids.reserve(nonzero);
  d.points.feature_values.reserve(nonzero);
  d.points.feature_offsets.reserve(images.count + 1);
  d.points.label_offsets.reserve(images.count + 1);
  std::vector<uint32_t> ids;
  std::vector<float> values;
  for (size_t i = 0; i < images.count; ++i) {
    ids.clear();
    values.clear();
    const uint8_t* px = images.pixels.data() + i * dim;
    for (size_t j = 0; j < dim; ++j) {
      if (px[j] == 0) continue;
      ids.push_back(static_cast<uint32_t>(j));
      values.push_back(static_cast<float>(px[j]) * (1.0f / 255.0f));
    }
    const uint32_t label = labels[i];
    d.points.add_point(ids, values, std::span<const uint32_t>(&label, 1));
  }
  return d;
}

}  // namespace frugal::data
