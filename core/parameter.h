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
  // A device backend's own copy of the row list (u32, rows.size() entries, in its memory), made by
  // the op that computed the gradient there (sparse_input_backward), so that the optimizer's
  // update finds the list where it runs instead of sending `rows` up again. It stands for the list
  // `device_rows_of` that was current when it was made: code that changes `rows` afterwards (an
  // exchange, a selection) needs not know about it, as device_rows() then no longer hands it out.
  Tensor device_rows_tensor{0, 0, Dtype::u32};
  std::vector<uint32_t> device_rows_of;
  // Set by the caller of a device's row_accumulate whose entries' ids never reached the host (the
  // LSH sampler's sets, made on the device): rows cannot be listed there, so the op lists them and
  // brings the list down into rows (4 bytes a row; it keeps its own copy as device_rows_tensor).
  // False: the caller listed rows (DistinctRows) and nothing comes down.
  bool rows_unlisted = false;
  // The device copy of `rows` in `owner`'s memory when there is one that still lists exactly
  // `rows`; null otherwise (the caller then sends `rows`).
  const Tensor* device_rows(const Backend* owner) const {
    return owner != nullptr && device_rows_tensor.owner() == owner && device_rows_of == rows &&
                   device_rows_tensor.size() == rows.size()
               ? &device_rows_tensor
               : nullptr;
  }
  void clear() {
    rows.clear();
    values.resize(0, values.cols());
    device_rows_of.clear();
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
