// What `frugal train` reads besides the XMC defaults: the data sets in either format (XMC text
// files, or IDX image files such as Fashion-MNIST). Kept apart from cmd_train.cpp so that file
// stays a thin command definition.
#pragma once

#include <string>

#include "core/dataset.h"

namespace frugal::cli {

struct TrainInputs {
  data::Dataset train, test;
};

// format: "xmc" (paths of XMC files) or "idx" (prefixes such as .../fashion-mnist/train).
// Both sets get the same label count (an IDX test set may lack the largest label).
TrainInputs load_train_test(const std::string& format, const std::string& train, const std::string& test);

}  // namespace frugal::cli
