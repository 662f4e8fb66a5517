#include "layers/dlrm/dlrm_network.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/check.h"
#include "core/rng.h"

namespace frugal::layers {
namespace {

// Dense layers of widths in -> widths[0] -> ... (ReLU), then -> last with `last_act`.
std::vector<std::unique_ptr<Dense>> mlp(size_t in, const std::vector<size_t>& widths, size_t last, Act last_act,
                                        uint64_t seed) {
  std::vector<std::unique_ptr<Dense>> layers;
  std::vector<size_t> all = widths;
  all.push_back(last);
  for (size_t l = 0; l < all.size(); ++l) {
    const Act act = l + 1 == all.size() ? last_act : Act::relu;
    layers.push_back(std::make_unique<Dense>(DenseOptions{.in = in, .out = all[l], .act = act, .seed = seed + l}));
    in = all[l];
  }
  return layers;
}

// Whether the tables are sliced by rows over the group (des, ps) rather than whole on every rank.
bool sliced(const DlrmOptions& o) { return comm::is_active(o.group) && o.tables != TableMode::replicated; }

}  // namespace

void DlrmOptions::validate() const {
  FRUGAL_CHECK(num_dense > 0, "DLRM: no dense features");
  FRUGAL_CHECK(!fields.empty(), "DLRM: no categorical fields");
  FRUGAL_CHECK(dim > 0, "DLRM: --embedding-dim must be > 0");
  for (size_t w : bottom) FRUGAL_CHECK(w > 0, "DLRM: a bottom MLP layer has width 0");
  for (size_t w : top) FRUGAL_CHECK(w > 0, "DLRM: a top MLP layer has width 0");
}

DlrmNetwork::DlrmNetwork(const DlrmOptions& options)
    : options_((options.validate(), options)),
      tables_(options.fields, options.lookups, options.dim, Rng(options.seed).split(2).next_u64(),
              sliced(options) ? options.group->rank() : 0, sliced(options) ? options.group->size() : 1),
      interaction_(options.fields.size(), options.dim),
      bottom_(mlp(options.num_dense, options.bottom, options.dim, Act::relu, Rng(options.seed).split(1).next_u64())),
      top_(mlp(interaction_.out_features(), options.top, 1, Act::none, Rng(options.seed).split(3).next_u64())) {
  // Unique names (checkpoints find parameters by name): bottom.<layer>.weight, top.<layer>.bias, ...
  for (const auto& [prefix, layers] : {std::pair{"bottom", &bottom_}, std::pair{"top", &top_}})
    for (size_t l = 0; l < layers->size(); ++l)
      for (Parameter* p : (*layers)[l]->parameters()) {
        const std::string kind = p->name.substr(p->name.find('.') + 1);  // "weight" or "bias"
        p->name = fmt::format("{}.{}.{}", prefix, l, kind);
        // Whole on every rank of the group (their gradients are summed): not a slice, so that the
        // whole model's gradient norm counts it once (train/gradient_clipping.h).
        p->sliced_axis = -1;
      }
  if (comm::is_active(options_.group)) exchange_ = make_table_exchange(options_.tables, *options_.group, tables_);
}

std::vector<Parameter*> DlrmNetwork::replicated_dense_parameters() {
  std::vector<Parameter*> out;
  if (!comm::is_active(options_.group)) return out;
  for (auto* layers : {&bottom_, &top_})
    for (auto& l : *layers)
      for (Parameter* p : l->parameters()) out.push_back(p);
  return out;
}

std::vector<Parameter*> DlrmNetwork::replicated_table_parameters() {
  if (!comm::is_active(options_.group) || options_.tables != TableMode::replicated) return {};
  return tables_.parameters();
}

std::vector<Parameter*> DlrmNetwork::parameters() {
  std::vector<Parameter*> out;
  for (auto& l : bottom_)
    for (Parameter* p : l->parameters()) out.push_back(p);
  for (Parameter* p : tables_.parameters()) out.push_back(p);
  for (auto& l : top_)
    for (Parameter* p : l->parameters()) out.push_back(p);
  return out;
}

size_t DlrmNetwork::num_parameters() {
  size_t n = 0;
  for (Parameter* p : parameters()) n += p->value.size();
  return n;
}

void DlrmNetwork::set_backend(Backend* backend) {
  for (auto& l : bottom_) l->set_backend(backend);
  for (auto& l : top_) l->set_backend(backend);
}

std::string DlrmNetwork::describe() const {
  size_t rows = 0, tables = 0;
  for (const EmbeddingField& f : options_.fields) {
    tables += f.tables.size();
    rows += std::accumulate(f.tables.begin(), f.tables.end(), size_t{0});
  }
  return fmt::format("DLRM(bottom {} -> [{}] -> {}, {} fields: {} tables x {} dims ({} rows), dot interaction -> {}, "
                     "top [{}] -> 1)",
                     options_.num_dense, fmt::join(options_.bottom, ", "), options_.dim, options_.fields.size(), tables,
                     options_.dim, rows, interaction_.out_features(), fmt::join(options_.top, ", "));
}

const Tensor& DlrmNetwork::forward(const CtrView& batch, std::span<const uint32_t> rows) {
  FRUGAL_CHECK(batch.num_dense == options_.num_dense && batch.num_fields == options_.fields.size(),
               fmt::format("DLRM of {} dense and {} categorical features given a batch of {} and {}", options_.num_dense,
                           options_.fields.size(), batch.num_dense, batch.num_fields));
  // The tables first: with a group the exchange is collective, also for a rank without samples.
  const Tensor& embeddings = exchange_ ? exchange_->forward(rows, batch.size) : tables_.forward(rows, batch.size);
  logits_ = nullptr;
  if (batch.size == 0) return embeddings;  // nothing to score here
  dense_in_.resize(batch.size, batch.num_dense);
  std::copy(batch.dense.begin(), batch.dense.end(), dense_in_.data());
  bottom_in_.clear();
  const Tensor* h = &dense_in_;
  for (auto& l : bottom_) {
    bottom_in_.push_back(h);
    h = &l->forward(*h);
  }
  const Tensor* x = &interaction_.forward(*h, embeddings);
  top_in_.clear();
  for (auto& l : top_) {
    top_in_.push_back(x);
    x = &l->forward(*x);
  }
  logits_ = x;
  return *x;
}

double DlrmNetwork::forward_backward(const CtrView& batch, std::span<const uint32_t> rows, bool train) {
  forward(batch, rows);
  const size_t b = batch.size;
  // The mean over the group's whole batch: every rank scales by the same count.
  const size_t total = exchange_ ? exchange_->group_samples() : b;
  double loss = 0;
  grad_logits_.resize(b, 1);
  for (size_t i = 0; i < b; ++i) {
    const double zi = logits_->data()[i], y = batch.labels[i];
    // log(1 + e^z) - y z, computed without overflow for large |z|.
    loss += std::max(zi, 0.0) - zi * y + std::log1p(std::exp(-std::abs(zi)));
    grad_logits_.data()[i] = static_cast<float>((1.0 / (1.0 + std::exp(-zi)) - y) / static_cast<double>(total));
  }
  if (!train) return loss;
  if (b > 0) {
    const Tensor* g = &grad_logits_;
    for (size_t l = top_.size(); l-- > 0;) g = &top_[l]->backward(*top_in_[l], *g);
    interaction_.backward(*g, grad_bottom_, grad_embeddings_);
    g = &grad_bottom_;
    for (size_t l = bottom_.size(); l-- > 0;) g = &bottom_[l]->backward(*bottom_in_[l], *g);
  } else {
    // No samples here: zero gradients, so this rank adds nothing to the group's sums.
    grad_embeddings_.resize(0, tables_.num_fields() * tables_.dim());
    for (auto* layers : {&bottom_, &top_})
      for (auto& l : *layers)
        for (Parameter* p : l->parameters()) {
          p->grad.rows.resize(p->value.rows());
          std::iota(p->grad.rows.begin(), p->grad.rows.end(), 0u);
          p->grad.values.resize(p->value.rows(), p->value.cols());
          p->grad.values.zero();
        }
  }
  if (exchange_) {
    exchange_->backward(grad_embeddings_);
  } else {
    tables_.backward(grad_embeddings_);
  }
  return loss;
}

void DlrmNetwork::predict(const CtrView& batch, std::span<const uint32_t> rows, std::vector<float>& probabilities) {
  forward(batch, rows);
  probabilities.resize(batch.size);
  for (size_t i = 0; i < batch.size; ++i)
    probabilities[i] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(logits_->data()[i]))));
}

}  // namespace frugal::layers
