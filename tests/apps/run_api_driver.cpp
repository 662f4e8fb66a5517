// The run API from a C++ program, for tests/apps/test_run_api.sh: the same settings as a
// `frugal train` command line, set as TrainConfig fields, must give the same bits.
//   run_api_driver TRAIN TEST METRICS [layers=W,W] [pipeline=S] [grid=DxM] [model=dlrm] [epochs=N]
//                  [seed=N] [threads=N] [micro_batches=N] [--flag=value ...]
// key=value sets the field; --flag=value sets it through run::set_option (the option table).
#include <frugal/frugal.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s TRAIN TEST METRICS [key=value ...]\n", argv[0]);
    return 2;
  }
  try {
    frugal::run::TrainConfig config;
    config.train = argv[1];
    config.test = argv[2];
    config.metrics = argv[3];
    config.quiet = true;
    for (int i = 4; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg.rfind("--", 0) == 0) {  // --flag=value: set from its text by the library's option table
        const size_t at = arg.find('=');
        frugal::run::set_option(config, arg.substr(0, at), at == std::string::npos ? "on" : arg.substr(at + 1));
        continue;
      }
      const size_t eq = arg.find('=');
      const std::string key = arg.substr(0, eq), value = eq == std::string::npos ? "" : arg.substr(eq + 1);
      const auto count = [&] { return static_cast<size_t>(std::stoull(value)); };
      if (key == "layers") config.layers = value;
      else if (key == "pipeline") config.pipeline = static_cast<int>(count());
      else if (key == "grid") config.grid = value;
      else if (key == "model" && value == "dlrm") config.model = frugal::run::ModelKind::dlrm;
      else if (key == "epochs") config.epochs = count();
      else if (key == "seed") config.seed = count();
      else if (key == "threads") config.threads = static_cast<int>(count());
      else if (key == "micro_batches") config.micro_batches = count();
      else {
        std::fprintf(stderr, "unknown setting %s\n", arg.c_str());
        return 2;
      }
    }
    const auto result = frugal::run::train(config);
    std::printf("epochs %zu\n", result.epochs.size());
    if (!result.epochs.empty() && result.epochs.back().auc)  // DLRM's records reach the callbacks too
      std::printf("auc %.6f\n", *result.epochs.back().auc);
  } catch (const frugal::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
