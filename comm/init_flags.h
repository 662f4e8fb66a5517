// The FRUGAL_* settings (comm/environment.h) as options of a command: one option per variable, the
// option winning over the variable, each with the check comm::init makes of it (naming the option:
// "--size 'x': expected an integer above 0"). The one list: the command line's flags
// (apps/comm_flags.cpp) and the run API's option table (train/run/train_options.h) are made from it;
// README's table of variables names each flag.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace frugal::comm {

struct InitFlag {
  std::string_view flag, variable;  // "--size", "FRUGAL_SIZE"
  std::string help;                 // ends "; else FRUGAL_SIZE"
  std::vector<std::string> choices;  // the values accepted, when a fixed few (--transport)
  bool existing_file = false;        // the value names a file that must exist (--cluster-key)
  // Throws frugal::Error naming `flag` when `value` is not one comm::init accepts.
  void (*check)(std::string_view flag, std::string_view value) = nullptr;
};

// Every FRUGAL_* variable's option, in the order --help lists them.
const std::vector<InitFlag>& init_flags();

// The group --help puts them in.
inline constexpr std::string_view kInitFlagGroup = "Cluster (ZeroMQ runs; each flag wins over its FRUGAL_* variable)";

}  // namespace frugal::comm
