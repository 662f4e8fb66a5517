#include "core/layer.h"

#include <fmt/format.h>

namespace frugal {

std::string Layer::describe() const {
  return fmt::format("{}({} -> {})", kind(), in_features(), out_features());
}

std::vector<Parameter*> OutputLayer::label_parameters() {
  std::vector<Parameter*> out;
  for (Parameter* p : parameters())
    if (p->sliced_axis == 0 ? p->full_rows == out_features() : p->sliced_axis < 0 && p->value.rows() == out_features())
      out.push_back(p);
  return out;
}

const Placement& Layer::placement() const {
  static const Placement replicated{};
  return replicated;
}

}  // namespace frugal
