#include "comm/exchange_factory.h"

#include "comm/dct/boundary_exchange.h"
#include "comm/dct/stage_link.h"
#include "comm/replica_reducer.h"

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
  std::unique_ptr<StageLink> stage_link(Communicator& pipeline, int peer, size_t width, const MpCompression& options,
                                        int tag) const override {
    return std::make_unique<PipelineLink>(pipeline, peer, width, options, tag);
  }
};

}  // namespace

const ExchangeFactory& comm_exchanges() {
  static const CommExchangeFactory factory;
  return factory;
}

}  // namespace frugal::comm
