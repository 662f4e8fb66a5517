// The run API's option declarations (train/run/train_options.h): the one place that says what each
// training option accepts, for the command line, Python and a C++ caller alike.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "core/check.h"
#include "train/run/predict_session.h"
#include "train/run/train_options.h"

using namespace frugal;
using Catch::Contains;

TEST_CASE("every option's shown default is a value it accepts, and reads back as itself") {
  std::set<std::string> flags;
  for (const run::Option<run::TrainConfig>& o : run::train_options()) {
    INFO(o.flag);
    CHECK(flags.insert(o.flag).second);  // declared once
    CHECK(o.flag.rfind("--", 0) == 0);
    CHECK(!o.help.empty());
    if (o.default_text.empty() || o.cluster) continue;
    run::TrainConfig config;
    REQUIRE_NOTHROW(run::set_option(config, o.flag, o.default_text));
    CHECK(config.given.count(o.flag) == 1);
    if (o.type != run::OptionType::switch_) CHECK(o.text(config) == o.default_text);
    CHECK_NOTHROW(run::check_options(config));
  }
  CHECK(flags.count("--batch") == 1);
  CHECK(flags.count("--infer") == 1);     // the inference options
  CHECK(flags.count("--ids") == 1);       // DLRM's
  CHECK(flags.count("--rank") == 1);      // the cluster's (comm/init_flags.h)
}

TEST_CASE("a value outside an option's range is refused in the command line's words, however it is set") {
  run::TrainConfig config;
  CHECK_THROWS_WITH(run::set_option(config, "--tables", "0"), Contains("--tables: 0 is outside [1, 4096]"));
  CHECK_THROWS_WITH(run::set_option(config, "--batch", "0"),
                    Contains("--batch: 0 is not positive: expected a count from 1 up"));
  CHECK_THROWS_WITH(run::set_option(config, "--lr", "1e39"), Contains("--lr: 1e39"));
  CHECK_THROWS_WITH(run::set_option(config, "--epochs", "-1"), Contains("--epochs: -1 is negative"));
  CHECK_THROWS_WITH(run::set_option(config, "--sampler", "bad"), Contains("--sampler: bad not in {lsh,exact}"));
  CHECK_THROWS_WITH(run::set_option(config, "--hidden", "0"),
                    Contains("--hidden '0': expected auto or a width from 1 to 1048576"));
  CHECK_THROWS_WITH(run::set_option(config, "--device", "gpu"), Contains("'gpu' is not one of cpu"));
  CHECK_THROWS_WITH(run::set_option(config, "--metrics", ""), Contains("--metrics: an empty value"));
  CHECK_THROWS_WITH(run::set_option(config, "--size", "x"), Contains("--size 'x'"));
  CHECK_THROWS_WITH(run::set_option(config, "--no-such-flag", "1"), Contains("--no-such-flag"));
  CHECK(config.given.empty());  // nothing refused was recorded

  // A C++ caller's fields get the same ranges when the run starts.
  run::TrainConfig fields;
  fields.tables = 0;
  CHECK_THROWS_WITH(run::check_options(fields), Contains("--tables: 0 is outside [1, 4096]"));
  fields.tables = 100;
  fields.lr = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(run::check_options(fields), Contains("--lr: nan is outside (0, 1000]"));
  fields.lr = 0.01f;
  fields.dropout = 1.5f;
  CHECK_THROWS_WITH(run::check_options(fields), Contains("--dropout: 1.5 is outside [0, 0.99]"));
  fields.dropout = 0;
  fields.hidden = 0;  // auto
  CHECK_NOTHROW(run::check_options(fields));
}

TEST_CASE("frugal train's arguments read without the command line") {
  const run::TrainConfig c = run::parse_train_options(
      {"--train", "a.txt", "--test", "b.txt", "--hidden", "64", "--quiet", "--logq", "off", "--dp-keep-param", "x.=0.5",
       "--dp-keep-param", "y.=0.2", "--infer", "lsh", "--rank", "1", "--batch", "1e3"});
  CHECK(c.train == "a.txt");
  CHECK(c.hidden == 64);
  CHECK(c.quiet);
  CHECK(!c.logq);
  CHECK(c.dp_keep_param == std::vector<std::string>{"x.=0.5", "y.=0.2"});
  CHECK(c.infer.mode == run::InferMode::lsh);
  CHECK(c.batch == 1000);
  CHECK(c.join.settings.at("FRUGAL_RANK").value == "1");
  CHECK(c.given.count("--hidden") == 1);
  CHECK(c.given.count("--epochs") == 0);
  CHECK_THROWS_WITH(run::parse_train_options({"--train", "a", "--test", "b", "--threads", "1", "--threads", "2"}),
                    Contains("--threads: given 2 times; give it once"));
  CHECK_THROWS_WITH(run::parse_train_options({"--test", "b"}), Contains("--train is required"));
  CHECK_THROWS_WITH(run::parse_train_options({"--train", "a", "--test", "b", "--batch"}), Contains("--batch"));
}

TEST_CASE("the settings ranks compare are the config's own, without per-rank or cluster options") {
  run::TrainConfig a, b;
  run::set_option(b, "--lr", "1e-2");
  a.lr = 0.01f;  // a C++ caller's field: the same setting as the flag's
  run::set_option(a, "--threads", "3");  // per rank
  run::set_option(a, "--rank", "1");     // the cluster's
  CHECK(run::agreed_settings(a) == run::agreed_settings(b));
  bool has_lr = false;
  for (const auto& [key, text] : run::agreed_settings(a)) {
    CHECK(key != "threads");
    CHECK(key != "rank");
    CHECK(key != "train");
    if (key == "lr") has_lr = text == "0.01";
  }
  CHECK(has_lr);
  b.batch = 64;
  CHECK(run::agreed_settings(a) != run::agreed_settings(b));
}

TEST_CASE("predict and evaluate's options are declared once too, and a C++ caller's fields are checked") {
  run::SessionArgs a;
  CHECK_THROWS_WITH(run::set_session_option(a, "--batch", "0"),
                    Contains("--batch: 0 is not positive: expected a count from 1 up"));
  CHECK_THROWS_WITH(run::set_session_option(a, "--infer", "fast"), Contains("--infer: fast not in {auto,exact,lsh,ensemble}"));
  run::set_session_option(a, "--infer", "lsh");
  CHECK(a.infer.mode == run::InferMode::lsh);
  a.model = "no-such-checkpoint";
  a.batch = 0;  // the field itself: refused before the checkpoint is read
  CHECK_THROWS_WITH(run::open_session(a, {}), Contains("--batch: 0 is not positive"));
  std::set<std::string> flags;
  for (const auto& o : run::session_options("")) flags.insert(o.flag);
  CHECK(flags == std::set<std::string>{"--model", "--batch", "--threads", "--device", "--accept-unchecked-checkpoint",
                                       "--infer", "--infer-candidates", "--ensemble-weight", "--ensemble-knn-weight",
                                       "--ensemble-temperature", "--ensemble-neighbours"});
}
