// The IDX reader: gzip and plain files parse into the expected points; a wrong magic number, a
// truncated file, trailing bytes and an image/label count mismatch each give an error that names
// the file and what was expected.
#include <catch2/catch.hpp>

#include "tests/data/error_of.h"
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/data/idx_file.h"

using frugal::data::IdxFile;
using Catch::Contains;

namespace {

std::vector<uint8_t> u32(uint32_t v) {
  return {static_cast<uint8_t>(v >> 24), static_cast<uint8_t>(v >> 16), static_cast<uint8_t>(v >> 8),
          static_cast<uint8_t>(v)};
}

std::vector<uint8_t> cat(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

class TempDir {
 public:
  TempDir() : path_(std::filesystem::temp_directory_path() / ("frugal_idx_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

void write_plain(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
  std::fclose(f);
}

void write_gz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  gzclose(f);
}

// Three 2x2 images and their labels.
const std::vector<uint8_t> kPixels = {0, 255, 51, 0, /**/ 0, 0, 0, 0, /**/ 255, 255, 255, 102};
const std::vector<uint8_t> kLabels = {3, 0, 9};
std::vector<uint8_t> images_file() { return cat({u32(0x803), u32(3), u32(2), u32(2), kPixels}); }
std::vector<uint8_t> labels_file() { return cat({u32(0x801), u32(3), kLabels}); }

}  // namespace

TEST_CASE("idx: gzip files by prefix become points with pixel/255 values, zeros left out") {
  TempDir dir;
  write_gz(dir.file("train-images-idx3-ubyte.gz"), images_file());
  write_gz(dir.file("train-labels-idx1-ubyte.gz"), labels_file());
  const auto d = IdxFile::open(dir.file("train"));
  REQUIRE(d.size() == 3);
  CHECK(d.num_features == 4);
  CHECK(d.num_labels == 10);  // largest label + 1
  REQUIRE(d.points.features_of(0).size() == 2);
  CHECK(d.points.features_of(0)[0] == 1);
  CHECK(d.points.values_of(0)[0] == 1.0f);
  CHECK(d.points.features_of(0)[1] == 2);
  CHECK(d.points.values_of(0)[1] == Approx(0.2f));
  CHECK(d.points.features_of(1).empty());  // an all-black image is a point without features
  CHECK(d.points.features_of(2).size() == 4);
  CHECK(d.points.values_of(2)[3] == Approx(0.4f));
  CHECK(d.points.labels_of(0)[0] == 3);
  CHECK(d.points.labels_of(1)[0] == 0);
  CHECK(d.points.labels_of(2)[0] == 9);
  // The path of one of the files names the pair just as well.
  CHECK(IdxFile::open(dir.file("train-images-idx3-ubyte.gz")).size() == 3);
}

TEST_CASE("idx: uncompressed files are read too") {
  TempDir dir;
  write_plain(dir.file("t10k-images-idx3-ubyte"), images_file());
  write_plain(dir.file("t10k-labels-idx1-ubyte"), labels_file());
  const auto d = IdxFile::open(dir.file("t10k"));
  CHECK(d.size() == 3);
  CHECK(d.points.labels_of(2)[0] == 9);
}

TEST_CASE("idx: malformed files give errors naming the file and what was expected") {
  TempDir dir;
  const std::string images = dir.file("x-images-idx3-ubyte.gz"), labels = dir.file("x-labels-idx1-ubyte.gz");

  write_gz(images, cat({u32(0x801), u32(3), kLabels}));  // a label file where images belong
  CHECK_THAT(error_of([&] { IdxFile::read_images(images); }),
             Contains(images) && Contains("bad magic number 0x00000801") && Contains("expected 0x00000803"));

  write_gz(labels, cat({u32(0x803), u32(3), kLabels}));
  CHECK_THAT(error_of([&] { IdxFile::read_labels(labels); }),
             Contains(labels) && Contains("bad magic number 0x00000803") && Contains("expected 0x00000801"));

  auto short_images = images_file();
  short_images.resize(short_images.size() - 5);
  write_gz(images, short_images);
  CHECK_THAT(error_of([&] { IdxFile::read_images(images); }),
             Contains(images) && Contains("truncated") && Contains("3 images of 2 x 2 pixels"));

  write_gz(images, cat({u32(0x803), u32(3)}));  // the header itself is cut short
  CHECK_THAT(error_of([&] { IdxFile::read_images(images); }), Contains("truncated") && Contains("the row count"));

  auto long_labels = labels_file();
  long_labels.push_back(7);
  write_gz(labels, long_labels);
  CHECK_THAT(error_of([&] { IdxFile::read_labels(labels); }), Contains(labels) && Contains("longer than its header"));

  write_gz(images, cat({u32(0x803), u32(0xffffffff), u32(0xffff), u32(0xffff)}));
  CHECK_THAT(error_of([&] { IdxFile::read_images(images); }), Contains("implausible size"));
  // count x rows x cols is 0 mod 2^64: it used to pass as an empty payload (tests/fuzz/fuzz_idx).
  write_gz(images, cat({u32(0x803), u32(0xf90e0000), u32(0x02000000), u32(0x03000000)}));
  CHECK_THAT(error_of([&] { IdxFile::read_images(images); }),
             Contains(images) && Contains("implausible size") && Contains("4178444288 images of 33554432 x 50331648"));

  write_gz(images, images_file());
  write_gz(labels, cat({u32(0x801), u32(2), std::vector<uint8_t>{1, 2}}));
  CHECK_THAT(error_of([&] { IdxFile::open(dir.file("x")); }),
             Contains("has 3 images but") && Contains("has 2 labels"));

  CHECK_THAT(error_of([&] { IdxFile::open(dir.file("missing")); }),
             Contains("missing-images-idx3-ubyte[.gz]: no such file") && Contains("dataset-fashion-mnist"));
  write_gz(dir.file("half-images-idx3-ubyte.gz"), images_file());
  CHECK_THAT(error_of([&] { IdxFile::open(dir.file("half")); }), Contains("half-labels-idx1-ubyte[.gz]: no such file"));
}

TEST_CASE("idx: a gzip stream cut in the middle is reported as truncated, not read short") {
  TempDir dir;
  const std::string whole = dir.file("whole.gz"), cut = dir.file("cut-images-idx3-ubyte.gz");
  std::vector<uint8_t> big = cat({u32(0x803), u32(64), u32(28), u32(28)});
  for (size_t i = 0; i < 64 * 28 * 28; ++i) big.push_back(static_cast<uint8_t>((i * 2654435761u) >> 13));
  write_gz(whole, big);
  std::FILE* f = std::fopen(whole.c_str(), "rb");
  REQUIRE(f != nullptr);
  std::vector<uint8_t> bytes(1 << 20);
  bytes.resize(std::fread(bytes.data(), 1, bytes.size(), f));
  std::fclose(f);
  bytes.resize(bytes.size() / 2);
  write_plain(cut, bytes);
  CHECK_THAT(error_of([&] { IdxFile::read_images(cut); }), Contains(cut) && Contains("truncated"));
}

TEST_CASE("idx: a header claiming more items than the file holds is an error naming the file, no huge allocation") {
  TempDir dir;
  // 4e9 images of 2 x 2 pixels: 16 GB claimed (under the implausible-size bound), 12 bytes present.
  const auto claim = cat({u32(0x803), u32(4000000000u), u32(2), u32(2), kPixels});
  const std::string plain = dir.file("p-images-idx3-ubyte"), gz = dir.file("g-images-idx3-ubyte.gz");
  write_plain(plain, claim);
  CHECK_THAT(error_of([&] { IdxFile::read_images(plain); }),
             Contains(plain) && Contains("truncated file") && Contains("4000000000 images of 2 x 2 pixels") &&
                 Contains("the file has 28 bytes"));
  write_gz(gz, claim);
  CHECK_THAT(error_of([&] { IdxFile::read_images(gz); }),
             Contains(gz) && Contains("truncated file") && Contains("4000000000 images of 2 x 2 pixels") &&
                 Contains("the file ends after 12"));
  const std::string labels = dir.file("l-labels-idx1-ubyte");
  write_plain(labels, cat({u32(0x801), u32(4000000000u), kLabels}));
  CHECK_THAT(error_of([&] { IdxFile::read_labels(labels); }),
             Contains(labels) && Contains("truncated file") && Contains("4000000000 labels"));
}
