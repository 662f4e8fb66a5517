// Reader for the Extreme Classification Repository text format (Amazon-670K, Delicious-200K,
// WikiLSHTC-325K): a header `N F L`, then one line per point `l1,l2,... f:v f:v ...` with 0-based
// ids. Every line is validated; an error names file:line and what is wrong.
#pragma once

#include <istream>
#include <string>

#include "core/dataset.h"

namespace frugal::data {

class XmcFile {
 public:
  // Reads the whole file, line by line (the text is never held in memory as a whole).
  static Dataset open(const std::string& path);
  // Same, from a stream; `name` is used in error messages.
  static Dataset read(std::istream& in, const std::string& name);
  // Writes `data` in the same format (what `frugal data` tools and the generator use).
  static void write(const Dataset& data, const std::string& path);
};

}  // namespace frugal::data
