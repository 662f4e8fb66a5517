// The data set formats frugal reads, by the names flags and checkpoint configs give them:
//   xmc: the XMC repository's text format (core/data/xmc_file.h), a data set per file;
//   idx: IDX image files (core/data/idx_file.h), a data set per prefix such as
//        /usr/share/datasets/fashion-mnist/train;
//   criteo: Criteo-format click logs (core/data/ctr_format.h), a file (.tsv, plain or gzip) read
//        with CtrReader or load_ctr: they are not a sparse Dataset.
#pragma once

#include <string>
#include <string_view>

#include "core/dataset.h"

namespace frugal::data {

enum class DataFormat { xmc, idx, criteo };

std::string_view to_string(DataFormat format);  // "xmc", "idx", "criteo"
// "xmc", "idx" or "criteo"; anything else throws naming them.
DataFormat data_format_from_string(std::string_view name);
// What a packed file (core/data/packed_file.h) holds: criteo for packed click logs, xmc for packed points;
// else criteo for a name ending in .tsv or .tsv.gz (how Criteo files and `synth-ctr`'s are named), else xmc.
DataFormat guess_data_format(std::string_view path);

// The whole data set at `path` (a file for xmc, a prefix for idx, or a packed file of either). criteo
// throws: its samples are CtrBatch, read by core/data/ctr_reader.h (which reads packed click logs).
Dataset open_dataset(DataFormat format, const std::string& path);

}  // namespace frugal::data
