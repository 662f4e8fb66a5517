// FRUGAL_CHECK: the one way frugal reports a violated expectation. It throws frugal::Error whose
// message speaks the user's terms (the flag, the file and line); the source file, line, rank and
// condition travel beside it (Error::where), for `frugal --verbose` and debug logs, not for users.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace frugal {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  Error(const std::string& message, std::string where) : std::runtime_error(message), where_(std::move(where)) {}
  // Where in frugal's source the check failed ("core/x.cpp:12, rank 0, check `n > 0`"); empty for
  // errors thrown without FRUGAL_CHECK.
  const std::string& where() const noexcept { return where_; }

 private:
  std::string where_;
};

// The rank printed in error messages; set by the communicator when a process joins a group.
void set_error_rank(int rank);
int error_rank();

[[noreturn]] void throw_check_failure(const char* file, int line, const char* condition,
                                      const std::string& message);

}  // namespace frugal

#define FRUGAL_CHECK(cond, msg)                                              \
  do {                                                                       \
    if (!(cond)) [[unlikely]] {                                              \
      ::frugal::throw_check_failure(__FILE__, __LINE__, #cond, (msg));       \
    }                                                                        \
  } while (false)
