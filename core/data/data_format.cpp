#include "core/data/data_format.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/quote.h"
#include "core/data/idx_file.h"
#include "core/data/xmc_file.h"

namespace frugal::data {

std::string_view to_string(DataFormat format) { return format == DataFormat::idx ? "idx" : "xmc"; }

DataFormat data_format_from_string(std::string_view name) {
  for (const DataFormat f : {DataFormat::xmc, DataFormat::idx})
    if (name == to_string(f)) return f;
  throw Error(fmt::format("unknown data format {}: expected xmc or idx", quote_input(name)));
}

Dataset open_dataset(DataFormat format, const std::string& path) {
  return format == DataFormat::idx ? IdxFile::open(path) : XmcFile::open(path);
}

}  // namespace frugal::data
