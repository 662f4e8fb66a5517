// Checks every collective of a Communicator against a serial reference. Each rank's input is a
// known function of (rank, index), so every rank computes the expected result on its own. Inputs
// are small integers, so sums are exact in any order and results compare with ==.
// Throws frugal::Error naming the collective, size and first wrong index (safe to call from many
// threads; Catch2 assertions are not).
#pragma once

#include <cstddef>

#include "core/communicator.h"

namespace frugal::comm::testing {

float input(int rank, size_t i);

void check_all_reduce(Communicator& c, size_t n);
void check_all_gather(Communicator& c, size_t n);     // equal and uneven counts
void check_reduce_scatter(Communicator& c, size_t n); // equal and uneven counts
void check_broadcast(Communicator& c, size_t n);
void check_bytes_and_barrier(Communicator& c, size_t n);  // broadcast_bytes, all_gather_bytes
void check_send_recv(Communicator& c, size_t n);
void check_split(Communicator& c);

// All of the above for one size.
void check_collectives(Communicator& c, size_t n);

}  // namespace frugal::comm::testing
