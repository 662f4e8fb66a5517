// What `frugal train` reads and builds besides the XMC defaults: the data sets in either format
// (XMC text files, or IDX image files such as Fashion-MNIST) and the multi-layer network of
// `--layers`. Kept apart from cmd_train.cpp so that file stays a thin command definition.
#pragma once

#include <string>
#include <vector>

#include "core/dataset.h"

namespace frugal::cli {

struct TrainInputs {
  data::Dataset train, test;
};

// format: "xmc" (paths of XMC files) or "idx" (prefixes such as .../fashion-mnist/train).
// Both sets get the same label count (an IDX test set may lack the largest label).
TrainInputs load_train_test(const std::string& format, const std::string& train, const std::string& test);

// Parses "1024,512" into {1024, 512}; every width must be a positive integer.
std::vector<size_t> parse_layer_widths(const std::string& text);

}  // namespace frugal::cli
