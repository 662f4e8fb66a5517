// What `frugal train` reads from the training set (train/run/data_defaults.h): few-shot labels turn on the
// centroid start, its learning rate and a wider hidden layer within the work budget; other data, a
// flag given by the user and non-network formats keep what was asked for.
#include <catch2/catch.hpp>

#include "train/run/data_defaults.h"
#include "train/run/run_settings.h"
#include "train/run/epoch_parts.h"
#include "train/run/validation_plan.h"

using namespace frugal;
using namespace frugal::run;

namespace {

data::DatasetStats stats(size_t points, uint64_t support, double nonzeros = 15.0) {
  data::DatasetStats s;
  s.points = points;
  s.average_nonzeros = nonzeros;
  s.average_labels = 1.0;
  s.median_label_support = support;
  s.rare_label_share = support <= 2 ? 0.6 : 0.01;
  return s;
}

}  // namespace

TEST_CASE("data defaults: labels with many points keep the defaults") {
  for (const uint64_t support : {kFewShotSupport + 1, uint64_t{78}, uint64_t{6000}}) {
    const DataDefaults d = choose_data_defaults(stats(50000, support), {});
    CHECK_FALSE(d.few_shot);
    CHECK(d.hidden == kDefaultHidden);
    CHECK_FALSE(d.centroid_start);
    CHECK_FALSE(d.lr.has_value());
    CHECK(d.step_cost_ratio == 1.0);
    CHECK_THAT(d.summary, Catch::Contains("not few-shot"));
  }
  // --output-init centroid given on such data: kept, at the optimizer's own rate.
  const DataDefaults given = choose_data_defaults(stats(50000, 78), {.centroid_start = true});
  CHECK(given.centroid_start);
  CHECK_FALSE(given.lr.has_value());
}

TEST_CASE("data defaults: few-shot labels get the centroid start, its rate and a width within the budget") {
  // GCIDE min5's size (30k points, 15 features a point): the widest width fits.
  const DataDefaults small = choose_data_defaults(stats(30000, 7), {});
  CHECK(small.few_shot);
  CHECK(small.centroid_start);
  REQUIRE(small.lr.has_value());
  CHECK(*small.lr == kCentroidStartLr);
  CHECK(small.hidden == 1024);
  CHECK(small.step_cost_ratio == 8.0);
  CHECK_THAT(small.summary, Catch::Contains("few-shot labels: median 7 training points") &&
                                Catch::Contains("centroid start") && Catch::Contains("hidden 1024"));
  // Bigger sets get narrower widths, never below 256; the work of an epoch decides.
  const DataDefaultsRequest r{.epoch_work_budget = 1e12, .rows_per_point = 1000.0};
  CHECK(choose_data_defaults(stats(900, 1), r).hidden == 1024);
  CHECK(choose_data_defaults(stats(1'500'000, 1), r).hidden == 512);      // 1.5e6 x 512 x 1015 = 7.8e11
  CHECK(choose_data_defaults(stats(3'000'000, 1), r).hidden == 256);      // 3e6 x 256 x 1015 = 7.8e11
  CHECK(choose_data_defaults(stats(100'000'000, 1), r).hidden == 256);    // over budget at every width: the narrowest
}

TEST_CASE("data defaults: --hidden auto keeps the model state within half the node's memory and says what it costs") {
  // 1M labels, 100k features, ~9 bytes of state per weight (f32, row-wise Adam) and 9 per label and
  // table (100 LSH tables): hidden 1024 takes ~10.28 GiB, 128 ~2.02 GiB (a little over 2 GiB).
  const DataDefaultsRequest big{.epoch_work_budget = 1e12, .rows_per_point = 1000.0,
                                .state_per_width = 1.1e6 * 9.0, .state_fixed = 1e6 * 100 * 9.0,
                                .memory_bytes = 24.0 * 1073741824.0, .memory_source = "this machine has available"};
  data::DatasetStats few = stats(30000, 1);
  few.labels = 1'000'000;
  const DataDefaults roomy = choose_data_defaults(few, big);
  CHECK(roomy.hidden == 1024);  // 10.28 GiB of 24: fits with room
  CHECK_FALSE(roomy.narrowed_for_memory);
  CHECK_THAT(roomy.summary, Catch::Contains("model state ~10.28 GiB of the 24.00 GiB this machine has available") &&
                                Catch::Contains("an epoch ~"));
  // A 4 GB node: the widest whose state takes at most half of it.
  DataDefaultsRequest small = big;
  small.memory_bytes = 4096.0 * 1048576.0;
  small.memory_source = "--memory-limit 4096 MiB allows";
  const DataDefaults node4 = choose_data_defaults(few, small);
  CHECK(node4.hidden == 64);  // 128: ~2.1 GiB, more than 2 GiB; 64: ~1.4 GiB
  CHECK(node4.narrowed_for_memory);
  CHECK_THAT(node4.summary, Catch::Contains("narrower than 1024: hidden 1024's model state") &&
                                Catch::Contains("--memory-limit 4096 MiB allows"));
  CHECK(0.5 * small.memory_bytes >= small.state_per_width * 64 + small.state_fixed);
  // Not few-shot: the default width when it fits, else narrower, saying why.
  data::DatasetStats many = stats(50000, 78);
  many.labels = 1'000'000;
  CHECK(choose_data_defaults(many, big).hidden == kDefaultHidden);
  CHECK_THAT(choose_data_defaults(many, big).summary, Catch::Contains("hidden 128: model state ~2.02 GiB"));
  const DataDefaults narrow = choose_data_defaults(many, small);
  CHECK(narrow.hidden == 64);
  CHECK_THAT(narrow.summary, Catch::Contains("hidden 64") && Catch::Contains("not 128") &&
                                 Catch::Contains("--hidden sets it"));
  // Nothing fits: the narrowest, and the weights check refuses it later with the sizes.
  small.memory_bytes = 1048576.0;
  CHECK(choose_data_defaults(many, small).hidden == kNarrowestAutoHidden);
  // A width given is never changed.
  CHECK(choose_data_defaults(many, {.hidden_auto = false, .state_per_width = 1e12, .memory_bytes = 1.0}).hidden ==
        kDefaultHidden);
}

TEST_CASE("data defaults: what the user gave is kept") {
  const data::DatasetStats few = stats(30000, 1);
  const DataDefaults hidden = choose_data_defaults(few, {.hidden_auto = false});
  CHECK(hidden.hidden == kDefaultHidden);  // the caller keeps its own width
  CHECK(hidden.step_cost_ratio == 1.0);
  CHECK(hidden.centroid_start);
  const DataDefaults random = choose_data_defaults(few, {.centroid_start = false});
  CHECK_FALSE(random.centroid_start);
  CHECK_FALSE(random.lr.has_value());  // the rate belongs to the centroid start
  CHECK(random.ensemble);  // --infer auto on few-shot labels
  CHECK_FALSE(choose_data_defaults(few, {.infer_auto = false}).ensemble);
  const DataDefaults lr = choose_data_defaults(few, {.lr_auto = false});
  CHECK(lr.centroid_start);
  CHECK_FALSE(lr.lr.has_value());
  const DataDefaults none = choose_data_defaults(few, {.hidden_auto = false, .centroid_start = false, .lr_auto = false,
                                                          .infer_auto = false});
  CHECK(none.few_shot);
  CHECK_THAT(none.summary, Catch::Contains("nothing to choose"));
}

TEST_CASE("data defaults: IDX images and empty sets are not few-shot") {
  CHECK_FALSE(choose_data_defaults(stats(60000, 1), {.network = false}).few_shot);
  CHECK(choose_data_defaults(stats(60000, 1), {.network = false}).summary.empty());
  CHECK_FALSE(choose_data_defaults(stats(0, 0), {}).few_shot);
}

TEST_CASE("validation plan: a share of the training set by default, none for small sets, the flags as given") {
  // Small sets hold none back, and the log says why and how to ask anyway.
  const ValidationPlan small = plan_validation(std::nullopt, false, std::nullopt, kAutoValidMinTrain - 1);
  CHECK_FALSE(small.on());
  CHECK(small.patience == 0);
  CHECK_THAT(small.line, Catch::Contains("--valid-fraction F holds back a share anyway"));
  // From 5,000 points: 10% up to 1,000 points, then 5%, at most 20,000.
  const auto held = [](size_t points) {
    return plan_validation(std::nullopt, false, std::nullopt, points).fraction * static_cast<double>(points);
  };
  CHECK(held(5000) == Approx(500));
  CHECK(held(10000) == Approx(1000));
  CHECK(held(30000) == Approx(1500));
  CHECK(held(1000000) == Approx(kAutoValidMaxPoints));
  const ValidationPlan dflt = plan_validation(std::nullopt, false, std::nullopt, 30000);
  CHECK(dflt.patience == kDefaultPatience);
  // --epochs auto: up to 10 where early stopping watches, else 3; as given otherwise.
  CHECK(dflt.epochs == kAutoEpochCap);
  CHECK(small.epochs == kDefaultEpochs);
  CHECK(plan_validation(std::nullopt, false, size_t{0}, 30000).epochs == kDefaultEpochs);
  CHECK(plan_validation(std::nullopt, false, std::nullopt, 30000, size_t{4}).epochs == 4);
  CHECK(plan_validation(std::nullopt, false, std::nullopt, 100, size_t{7}).epochs == 7);
  // --lr-schedule auto: cosine over the bound where early stopping watches, else constant.
  CHECK(auto_schedule(dflt) == optim::ScheduleKind::cosine);
  CHECK(auto_schedule(small) == optim::ScheduleKind::constant);
  CHECK(auto_schedule(plan_validation(std::nullopt, false, size_t{0}, 30000)) == optim::ScheduleKind::constant);
  // As given: a fraction (0: off), a file, a patience.
  CHECK(plan_validation(0.2, false, std::nullopt, 100).fraction == 0.2);
  CHECK_FALSE(plan_validation(0.0, false, std::nullopt, 100000).on());
  CHECK(plan_validation(0.0, false, std::nullopt, 100000).patience == 0);
  const ValidationPlan file = plan_validation(std::nullopt, true, std::nullopt, 100);
  CHECK((file.file && file.fraction == 0.0 && file.patience == kDefaultPatience));
  CHECK(plan_validation(std::nullopt, false, size_t{0}, 30000).patience == 0);
  CHECK(plan_validation(std::nullopt, false, size_t{5}, 30000).patience == 5);
  // Early stopping with nothing to watch, and two validation sets, are refused naming the flags.
  CHECK_THROWS_WITH(plan_validation(std::nullopt, false, size_t{2}, 100),
                    Catch::Contains("--early-stopping 2 watches a validation set, and this run has none") &&
                        Catch::Contains("fewer than 5000 points"));
  CHECK_THROWS_WITH(plan_validation(0.0, false, size_t{2}, 100000), Catch::Contains("--valid-fraction F or --valid FILE"));
  CHECK_THROWS_WITH(plan_validation(0.1, true, std::nullopt, 100000),
                    Catch::Contains("--valid FILE and --valid-fraction 0.1 both name a validation set"));
}

TEST_CASE("validation plan: long epochs are scored within, every split / 5% training points") {
  // The default split of a set up to 400,000 points is its 5%: its epochs are scored at their ends only.
  const auto every = [](size_t points, std::optional<size_t> given = std::nullopt, size_t max_steps = 0) {
    const ValidationPlan plan = plan_validation(std::nullopt, false, std::nullopt, points);
    const size_t held = static_cast<size_t>(std::llround(plan.fraction * static_cast<double>(points)));
    return valid_every_steps(given, held, 128, steps_in_epoch(points - held, 128, max_steps));
  };
  CHECK(every(30000) == 0);
  CHECK(every(400000) == 0);
  // 1.7M points (the Amazon-3M shape): a 20,000-point split, scored every 400,000 points (3,125 steps).
  CHECK(every(1700000) == 3125);
  CHECK(every(1000000) == 3125);
  // As given (0: epoch ends only), and never an interval that is the whole epoch.
  CHECK(every(30000, size_t{50}) == 50);
  CHECK(every(1700000, size_t{0}) == 0);
  CHECK(every(30000, size_t{100000}) == 0);
  CHECK(every(1700000, std::nullopt, 3000) == 0);  // --max-steps shortens the epoch
  CHECK(valid_every_steps(std::nullopt, 0, 128, 1000) == 0);
  CHECK(steps_in_epoch(1000, 128, 0) == 8);
  CHECK(steps_in_epoch(1000, 128, 5) == 5);
}

TEST_CASE("--precision auto: bf16 for the LSH network where the CPU has AVX512-BF16, f32 otherwise") {
  const TrainConfig defaults;
  CHECK_FALSE(defaults.precision.has_value());  // auto unless set
  const RunArgs lsh(defaults);
  CHECK(auto_precision(lsh, /*cpu_has_bf16=*/true) == Dtype::bf16);
  CHECK(auto_precision(lsh, /*cpu_has_bf16=*/false) == Dtype::f32);
  // The exact softmax keeps its matrix in f32, DLRM has no such layers, IDX images train the exact
  // softmax, and replicas that exchange weight changes need f32 to hold them.
  RunArgs exact(defaults);
  exact.sampler = layers::Sampler::exact;
  RunArgs dlrm(defaults);
  dlrm.model = ModelKind::dlrm;
  RunArgs idx(defaults);
  idx.format = data::DataFormat::idx;
  RunArgs updates(defaults);
  updates.dp_compress = comm::DpTarget::updates;
  RunArgs gradients(defaults);
  gradients.dp_compress = comm::DpTarget::gradients;
  for (const RunArgs* a : {&exact, &dlrm, &idx, &updates}) CHECK(auto_precision(*a, true) == Dtype::f32);
  CHECK(auto_precision(gradients, true) == Dtype::bf16);
}
