// The batches of one DLRM epoch (the DlrmTrainer's loader, as data::BatchLoader is the XMC
// trainers'): the samples of a CtrView in the order Rng(seed) shuffles them, cut into global batches
// of `batch` samples; with a group of ranks each global batch is split into contiguous parts, one
// per rank (slice_bounds), and next() gives this rank's part. Every rank walks the same order, so
// the group trains as one rank would with that batch. The parts are copied into buffers the loader
// owns: a batch stays valid until the next call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/data/ctr_stream.h"
#include "layers/dlrm/ctr_view.h"

namespace frugal::comm {
class Communicator;
}

namespace frugal::train {

class CtrBatches {
 public:
  using Batch = layers::CtrView;
  // `data` must outlive the loader.
  CtrBatches(const layers::CtrView& data, size_t batch, uint64_t seed, const comm::Communicator* group);
  // This rank's part of the next global batch, and that batch's size in *global_size; false when
  // the epoch is over.
  bool next(layers::CtrView& out, size_t* global_size = nullptr);
  // The points of a batch next() gave (epoch::run_steps counts them).
  static size_t points(const layers::CtrView& batch) { return batch.size; }
  // This rank's part [first, last) of a global batch of n samples.
  static std::pair<size_t, size_t> part(size_t n, const comm::Communicator* group);

 private:
  const layers::CtrView& data_;
  size_t batch_;
  const comm::Communicator* group_;
  std::vector<uint32_t> order_;
  size_t begin_ = 0;
  std::vector<float> labels_, dense_;
  std::vector<uint64_t> cats_;
};

// The same interface over a stream of a packed file (core/data/ctr_stream.h): this rank's part of
// each global batch as the stream gives it.
class CtrStreamBatches {
 public:
  using Batch = layers::CtrView;
  explicit CtrStreamBatches(data::CtrStream& stream) : stream_(stream) {}
  bool next(layers::CtrView& out, size_t* global_size = nullptr);
  static size_t points(const layers::CtrView& batch) { return batch.size; }

 private:
  data::CtrStream& stream_;
  data::CtrBatch part_;
};

}  // namespace frugal::train
