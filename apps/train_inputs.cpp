#include "apps/train_inputs.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/check.h"
#include "core/data/idx_file.h"
#include "core/data/xmc_file.h"

namespace frugal::cli {

TrainInputs load_train_test(const std::string& format, const std::string& train, const std::string& test) {
  TrainInputs in;
  if (format == "idx") {
    in.train = data::IdxFile::open(train);
    in.test = data::IdxFile::open(test);
    const uint32_t labels = std::max(in.train.num_labels, in.test.num_labels);
    in.train.num_labels = in.test.num_labels = labels;
  } else {
    FRUGAL_CHECK(format == "xmc", fmt::format("unknown data format '{}': expected xmc or idx", format));
    in.train = data::XmcFile::open(train);
    in.test = data::XmcFile::open(test);
  }
  return in;
}

}  // namespace frugal::cli
