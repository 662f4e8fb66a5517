// The data set formats frugal reads, by the names flags and checkpoint configs give them:
//   xmc: the XMC repository's text format (core/data/xmc_file.h), a data set per file;
//   idx: IDX image files (core/data/idx_file.h), a data set per prefix such as
//        /usr/share/datasets/fashion-mnist/train.
#pragma once

#include <string>
#include <string_view>

#include "core/dataset.h"

namespace frugal::data {

enum class DataFormat { xmc, idx };

std::string_view to_string(DataFormat format);  // "xmc", "idx"
// "xmc" or "idx"; anything else throws naming both.
DataFormat data_format_from_string(std::string_view name);

// The whole data set at `path` (a file for xmc, a prefix for idx).
Dataset open_dataset(DataFormat format, const std::string& path);

}  // namespace frugal::data
