// Test helper: a fresh folder under the system's temporary directory, removed with everything in it
// when the TempDir goes; `dir / "name"` is a path inside it.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

#include <catch2/catch.hpp>

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "frugal-test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};
