// A seeded generator of Criteo-format click logs with a planted click model, so that a model's
// AUC can be judged against the best any model could reach (`frugal data synth-ctr`).
//   - 26 categorical fields; field f has a vocabulary of about 10 * 10^(4f/25) * vocab_scale ids
//     (10 .. 100k at scale 1), drawn with Zipf(zipf) frequencies; each entry has a random, distinct
//     8-hex-digit id. Some fields are often missing (rates 0 .. 45%, as in Criteo).
//   - 13 integer features: heavy-tailed (log-normal) counts, I2 shifted to reach -3 as Criteo's
//     does, each missing in a few % of the samples.
//   - click logit z = bias + sum_f w[f][id_f] + sum_{f<g} <v[f][id_f], v[g][id_g]> + sum_j a_j t_j,
//     v of dimension embedding_dim (DLRM's dot interaction is the model class that fits it),
//     t_j = log(1 + max(I_j, 0)) (0 when missing), plus unseen Gaussian noise of sd `noise`;
//     the label is Bernoulli(sigmoid(z + noise)). The bias is solved for so that the mean click
//     rate is base_ctr. A missing id has its own w and v.
// The Bayes-optimal score of a sample is P(click | features) = E[sigmoid(z + noise)]; its AUC and
// logloss on the test set are the best any model can reach there. Same options, same files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace frugal::data {

struct SynthCtrOptions {
  size_t train = 100000;
  size_t test = 20000;
  uint64_t seed = 1;
  double vocab_scale = 1.0;      // multiplies every field's vocabulary size
  double zipf = 1.1;             // the id of rank r has frequency proportional to 1/(r+1)^zipf
  uint32_t embedding_dim = 8;    // of the planted field embeddings
  double noise = 0.5;            // sd of the unseen logit noise
  double base_ctr = 0.25;        // mean click rate
  void validate() const;         // throws naming the field, e.g. "SynthCtrOptions::zipf must be > 0"
  // What a run takes: bytes in memory (the planted model, the test set's scores) and, at least, on disk.
  double memory_bytes() const;
  double file_bytes() const;
};

// The fewest bytes a line of a written click log takes (file_bytes).
constexpr double kFewestBytesPerLine = 64;

struct SynthCtrInfo {
  SynthCtrOptions options;
  std::vector<size_t> vocab_sizes;    // per categorical field C1..C26
  std::vector<double> cat_missing;    // per field, the probability that it is empty
  std::vector<double> dense_missing;  // per integer feature I1..I13
  double bias = 0;
  size_t train_clicks = 0, test_clicks = 0;
  double bayes_auc = 0, bayes_logloss = 0;  // of P(click | features) on the test set (NaN: one class)

  std::string to_json() const;  // what DIR/info.json holds
};

// Writes DIR/train.tsv, DIR/test.tsv and DIR/info.json (creating DIR) in memory that grows with
// the vocabularies and the test set, not with the training set.
SynthCtrInfo write_synth_ctr(const SynthCtrOptions& options, const std::string& dir);

}  // namespace frugal::data
