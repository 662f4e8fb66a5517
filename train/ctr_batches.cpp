#include "train/ctr_batches.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "core/communicator.h"
#include "core/placement.h"
#include "core/rng.h"

namespace frugal::train {

CtrBatches::CtrBatches(const layers::CtrView& data, size_t batch, uint64_t seed, const comm::Communicator* group)
    : data_(data), batch_(batch), group_(group), order_(data.size) {
  std::iota(order_.begin(), order_.end(), 0u);
  Rng rng(seed);
  for (size_t i = data.size; i > 1; --i) std::swap(order_[i - 1], order_[rng.below(i)]);
}

std::pair<size_t, size_t> CtrBatches::part(size_t n, const comm::Communicator* group) {
  if (!comm::is_active(group)) return {0, n};
  const std::vector<size_t> bounds = slice_bounds(n, static_cast<size_t>(group->size()));
  return {bounds[static_cast<size_t>(group->rank())], bounds[static_cast<size_t>(group->rank()) + 1]};
}

bool CtrBatches::next(layers::CtrView& out, size_t* global_size) {
  if (begin_ >= data_.size) return false;
  const size_t global = std::min(batch_, data_.size - begin_);
  const auto [first, last] = part(global, group_);
  const size_t n = last - first, num_dense = data_.num_dense, num_fields = data_.num_fields;
  labels_.resize(n);
  dense_.resize(n * num_dense);
  cats_.resize(n * num_fields);
  for (size_t j = 0; j < n; ++j) {
    const size_t i = order_[begin_ + first + j];
    labels_[j] = data_.labels[i];
    std::copy_n(data_.dense.begin() + static_cast<std::ptrdiff_t>(i * num_dense), num_dense,
                dense_.begin() + static_cast<std::ptrdiff_t>(j * num_dense));
    std::copy_n(data_.cats.begin() + static_cast<std::ptrdiff_t>(i * num_fields), num_fields,
                cats_.begin() + static_cast<std::ptrdiff_t>(j * num_fields));
  }
  out = layers::CtrView{n, num_dense, num_fields, labels_, dense_, cats_};
  begin_ += global;
  if (global_size != nullptr) *global_size = global;
  return true;
}

bool CtrStreamBatches::next(layers::CtrView& out, size_t* global_size) {
  if (!stream_.next(part_, global_size)) return false;
  out = {part_.size, data::kCtrDense, data::kCtrCats, part_.labels, part_.dense, part_.cats};
  return true;
}

}  // namespace frugal::train
