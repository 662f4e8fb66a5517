// LshTables: L hash tables over the rows of a weight matrix (one row = one neuron). Built in one go
// from the weights (rebuild), stored per table as buckets in CSR form. A bucket holds at most
// `bucket_capacity` neurons; when more hash there, a uniformly random subset of that size is kept
// (random eviction, seeded: every neuron of an overfull bucket has the same chance to stay,
// core/bucket_build.h). Built where the backend computes: on the host in host memory, on a device
// by its ops (the codes of every row, then bucket_build), where bucket_union reads them: a rebuild
// moves nothing between the host and the device. A checkpoint brings a device's tables down.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/device.h"
#include "core/huge_pages.h"
#include "core/tensor.h"
#include "layers/lsh/hash_family.h"

namespace cereal {
class BinaryOutputArchive;
class BinaryInputArchive;
}  // namespace cereal

namespace frugal {
struct BucketTables;  // core/backend.h (internal)
}

namespace frugal::lsh {

class LshTables {
 public:
  LshTables(std::shared_ptr<const HashFamily> family, size_t bucket_capacity);
  // view() hands out spans over this object's own arrays.
  LshTables(const LshTables&) = delete;
  LshTables& operator=(const LshTables&) = delete;
  // Rebuilds every table. On the host, only rows flagged in `changed` (all when null, or on the
  // first build) are hashed again: a row's codes depend on nothing but the row, and most label rows
  // of an extreme classifier are untouched between two rebuilds. On a device every row is hashed
  // (its codes stay there; the same codes, as the unchanged rows' are unchanged).
  void build(Backend& backend, const Tensor& weights, uint64_t seed, const std::vector<uint8_t>* changed = nullptr);
  // Host tables only (throws for tables built on a device: bring_home() first).
  std::span<const uint32_t> bucket(size_t table, uint32_t code) const;
  // Tables built on a device become host tables (a copy down), so that any backend can read them.
  void bring_home();
  // The backend the tables were built on when that is a device; null for host tables.
  const Backend* device_owner() const { return built_on_; }
  // The tables as Backend::bucket_union reads them (valid until the next build or load).
  BucketTables view() const;
  const HashFamily& family() const { return *family_; }
  size_t num_tables() const { return num_tables_; }
  size_t num_neurons() const { return num_neurons_; }
  size_t bucket_capacity() const { return capacity_; }
  // Bytes the tables hold: every table's offsets and ids, and the neurons' codes kept for rebuilds.
  size_t bytes() const;
  void save(cereal::BinaryOutputArchive& ar) const;
  // False when the saved tables were hashed into another number of buckets than this family's:
  // they are dropped (the tables are then empty and must be built again from the weights).
  bool load(cereal::BinaryInputArchive& ar);

 private:
  std::shared_ptr<const HashFamily> family_;
  size_t capacity_;
  size_t num_tables_;
  size_t num_neurons_ = 0;
  // Every table's arrays in one block each, read in random order by every look-up (huge pages when
  // big): table t's bucket offsets are offsets_[t * stride_ ..] (buckets + 1 of them; stride_ 0
  // while there are no tables), its ids ids_[t * num_neurons_ ..], id_counts_[t] of them (fewer
  // than the neurons where overfull buckets kept only bucket_capacity).
  HugePageVector<uint32_t> offsets_, ids_;
  std::vector<size_t> id_counts_;
  size_t stride_ = 0;
  void clear_tables();
  // view()'s spans over each table's part of the blocks and the contents' generation, renewed by every build and load.
  std::vector<std::span<const uint32_t>> offset_spans_, id_spans_;
  uint64_t generation_ = 0;
  void renew_view();
  void build_on_device(Backend& backend, const Tensor& weights, uint64_t seed);
  void drop_device_tables();
  // save() of the host layout (the tables' own, or a device's brought down).
  void save_arrays(cereal::BinaryOutputArchive& ar, const HugePageVector<uint32_t>& offsets,
                   const HugePageVector<uint32_t>& ids, const std::vector<size_t>& counts, size_t stride) const;
  // The host layout (offsets_, ids_, id_counts_, stride_) of tables built on a device.
  void host_copy(HugePageVector<uint32_t>& offsets, HugePageVector<uint32_t>& ids, std::vector<size_t>& counts) const;
  template <class Code>
  void build_with(HugePageVector<Code>& codes, Backend& backend, const Tensor& weights, uint64_t seed,
                  const std::vector<uint8_t>* changed);
  // Every neuron's code in every table, kept so that a rebuild hashes only the changed rows;
  // table-major (codes[t * neurons + i]), 16-bit when the tables have at most 65,536 buckets.
  HugePageVector<uint16_t> narrow_codes_;
  HugePageVector<uint32_t> wide_codes_;
  // Tables built on a device (bucket_build): every row's codes (rows x tables), the offsets (tables
  // x (buckets + 1)) and ids (tables x neurons) in its memory; built_on_ null when host tables.
  Tensor device_codes_{0, 0, Dtype::u32}, built_offsets_{0, 0, Dtype::u32}, built_ids_{0, 0, Dtype::u32};
  const Backend* built_on_ = nullptr;
};

}  // namespace frugal::lsh
