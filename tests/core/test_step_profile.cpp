// The step profile (core/step_profile.h): exclusive phase times, work counted into the right phase
// and thread, a trainer's epoch profile with the work its layers do, and the roofline built on it
// (core/roofline.h) from fed-in machine figures.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "core/backend.h"
#include "core/data/synth_xmc.h"
#include "core/roofline.h"
#include "core/step_profile.h"
#include "train/trainer.h"
#include "layers/xmc_network.h"

using namespace frugal;
using profile::Phase;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

TEST_CASE("step profile: nested scopes charge their own time only, and the phases add up to the wall time") {
  const profile::StepProfile before = profile::thread_totals();
  const auto start = std::chrono::steady_clock::now();
  {
    const profile::Scope outer(Phase::output_forward);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    {
      const profile::Scope inner(Phase::hash);
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
  }
  const double wall = seconds_since(start);
  profile::StepProfile p = profile::thread_totals();
  p -= before;
  // Each phase got at least its own sleep, and the two partition the scopes' time exactly (so the
  // outer phase did not also get the inner one's 30 ms).
  REQUIRE(p[Phase::output_forward].seconds >= 0.020);
  REQUIRE(p[Phase::hash].seconds >= 0.030);
  REQUIRE(p[Phase::output_forward].seconds + p[Phase::hash].seconds <= wall);
  REQUIRE(p.seconds() == Approx(p[Phase::output_forward].seconds + p[Phase::hash].seconds));
  // Outside every scope, nothing is charged.
  const profile::StepProfile idle = profile::thread_totals();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(profile::thread_totals().seconds() == idle.seconds());
}

TEST_CASE("step profile: work goes to the named phase, or the innermost open one, of this thread only") {
  const profile::StepProfile before = profile::thread_totals();
  profile::count(Phase::optimizer, 10.0, 100.0);
  {
    const profile::Scope rebuild(Phase::rebuild);
    profile::count_here(1.0, 2.0);
    {
      const profile::Scope hash(Phase::hash);
      profile::count_here(3.0, 4.0);
    }
  }
  std::thread other([] { profile::count(Phase::optimizer, 1e9, 1e9); });
  other.join();
  profile::StepProfile p = profile::thread_totals();
  p -= before;
  REQUIRE(p[Phase::optimizer].flops == 10.0);
  REQUIRE(p[Phase::optimizer].bytes == 100.0);
  REQUIRE(p[Phase::rebuild].flops == 1.0);
  REQUIRE(p[Phase::rebuild].bytes == 2.0);
  REQUIRE(p[Phase::hash].flops == 3.0);
  REQUIRE(p[Phase::hash].bytes == 4.0);
  REQUIRE(profile::phase_name(Phase::output_backward) == "output_backward");
}

TEST_CASE("step profile: an LSH epoch's profile has every phase of the step, with the layers' work") {
  host_backend().set_num_threads(2);
  const data::SynthXmc d = data::generate_synth_xmc(
      {.features = 2000, .labels = 500, .train = 640, .test = 64, .nnz = 20, .labels_per_point = 2, .seed = 5});
  for (const auto sampler : {layers::Sampler::lsh, layers::Sampler::exact}) {
    Model model;
    layers::build_xmc_network(model, {.features = 2000, .labels = 500, .hidden = 32, .sampler = sampler,
                                      .lsh = {.family = lsh::auto_family(lsh::Dwta{}, 20, 500), .tables = 20},
                                      .seed = 3});
    train::Trainer trainer(model, {});
    const train::FitResult fit = trainer.fit_epoch(d.train, {.batch = 64, .progress = false});
    const profile::StepProfile& p = fit.profile;
    INFO((sampler == layers::Sampler::lsh ? "lsh" : "exact"));
    // The input layer's multiply-adds: 2 per nonzero and hidden unit, plus bias and activation.
    const double nnz = static_cast<double>(d.train.points.feature_ids.size());
    REQUIRE(p[Phase::input_forward].flops == Approx(2.0 * nnz * 32 + 2.0 * 640 * 32));
    REQUIRE(p[Phase::input_backward].flops == Approx(2.0 * nnz * 32 + 2.0 * 640 * 32));
    REQUIRE(p[Phase::input_forward].gathered_bytes > 0.0);
    for (const Phase ph : {Phase::input_forward, Phase::output_forward, Phase::output_backward,
                           Phase::input_backward, Phase::optimizer}) {
      INFO(profile::phase_name(ph));
      REQUIRE(p[ph].seconds > 0.0);
      REQUIRE(p[ph].flops > 0.0);
      REQUIRE(p[ph].bytes > 0.0);
    }
    if (sampler == layers::Sampler::lsh) {
      // Output: two multiply-adds forward and four backward per active label and hidden unit.
      const double active = fit.labels_scored_per_sample * 640;
      REQUIRE(p[Phase::output_forward].flops == Approx(2.0 * active * 32 + 6.0 * active));
      REQUIRE(p[Phase::output_backward].flops == Approx(4.0 * active * 32));
      // The active rows are gathered; the input layer's feature rows too.
      REQUIRE(p[Phase::output_forward].gathered_bytes > 0.0);
      REQUIRE(p[Phase::output_forward].gathered_bytes < p[Phase::output_forward].bytes);
      for (const Phase ph : {Phase::hash, Phase::sample, Phase::rebuild}) {
        INFO(profile::phase_name(ph));
        REQUIRE(p[ph].seconds > 0.0);
        REQUIRE(p[ph].bytes > 0.0);
      }
    } else {
      REQUIRE(p[Phase::output_forward].flops == Approx(2.0 * 640 * 500 * 32 + 6.0 * 640 * 500));
      REQUIRE(p[Phase::output_forward].gathered_bytes == 0.0);  // dense products stream
      REQUIRE(p[Phase::hash].seconds == 0.0);
      REQUIRE(p[Phase::sample].seconds == 0.0);
      REQUIRE(p[Phase::rebuild].seconds == 0.0);
    }
    // Adam over the touched rows: each element's weight, two moments (read, written) and gradient
    // read, 28 bytes, plus each row's step count read and written.
    REQUIRE(p[Phase::optimizer].bytes > 28.0 * 32 * 10);
    // The phases account for the steps' time (the rest of fit_epoch is the loader and bookkeeping).
    REQUIRE(p.seconds() <= fit.seconds);
    REQUIRE(p.seconds() > 0.5 * fit.compute_seconds);
  }
}

TEST_CASE("roofline: each phase is held to the larger of its compute and memory time") {
  profile::StepProfile p;
  // 10 samples. Output forward: 1e6 flops, 6e6 bytes of which 4e6 gathered, 1.1 ms -> memory:
  // 2e6 / 2e10 + 4e6 / 4e9 = 0.1 + 1 ms, mostly gathering: 100%.
  p[Phase::output_forward] = {.seconds = 1.1e-3, .flops = 1e6, .bytes = 6e6, .gathered_bytes = 4e6};
  // Dense layers: 1e9 flops in 20 ms, few bytes -> compute-bound (1e9 / 1e11 = 10 ms): 50%.
  p[Phase::dense_layers] = {.seconds = 20e-3, .flops = 1e9, .bytes = 1e6};
  // The optimizer streams: 2e7 bytes at 2e10 B/s = 1 ms of roof in 4 ms: 25%.
  p[Phase::optimizer] = {.seconds = 4e-3, .flops = 1e5, .bytes = 2e7};
  // Waiting has no work: it counts in the step time but not in the roof.
  p[Phase::wait] = {.seconds = 5e-3};
  const profile::Roofline r =
      profile::roofline(p, 10, {.flops_per_s = 1e11, .stream_bytes_per_s = 2e10, .gather_bytes_per_s = 4e9});
  REQUIRE(r.phases.size() == 4);
  REQUIRE(r.phases[0].phase == Phase::dense_layers);
  REQUIRE(r.phases[0].bound == "compute");
  REQUIRE(r.phases[0].fraction() == Approx(0.5));
  REQUIRE(r.phases[1].phase == Phase::output_forward);
  REQUIRE(r.phases[1].bound == "memory (gather)");
  REQUIRE(r.phases[1].fraction() == Approx(1.0));
  REQUIRE(r.phases[1].seconds == Approx(1.1e-4));  // per sample
  REQUIRE(r.phases[1].gathered_bytes == Approx(4e5));
  REQUIRE(r.phases[2].bound == "memory (stream)");
  REQUIRE(r.phases[2].fraction() == Approx(0.25));
  REQUIRE(r.phases[3].bound.empty());
  REQUIRE(r.seconds == Approx(30.1e-4));
  REQUIRE(r.roof_seconds == Approx((10e-3 + 1.1e-3 + 1e-3) / 10));
  REQUIRE(r.counted_seconds == Approx(25.1e-4));
  REQUIRE_THROWS_WITH(profile::roofline(p, 0, {.flops_per_s = 1, .stream_bytes_per_s = 1, .gather_bytes_per_s = 1}),
                      Catch::Contains("no samples"));
  REQUIRE_THROWS_WITH(profile::roofline(p, 1, {}), Catch::Contains("probe"));
}
