#include "comm/zmq_communicator.h"

#include "comm/transport_communicator.h"
#include "comm/zmq_transport.h"

namespace frugal::comm {

std::unique_ptr<Communicator> make_zmq_communicator(const ZmqOptions& options) {
  auto transport = std::make_shared<detail::ZmqTransport>(options);
  std::vector<int> members(options.size);
  for (int r = 0; r < options.size; ++r) members[r] = r;
  set_error_rank(options.rank);
  return std::make_unique<detail::TransportCommunicator>(std::move(transport), std::move(members),
                                                         0, options.tuning);
}

}  // namespace frugal::comm
