// The checks every point of a data set gets, wherever it comes from: a line of an XMC file, or rows
// of arrays given in memory (the Python module, a C++ program that builds a Dataset). Each check is
// one function here. The XMC reader calls the entry checks line by line, so its errors keep naming
// file:line; check_points runs the same entry checks over a data set held in memory, naming the row,
// and then the warnings of data_warnings.h (errors under --strict). Accepted as the reader accepts
// them: a point without labels, and a point with neither labels nor features.
// (IDX images cannot hold a bad entry: pixels are bytes, their ids are positions, their label is a
// byte. Criteo lines are a different form, checked column by column in ctr_format.cpp.)
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "core/dataset.h"
#include "core/quote.h"

namespace frugal::data {

// The bounds of a data set's ids, and the words messages use for them.
struct PointLimits {
  uint32_t num_features = 0, num_labels = 0;
  std::string_view features_as = "F", labels_as = "L";  // an XMC header's names
  // Said after an id equal to its bound (1-based ids are the common slip).
  std::string_view one_based_hint = " (ids are 0-based: is this file 1-based?)";
  // A further bound on feature ids (a model's input width): "feature id X >= {limit_what} = {limit}".
  uint32_t feature_limit = UINT32_MAX;
  std::string_view limit_what{};
};

// What is wrong with feature `id` of value `value`, or "" when nothing. `written`: the entry as the
// input wrote it ("3:nan"), quoted in the message; empty for values held in memory.
inline std::string feature_problem(const PointLimits& limits, uint32_t id, float value, std::string_view written = {}) {
  if (id >= limits.num_features)
    return fmt::format("feature id {} >= {} = {}{}", id, limits.features_as, limits.num_features,
                       id == limits.num_features ? limits.one_based_hint : std::string_view());
  if (id >= limits.feature_limit) return fmt::format("feature id {} >= {} = {}", id, limits.limit_what, limits.feature_limit);
  // NaN or inf trains to a NaN loss (and a model that predicts nothing) without another word.
  if (!std::isfinite(value))
    return written.empty() ? fmt::format("non-finite value {} of feature {}: expected a finite number", value, id)
                           : fmt::format("non-finite value in {}", quote_input(written));
  return {};
}

// What is wrong with label `label`, or "" when nothing.
inline std::string label_problem(const PointLimits& limits, uint32_t label) {
  if (label >= limits.num_labels)
    return fmt::format("label id {} >= {} = {}{}", label, limits.labels_as, limits.num_labels,
                       label == limits.num_labels ? limits.one_based_hint : std::string_view());
  return {};
}

struct PointCheckOptions {
  // How messages name the features and the labels ("X" and "Y" from Python); empty: data.source.
  std::string features_name{}, labels_name{};
  uint32_t feature_limit = UINT32_MAX;  // as PointLimits::feature_limit
  std::string limit_what{};
  // The warnings of data_warnings.h (warn_suspicious): a stray label id, values beyond +-1e6.
  // Training and `data stats` warn; predict and evaluate, as the command line's, do not.
  bool warnings = true;
  // A training set: it needs features and labels (a test set may have none of its own), and
  // warn_suspicious compares the label count with the ids that occur.
  bool training = true;
};

// Checks `data`: a training set has features and labels; the CSR arrays agree with each other;
// every id is below data.num_features / data.num_labels (and options.feature_limit); every value
// is finite. An error names the row (0-based): "X: row 12: non-finite value nan of feature 3:
// expected a finite number". Then the warnings, which --strict (set_strict_warnings) makes errors.
void check_points(const Dataset& data, const PointCheckOptions& options = {});

}  // namespace frugal::data
