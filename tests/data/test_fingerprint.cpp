// Data fingerprints (core/data/fingerprint.h): the same content gives the same fingerprint, and a
// changed byte in a sampled block, a shuffled copy or another header give another; a large file
// is sampled (64 blocks, first and last included), a small one hashed whole.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "core/data/fingerprint.h"
#include "core/rng.h"
#include "error_of.h"

using namespace frugal;

namespace {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "frugal-fingerprint-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name, const std::string& content) const {
    const std::string p = (path / name).string();
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }
};

// An XMC-like file of `n` points: the header, then one line per point.
std::vector<std::string> point_lines(size_t n) {
  std::vector<std::string> lines;
  for (size_t i = 0; i < n; ++i)
    lines.push_back(std::to_string(i % 97) + " " + std::to_string(i) + ":1 " + std::to_string(i * 7 % 5000) + ":0.5");
  return lines;
}

std::string join(const std::string& header, const std::vector<std::string>& lines) {
  std::string s = header + "\n";
  for (const auto& l : lines) s += l + "\n";
  return s;
}

}  // namespace

TEST_CASE("fingerprint offsets: every block of a small file, 64 spread blocks of a large one") {
  CHECK(data::fingerprint_offsets(0).empty());
  CHECK(data::fingerprint_offsets(100) == std::vector<uint64_t>{0});
  CHECK(data::fingerprint_offsets(4097) == std::vector<uint64_t>{0, 4096});
  const uint64_t size = 10'000'000'000ULL;
  const auto offsets = data::fingerprint_offsets(size);
  REQUIRE(offsets.size() == data::kFingerprintBlocks);
  CHECK(offsets.front() == 0);
  CHECK(offsets.back() == size - data::kFingerprintBlockBytes);
  CHECK(std::is_sorted(offsets.begin(), offsets.end()));
}

TEST_CASE("fingerprint: same content same, a changed byte, a shuffle or another header different") {
  TempDir dir;
  // About 1.3 MB: more than 64 blocks, so it is sampled.
  const auto lines = point_lines(60000);
  const std::string content = join("60000 5000 97", lines);
  REQUIRE(content.size() > data::kFingerprintBlocks * data::kFingerprintBlockBytes);
  const std::string a = dir.file("a.txt", content);
  const std::string b = dir.file("b.txt", content);
  const data::Fingerprint fa = data::fingerprint(a);
  CHECK(fa.size == content.size());
  CHECK(fa.header == "60000 5000 97");
  CHECK(data::fingerprint(b) == fa);
  CHECK(data::fingerprint(b).to_string() == fa.to_string());
  CHECK(fa.to_string().find("header '60000 5000 97'") != std::string::npos);

  SECTION("a changed byte in a sampled block") {
    const auto offsets = data::fingerprint_offsets(content.size());
    std::string changed = content;
    const size_t at = offsets[offsets.size() / 2] + 100;
    changed[at] = changed[at] == '1' ? '2' : '1';
    const data::Fingerprint fc = data::fingerprint(dir.file("c.txt", changed));
    CHECK(fc.size == fa.size);
    CHECK(fc.header == fa.header);
    CHECK(fc.hash != fa.hash);
    CHECK(fc.to_string() != fa.to_string());
  }
  SECTION("a shuffled copy with the same header") {
    auto shuffled = lines;
    Rng rng(7);
    for (size_t i = shuffled.size() - 1; i > 0; --i) std::swap(shuffled[i], shuffled[rng.next_u64() % (i + 1)]);
    const data::Fingerprint fs = data::fingerprint(dir.file("s.txt", join("60000 5000 97", shuffled)));
    CHECK(fs.size == fa.size);
    CHECK(fs.header == fa.header);
    CHECK(fs.hash != fa.hash);
  }
  SECTION("another header") {
    const data::Fingerprint fh = data::fingerprint(dir.file("h.txt", join("60000 5001 97", lines)));
    CHECK(fh.header == "60000 5001 97");
    CHECK(fh.hash != fa.hash);
    CHECK(fh.to_string() != fa.to_string());
  }
  SECTION("a small file is hashed whole; a Windows line ending is not part of the header") {
    const std::string small = "2 3 4\r\n0 1:1\n1 2:1\n";
    const data::Fingerprint f1 = data::fingerprint(dir.file("small1.txt", small));
    CHECK(f1.header == "2 3 4");
    const data::Fingerprint f2 = data::fingerprint(dir.file("small2.txt", "2 3 4\r\n1 2:1\n0 1:1\n"));
    CHECK(f2.size == f1.size);
    CHECK(f2.hash != f1.hash);
  }
  SECTION("a missing file is an error naming it") {
    CHECK(error_of([&] { data::fingerprint((dir.path / "nope.txt").string()); }).find("nope.txt") != std::string::npos);
  }
}
