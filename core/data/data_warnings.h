// Data that is valid but surely wrong says so (core/warnings.h: a warning in the log and the metrics,
// an error under --strict): a label id far above every other one (one stray id makes the output
// layer as wide as it), a header that declares far more labels than the file uses, and feature
// values beyond any sane scale (a value of 3e38 trains to a loss of 1e34). Checked once per file
// read for training, evaluation or `data stats`.
#pragma once

#include "core/dataset.h"

namespace frugal::data {

// Warns about what in `data` (read from `data.source`) looks like a damaged or mistyped file.
// `training`: the header's label count is compared with the ids that occur (a test file may well
// use few of the labels its header declares).
void warn_suspicious(const Dataset& data, bool training = true);

// Feature values whose magnitude exceeds this are warned about: inputs are counts, TF-IDF weights
// or pixels, and a network trained on values this large diverges.
inline constexpr float kSaneFeatureMagnitude = 1e6f;

}  // namespace frugal::data
