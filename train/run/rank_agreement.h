// Which options of a training run the ranks must agree on. The ranks compare, at rendezvous, what
// the run resolves (its run config) and every option as given or defaulted (TrainConfig::settings),
// except those each rank may set for itself (its data's path, its device, threads, memory, output)
// and those compared as resolved instead (--output-init: "auto" and "random" would read as a
// choice). A new option is compared unless it is listed in rank_agreement.cpp, with the reason.
#pragma once

#include <string_view>

namespace frugal::run {

// Whether the ranks compare `flag` (e.g. "--batch") as given.
bool compared_as_given(std::string_view flag);

}  // namespace frugal::run
