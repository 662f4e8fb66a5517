#include "core/hash32.h"
#include "core/data/synth_ctr.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "core/binary_metrics.h"
#include "core/check.h"
#include "core/staged_file.h"
#include "core/data/ctr_format.h"
#include "core/rng.h"

namespace frugal::data {
namespace {

// Scales of the planted parameters, chosen so that the three parts of the logit have comparable
// spread and the Bayes-optimal AUC lands near Criteo's best published models (~0.8).
constexpr double kLinearSd = 0.2;      // w[f][id]
constexpr double kEmbeddingSd = 0.25;  // entries of v[f][id], divided by dim^(1/4) (see Model)
constexpr double kDenseWeightSd = 0.1;
constexpr double kMissingRates[] = {0, 0, 0, 0.01, 0.03, 0.2, 0.45};  // cycled over the fields
constexpr size_t kNoiseNodes = 32;     // quadrature of E[sigmoid(z + noise)]
constexpr size_t kCalibration = 20000;  // samples the bias is solved on

double uniform01(Rng& rng) { return static_cast<double>(rng.next_u64() >> 11) * 0x1.0p-53; }
double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

// The standard normal quantile by bisection on erfc: needed once for kNoiseNodes points.
double normal_quantile(double p) {
  double lo = -10, hi = 10;
  for (int i = 0; i < 100; ++i) {
    const double mid = (lo + hi) / 2;
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// A bijection of 32-bit integers keyed per field: distinct entries get distinct ids.
uint32_t field_id(uint32_t entry, uint32_t key) { return lowbias32(entry + key); }

class Model {
 public:
  Model(const SynthCtrOptions& o, Rng rng) : o_(o), dim_(o.embedding_dim) {
    const double emb_sd = kEmbeddingSd / std::pow(static_cast<double>(dim_), 0.25);
    for (size_t f = 0; f < kCtrCats; ++f) {
      Field field;
      const double size = 10 * std::pow(10.0, 4.0 * static_cast<double>(f) / (kCtrCats - 1)) * o.vocab_scale;
      field.size = static_cast<size_t>(std::max(2.0, std::round(size)));
      field.missing = kMissingRates[(f * 3) % std::size(kMissingRates)];
      field.key = rng.next_u32();
      field.cdf.resize(field.size);
      double total = 0;
      for (size_t r = 0; r < field.size; ++r) field.cdf[r] = total += std::pow(static_cast<double>(r + 1), -o.zipf);
      for (double& c : field.cdf) c /= total;
      field.w.resize(field.size + 1);  // the last entry: the field is missing
      for (float& w : field.w) w = static_cast<float>(kLinearSd * rng.normal());
      field.v.resize((field.size + 1) * dim_);
      for (float& v : field.v) v = static_cast<float>(emb_sd * rng.normal());
      fields_.push_back(std::move(field));
    }
    for (size_t j = 0; j < kCtrDense; ++j) {
      dense_[j] = {.log_mean = 0.5 + 3.5 * uniform01(rng), .log_sd = 0.5 + 1.3 * uniform01(rng),
                   .missing = 0.005 + 0.055 * uniform01(rng), .weight = kDenseWeightSd * rng.normal()};
    }
    for (size_t k = 0; k < kNoiseNodes; ++k)
      noise_nodes_[k] = o.noise * normal_quantile((static_cast<double>(k) + 0.5) / kNoiseNodes);
  }

  // Draws the features of one sample into `r` and returns its logit without the bias and noise.
  double draw(Rng& rng, CtrRecord& r) {
    double z = 0;
    sum_.assign(dim_, 0.0);
    double sq = 0;
    for (size_t f = 0; f < kCtrCats; ++f) {
      const Field& field = fields_[f];
      size_t entry = field.size;
      if (uniform01(rng) >= field.missing) {
        entry = static_cast<size_t>(std::upper_bound(field.cdf.begin(), field.cdf.end(), uniform01(rng)) -
                                    field.cdf.begin());
        entry = std::min(entry, field.size - 1);  // u within rounding of 1
        r.cats[f] = field_id(static_cast<uint32_t>(entry), field.key);
      } else {
        r.cats[f] = kMissingCategory;
      }
      z += field.w[entry];
      const float* v = &field.v[entry * dim_];
      for (size_t d = 0; d < dim_; ++d) {
        sum_[d] += v[d];
        sq += static_cast<double>(v[d]) * v[d];
      }
    }
    // sum over pairs f < g of <v_f, v_g> = (|sum v|^2 - sum |v|^2) / 2
    double norm = 0;
    for (const double s : sum_) norm += s * s;
    z += (norm - sq) / 2;
    for (size_t j = 0; j < kCtrDense; ++j) {
      const Dense& d = dense_[j];
      r.int_missing[j] = uniform01(rng) < d.missing;
      const double count = std::max(0.0, std::floor(std::expm1(d.log_mean + d.log_sd * rng.normal())));
      r.ints[j] = static_cast<int64_t>(std::min(count, 1e12)) - (j == 1 ? 3 : 0);
      if (!r.int_missing[j]) z += d.weight * ctr_dense_transform(r.ints[j]);
    }
    return z;
  }

  double noisy_logit(Rng& rng, double z) const { return z + o_.noise * rng.normal(); }

  // P(click | features) for the logit z (bias included): the mean over the noise.
  double posterior(double z) const {
    double p = 0;
    for (const double q : noise_nodes_) p += sigmoid(z + q);
    return p / kNoiseNodes;
  }

  void describe(SynthCtrInfo& info) const {
    for (const Field& f : fields_) {
      info.vocab_sizes.push_back(f.size);
      info.cat_missing.push_back(f.missing);
    }
    for (const Dense& d : dense_) info.dense_missing.push_back(d.missing);
  }

 private:
  struct Field {
    size_t size = 0;
    double missing = 0;
    uint32_t key = 0;
    std::vector<double> cdf;
    std::vector<float> w, v;
  };
  struct Dense {
    double log_mean, log_sd, missing, weight;
  };
  SynthCtrOptions o_;
  size_t dim_;
  std::vector<Field> fields_;
  Dense dense_[kCtrDense] = {};
  double noise_nodes_[kNoiseNodes] = {};
  std::vector<double> sum_;
};

// The bias that makes the mean posterior click rate base_ctr, by bisection on a calibration sample.
double solve_bias(Model& model, Rng rng, double base_ctr) {
  std::vector<double> z(kCalibration);
  CtrRecord r;
  for (double& x : z) x = model.draw(rng, r);
  double lo = -30, hi = 30;
  for (int i = 0; i < 50; ++i) {
    const double mid = (lo + hi) / 2;
    double mean = 0;
    for (const double x : z) mean += model.posterior(x + mid);
    (mean / kCalibration < base_ctr ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// Lines buffered into a StagedFile (renamed into place by close()).
class LineFile {
 public:
  explicit LineFile(std::string path) : file_(std::move(path)) {}
  std::string& buffer() { return buf_; }
  void flush_if_full() {
    if (buf_.size() >= (size_t{1} << 20)) flush();
  }
  void close() {
    flush();
    file_.commit();
  }

 private:
  void flush() {
    file_.write(buf_);
    buf_.clear();
  }
  StagedFile file_;
  std::string buf_;
};

}  // namespace

void SynthCtrOptions::validate() const {
  // 100 gives fields of up to 10M ids (the Kaggle set's largest) and ~1.5 GB of planted parameters.
  FRUGAL_CHECK(vocab_scale > 0 && vocab_scale <= 100, "SynthCtrOptions::vocab_scale must be in (0, 100]");
  FRUGAL_CHECK(zipf > 0 && zipf <= 10, "SynthCtrOptions::zipf must be in (0, 10]");
  FRUGAL_CHECK(embedding_dim >= 1 && embedding_dim <= 1024, "SynthCtrOptions::embedding_dim must be in 1..1024");
  FRUGAL_CHECK(noise >= 0 && noise <= 10, "SynthCtrOptions::noise must be in [0, 10]");
  FRUGAL_CHECK(base_ctr > 0 && base_ctr < 1, "SynthCtrOptions::base_ctr must be in (0, 1)");
}

double SynthCtrOptions::memory_bytes() const {
  double bytes = 0;
  for (size_t f = 0; f < kCtrCats; ++f) {
    const double size = std::max(2.0, std::round(10 * std::pow(10.0, 4.0 * static_cast<double>(f) / (kCtrCats - 1)) *
                                                 vocab_scale));
    // The popularity table (a double an id) and the planted w and v (a float each, per id and the missing one).
    bytes += sizeof(double) * size + sizeof(float) * (size + 1) * (1.0 + embedding_dim);
  }
  // The test set's scores and labels (a float each, in vectors that grow by doubling).
  return bytes + 2 * 2 * sizeof(float) * static_cast<double>(test);
}

double SynthCtrOptions::file_bytes() const {
  // A line: 13 integers and 26 ids of 8 hex digits, tab-separated; the fewest bytes one can take
  // (every integer a single digit, a missing id empty) is about 70.
  return kFewestBytesPerLine * (static_cast<double>(train) + static_cast<double>(test));
}

std::string SynthCtrInfo::to_json() const {
  const auto number = [](double x) { return std::isfinite(x) ? fmt::format("{:.6g}", x) : std::string("null"); };
  const auto list = [&](const auto& xs) {
    std::string out;
    for (const auto x : xs) out += (out.empty() ? "" : ", ") + number(static_cast<double>(x));
    return "[" + out + "]";
  };
  const SynthCtrOptions& o = options;
  return fmt::format(
      "{{\n  \"generator\": \"frugal data synth-ctr\",\n  \"train\": {},\n  \"test\": {},\n  \"seed\": {},\n"
      "  \"vocab_scale\": {},\n  \"zipf\": {},\n  \"embedding_dim\": {},\n  \"noise\": {},\n  \"base_ctr\": {},\n"
      "  \"bias\": {},\n  \"vocab_sizes\": {},\n  \"cat_missing\": {},\n  \"dense_missing\": {},\n"
      "  \"train_ctr\": {},\n  \"test_ctr\": {},\n  \"bayes_auc\": {},\n  \"bayes_logloss\": {}\n}}\n",
      o.train, o.test, o.seed, number(o.vocab_scale), number(o.zipf), o.embedding_dim, number(o.noise),
      number(o.base_ctr), number(bias), list(vocab_sizes), list(cat_missing), list(dense_missing),
      number(o.train ? static_cast<double>(train_clicks) / static_cast<double>(o.train) : NAN),
      number(o.test ? static_cast<double>(test_clicks) / static_cast<double>(o.test) : NAN), number(bayes_auc),
      number(bayes_logloss));
}

SynthCtrInfo write_synth_ctr(const SynthCtrOptions& options, const std::string& dir) {
  options.validate();
  SynthCtrInfo info;
  info.options = options;
  const Rng root(options.seed);
  Model model(options, root.split(1));
  model.describe(info);
  info.bias = solve_bias(model, root.split(2), options.base_ctr);
  std::filesystem::create_directories(dir);
  std::vector<float> scores, labels;  // of the test set
  for (const bool test : {false, true}) {
    Rng rng = root.split(test ? 4 : 3);
    LineFile out(dir + (test ? "/test.tsv" : "/train.tsv"));
    CtrRecord r;
    size_t& clicks = test ? info.test_clicks : info.train_clicks;
    for (size_t i = 0, n = test ? options.test : options.train; i < n; ++i) {
      const double z = model.draw(rng, r) + info.bias;
      r.label = uniform01(rng) < sigmoid(model.noisy_logit(rng, z));
      clicks += r.label;
      if (test) {
        scores.push_back(static_cast<float>(model.posterior(z)));
        labels.push_back(static_cast<float>(r.label));
      }
      format_ctr_line(r, out.buffer());
      out.flush_if_full();
    }
    out.close();
  }
  info.bayes_auc = auc(scores, labels);
  info.bayes_logloss = labels.empty() ? NAN : logloss(scores, labels);
  LineFile json(dir + "/info.json");
  json.buffer() = info.to_json();
  json.close();
  return info;
}

}  // namespace frugal::data
