// SoftmaxOutput: the output layer of an extreme classifier and its loss. Logits z = h W^T + b over
// `out` labels (W label-major, out x in); loss = softmax cross-entropy against the point's labels,
// each weighted 1/|labels|. The sampler decides which labels are computed in training:
//  - exact: all of them (full softmax: the reference and the dense baseline, through oneDNN);
//  - lsh:   each point's LSH active set plus its true labels (SLIDE); only those logits, their
//           gradients and their rows of W are computed and updated.
// Evaluation (top_k) always scores every label, so P@k is exact whichever sampler trained.
// When sliced over a group, forward_backward returns this rank's part of dLoss/dIn (the sum over
// its labels): the caller sums the parts over the group (reduce-scatter or all-reduce).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "core/active_sets.h"
#include "core/device.h"
#include "core/distinct_rows.h"
#include "core/layer.h"
#include "core/placement.h"
#include "layers/lsh/lsh_sampler.h"

namespace frugal {
class RowWorkspace;  // core/backend.h (internal)
}

namespace frugal::layers {

enum class Sampler { exact, lsh };

struct SoftmaxOutputOptions {
  size_t in = 0;
  size_t out = 0;  // labels
  Sampler sampler = Sampler::lsh;
  lsh::LshOptions lsh{};
  uint64_t seed = 1;
  // Sliced: this rank owns labels [slice_begin(), slice_end()), builds LSH tables over them only,
  // and the softmax normalizer is combined across the group (3 floats per point and rank, one
  // all-gather).
  Placement placement{};
  // Of the weight with the LSH sampler (bf16: half the bytes; computed in f32). The exact softmax
  // multiplies the whole matrix every step and keeps f32 whatever is asked.
  Dtype storage = Dtype::f32;
  void validate() const;
};

class SoftmaxOutput : public OutputLayer {
 public:
  using Options = SoftmaxOutputOptions;
  explicit SoftmaxOutput(const Options& options);
  ~SoftmaxOutput() override;
  std::string kind() const override;
  bool sampled() const override { return options_.sampler == Sampler::lsh; }
  size_t in_features() const override { return options_.in; }
  size_t out_features() const override { return options_.out; }
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  double forward_backward(const Tensor& in, const SparseBatch& batch, uint64_t step, Tensor* grad_in,
                          float grad_scale) override;
  void top_k(const Tensor& in, size_t k, std::vector<uint32_t>& labels, std::vector<float>& scores) override;
  void visit_top_k(const Tensor& in, size_t k, const TopLabelsVisitor& visit) override;
  void after_update(uint64_t step) override;
  size_t derived_state_bytes() const override;
  void set_label_counts(std::span<const uint32_t> counts) override;
  void set_inference(const InferenceOptions& options) override;
  void accumulate_centroids(const Tensor& in, const SparseBatch& batch) override;
  void finish_centroids(float scale, std::span<const float> mean) override;
  InferenceOptions inference() const override { return inference_; }
  // Output neurons computed so far, in training and in top_k (OutputLayer::labels_scored).
  uint64_t labels_scored() const override { return labels_scored_; }
  const Placement& placement() const override { return options_.placement; }
  size_t slice_begin() const { return begin_; }
  size_t slice_end() const { return end_; }
  void save_state(cereal::BinaryOutputArchive& ar) const override;
  void load_state(cereal::BinaryInputArchive& ar) override;
  std::string describe() const override;

  // The last training step's sets where the layer computes.
  const ActiveTensors& last_active_sets() const { return active_tensors_; }
  const Parameter& weight() const { return weight_; }
  const lsh::LshSampler* sampler() const { return sampler_.get(); }

 private:
  friend struct SoftmaxOutputTesting;  // layers/softmax_output_testing.h (not installed)
  double exact_forward_backward(const Tensor& in, const SparseBatch& batch, Tensor* grad_in, float grad_scale);
  double sampled_forward_backward(const Tensor& in, const SparseBatch& batch, uint64_t step, Tensor* grad_in,
                                  float grad_scale);
  // Softmax cross-entropy over logits spread across the group: point i's local logits are
  // z[offsets[i] .. offsets[i+1]), its labels owned here sit at positions_[i] within them, or, with
  // labels_first (offsets where the ops run, samples + 1), they are its first labels_first[i+1] -
  // labels_first[i] logits. Overwrites z with dLoss/dz times grad_scale.
  double distributed_xent(const SparseBatch& batch, Tensor& z, const Tensor& offsets, float grad_scale,
                          const Tensor* labels_first = nullptr);
  // positions_ for the batch's labels owned here: among the sampler's sets (sampled) or active_.
  void list_label_positions(const SparseBatch& batch, bool sampled);
  void local_top_k(const Tensor& in, size_t k, std::vector<uint32_t>& labels, std::vector<float>& scores);
  // This slice's k best (k <= its labels; f32 weights, or LSH inference: over the labels the tables
  // return for each point only) into top_labels_ / top_scores_ where the layer computes, visited
  // block by block: visit(first_row, labels, scores).
  using RankedBlock = std::function<void(size_t first_row, const Tensor& labels, const Tensor& scores)>;
  void rank_slice(const Tensor& in, size_t k, const RankedBlock& visit);
  // A sliced group's normalizer: every rank's max_ and sums_ (relative to its own max) combined
  // into the group's, in one all-gather.
  void combine_normalizer(comm::Communicator& group, size_t b);
  // local_top_k over bf16 weights or many host labels: blocks of kScoreBlockLabels labels (widened
  // when bf16) scored for every point, their k best merged.
  static constexpr size_t kScoreBlockLabels = 16384;
  bool scores_in_blocks() const;
  void blocked_top_k(const Tensor& in, size_t k, std::vector<uint32_t>& labels, std::vector<float>& scores);
  // Every id of the sets is a label of this slice (throws naming the first that is not).
  void check_active_ids(const ActiveSets& sets) const;

  Options options_;
  size_t begin_ = 0, end_ = 0;
  Parameter weight_, bias_;
  std::unique_ptr<lsh::LshSampler> sampler_;
  // LSH inference for a model trained with the exact softmax: tables over its weights, never saved.
  std::unique_ptr<lsh::LshSampler> inference_sampler_;
  InferenceOptions inference_{};
  uint64_t labels_scored_ = 0;
  Tensor centroid_sum_;  // per local label: sum of its points' hidden vectors (centroid init only)
  std::vector<uint32_t> centroid_points_;
  const ActiveSets* override_ = nullptr;
  ActiveSets active_;  // an override's sets, or an empty slice's (the sampler's are made where the ops run)
  std::unique_ptr<RowWorkspace> workspace_;  // the backend's row accumulation state (made on first use)
  // Where the layer computes (its backend's memory): the logits and dLoss/dz, the per-sample max,
  // sums and losses of the softmax, and the batch's arrays the cross-entropy ops read.
  Tensor logits_;
  Tensor full_logits_;
  Tensor top_labels_, top_scores_;  // rank_slice's block of the k best
  Tensor max_, sums_, losses_{0, 0, Dtype::f64};
  Tensor row_offsets_{0, 0, Dtype::u64};     // exact softmax: i * labels, the logits' CSR offsets
  size_t row_offsets_width_ = 0;             // the labels those offsets were made for
  ActiveTensors active_tensors_;     // LSH: the step's sets where the layer computes (the xent reads its offsets)
  ActiveTensors candidate_tensors_;  // LSH inference: the sampler's candidates where the layer computes
  DistinctRows distinct_;            // the active rows, listed on the host for a device backend
  Tensor pos_offsets_{0, 0, Dtype::u64}, position_ids_{0, 0, Dtype::u32}, label_offsets_{0, 0, Dtype::u64};
  std::vector<float> normalizer_mine_, normalizer_all_;  // a sliced group's per-rank (max, sums), gathered
  std::vector<std::vector<uint32_t>> positions_;
  std::vector<uint64_t> position_offsets_;  // positions_ in CSR form, for the backend
  std::vector<uint32_t> position_list_;
};

}  // namespace frugal::layers
