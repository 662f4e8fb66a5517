#include "apps/infer_flags.h"

#include "apps/option_flags.h"
#include "train/run/train_options.h"

namespace frugal::cli {

void add_infer_options(CLI::App* cmd, InferSettings& flags, const std::string& auto_help) {
  add_declared_options(cmd, flags, run::infer_options(auto_help));
}

}  // namespace frugal::cli
