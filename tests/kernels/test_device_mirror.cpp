// The `device_mirror` test: the protocol by which a device backend keeps model tensors on its device
// (core/device_mirror.h), checked without a GPU. The "device" is host memory (MirrorBackend,
// tests/kernels/mirror_backend.h, which keeps the same tensors resident as the CUDA backend), so:
//  - the mirror's own rules: one upload per host write, none otherwise; freed host data drops its
//    copy; a host write over a device copy that is ahead is refused; flush writes the moments back;
//  - every op of the "mirror" backend passes the parity harness;
//  - whole trainings on "mirror" equal those on "cpu" bit for bit (exact and LSH samplers, a dense
//    hidden layer, Adam / SGD / Adagrad, lazy and catch-up rows, bf16 storage, evaluation, a
//    checkpoint saved and resumed mid-way): a forgotten flush, a missed host write or a stale copy
//    would change the bits;
//  - in steady state a step uploads no model tensor: only the changed weight rows come back;
//  - a 2x2 grid (replicas and slices, ranks as threads) with rank 0 on "mirror" equals one on "cpu",
//    with DCT-DP over gradients and over optimizer updates (host weight writes every step).
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "comm/local_communicator.h"
#include "core/backend.h"
#include "core/data/synth_xmc.h"
#include "core/check.h"
#include "core/device_mirror.h"
#include "core/train/checkpoint.h"
#include "core/train/trainer.h"
#include "layers/mlp_network.h"
#include "tests/kernels/backend_harness.h"
#include "tests/kernels/mirror_backend.h"
#include "tests/kernels/training_equivalence.h"

using namespace frugal;
using namespace frugal::testing;

namespace {

// Device memory that is host memory, counting what it is asked for.
class CountingMemory : public DeviceMirror::Memory {
 public:
  void* allocate(const Tensor&, size_t bytes) override {
    ++live;
    return ::operator new(bytes);
  }
  void release(void* device) noexcept override {
    --live;
    ::operator delete(device);
  }
  void upload(void* device, const void* host, size_t bytes) override {
    if (fail_uploads) throw Error("upload failed (on purpose)");
    std::memcpy(device, host, bytes);
  }
  void download(void* host, const void* device, size_t bytes) override { std::memcpy(host, device, bytes); }
  int live = 0;
  bool fail_uploads = false;
};


}  // namespace

TEST_CASE("device mirror: one upload per host write, none otherwise") {
  CountingMemory memory;
  DeviceMirror mirror(memory);
  Tensor t(3, 4);
  t.fill(2.0f);
  void* d = mirror.acquire(t);
  REQUIRE(d != nullptr);
  CHECK(mirror.traffic().uploads == 1);
  CHECK(static_cast<float*>(d)[5] == 2.0f);
  // Reading through a const Tensor does not mark it.
  const Tensor& view = t;
  CHECK(view.at(1, 1) == 2.0f);
  CHECK(mirror.acquire(t) == d);
  CHECK(mirror.traffic().uploads == 1);
  CHECK(mirror.find(t) == d);
  CHECK(mirror.find_range(t.raw() + 16, 8) == static_cast<std::byte*>(d) + 16);
  CHECK(mirror.find_range(t.raw() + 40, 16) == nullptr);  // runs past the tensor
  // A host write: the copy is refreshed on the next acquire, and not found before.
  t.at(0, 0) = 7.0f;
  CHECK(mirror.find(t) == nullptr);
  CHECK(mirror.find_range(t.raw(), 4) == nullptr);
  REQUIRE(mirror.acquire(t) == d);
  CHECK(static_cast<float*>(d)[0] == 7.0f);
  CHECK(mirror.traffic().uploads == 2);
  CHECK(mirror.bytes() == t.bytes());
}

TEST_CASE("device mirror: moments ahead on the device come back with flush, and host writes over them are refused") {
  CountingMemory memory;
  DeviceMirror mirror(memory);
  Tensor m(2, 2);
  auto* d = static_cast<float*>(mirror.acquire(m));
  d[3] = 5.0f;  // an op changed the device copy
  mirror.changed(m, false);
  CHECK(std::as_const(m).at(1, 1) == 0.0f);  // the host has not seen it
  mirror.flush();
  CHECK(std::as_const(m).at(1, 1) == 5.0f);
  CHECK(mirror.traffic().flushes == 1);
  mirror.flush();  // nothing ahead: nothing moves
  CHECK(mirror.traffic().flushes == 1);
  CHECK(mirror.acquire(m) == d);  // a flush does not mark the host copy written
  CHECK(mirror.traffic().uploads == 1);

  d[0] = 1.0f;
  mirror.changed(m, false);
  m.at(0, 1) = 3.0f;  // a host write while the device is ahead: one of them would be lost
  CHECK_THROWS_WITH(mirror.acquire(m), Catch::Contains("the host wrote a 2x2 f32 tensor whose device copy has changes"));
  CHECK_THROWS_WITH(mirror.flush(), Catch::Contains("the host wrote a 2x2 f32 tensor whose device copy has changes"));
  CHECK(std::as_const(m).at(0, 1) == 3.0f);  // the host's write is not overwritten

  // Weights written through: the host has the device's values, nothing is ahead.
  Tensor w(2, 2);
  auto* dw = static_cast<float*>(mirror.acquire(w));
  dw[1] = 4.0f;
  w.at(0, 1) = 4.0f;  // the backend's write-through
  mirror.changed(w, true);
  CHECK(mirror.acquire(w) == dw);
  CHECK(mirror.traffic().uploads == 2);
  CHECK_THROWS_WITH(mirror.changed(Tensor(1, 1), false), Catch::Contains("has no device copy"));
}

TEST_CASE("device mirror: a failed upload leaves the tensor to be uploaded again") {
  CountingMemory memory;
  DeviceMirror mirror(memory);
  Tensor t(2, 3);
  t.fill(1.5f);
  memory.fail_uploads = true;
  CHECK_THROWS_WITH(mirror.acquire(t), Catch::Contains("upload failed"));
  CHECK(mirror.find(t) == nullptr);  // the copy that never arrived is not used
  memory.fail_uploads = false;
  const auto* d = static_cast<const float*>(mirror.acquire(t));
  REQUIRE(d != nullptr);
  CHECK(d[5] == 1.5f);
}

TEST_CASE("device mirror: freeing or reallocating the host data drops its copy") {
  CountingMemory memory;
  DeviceMirror mirror(memory);
  {
    Tensor a(4, 4), b(2, 8);
    mirror.acquire(a);
    mirror.acquire(b);
    CHECK(mirror.entries() == 2);
    CHECK(memory.live == 2);
    Tensor moved = std::move(a);  // the data moves, and its copy stays found
    CHECK(mirror.find(moved) != nullptr);
    CHECK(mirror.traffic().uploads == 2);
    b.resize(100, 100);  // a new allocation: the old one's copy goes
    CHECK(mirror.entries() == 1);
  }
  CHECK(mirror.entries() == 0);
  CHECK(memory.live == 0);
  CHECK(mirror.bytes() == 0);
  // Resized in place (same allocation, new shape): a fresh copy of the new shape.
  Tensor c(4, 4);
  void* d = mirror.acquire(c);
  c.resize(2, 4);
  REQUIRE(mirror.acquire(c) != nullptr);
  CHECK(mirror.bytes() == c.bytes());
  CHECK(mirror.traffic().uploads == 4);  // a, b, then c twice
  (void)d;
}

TEST_CASE("device mirror: every op of the mirror backend passes the parity harness") {
  testing::MirrorBackend mirror;
  const harness::Tally t = harness::run_all(mirror, false);
  CHECK(t.fail == 0);
  CHECK(t.skip == 0);
  CHECK(t.ok > 0);
  CHECK(mirror.mirror().entries() == 0);  // every case's tensors were freed, and their copies with them
}

TEST_CASE("device mirror: trainings on the mirror backend equal the CPU backend's bit for bit") {
  Backend& cpu = *find_backend("cpu");
  cpu.set_num_threads(2);
  const std::vector<Setup> setups = testing::standard_setups();
  const std::string dir = (std::filesystem::temp_directory_path() / "frugal_device_mirror_ckpt").string();
  for (const Setup& s : setups) {
    SECTION(s.name) {
      testing::MirrorBackend mirror;
      mirror.set_num_threads(2);
      const Outcome want = train(cpu, s);
      require_same(train(mirror, s), want);
      std::filesystem::remove_all(dir);
      require_same(train(mirror, s, dir), want);
      std::filesystem::remove_all(dir);
      CHECK(mirror.mirror().traffic().flushes > 0);  // the moments came back for the checkpoint
    }
  }
}

TEST_CASE("device mirror: in steady state a step moves no model tensor to the device") {
  testing::MirrorBackend mirror;
  mirror.set_num_threads(2);
  for (const auto sampler : {layers::Sampler::lsh, layers::Sampler::exact}) {
    INFO((sampler == layers::Sampler::lsh ? "lsh" : "exact"));
    Setup s;
    s.sampler = sampler;
    if (sampler == layers::Sampler::exact) s.hidden = {48, 32};  // and a dense hidden layer (matmul)
    auto model = build(s);
    Trainer trainer(*model, {});
    use(mirror, *model, trainer);
    trainer.fit_epoch(problem().train, {.batch = kBatch, .seed = 1, .progress = false});
    const DeviceMirror::Traffic before = mirror.mirror().traffic();
    const uint64_t through_before = mirror.written_through_bytes();
    trainer.fit_epoch(problem().train, {.batch = kBatch, .seed = 2, .progress = false});
    const DeviceMirror::Traffic after = mirror.mirror().traffic();
    CHECK(after.uploads == before.uploads);
    CHECK(after.flushes == before.flushes);
    CHECK(mirror.written_through_bytes() > through_before);  // the changed weight rows came back
    size_t model_bytes = 0;
    for (Parameter* p : model->parameters()) model_bytes += p->value.bytes();
    CHECK(mirror.mirror().bytes() >= model_bytes);  // weights and moments resident
  }
}

// Data-parallel replicas and model slices, with DCT-DP over gradients and over optimizer updates
// (which writes the weights on the host after every step: the mirror must upload them again).
TEST_CASE("device mirror: a 2x2 grid with rank 0 on the mirror backend equals one on the CPU backend") {
  Backend& cpu = *find_backend("cpu");
  cpu.set_num_threads(1);
  std::vector<uint64_t> uploads;
  for (const auto& dp : {std::optional<comm::DpCompression>{},
                         std::optional<comm::DpCompression>{comm::DpCompression{.keep = 0.05f}},
                         std::optional<comm::DpCompression>{comm::DpCompression{
                             .keep = 0.05f, .target = comm::DpTarget::updates}}}) {
    INFO((!dp ? "plain" : dp->target == comm::DpTarget::updates ? "dct-dp updates" : "dct-dp gradients"));
    testing::MirrorBackend mirror;
    mirror.set_num_threads(1);
    const Outcome want = train_grid(cpu, dp);
    require_same(train_grid(mirror, dp), want);
    uploads.push_back(mirror.mirror().traffic().uploads);
  }
  // Over updates, the host's weight changes went up again after every step; otherwise each tensor
  // went up once.
  CHECK(uploads[0] == uploads[1]);
  CHECK(uploads[2] > 4 * uploads[0]);
}
