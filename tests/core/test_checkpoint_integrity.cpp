// Checkpoint integrity: CRC32C per file (every single-bit flip of a slice file is caught before
// decoding, naming the file), manifest field validation (type and range errors name the field),
// row step counts beyond the checkpoint's step, manifests from before checksums, and atomic writes
// that leave no temporary file behind when they fail.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <cstring>
#include <iterator>
#include <sstream>

#include "core/atomic_file.h"
#include "core/check.h"
#include "train/checkpoint_manifest.h"
#include "core/sealed_json.h"
#include "train/checkpoint_slice.h"
#include "train/trainer.h"
#include "layers/xmc_network.h"

using namespace frugal;
namespace fs = std::filesystem;

namespace {

layers::XmcNetworkOptions small_net() {
  return {.features = 300, .labels = 50, .hidden = 8, .sampler = layers::Sampler::exact,
          .lsh = {.family = lsh::auto_family(lsh::Dwta{}, 4, 50), .tables = 4, .min_active = 20,
                  .max_active = 20},
          .seed = 5};
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// A fresh checkpoint of the small network in `dir`.
void save_small(const std::string& dir) {
  fs::remove_all(dir);
  Model m;
  layers::build_xmc_network(m, small_net());
  train::Trainer t(m, {});
  train::save_checkpoint(dir, m, t);
}

}  // namespace

TEST_CASE("checkpoint: the manifest records a CRC32C per file and every single-bit flip of a slice fails to load") {
  const std::string dir = "checkpoint_crc_test";
  save_small(dir);
  const auto info = train::read_manifest(dir);
  const std::string relative = info.folder + "/slice0.ckpt";
  REQUIRE(info.checksums.size() == 1);
  REQUIRE(info.checksums.count(relative) == 1);
  const fs::path slice = fs::path(dir) / relative;
  const std::string original = read_all(slice);
  REQUIRE(original.size() > 1000);

  Model m;
  layers::build_xmc_network(m, small_net());
  train::Trainer t(m, {});
  REQUIRE_NOTHROW(train::load_checkpoint(dir, m, t));
  REQUIRE_NOTHROW(train::load_weights(dir, m));

  // Positions spread over the whole file (header, parameters, moments, row steps, layer states),
  // plus the first and the last byte; each flip is tried with load_checkpoint and load_weights.
  std::vector<size_t> positions{0, original.size() - 1};
  for (size_t i = 1; i < 300; ++i) positions.push_back(i * original.size() / 300 + i % 7);
  size_t loads = 0, detected = 0;
  for (size_t k = 0; k < positions.size(); ++k) {
    std::string bytes = original;
    bytes[positions[k]] = static_cast<char>(bytes[positions[k]] ^ (1 << (k % 8)));
    write_all(slice, bytes);
    for (const bool weights_only : {false, true}) {
      ++loads;
      const std::string e = error_of([&] {
        if (weights_only) train::load_weights(dir, m);
        else train::load_checkpoint(dir, m, t);
      });
      if (e.find("slice0.ckpt: checksum mismatch") != std::string::npos && e.find("corrupt") != std::string::npos)
        ++detected;
      else
        FAIL_CHECK("flip of bit " << k % 8 << " at byte " << positions[k] << " not detected: " << e);
    }
  }
  CHECK(detected == loads);
  CHECK(loads == 2 * positions.size());
  write_all(slice, original);
  REQUIRE_NOTHROW(train::load_checkpoint(dir, m, t));
  fs::remove_all(dir);
}

TEST_CASE("checkpoint: a manifest without its own checksum (older checkpoints) is refused unless accepted unchecked") {
  const std::string dir = "checkpoint_old_manifest_test";
  save_small(dir);
  const fs::path manifest = fs::path(dir) / "manifest.json";
  auto j = nlohmann::json::parse(read_all(manifest));
  j.erase("checksums");
  j.erase(kManifestChecksumField);
  write_all(manifest, j.dump(2));
  CHECK_THAT(error_of([&] { train::read_manifest(dir); }),
             Catch::Contains("has no 'manifest_checksum'") && Catch::Contains("--accept-unchecked-checkpoint"));
  REQUIRE(train::read_manifest(dir, /*accept_unchecked=*/true).checksums.empty());
  Model m;
  layers::build_xmc_network(m, small_net());
  train::Trainer t(m, {});
  CHECK_THAT(error_of([&] { train::load_checkpoint(dir, m, t); }), Catch::Contains("has no 'manifest_checksum'"));
  CHECK_THAT(error_of([&] { train::load_weights(dir, m); }), Catch::Contains("has no 'manifest_checksum'"));
  REQUIRE_NOTHROW(train::load_checkpoint(dir, train::read_manifest(dir, true), m, t, nlohmann::json::object()));
  REQUIRE_NOTHROW(train::load_weights(dir, train::read_manifest(dir, true), m, nullptr));
  // Sealed but edited (any field): refused naming the seal.
  j = nlohmann::json::parse(read_all(manifest));
  seal_json(j);
  j["step"] = 12345;
  write_all(manifest, j.dump(2));
  CHECK_THAT(error_of([&] { train::read_manifest(dir); }), Catch::Contains("'manifest_checksum' does not match its contents"));
  CHECK_THAT(error_of([&] { train::read_manifest(dir, true); }), Catch::Contains("does not match its contents"));
  fs::remove_all(dir);
}

TEST_CASE("checkpoint: every manifest field is validated, naming manifest.json and the field") {
  const std::string dir = "checkpoint_manifest_fields_test";
  save_small(dir);
  const fs::path manifest = fs::path(dir) / "manifest.json";
  const auto original = nlohmann::json::parse(read_all(manifest));
  const std::string folder = original.at("folder").get<std::string>();
  struct Case {
    std::string field;
    nlohmann::json value;
    std::string expected;
  };
  const std::vector<Case> cases{
      {"epoch", -1, "field 'epoch' must be an unsigned integer"},
      {"epoch", "x", "field 'epoch' must be an unsigned integer"},
      {"epoch", 1.5, "field 'epoch' must be an unsigned integer"},
      {"step", uint64_t{1} << 40, "field 'step' is 1099511627776, outside"},
      {"step", nullptr, "field 'step' must be an unsigned integer"},
      {"version", "2", "field 'version' must be an unsigned integer"},
      {"world_size", 0, "field 'world_size' is 0, outside"},
      {"world_size", "one", "field 'world_size' must be an unsigned integer"},
      {"model_slices", 0, "field 'model_slices' is 0, outside"},
      {"model_slices", 2, "field 'model_slices' is 2, more than world_size 1"},
      {"grid", {2, 1}, "field 'grid' is [2,1], inconsistent with world_size 1"},
      {"grid", "1x1", "field 'grid' must be [replicas, model_slices]"},
      {"folder", "../x", "field 'folder' must be a plain folder name"},
      {"folder", "a/b", "field 'folder' must be a plain folder name"},
      {"folder", "..", "field 'folder' must be a plain folder name"},
      {"folder", 7, "field 'folder' must be a string"},
      {"files", {"../etc/passwd"}, "field 'files' entry \"../etc/passwd\" is not a file inside the folder"},
      {"files", {folder + "/../../x"}, "field 'files' entry"},
      {"files", "slice0.ckpt", "field 'files' must be an array"},
      {"dct_residual_files", {"elsewhere/dct.ckpt"}, "field 'dct_residual_files' entry"},
      {"config", 3, "field 'config' must be an object"},
      {"parameters", "none", "field 'parameters' must be an array"},
      {"checksums", {{folder + "/slice0.ckpt", "xyz"}}, "field 'checksums' entry"},
      {"checksums", {{folder + "/slice0.ckpt", 12}}, "field 'checksums' entry"},
      {"checksums", nlohmann::json::object(), "field 'checksums' lacks the file"},
      {"checksums", 5, "field 'checksums' must be an object"},
  };
  Model m;
  layers::build_xmc_network(m, small_net());
  train::Trainer t(m, {});
  for (const Case& c : cases) {
    auto j = original;
    j[c.field] = c.value;
    seal_json(j);  // as if frugal had written it: the fields' own checks behind the seal
    write_all(manifest, j.dump(2));
    INFO(c.field << " = " << c.value.dump());
    const std::string e = error_of([&] { train::load_checkpoint(dir, m, t); });
    CHECK_THAT(e, Catch::Contains("manifest.json: " + c.expected));
    CHECK_THAT(error_of([&] { train::load_weights(dir, m); }), Catch::Contains("manifest.json: " + c.expected));
    CHECK_THAT(e, !Catch::Contains("type_error"));
  }
  write_all(manifest, original.dump(2));
  REQUIRE_NOTHROW(train::load_checkpoint(dir, m, t));
  fs::remove_all(dir);
}

TEST_CASE("checkpoint: a row step count beyond the checkpoint's step is refused, naming the file") {
  const std::string dir = "checkpoint_row_steps_test";
  fs::remove_all(dir);
  Model m;
  layers::build_xmc_network(m, small_net());
  train::Trainer t(m, {});
  // What made the bias-correction tables grow to 1.7e9 entries: a forged count (the checksum is of
  // the file as written, so only this check stops it).
  t.optimizer().state(0).row_steps.at(3) = 1'700'000'000u;
  train::save_checkpoint(dir, m, t);
  Model m2;
  layers::build_xmc_network(m2, small_net());
  train::Trainer t2(m2, {});
  CHECK_THAT(error_of([&] { train::load_checkpoint(dir, m2, t2); }),
             Catch::Contains("slice0.ckpt") && Catch::Contains("row 3 has step count 1700000000") &&
                 Catch::Contains("beyond the checkpoint's step 0"));
  // Weights-only loading does not use the optimizer state.
  CHECK_NOTHROW(train::load_weights(dir, m2));
  fs::remove_all(dir);
}

// Inputs of tests/fuzz/fuzz_checkpoint: counts that cereal would have allocated before reading
// (std::length_error or std::bad_alloc escaped, or gigabytes were allocated for a 10 kB file).
TEST_CASE("checkpoint: a slice file's counts and shapes are checked against its size before allocating") {
  const std::string dir = "checkpoint_counts_test";
  save_small(dir);
  const std::string original = read_all(fs::path(dir) / train::read_manifest(dir).folder / "slice0.ckpt");
  const auto decode = [](const std::string& bytes, bool full) {
    std::istringstream in(bytes, std::ios::binary);
    return train::decode_slice(in, "x/slice0.ckpt", full);
  };
  REQUIRE(decode(original, true).params.size() > 0);
  const auto put64 = [](std::string& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); };
  // Magic (8 bytes), version (4), parameter count (8), then the first parameter's name size tag.
  constexpr size_t kName = 20;
  uint64_t name_len = 0;
  std::memcpy(&name_len, original.data() + kName, 8);
  const size_t shape = kName + 8 + name_len + 4 + 3 * 8;  // name, axis, offset, full rows and columns
  for (const bool full : {true, false}) {
    std::string b = original;
    put64(b, kName, uint64_t{1} << 62);
    CHECK_THAT(error_of([&] { decode(b, full); }),
               Catch::Contains("x/slice0.ckpt: parameter name") && Catch::Contains("truncated or corrupt"));
    // 2^32 x 2^32 floats: the product wraps to 0 in 64 bits.
    b = original;
    put64(b, shape, uint64_t{1} << 32);
    put64(b, shape + 8, uint64_t{1} << 32);
    CHECK_THAT(error_of([&] { decode(b, full); }),
               Catch::Contains("x/slice0.ckpt") && Catch::Contains("4294967296x4294967296 tensor does not fit"));
    // A value with one more row than its step counts.
    b = original;
    uint64_t rows = 0;
    std::memcpy(&rows, b.data() + shape, 8);
    put64(b, shape, rows - 1);
    CHECK_THAT(error_of([&] { decode(b, full); }), Catch::Contains("x/slice0.ckpt") && Catch::Contains("corrupt"));
  }
  fs::remove_all(dir);
}

TEST_CASE("write_atomically: a failed write leaves no temporary file") {
  const fs::path dir = "atomic_write_failure_test";
  fs::remove_all(dir);
  fs::create_directories(dir / "target" / "inside");
  // Renaming a file over a non-empty directory fails (for root too), after the .tmp was written.
  CHECK_THROWS(write_atomically(dir / "target", "bytes"));
  CHECK_FALSE(fs::exists(dir / "target.tmp"));
  CHECK(fs::is_directory(dir / "target"));
  // A successful write leaves the target and no .tmp.
  write_atomically(dir / "plain", "bytes");
  CHECK(read_all(dir / "plain") == "bytes");
  CHECK_FALSE(fs::exists(dir / "plain.tmp"));

  // The same through save_checkpoint: the slice file cannot be renamed into place.
  const std::string ckpt = (dir / "ckpt").string();
  Model m;
  layers::build_xmc_network(m, small_net());
  train::Trainer t(m, {});
  fs::create_directories(fs::path(ckpt) / "epoch-0-step-0" / "slice0.ckpt" / "x");
  CHECK_THROWS(train::save_checkpoint(ckpt, m, t));
  CHECK_FALSE(fs::exists(fs::path(ckpt) / "epoch-0-step-0" / "slice0.ckpt.tmp"));
  CHECK_FALSE(fs::exists(fs::path(ckpt) / "manifest.json"));
  fs::remove_all(dir);
}
