#include "layers/dlrm/table_exchange.h"

#include <cstring>

#include <fmt/format.h>

#include "core/check.h"
#include "layers/dlrm/ps_exchange.h"
#include "layers/dlrm/replicated_exchange.h"

namespace frugal::layers {

std::string_view to_string(TableMode mode) {
  switch (mode) {
    case TableMode::ps: return "ps";
    case TableMode::replicated: return "replicated";
    case TableMode::des: break;
  }
  return "des";
}

size_t group_count(comm::Communicator& group, size_t mine) {
  const uint64_t value = mine;
  std::vector<std::vector<std::byte>> all;
  group.all_gather_bytes(std::as_bytes(std::span<const uint64_t>(&value, 1)), all).wait();
  uint64_t total = 0;
  for (size_t r = 0; r < all.size(); ++r) {
    FRUGAL_CHECK(all[r].size() == sizeof(uint64_t), fmt::format("sample count: rank {} sent {} bytes", r, all[r].size()));
    uint64_t v = 0;
    std::memcpy(&v, all[r].data(), sizeof(v));
    total += v;
  }
  return static_cast<size_t>(total);
}

const Tensor& DesExchange::forward(std::span<const uint32_t> rows, size_t n) {
  const size_t stride = row_stride(), width = tables_.slot_width();
  FRUGAL_CHECK(rows.size() == n * stride,
               fmt::format("table exchange: {} rows for {} samples x {} per sample", rows.size(), n, stride));
  std::vector<std::vector<std::byte>> all;
  group_.all_gather_bytes(std::as_bytes(rows), all).wait();
  all_rows_.clear();
  counts_.assign(all.size(), 0);
  for (size_t r = 0; r < all.size(); ++r) {
    FRUGAL_CHECK(all[r].size() % (stride * sizeof(uint32_t)) == 0,
                 fmt::format("table exchange: rank {} sent {} bytes of rows, not whole samples of {} rows", r,
                             all[r].size(), stride));
    const size_t count = all[r].size() / sizeof(uint32_t), before = all_rows_.size();
    all_rows_.resize(before + count);
    if (count > 0) std::memcpy(all_rows_.data() + before, all[r].data(), all[r].size());  // a rank may send none
    counts_[r] = count / stride * width;
  }
  const size_t total = group_samples();
  tables_.gather_owned(all_rows_, total, all_slots_);
  own_slots_.resize(n, width);
  group_.reduce_scatterv(all_slots_.span(), own_slots_.span(), counts_).wait();
  return tables_.combine(rows, own_slots_);
}

void DesExchange::backward(const Tensor& grad_out) {
  tables_.combine_backward(grad_out, grad_slots_);
  all_grad_slots_.resize(group_samples(), tables_.slot_width());
  group_.all_gatherv(grad_slots_.span(), all_grad_slots_.span(), counts_).wait();
  tables_.accumulate(all_rows_, group_samples(), all_grad_slots_);
}

std::unique_ptr<TableExchange> make_table_exchange(TableMode mode, comm::Communicator& group, EmbeddingTables& tables) {
  switch (mode) {
    case TableMode::ps: return std::make_unique<PsExchange>(group, tables);
    case TableMode::replicated: return std::make_unique<ReplicatedExchange>(group, tables);
    case TableMode::des: break;
  }
  return std::make_unique<DesExchange>(group, tables);
}

}  // namespace frugal::layers
