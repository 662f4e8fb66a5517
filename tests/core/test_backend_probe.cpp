// register_backend_probe (core/backend.h): a backend made only when first asked for, as the CUDA
// backend registers, so that a process that never asks for a device never starts its driver. The
// probes here make CPU backends under other names (or nothing), counting their calls.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/backend.h"
#include "core/check.h"
#include "kernels/cpu_backend.h"

using namespace frugal;
using Catch::Matchers::Contains;

namespace {

// The CPU backend under another name: a stand-in for a device backend.
class NamedCpuBackend : public kernels::CpuBackend {
 public:
  explicit NamedCpuBackend(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }

 private:
  std::string name_;
};

bool listed(const std::string& name) {
  for (const Backend* b : backends())
    if (b->name() == name) return true;
  return false;
}

}  // namespace

TEST_CASE("backend probe: made on the first look-up of its name, once") {
  static std::atomic<int> calls{0};
  register_backend_probe("probe-made", [] {
    ++calls;
    return std::make_unique<NamedCpuBackend>("probe-made");
  });
  CHECK(calls == 0);                         // registering runs nothing
  REQUIRE(find_backend("cpu") != nullptr);   // nor does asking for another name
  CHECK(calls == 0);
  Backend* made = find_backend("probe-made");
  REQUIRE(made != nullptr);
  CHECK(made->name() == "probe-made");
  CHECK(calls == 1);
  CHECK(find_backend("probe-made") == made);
  CHECK(listed("probe-made"));
  CHECK(calls == 1);
}

TEST_CASE("backend probe: one that finds no device leaves the name unregistered, and is not run again") {
  static std::atomic<int> calls{0};
  register_backend_probe("probe-none", []() -> std::unique_ptr<Backend> {
    ++calls;
    return nullptr;
  });
  CHECK(find_backend("probe-none") == nullptr);
  CHECK(find_backend("probe-none") == nullptr);
  CHECK_FALSE(listed("probe-none"));
  CHECK(calls == 1);
}

TEST_CASE("backend probe: backends() runs the pending probes") {
  static std::atomic<int> calls{0};
  register_backend_probe("probe-listed", [] {
    ++calls;
    return std::make_unique<NamedCpuBackend>("probe-listed");
  });
  CHECK(listed("probe-listed"));
  CHECK(calls == 1);
  CHECK(find_backend("probe-listed") != nullptr);
  CHECK(calls == 1);
}

TEST_CASE("backend probe: threads asking at once wait for the one probe run") {
  static std::atomic<int> calls{0};
  register_backend_probe("probe-slow", [] {
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a driver starting
    return std::make_unique<NamedCpuBackend>("probe-slow");
  });
  Backend* seen[4] = {};
  std::thread threads[4];
  for (int t = 0; t < 4; ++t) threads[t] = std::thread([&seen, t] { seen[t] = find_backend("probe-slow"); });
  for (auto& th : threads) th.join();
  REQUIRE(seen[0] != nullptr);
  for (Backend* b : seen) CHECK(b == seen[0]);
  CHECK(calls == 1);
}

TEST_CASE("backend probe: errors name the probe, and a failed probe is not retried") {
  static std::atomic<int> calls{0};
  register_backend_probe("probe-throws", []() -> std::unique_ptr<Backend> {
    ++calls;
    throw std::runtime_error("the driver is too old for this device");
  });
  CHECK_THROWS_WITH(find_backend("probe-throws"), Contains("the driver is too old"));
  CHECK(find_backend("probe-throws") == nullptr);
  CHECK(calls == 1);

  register_backend_probe("probe-misnamed", [] { return std::make_unique<NamedCpuBackend>("probe-other"); });
  CHECK_THROWS_WITH(find_backend("probe-misnamed"),
                    Contains("the probe for backend 'probe-misnamed' made a backend named 'probe-other'"));
  CHECK(find_backend("probe-other") == nullptr);

  CHECK_THROWS_WITH(register_backend_probe("cpu", [] { return std::unique_ptr<Backend>(); }),
                    Contains("backend 'cpu' is already registered"));
  register_backend_probe("probe-twice", [] { return std::unique_ptr<Backend>(); });
  CHECK_THROWS_WITH(register_backend_probe("probe-twice", [] { return std::unique_ptr<Backend>(); }),
                    Contains("backend 'probe-twice' already has a probe"));
  CHECK_THROWS_WITH(register_backend_probe("probe-empty", nullptr), Contains("no function to make the backend"));
}
