#include "core/data/data_format.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/quote.h"
#include "core/data/idx_file.h"
#include "core/data/packed_file.h"
#include "core/data/xmc_file.h"

namespace frugal::data {

std::string_view to_string(DataFormat format) {
  switch (format) {
    case DataFormat::idx: return "idx";
    case DataFormat::criteo: return "criteo";
    default: return "xmc";
  }
}

DataFormat data_format_from_string(std::string_view name) {
  for (const DataFormat f : {DataFormat::xmc, DataFormat::idx, DataFormat::criteo})
    if (name == to_string(f)) return f;
  throw Error(fmt::format("unknown data format {}: expected xmc, idx or criteo", quote_input(name)));
}

DataFormat guess_data_format(std::string_view path) {
  // A packed file says what it holds.
  if (const std::string file(path); is_packed_file(file))
    return PackedReader(file).header().kind == PackedKind::clicks ? DataFormat::criteo : DataFormat::xmc;
  return path.ends_with(".tsv") || path.ends_with(".tsv.gz") ? DataFormat::criteo : DataFormat::xmc;
}

Dataset open_dataset(DataFormat format, const std::string& path) {
  if (format == DataFormat::criteo)
    throw Error(fmt::format("{}: Criteo-format click logs are no sparse Dataset: read them with CtrReader or load_ctr "
                            "(core/data/ctr_reader.h)",
                            path));
  // A packed file (of an XMC or an IDX set) is read as what it holds, whichever of the two is named.
  return format == DataFormat::idx && !is_packed_file(path) ? IdxFile::open(path) : XmcFile::open(path);
}

}  // namespace frugal::data
