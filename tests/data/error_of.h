// Test helper: the message of the frugal::Error that `f` throws, or "no error".
#pragma once

#include <functional>
#include <string>

#include "core/check.h"

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const frugal::Error& e) {
    return e.what();
  }
  return "no error";
}
