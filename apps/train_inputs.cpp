#include "apps/train_inputs.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "core/check.h"
#include "core/idx_file.h"
#include "core/xmc_file.h"

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

std::vector<size_t> parse_layer_widths(const std::string& text) {
  std::vector<size_t> out;
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    size_t width = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), width);
    if (ec != std::errc() || end != item.data() + item.size() || width == 0)
      throw Error(fmt::format("--layers '{}': bad width '{}': expected positive integers separated by commas, "
                              "e.g. 1024,1024",
                              text, item));
    out.push_back(width);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace frugal::cli
