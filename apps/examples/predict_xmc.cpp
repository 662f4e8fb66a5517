// Using a trained model through frugal's public C++ API only:
//   predict_xmc CHECKPOINT_DIR FILE.txt [K]
// Loads a checkpoint saved by `frugal train --checkpoint` (on any number of ranks), streams the XMC
// file in chunks, prints the top K (5) labels of every point as `label:score ...` and, when the
// file has labels, P@1, nDCG@K and (with the label counts saved next to the checkpoint) PSP@K.
// Build outside the tree with:
//   g++ -std=c++20 predict_xmc.cpp $(pkg-config --cflags --libs frugal)
#include <frugal/frugal.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: %s CHECKPOINT_DIR FILE.txt [K]\n", argv[0]);
    return 2;
  }
  try {
    size_t k = 5;
    if (argc == 4) {
      const std::string_view text = argv[3];
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), k);
      if (error != std::errc{} || end != text.data() + text.size() || k == 0) {
        std::fprintf(stderr, "K '%s': expected a positive integer\n", argv[3]);
        return 2;
      }
    }
    frugal::train::Predictor predictor(argv[1]);
    frugal::data::XmcReader reader(argv[2]);
    std::optional<frugal::Propensities> propensities;
    if (predictor.label_counts()) propensities.emplace(*predictor.label_counts());
    frugal::RankingMetrics metrics({1, k}, propensities ? &*propensities : nullptr);
    frugal::SparseBatch batch;
    frugal::train::Predictions top;
    while (reader.read(batch, 256) > 0) {
      predictor.top_k(batch, k, top);
      for (size_t i = 0; i < top.size(); ++i) {
        for (size_t j = 0; j < top.k; ++j)
          std::printf("%s%u:%.4f", j == 0 ? "" : " ", top.labels_of(i)[j], top.scores_of(i)[j]);
        std::printf("\n");
      }
      metrics.add(batch, top.labels);
      batch.clear();
    }
    const frugal::RankingScores s = metrics.values();
    std::fprintf(stderr, "%zu points: P@1 %.4f, nDCG@%zu %.4f", metrics.points(), s.precision.at(1), k, s.ndcg.at(k));
    if (!s.psp.empty()) std::fprintf(stderr, ", PSP@%zu %.4f", k, s.psp.at(k));
    std::fprintf(stderr, "\n");
  } catch (const frugal::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
