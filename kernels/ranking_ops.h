// Backend::ranking_add on the CPU: the ranking metrics' sums of a batch, points in parallel (each
// point's share by core/ranking_counts.h's program), then added to the sums in point order.
#pragma once

#include "core/backend.h"

namespace frugal::kernels {

void ranking_add(const RankingTensors& in, RankingState& state);

}  // namespace frugal::kernels
