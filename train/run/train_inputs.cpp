#include "train/run/train_inputs.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/check.h"
#include "core/data/data_warnings.h"
#include "core/data/point_checks.h"

namespace frugal::run {

data::Dataset open_input(data::DataFormat format, const std::string& path) {
  if (format != data::DataFormat::idx) return data::open_dataset(format, path);
  try {
    return data::open_dataset(format, path);
  } catch (const Error& e) {
    throw Error(fmt::format("--format idx: {}", e.what()));
  }
}

TrainInputs load_train_test(data::DataFormat format, const std::string& train, const std::string& test) {
  TrainInputs in;
  in.train = open_input(format, train);
  in.test = open_input(format, test);
  if (format == data::DataFormat::idx) {
    const uint32_t labels = std::max(in.train.num_labels, in.test.num_labels);
    in.train.num_labels = in.test.num_labels = labels;
  }
  if (format == data::DataFormat::criteo) {  // click logs: their reader checks every column
    data::warn_suspicious(in.train);
    data::warn_suspicious(in.test, /*training=*/false);
    return in;
  }
  // The checks every face makes on a data set (core/data/point_checks.h; Python calls the same):
  // a training set with no features or labels (a header "N 0 L") is refused naming the file,
  // then the warnings (errors under --strict).
  data::check_points(in.train);
  data::check_points(in.test, {.training = false});
  return in;
}

}  // namespace frugal::run
