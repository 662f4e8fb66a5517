#include "zmq_harness.h"

#include "comm/local_port.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace frugal::comm::testing {

int free_port() { return free_local_port(); }

std::vector<std::string> run_zmq_collect(int n, const std::function<void(Communicator&)>& fn,
                                         const std::function<void(ZmqOptions&)>& configure) {
  const std::string coordinator = fmt::format("127.0.0.1:{}", free_port());
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      set_error_rank(r);
      try {
        ZmqOptions o;
        o.rank = r;
        o.size = n;
        o.coordinator = coordinator;
        o.timeout = std::chrono::seconds(10);
        o.rendezvous_timeout = std::chrono::seconds(20);
        if (configure) configure(o);
        auto comm = make_zmq_communicator(o);
        fn(*comm);
      } catch (const std::exception& e) {
        errors[r] = e.what();
        if (errors[r].empty()) errors[r] = "(empty error message)";
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

void run_zmq(int n, const std::function<void(Communicator&)>& fn,
             const std::function<void(ZmqOptions&)>& configure) {
  const auto errors = run_zmq_collect(n, fn, configure);
  for (int r = 0; r < n; ++r) {
    if (!errors[r].empty()) throw Error(fmt::format("rank {}: {}", r, errors[r]));
  }
}

}  // namespace frugal::comm::testing
