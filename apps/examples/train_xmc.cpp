// The C++ quick start: `frugal train` with its defaults, from a program.
//   train_xmc TRAIN.txt TEST.txt
// Trains 3 epochs (the defaults read the rest from the data: hidden width, optimizer, learning
// rate, inference), prints a line per epoch with its P@1 and saves a checkpoint. Under `frugal
// launch --ranks N` or mpirun the same program trains one model sliced over the N ranks.
// Build outside the tree with:
//   g++ -std=c++20 train_xmc.cpp $(pkg-config --cflags --libs frugal)
#include <frugal/frugal.h>

#include <cstdio>
#include <string_view>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s TRAIN.txt TEST.txt\n", argv[0]);
    return 2;
  }
  try {
    frugal::run::TrainConfig config;  // every option of `frugal train`, with its defaults
    config.train = argv[1];
    config.test = argv[2];
    config.checkpoint = "train_xmc.ckpt";
    const auto result = frugal::run::train(
        config, {.on_output = [](std::string_view) {},  // the run's own lines: this program prints its own
                 .on_epoch = [](const frugal::run::EpochRecord& r) {
                   if (r.rank == 0)  // each rank gets its own record; one speaks
                     std::printf("epoch %llu: loss %.4f, P@1 %.4f, P@5 %.4f\n",
                                 static_cast<unsigned long long>(r.epoch), r.loss, r.p_at(1), r.p_at(5));
                   return true;  // false would stop after this epoch
                 }});
    if (result.epochs.empty() || result.epochs.back().rank == 0)
      std::printf("trained %zu epochs; checkpoint in train_xmc.ckpt\n", result.epochs.size());
  } catch (const frugal::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
