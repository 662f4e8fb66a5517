// A run token (FRUGAL_RUN_TOKEN, ZmqOptions::run_token): 32 random bytes from the kernel as hex, the
// secret the ZeroMQ ranks of one run share. Made by `frugal launch` for each launch, and by rank 0
// of an mpirun job that opens the ZeroMQ mesh too (--transport-map), which sends it to the others
// over MPI.
#pragma once

#include <string>

namespace frugal::comm {

// Throws frugal::Error when the kernel gives no random bytes.
std::string new_run_token();

}  // namespace frugal::comm
