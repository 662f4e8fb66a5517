// comm/'s ExchangeFactory, registered when libfrugal loads: the trainer (core/train) reaches the
// exchanges through core/exchange.h and never includes comm/.
#include "comm/dct/boundary_exchange.h"
#include "comm/replica_reducer.h"
#include "core/exchange.h"

namespace frugal::comm {
namespace {

class CommExchangeFactory : public ExchangeFactory {
 public:
  std::unique_ptr<ActivationExchange> activation_exchange(const Placement& placement, size_t width,
                                                          const MpCompression& options, int tag) const override {
    return std::make_unique<BoundaryExchange>(placement, width, options, tag);
  }
  std::unique_ptr<ReplicaReducer> replica_reducer(Communicator& replicas, std::vector<Parameter*> params,
                                                  const ReducerOptions& options) const override {
    return make_replica_reducer(replicas, std::move(params), options);
  }
};

const CommExchangeFactory factory;
// libfrugal links comm/ whole (the root meson.build), so this object file, and this registration,
// is always part of it.
[[maybe_unused]] const bool registered = (register_exchange_factory(&factory), true);

}  // namespace
}  // namespace frugal::comm
