// Reader for the Extreme Classification Repository text format (Amazon-670K, Delicious-200K,
// WikiLSHTC-325K): a header `N F L`, then one line per point `l1,l2,... f:v f:v ...` with 0-based
// ids. Every line is validated; an error names file:line and what is wrong. Accepted as published:
//  - a point without labels: the line starts with a space (` f:v f:v`);
//  - a point with neither labels nor features: a line holding only spaces;
//  - labels separated by ", " (the LSHTC original) as well as ",";
//  - Windows line endings, tabs, repeated or trailing spaces, a UTF-8 byte-order mark, blank lines
//    after the last point, a missing final newline;
//  - points in any order (repository files are often sorted by label: training shuffles every
//    epoch; `frugal data shuffle` / `split` reorder files).
// Ids equal to F or L get a hint that the file may be 1-based.
// XmcReader (core/data/xmc_reader.h) reads the same format in chunks, for files too large to hold.
#pragma once

#include <istream>
#include <string>

#include "core/dataset.h"

namespace frugal::data {

class XmcFile {
 public:
  // Reads the whole file, line by line (the text is never held in memory as a whole). A first pass
  // counts separators so the point arrays are allocated once at their final size.
  static Dataset open(const std::string& path);
  // Same, from a stream; `name` is used in error messages.
  static Dataset read(std::istream& in, const std::string& name);
  // Writes `data` in the same format (what `frugal data` tools and the generator use).
  static void write(const Dataset& data, const std::string& path);
};

}  // namespace frugal::data
