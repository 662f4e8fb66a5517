// The layer interfaces. A model is an input layer (sparse features -> dense activations), any number
// of hidden layers (dense -> dense) and an output layer that owns the loss. Each layer keeps what
// its backward needs from its forward, so a step is forward() then backward() on the same batch.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/act.h"
#include "core/parameter.h"
#include "core/placement.h"
#include "core/sparse_batch.h"
#include "core/tensor.h"

namespace cereal {
class BinaryOutputArchive;
class BinaryInputArchive;
}  // namespace cereal

namespace frugal {

class Backend;

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string kind() const = 0;
  virtual size_t in_features() const = 0;
  virtual size_t out_features() const = 0;
  virtual std::vector<Parameter*> parameters() = 0;
  // State beyond parameters (LSH tables, schedules) for bit-identical resume.
  virtual void save_state(cereal::BinaryOutputArchive&) const {}
  virtual void load_state(cereal::BinaryInputArchive&) {}
  // Called after the optimizer changed the parameters (e.g. to rebuild hash tables on schedule).
  virtual void after_update(uint64_t /*step*/) {}
  // Bytes of the state the layer keeps besides its parameters' values (LSH tables and the codes they
  // are built from): part of the model state a run's metrics report per parameter.
  virtual size_t derived_state_bytes() const { return 0; }
  // A one-line description for logs.
  virtual std::string describe() const;
  // How the layer's output neurons are spread over a model-parallel group (replicated by default).
  virtual const Placement& placement() const;
  // The Backend this layer computes on (core/backend.h): the one set here, else host_backend().
  Backend& backend() const;
  // Places the layer on `backend` (nullptr: back to host_backend()): its parameters' values
  // move into that backend's memory (place_on, core/tensor.h), where its ops read and write them.
  // Only apps/ picks a backend (core/backend.h).
  void set_backend(Backend* backend);

 private:
  Backend* backend_ = nullptr;
};

class InputLayer : public Layer {
 public:
  virtual const Tensor& forward(const SparseBatch& x) = 0;
  // forward(x) in row parts, so that a caller ships finished rows while later ones are computed:
  // call it for consecutive parts [first, first + count) covering [0, B) in order, starting at 0.
  // Returns the B x out output, whose rows before first + count are final; after the last part the
  // output and what backward() needs are forward(x)'s, the same bits. The default computes every
  // row at the first part.
  virtual const Tensor& forward_rows(const SparseBatch& x, size_t first, size_t count);
  // grad_out: dLoss/dOutput (B x out). Fills the parameters' row gradients.
  virtual void backward(const SparseBatch& x, const Tensor& grad_out) = 0;
  // The parameters whose row f belongs to input feature f: a step reads only its batch's rows of
  // them (a catch-up optimizer brings those rows up to date before the forward pass).
  virtual std::vector<Parameter*> feature_parameters() { return {}; }

 private:
  const Tensor* whole_ = nullptr;  // the default forward_rows' output
};

class HiddenLayer : public Layer {
 public:
  virtual const Tensor& forward(const Tensor& in) = 0;
  // Returns dLoss/dIn and fills the parameters' gradients.
  virtual const Tensor& backward(const Tensor& in, const Tensor& grad_out) = 0;
};

// How an output layer scores labels at evaluation and prediction: every label (exact top-k), or
// only the labels its LSH tables return for the point (fast retrieval, approximate).
enum class Inference { exact, lsh };
std::string_view to_string(Inference mode);  // "exact", "lsh" (as flags and run configs name them)
struct InferenceOptions {
  Inference mode = Inference::exact;
  // LSH: at most this many labels scored per point, those found in the most tables (0: every
  // label the tables return). Measured on synthetic data (bench/REPORT.md), a cap loses far more
  // P@k than it saves time (the number of tables a label is found in ranks poorly), so none.
  size_t candidates = 0;
};

class OutputLayer : public Layer {
 public:
  // Computes the loss of the batch (summed over points) and, when grad_in is given, fills
  // dLoss/dIn and the parameters' gradients, each times grad_scale (the trainer's 1 / global batch:
  // applied to dLoss/dz, the gradients need no pass of their own). `step` seeds any sampling, so
  // runs reproduce.
  virtual double forward_backward(const Tensor& in, const SparseBatch& batch, uint64_t step,
                                  Tensor* grad_in, float grad_scale) = 0;
  // The k highest-scoring labels of each point over all labels, best first (B x k, row-major).
  virtual void top_k(const Tensor& in, size_t k, std::vector<uint32_t>& labels,
                     std::vector<float>& scores) = 0;
  // The same k best labels (global ids) as u32 tensors where the layer ranks, visited in blocks of
  // rows: visit(first_row, labels) with labels (rows x k', k' = min(k, labels of the layer), best
  // first). A device layer's stay on the device, so an evaluation counts its metrics there
  // (Backend::ranking_add) and only the sums come down. Default: top_k, one host tensor.
  using TopLabelsVisitor = std::function<void(size_t first_row, const Tensor& labels)>;
  virtual void visit_top_k(const Tensor& in, size_t k, const TopLabelsVisitor& visit);
  // Labels scored so far: output neurons computed, in training (all labels per point for a full
  // softmax, the active set for a sampled one) and in top_k (all of the slice's labels per point
  // when exact, the candidates with LSH inference). The one measure of the output layer's cost:
  // the trainer reports its mean per point for training (FitResult) and evaluation (EvalResult).
  virtual uint64_t labels_scored() const = 0;
  // Training points per label of the data about to be trained on (all labels, global ids): a
  // sampled output draws its random negatives by them. The trainer calls it before each epoch.
  virtual void set_label_counts(std::span<const uint32_t> /*counts*/) {}
  // Scoring mode of top_k() from now on. Layers without LSH support only exact.
  virtual void set_inference(const InferenceOptions& options);
  virtual InferenceOptions inference() const { return {}; }
  // Output rows initialized from label centroids: every training point's hidden vector is added
  // to its labels' rows (accumulate_centroids over the whole training set, then finish). With
  // `mean` the mean hidden vector of all points, label l's row becomes scale * d_l and its bias
  // -scale * <mean, d_l>, d_l the unit direction of (its points' mean - mean): the network starts
  // as a nearest-centroid classifier on centred hidden vectors (the part all points share says
  // nothing about the label). Labels without points keep their random rows.
  virtual void accumulate_centroids(const Tensor& in, const SparseBatch& batch);
  virtual void finish_centroids(float scale, std::span<const float> mean);
  // The parameters whose rows are this rank's labels (row r: label placement offset + r); a
  // training step reads at least its batch's true labels' rows. Default: those with one row per
  // label of the layer's slice.
  virtual std::vector<Parameter*> label_parameters();
  // Whether a training step computes only a sample of the labels (an LSH softmax): its label rows
  // are row-sparse, what the trainer's automatic optimizer (row-wise Adam) is for.
  virtual bool sampled() const { return false; }
};

}  // namespace frugal
