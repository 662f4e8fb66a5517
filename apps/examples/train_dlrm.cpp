// DLRM on Criteo-format click logs through frugal's public C++ API only:
//   train_dlrm TRAIN.tsv TEST.tsv
// Counts the ids of the training data, builds DLRM (bottom 13 -> 64 -> 16, 26 tables of 16, dot
// interaction, top 64 -> 32 -> 1), trains 2 epochs with lazy Adam, prints AUC and logloss after each
// and saves a checkpoint that `frugal evaluate --model train_dlrm.ckpt` reads. Build outside the
// tree with:  g++ -std=c++20 train_dlrm.cpp $(pkg-config --cflags --libs frugal)
#include <frugal/frugal.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s TRAIN.tsv TEST.tsv\n", argv[0]);
    return 2;
  }
  try {
    namespace L = frugal::layers;
    namespace T = frugal::train;
    frugal::set_threads(frugal::host_backend(), 1);
    const frugal::data::CtrDataset train = frugal::data::load_ctr(argv[1]), test = frugal::data::load_ctr(argv[2]);
    const auto view = [](const frugal::data::CtrDataset& d) {
      return L::CtrView{d.size, frugal::data::kCtrDense, frugal::data::kCtrCats, d.labels, d.dense, d.cats};
    };
    L::IdCounts counts(frugal::data::kCtrCats);
    counts.add(view(train));
    const L::IdMap ids({.mode = L::IdMode::full, .min_count = 2}, counts);
    L::DlrmNetwork net({.num_dense = frugal::data::kCtrDense, .fields = L::embedding_fields(ids),
                        .lookups = ids.lookups(), .dim = 16, .bottom = {64}, .top = {64, 32}, .seed = 1});
    T::DlrmTrainer trainer(net, ids, {.optimizer = frugal::optim::Adam{.lr = 1e-3f}, .batch = 128});
    for (uint64_t epoch = 1; epoch <= 2; ++epoch) {
      const T::FitResult fit = trainer.fit_epoch(view(train), epoch);
      const T::ClickMetrics m = trainer.evaluate(view(test));
      std::printf("epoch %llu: loss %.4f, %.0f samples/s, AUC %.4f, logloss %.4f\n",
                  static_cast<unsigned long long>(epoch), fit.loss, fit.samples_per_s, m.auc, m.logloss);
      // The configuration `frugal evaluate` rebuilds the network from.
      T::save_dlrm_checkpoint("train_dlrm.ckpt",
                              R"({"model": "dlrm", "embedding_dim": 16, "bottom": "64", "top": "64,32", "seed": 1})",
                              epoch, ids, net, trainer.optimizer(), nullptr);
    }
  } catch (const frugal::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
