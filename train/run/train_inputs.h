// The data sets a command reads in the format --format names (XMC text files, or IDX image files
// such as Fashion-MNIST): `frugal train`'s training and test sets, `frugal data stats`'s one.
#pragma once

#include <string>

#include "core/data/data_format.h"
#include "core/dataset.h"

namespace frugal::run {

struct TrainInputs {
  data::Dataset train, test;
};

// One data set: an XMC file, or an IDX prefix such as .../fashion-mnist/train (whose errors say
// that --format idx asked for one).
data::Dataset open_input(data::DataFormat format, const std::string& path);

// Both sets get the same label count (an IDX test set may lack the largest label).
TrainInputs load_train_test(data::DataFormat format, const std::string& train, const std::string& test);

}  // namespace frugal::run
