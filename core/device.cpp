#include "core/device.h"

#include <charconv>
#include <vector>

#include <fmt/format.h>

#include "core/backend.h"
#include "core/check.h"
#include "core/communicator.h"

namespace frugal {
namespace {

// N of "cuda:N", or -1 when `spec` is not of that form.
int cuda_index(std::string_view spec) {
  constexpr std::string_view prefix = "cuda:";
  if (spec.substr(0, prefix.size()) != prefix || spec.size() == prefix.size()) return -1;
  const std::string_view digits = spec.substr(prefix.size());
  int n = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || end != digits.data() + digits.size() || n < 0) return -1;
  return n;
}

std::string registered_names() {
  std::string names;
  for (const Backend* b : backends()) names += (names.empty() ? "" : ", ") + b->name();
  return names.empty() ? "none" : names;
}

}  // namespace

bool is_device_spec(std::string_view spec) {
  return spec == "cpu" || spec == "cuda" || spec == "auto" || spec == "emulated" || cuda_index(spec) >= 0;
}

Backend& resolve_device(std::string_view spec) {
  FRUGAL_CHECK(is_device_spec(spec),
               fmt::format("device '{}' is not one of cpu, cuda, cuda:N, auto, emulated", spec));
  if (spec == "auto") {
    if (Backend* cuda = find_backend("cuda")) return *cuda;
    spec = "cpu";
  }
  if (spec == "emulated") {  // the counting device (kernels/emulated_backend.h): for testing
    Backend* emulated = find_backend("emulated");
    FRUGAL_CHECK(emulated != nullptr, fmt::format("device emulated: no \"emulated\" backend is registered "
                                                  "(registered: {})", registered_names()));
    return *emulated;
  }
  if (spec == "cpu") {
    Backend* cpu = find_backend("cpu");
    FRUGAL_CHECK(cpu != nullptr, fmt::format("device cpu: no \"cpu\" backend is registered (registered: {})",
                                             registered_names()));
    return *cpu;
  }
  if (Backend* exact = find_backend(spec)) return *exact;  // "cuda", or a backend registered as "cuda:N"
  Backend* cuda = find_backend("cuda");
  FRUGAL_CHECK(cuda != nullptr,
               fmt::format("device {}: no CUDA backend is registered: this build has no CUDA support "
                           "(meson -Dcuda) or no GPU is visible (registered backends: {}); use cpu or auto",
                           spec, registered_names()));
  const int n = cuda_index(spec);
  FRUGAL_CHECK(n == 0, fmt::format("device {}: there is no CUDA device {} here: the \"cuda\" backend drives one "
                                   "device, cuda:0 (the backend interface has no device index to pick another)",
                                   spec, n));
  return *cuda;
}

std::string device_name(const Backend& backend) { return backend.name(); }

void set_threads(Backend& backend, int threads) { backend.set_num_threads(threads); }

int threads(const Backend& backend) { return backend.num_threads(); }

bool is_gpu(std::string_view device) { return device == "cuda" || cuda_index(device) >= 0; }

bool group_mixes_devices(comm::Communicator* group, std::string_view device) {
  if (!comm::is_active(group)) return false;
  // One number per kind of device (cpu, a GPU, the counting device): they mix when two differ.
  const float kind = device == "cpu" ? 0.0f : is_gpu(device) ? 1.0f : 2.0f;
  std::vector<float> most{kind}, least{kind};
  group->all_reduce(most, comm::ReduceOp::max).wait();
  group->all_reduce(least, comm::ReduceOp::min).wait();
  return most[0] != least[0];
}

}  // namespace frugal
