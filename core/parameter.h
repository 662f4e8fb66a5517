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
  // The rows are on the device only: `rows` is empty and device_rows_tensor lists them (values has
  // one row each). The caller of a device's row_accumulate sets it when the entries' ids never
  // reached the host (the LSH sampler's sets, made on the device), and the op then keeps its list
  // there: only the count comes down. The optimizer's lazy updates read that list where they run;
  // host code that needs the ids (an exchange, catch-up) calls fetch_rows() (4 bytes a row).
  bool rows_on_device = false;
  size_t num_rows() const { return rows_on_device ? device_rows_tensor.size() : rows.size(); }
  // The device copy of `rows` in `owner`'s memory when there is one that still lists exactly
  // `rows` (or the rows are on the device only); null otherwise (the caller then sends `rows`).
  const Tensor* device_rows(const Backend* owner) const {
    if (owner == nullptr || device_rows_tensor.owner() != owner) return nullptr;
    if (rows_on_device) return &device_rows_tensor;
    return device_rows_of == rows && device_rows_tensor.size() == rows.size() ? &device_rows_tensor : nullptr;
  }
  // Rows on the device only come down into `rows` (the device keeps its copy, still current).
  void fetch_rows() {
    if (!rows_on_device) return;
    rows.resize(device_rows_tensor.size());
    if (!rows.empty()) copy_to_host(device_rows_tensor, rows.data());
    device_rows_of = rows;
    rows_on_device = false;
  }
  void clear() {
    rows.clear();
    values.resize(0, values.cols());
    device_rows_of.clear();
    rows_on_device = false;
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
  // A table of which a step touches few rows (the sparse input layer's feature rows, a sampled
  // output layer's label rows): a row-wise optimizer (--optimizer rowwise-adagrad) keeps one state
  // value per row of it instead of one per element. Set by the layer that owns it.
  bool row_sparse = false;
  // Its rows are input features' (the sparse input layer, DLRM's embedding tables), not output
  // labels': optim::Options::rowwise_input says whether a row-wise optimizer keeps them per row.
  bool input_rows = false;
};

}  // namespace frugal
