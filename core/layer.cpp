#include "core/layer.h"

#include <fmt/format.h>

namespace frugal {

std::string Layer::describe() const {
  return fmt::format("{}({} -> {})", kind(), in_features(), out_features());
}

}  // namespace frugal
