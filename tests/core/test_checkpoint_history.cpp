// Keeping the last K checkpoints (train/checkpoint_history.h) and --resume's fallback: the
// newest intact checkpoint is chosen, a damaged newer one is passed over with the reason naming the
// damaged file; K = 1 keeps only the newest, as before K existed; a directory saved before the
// epoch folders held their own manifest still resumes, and keeps its checkpoint as a fallback.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/check.h"
#include "train/checkpoint_history.h"
#include "train/trainer.h"
#include "layers/xmc_network.h"

using namespace frugal;
namespace fs = std::filesystem;

namespace {

layers::XmcNetworkOptions tiny_net() {
  return {.features = 200, .labels = 40, .hidden = 8, .sampler = layers::Sampler::exact, .seed = 7};
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void flip_byte(const fs::path& p, size_t at) {
  std::string bytes = read_all(p);
  REQUIRE(at < bytes.size());
  bytes[at] = static_cast<char>(bytes[at] ^ 0x10);
  write_all(p, bytes);
}

// Saves checkpoints of epochs 1..n (step 10 per epoch) into `dir`, keeping `keep`.
void save_epochs(const std::string& dir, int n, size_t keep) {
  fs::remove_all(dir);
  Model m;
  layers::build_xmc_network(m, tiny_net());
  train::Trainer t(m, {});
  for (int e = 1; e <= n; ++e) {
    t.set_epoch(static_cast<uint64_t>(e));
    t.set_step(static_cast<uint64_t>(10 * e));
    train::save_checkpoint(dir, m, t, nlohmann::json::object(), nlohmann::json::object(), keep);
  }
}

std::string folder(int epoch) { return "epoch-" + std::to_string(epoch) + "-step-" + std::to_string(10 * epoch); }

}  // namespace

TEST_CASE("checkpoint history: --keep-checkpoints K keeps the newest K epoch folders, each with its manifest") {
  const std::string dir = "checkpoint_keep_test";
  for (const size_t keep : {1, 2, 3}) {
    save_epochs(dir, 5, keep);
    std::vector<std::string> expected;
    for (int e = 5; e > 5 - static_cast<int>(keep); --e) expected.push_back(folder(e));
    CHECK(train::checkpoint_folders(dir) == expected);
    for (const auto& f : expected) CHECK(fs::is_regular_file(fs::path(dir) / f / "manifest.json"));
    CHECK(train::read_manifest(dir).folder == folder(5));
    const train::CheckpointChoice choice = train::newest_intact_checkpoint(dir);
    CHECK(choice.manifest.epoch == 5);
    CHECK(choice.skipped.empty());
    CHECK(choice.manifest_file == (fs::path(dir) / "manifest.json").string());
  }
  // Epoch folders sort by number, not by name: epoch-10 is newer than epoch-9.
  save_epochs(dir, 10, 2);
  CHECK(train::checkpoint_folders(dir) == std::vector<std::string>{folder(10), folder(9)});
  fs::remove_all(dir);
}

TEST_CASE("checkpoint history: a flipped byte in the newest slice file falls back to the previous checkpoint") {
  const std::string dir = "checkpoint_fallback_test";
  save_epochs(dir, 3, 2);
  flip_byte(fs::path(dir) / folder(3) / "slice0.ckpt", 100);
  const train::CheckpointChoice choice = train::newest_intact_checkpoint(dir);
  CHECK(choice.manifest.epoch == 2);
  CHECK(choice.manifest.folder == folder(2));
  CHECK(choice.manifest_file == (fs::path(dir) / folder(2) / "manifest.json").string());
  REQUIRE(choice.skipped.size() == 1);
  CHECK(choice.skipped[0].manifest == (fs::path(dir) / "manifest.json").string());
  CHECK_THAT(choice.skipped[0].reason, Catch::Contains(folder(3) + "/slice0.ckpt: checksum mismatch"));
  // The chosen checkpoint loads, and restores its epoch and step.
  Model m;
  layers::build_xmc_network(m, tiny_net());
  train::Trainer t(m, {});
  train::load_checkpoint(dir, choice.manifest, m, t, nlohmann::json::object());
  CHECK(t.epoch() == 2);
  CHECK(t.step() == 20);

  // A damaged top manifest: its copy in the epoch folder is the next candidate.
  save_epochs(dir, 3, 2);
  write_all(fs::path(dir) / "manifest.json", "{ not json");
  const train::CheckpointChoice from_copy = train::newest_intact_checkpoint(dir);
  CHECK(from_copy.manifest.epoch == 3);
  REQUIRE(from_copy.skipped.size() == 1);
  CHECK_THAT(from_copy.skipped[0].reason, Catch::Contains("manifest.json: corrupt manifest"));

  // A missing slice file counts as damage too.
  save_epochs(dir, 3, 2);
  fs::remove(fs::path(dir) / folder(3) / "slice0.ckpt");
  CHECK(train::newest_intact_checkpoint(dir).manifest.epoch == 2);
  fs::remove_all(dir);
}

TEST_CASE("checkpoint history: with K = 1 or every checkpoint damaged, --resume fails naming each file") {
  const std::string dir = "checkpoint_none_intact_test";
  save_epochs(dir, 3, 1);
  CHECK(train::checkpoint_folders(dir) == std::vector<std::string>{folder(3)});
  flip_byte(fs::path(dir) / folder(3) / "slice0.ckpt", 100);
  try {
    train::newest_intact_checkpoint(dir);
    FAIL("a damaged only checkpoint was accepted");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("no intact checkpoint"));
    // The top manifest and its folder's copy are the same checkpoint: it is tried once.
    CHECK_THAT(what, Catch::Contains(folder(3) + "/slice0.ckpt: checksum mismatch"));
    CHECK(what.find("checksum mismatch") == what.rfind("checksum mismatch"));
  }
  fs::remove_all(dir);
  CHECK_THROWS_WITH(train::newest_intact_checkpoint(dir), Catch::Contains("no checkpoint here"));
}

TEST_CASE("checkpoint history: a directory saved before folder manifests resumes and stays a fallback") {
  const std::string dir = "checkpoint_old_layout_test";
  save_epochs(dir, 1, 1);
  fs::remove(fs::path(dir) / folder(1) / "manifest.json");  // the layout before this change
  CHECK(train::newest_intact_checkpoint(dir).manifest.epoch == 1);
  // The next save (keep 2) gives the old checkpoint its manifest copy and keeps it.
  Model m;
  layers::build_xmc_network(m, tiny_net());
  train::Trainer t(m, {});
  t.set_epoch(2);
  t.set_step(20);
  train::save_checkpoint(dir, m, t, nlohmann::json::object(), nlohmann::json::object(), 2);
  CHECK(train::checkpoint_folders(dir) == std::vector<std::string>{folder(2), folder(1)});
  flip_byte(fs::path(dir) / folder(2) / "slice0.ckpt", 100);
  CHECK(train::newest_intact_checkpoint(dir).manifest.epoch == 1);
  fs::remove_all(dir);
}

TEST_CASE("checkpoint history: epoch folders newer than the one saved belong to an abandoned run and go") {
  const std::string dir = "checkpoint_abandoned_test";
  save_epochs(dir, 4, 3);
  // Resumed from epoch 2 (say epochs 3 and 4 were damaged), the run saves epoch 3 at another step.
  Model m;
  layers::build_xmc_network(m, tiny_net());
  train::Trainer t(m, {});
  t.set_epoch(3);
  t.set_step(25);
  train::save_checkpoint(dir, m, t, nlohmann::json::object(), nlohmann::json::object(), 3);
  CHECK(train::checkpoint_folders(dir) == std::vector<std::string>{"epoch-3-step-25", folder(2)});
  CHECK(train::newest_intact_checkpoint(dir).manifest.step == 25);
  CHECK_THROWS_WITH(train::save_checkpoint(dir, m, t, nlohmann::json::object(), nlohmann::json::object(), 0),
                    Catch::Contains("keep at least 1"));
  fs::remove_all(dir);
}
