// FRUGAL_CHECK: the one way frugal reports a violated expectation. It throws frugal::Error whose
// message names the source file, the line and the rank of the process, so an error printed by one
// of many ranks says where it came from.
#pragma once

#include <stdexcept>
#include <string>

namespace frugal {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
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
