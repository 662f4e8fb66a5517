// Runs ZeroMQ ranks as threads of the test process (each with its own ZeroMQ context and TCP
// sockets on 127.0.0.1), so the collective checks can run against the real TCP transport.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "comm/zmq_communicator.h"

namespace frugal::comm::testing {

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it, close).
int free_port();

// Runs fn(comm) on ranks 0..n-1; `configure` may adjust each rank's options. Rethrows the first
// exception (construction included) after all threads finished.
void run_zmq(int n, const std::function<void(Communicator&)>& fn,
             const std::function<void(ZmqOptions&)>& configure = {});

// As run_zmq, but returns each rank's error message ("" for a rank that succeeded).
std::vector<std::string> run_zmq_collect(int n, const std::function<void(Communicator&)>& fn,
                                         const std::function<void(ZmqOptions&)>& configure = {});

}  // namespace frugal::comm::testing
