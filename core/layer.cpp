#include "core/layer.h"

#include <fmt/format.h>

namespace frugal {

std::string Layer::describe() const {
  return fmt::format("{}({} -> {})", kind(), in_features(), out_features());
}

const Placement& Layer::placement() const {
  static const Placement replicated{};
  return replicated;
}

}  // namespace frugal
