// Where a tensor's memory lies: small ones 64-byte aligned; big ones (weights,
// optimizer moments, row-sparse gradients) on a 2 MB boundary and advised to use transparent huge
// pages, which their random row reads need (core/tensor.cpp).
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/tensor.h"

using namespace frugal;

namespace {

uintptr_t start_of(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw()); }

// The VmFlags line of the mapping in /proc/self/smaps that holds address a ("" when not found).
std::string vm_flags_at(uintptr_t a) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    // A mapping's first line starts "lo-hi perms ..." (its first ':' is in the device, after a
    // space); its field lines start "Name:".
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      inside = lo <= a && a < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

}  // namespace

TEST_CASE("tensor memory: small tensors 64-byte aligned, big ones on 2 MB boundaries with huge pages advised") {
  Tensor small(3, 5);
  CHECK(reinterpret_cast<uintptr_t>(small.raw()) % 64 == 0);

  constexpr size_t kTwoMb = size_t{2} << 20;
  Tensor big(1024, 1024);  // 4 MB of f32
  CHECK(start_of(big) % kTwoMb == 0);
  // The contents are a tensor's as ever: zeroed by the constructor, written and read back.
  CHECK(big.at(1023, 1023) == 0.0f);
  big.at(1023, 1023) = 7.0f;
  big.at(0, 0) = -1.0f;
  CHECK(big.at(1023, 1023) == 7.0f);
  CHECK(big.at(0, 0) == -1.0f);

  // Growing past the capacity allocates again, on a boundary again; a copy of a big one is big.
  big.resize(3000, 1024);
  CHECK(start_of(big) % kTwoMb == 0);
  const Tensor copy = big;
  CHECK(start_of(copy) % kTwoMb == 0);

  Tensor half(2048, 1024, Dtype::bf16);  // 4 MB of bf16
  CHECK(start_of(half) % kTwoMb == 0);

  // Linux with transparent huge pages marks an advised mapping "hg" (whether or not the kernel
  // has a huge page to give it at the time).
  if (std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled")) {
    const std::string flags = vm_flags_at(start_of(big));
    INFO("VmFlags of the big tensor's mapping: " << flags);
    if (!flags.empty()) CHECK(flags.find(" hg") != std::string::npos);
  }
}
