// Parameter: a weight matrix with a row-sparse gradient. Layers fill `grad` with only the rows the
// step touched (input features present in the batch, labels that were active), so the optimizer and
// the communicator work on those rows alone. parameters() lists these: the contract between model,
// optimizer and communication.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace frugal {

struct RowGrad {
  std::vector<uint32_t> rows;  // sorted, unique row ids of `value` that have a gradient
  Tensor values;               // rows.size() x cols: the gradient of each listed row
  void clear() {
    rows.clear();
    values.resize(0, values.cols());
  }
};

struct Parameter {
  std::string name;
  Tensor value;
  RowGrad grad;
  // Where `value` sits in the whole parameter when a layer is sliced over ranks: rows (axis 0) or
  // columns (axis 1) [offset, offset + local size) of a full_rows x full_cols matrix. Checkpoints
  // use it to reslice onto another number of ranks. axis -1: not sliced.
  int sliced_axis = -1;
  size_t offset = 0, full_rows = 0, full_cols = 0;
};

}  // namespace frugal
