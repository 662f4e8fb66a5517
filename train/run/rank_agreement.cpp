#include "train/run/rank_agreement.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace frugal::run {
namespace {

// The flags of `frugal train` each rank may set for itself, and why. Every other flag (but the
// cluster's, --rank and friends, which say how a rank joins) must be the same on every rank: the
// rendezvous compares each one, as given or defaulted (TrainConfig::settings), and names the one that
// differs.
// A new flag is compared unless it is added here.
constexpr std::pair<std::string_view, std::string_view> kPerRankFlags[] = {
    {"--train", "each rank reads its own copy of the data; the copies' fingerprints are compared"},
    {"--test", "each rank reads its own copy of the data; the copies' fingerprints are compared"},
    {"--metrics", "each rank writes its own log (FILE.rankR.jsonl)"},
    {"--resume", "hosts may mount the checkpoint folder at other paths; the checkpoint is checked on load"},
    {"--device", "a mixed cluster gives its ranks different devices"},
    {"--threads", "hosts have different core counts"},
    {"--memory-limit", "hosts have different memory"},
    {"--bf16-dot", "CPUs differ in the instruction; both ways compute the same products to bf16 rounding"},
    {"--quiet", "output only"},
    {"--strict", "how this rank treats warnings about its own input"},
    {"--accept-unchecked-checkpoint", "how this rank treats its own copy of the checkpoint"},
};

// Flags compared as resolved, by what run_config records (only where they leave the default: an
// "output_init" key means centroid rows), not as given ("auto" or "random" would read as a choice).
constexpr std::string_view kResolvedByRunConfig[] = {"--output-init", "--centroid-scale"};

}  // namespace

bool compared_as_given(std::string_view flag) {
  return std::none_of(std::begin(kPerRankFlags), std::end(kPerRankFlags),
                      [&](const auto& f) { return f.first == flag; }) &&
         std::find(std::begin(kResolvedByRunConfig), std::end(kResolvedByRunConfig), flag) ==
             std::end(kResolvedByRunConfig);
}


}  // namespace frugal::run
