// The building blocks: a training program that assembles the network, the trainer and the epoch
// loop itself (apps/examples/train_xmc.cpp gets all of it from one call, frugal::run::train):
//   train_xmc_blocks TRAIN.txt TEST.txt
// Builds sparse input -> 128 hidden (ReLU) -> LSH-sampled softmax, trains 3 epochs, prints
// P@1/P@5 after each and saves a checkpoint. Build outside the tree with:
//   g++ -std=c++20 train_xmc_blocks.cpp $(pkg-config --cflags --libs frugal)
// The trainer's default optimizer is what `frugal train` picks for the model: for this LSH output
// layer row-wise Adam at its default rate, with row-wise state on the label rows.
#include <frugal/frugal.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s TRAIN.txt TEST.txt\n", argv[0]);
    return 2;
  }
  try {
    frugal::set_threads(frugal::host_backend(), 2);
    const auto train = frugal::data::XmcFile::open(argv[1]);
    const auto test = frugal::data::XmcFile::open(argv[2]);
    frugal::Model model;
    model.add<frugal::layers::SparseDense>({.in = train.num_features, .out = 128, .act = frugal::Act::relu});
    model.add<frugal::layers::SoftmaxOutput>(
        {.in = 128, .out = train.num_labels, .sampler = frugal::layers::Sampler::lsh,
         .lsh = {.family = frugal::lsh::auto_family(frugal::lsh::Dwta{}, 50, train.num_labels),
                 .tables = 50, .min_active = 300}});
    frugal::train::Trainer trainer(model, {});  // the defaults: the optimizer `frugal train` would pick
    for (uint64_t epoch = 1; epoch <= 3; ++epoch) {
      const auto fit = trainer.fit_epoch(train, {.batch = 128, .seed = epoch});
      const auto ev = trainer.evaluate(test, {.k = {1, 5}});
      std::printf("epoch %llu: loss %.4f, %.0f samples/s, P@1 %.4f, P@5 %.4f\n",
                  static_cast<unsigned long long>(epoch), fit.loss, fit.samples_per_s, ev.p(1), ev.p(5));
      frugal::train::save_checkpoint("train_xmc_blocks.ckpt", model, trainer);
    }
  } catch (const frugal::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
