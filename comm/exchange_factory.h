// comm/'s ExchangeFactory (comm/exchange.h): the model-parallel boundary exchanges and the replica
// reducers of comm/. The trainer (train, the floor above comm/) and apps/ pass it where a group
// of ranks needs exchanges; the layers below comm/ (the DLRM network) are given it.
#pragma once

#include "comm/exchange.h"

namespace frugal::comm {

const ExchangeFactory& comm_exchanges();

}  // namespace frugal::comm
