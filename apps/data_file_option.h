// The data file a data command reads (`data stats`, `data pack`, `bench read`): its positional
// argument and --format, declared once, and the format it resolves to: as given, else what a packed
// file holds or what the name says (data::guess_data_format).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "apps/cli_options.h"
#include "core/data/data_format.h"

namespace frugal::cli {

struct DataFileArgs {
  std::string file;
  data::DataFormat format = data::DataFormat::xmc;
  CLI::Option* format_option = nullptr;
  data::DataFormat resolved() const {
    return format_option != nullptr && format_option->count() > 0 ? format : data::guess_data_format(file);
  }
};

// `name` (the positional's name) described as `what`; `a` must outlive the command (a shared_ptr's).
inline void add_data_file(CLI::App* cmd, DataFileArgs& a, const std::string& name, const std::string& what) {
  cmd->add_option(name, a.file, what)->required();
  a.format_option = add_choice(cmd, "--format", a.format,
                               {data::DataFormat::xmc, data::DataFormat::idx, data::DataFormat::criteo},
                               "xmc, idx or criteo (default: what a packed file holds; criteo for .tsv and .tsv.gz "
                               "files, else xmc)");
}

}  // namespace frugal::cli
