// A free TCP port on 127.0.0.1 for a ZeroMQ coordinator that is bound a moment later (`frugal
// launch`, the tests' in-process ZeroMQ runs). Chosen below the kernel's ephemeral port range: a
// port of that range can meanwhile become the source port of any process's outgoing connection,
// and the coordinator's bind would fail ("Address already in use") under concurrent runs.
#pragma once

namespace frugal::comm {

// Free now (bound and released), random among the ports from 10000 to below the ephemeral range;
// the kernel's own choice when none of 64 picks is free. Throws frugal::Error when no port binds.
int free_local_port();

}  // namespace frugal::comm
