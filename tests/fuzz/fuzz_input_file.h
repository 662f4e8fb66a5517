// The fuzz targets of readers that take a path (hostfile, price table, transport table, metrics
// log, the files beside a checkpoint): each input is written to a file of this process's own in a
// scratch folder (tmpfs where there is one), which the reader then opens as a user's file.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

// The scratch folder of this process, made on first use: /dev/shm/frugal-fuzz-PID, or under TMPDIR.
inline const std::string& fuzz_scratch_dir() {
  static const std::string dir = [] {
    const char* base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : std::getenv("TMPDIR");
    std::string d = std::string(base != nullptr ? base : "/tmp") + "/frugal-fuzz-" + std::to_string(::getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

// Writes `bytes` to SCRATCH/name and returns its path.
inline std::string fuzz_input_file(const std::string& name, std::string_view bytes) {
  const std::string path = fuzz_scratch_dir() + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) __builtin_trap();
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) __builtin_trap();
  std::fclose(f);
  return path;
}
