// Pipeline parallelism (train/pipeline_trainer.h) must compute what one process computes: with one
// micro-batch a stage split trains the bits of 1 rank (LSH sampler included); with several, the sum
// of the micro-batches' gradients equals the batch's up to the order of the sums (exact sampler,
// losses within 1e-6); replicas of the pipeline equal 1 rank on the global batch; a stage boundary
// sends exactly the top-k it promises, its gradients at those positions only, and error feedback
// conserves what it did not send; stages sliced over 2 ranks each (--grid 1x2x2) equal 1 rank too, and
// their checkpoint is the 2-slice one. Ranks are threads (LocalCommunicator).
#include <catch2/catch.hpp>
#include <cmath>
#include <mutex>

#include "comm/local_communicator.h"
#include "core/backend.h"
#include "core/data/batch_loader.h"
#include "core/data/synth_xmc.h"
#include "comm/exchange.h"
#include "comm/exchange_factory.h"
#include "layers/network_spec.h"
#include "train/checkpoint_manifest.h"
#include "train/pipeline_checkpoint.h"
#include "train/pipeline_trainer.h"
#include "train/trainer.h"

using namespace frugal;

namespace {

constexpr size_t kSteps = 12, kBatch = 32;

const data::SynthXmc& problem() {
  static const data::SynthXmc d = data::generate_synth_xmc(
      {.features = 600, .labels = 200, .train = kSteps * kBatch, .test = 150, .nnz = 16, .labels_per_point = 3,
       .seed = 11});
  return d;
}

layers::NetworkSpec spec(const std::string& sampler) {
  layers::NetworkSpec s;
  s.features = 600;
  s.labels = 200;
  s.layers = "24,16,20";
  s.sampler = sampler;
  s.tables = 8;
  s.k = 2;
  s.seed = 4;
  return s;
}

struct Run {
  std::vector<double> losses;
  double p1 = 0;
};

Run one_rank(const std::string& sampler, size_t batch = kBatch) {
  Model m;
  layers::build_network_stage(m, spec(sampler), 0, 4);
  train::Trainer t(m, {});
  data::BatchLoader loader(problem().train, {.batch = batch, .seed = 2});
  SparseBatch b;
  Run run;
  while (loader.next(b)) run.losses.push_back(t.train_step(b));
  run.p1 = t.evaluate(problem().test, {}).p(1);
  return run;
}

// `split`: layers per stage; `replicas` copies of the pipeline share each global batch of `batch`;
// each stage sliced over `slices` ranks (rank = (replica x S + stage) x M + slice, as frugal train).
Run pipeline(const std::vector<size_t>& split, size_t micro, const std::string& sampler, int replicas = 1,
             const comm::MpCompression& boundary = {}, const std::string& checkpoint = "", int slices = 1) {
  const int stages = static_cast<int>(split.size());
  Run run;
  std::mutex mu;
  comm::run_local(stages * replicas * slices, [&](comm::Communicator& world) {
    const int r = world.rank(), slice = r % slices, stage = (r / slices) % stages, replica = r / (slices * stages);
    auto pipe = world.split(replica * slices + slice, r);
    auto group = world.split(replica * stages + stage, r);
    auto data = world.split(stage * slices + slice, r);
    size_t first = 0;
    for (int s = 0; s < stage; ++s) first += split[s];
    Model m;
    layers::build_network_stage(m, spec(sampler), first, first + split[stage],
                                slices > 1 ? Placement::sliced(*group) : Placement{});
    train::PipelineTrainer t(m, {.pipeline = pipe.get(), .data = data.get(), .model = slices > 1 ? group.get() : nullptr,
                          .micro_batches = micro, .first_layer = first, .total_layers = 4, .boundary = boundary});
    data::BatchLoader loader(problem().train, {.batch = kBatch, .seed = 2, .shard = static_cast<size_t>(replica),
                                               .num_shards = static_cast<size_t>(replicas)});
    SparseBatch b;
    std::vector<double> losses;
    size_t global = 0;
    while (loader.next(b, &global)) {
      double loss = t.train_step(b, global);
      if (replicas > 1 && t.last_stage()) {  // the global batch's loss: the replicas' sum
        std::vector<float> l{static_cast<float>(loss)};
        data->all_reduce(l).wait();
        loss = l[0];
      }
      losses.push_back(loss);
    }
    const double p1 = t.evaluate(problem().test, {}).p(1);
    if (!checkpoint.empty()) train::save_pipeline_checkpoint(checkpoint, t, nlohmann::json::object(), nlohmann::json::object(), 1);
    std::lock_guard<std::mutex> lock(mu);
    if (t.last_stage() && replica == 0 && slice == 0) run.losses = losses;
    if (r == 0) run.p1 = p1;
  });
  return run;
}

}  // namespace

TEST_CASE("pipeline: one micro-batch trains the bits of 1 rank on 2, 3 and 4 stages (LSH sampler)") {
  host_backend().set_num_threads(1);
  const Run reference = one_rank("lsh");
  REQUIRE(reference.losses.size() == kSteps);
  for (const auto& split : std::vector<std::vector<size_t>>{{1, 3}, {3, 1}, {2, 1, 1}, {1, 1, 1, 1}}) {
    INFO(split.size() << " stages");
    const Run p = pipeline(split, 1, "lsh");
    REQUIRE(p.losses == reference.losses);
    REQUIRE(p.p1 == reference.p1);
  }
}

TEST_CASE("pipeline: micro-batches sum to the batch's gradient (exact sampler, losses within 1e-6)") {
  host_backend().set_num_threads(1);
  const Run reference = one_rank("exact");
  for (const size_t micro : {2, 4, 7}) {
    INFO(micro << " micro-batches");
    const Run p = pipeline({1, 2, 1}, micro, "exact");
    REQUIRE(p.losses.size() == reference.losses.size());
    for (size_t i = 0; i < p.losses.size(); ++i) REQUIRE(p.losses[i] == Approx(reference.losses[i]).epsilon(1e-6));
  }
  // The same micro-batches on one stage (gradient accumulation) and on four: the same bits.
  const Run one = pipeline({4}, 4, "lsh");
  const Run four = pipeline({1, 1, 1, 1}, 4, "lsh");
  REQUIRE(one.losses == four.losses);
  REQUIRE(one.p1 == four.p1);
}

TEST_CASE("pipeline: 2 replicas of a 2-stage pipeline equal 1 rank on the global batch (exact sampler)") {
  host_backend().set_num_threads(1);
  const Run reference = one_rank("exact");
  const Run p = pipeline({2, 2}, 2, "exact", 2);
  REQUIRE(p.losses.size() == reference.losses.size());
  for (size_t i = 0; i < p.losses.size(); ++i) REQUIRE(p.losses[i] == Approx(reference.losses[i]).epsilon(1e-5));
}

TEST_CASE("pipeline: stages sliced over 2 ranks each equal 1 rank (exact sampler, losses within 1e-5)") {
  host_backend().set_num_threads(1);
  const Run reference = one_rank("exact");
  for (const size_t micro : {1, 3}) {
    INFO(micro << " micro-batches");
    const Run p = pipeline({2, 2}, micro, "exact", 1, {}, "", 2);
    REQUIRE(p.losses.size() == reference.losses.size());
    for (size_t i = 0; i < p.losses.size(); ++i) REQUIRE(p.losses[i] == Approx(reference.losses[i]).epsilon(1e-5));
    REQUIRE(p.p1 == reference.p1);
  }
  // A stage holding only the input layer, sliced; the next one the rest.
  const Run q = pipeline({1, 3}, 2, "exact", 1, {}, "", 2);
  for (size_t i = 0; i < q.losses.size(); ++i) REQUIRE(q.losses[i] == Approx(reference.losses[i]).epsilon(1e-5));
}

TEST_CASE("pipeline: a pipeline's checkpoint is the checkpoint of its M slices that 1 rank loads") {
  host_backend().set_num_threads(1);
  struct Case {
    std::vector<size_t> split;
    int slices;
  };
  for (const Case& c : {Case{{1, 2, 1}, 1}, Case{{2, 2}, 2}}) {
    INFO(c.split.size() << " stages of " << c.slices << " slices");
    const std::string dir = "test_pipeline_checkpoint";
    std::filesystem::remove_all(dir);
    const Run p = pipeline(c.split, 2, "lsh", 1, {}, dir, c.slices);
    const train::CheckpointManifest info = train::read_manifest(dir);
    REQUIRE(info.model_slices == c.slices);
    REQUIRE(info.pipeline_stages == static_cast<int>(c.split.size()));
    REQUIRE(info.world_size == c.slices * static_cast<int>(c.split.size()));
    Model m;
    layers::build_network_stage(m, spec("lsh"), 0, 4);
    train::load_weights(dir, m);
    train::Trainer t(m, {.inference_only = true});
    REQUIRE(t.evaluate(problem().test, {}).p(1) == p.p1);
    std::filesystem::remove_all(dir);
  }
}

TEST_CASE("pipeline boundary: top-k forward, gradients at the kept positions, error feedback conserves") {
  const size_t rows = 5, width = 40, k = 10;
  Tensor act(rows, width), shifted(rows, width), grad(rows, width);
  Rng rng(3);
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < width; ++j) {
      act.at(i, j) = rng.uniform() * 2.0f - 1.0f;
      grad.at(i, j) = rng.uniform() * 2.0f - 1.0f;
    }
  for (size_t i = 0; i < rows; ++i)  // the second micro-batch keeps other positions
    for (size_t j = 0; j < width; ++j) shifted.at(i, j) = act.at(i, (j + 7) % width);
  for (const bool feedback : {false, true}) {
    INFO("error feedback " << feedback);
    const comm::MpCompression o{.keep = 0.25, .wire = comm::ValueType::f32, .error_feedback = feedback};
    comm::run_local(2, [&](comm::Communicator& c) {
      auto link = comm::comm_exchanges().stage_link(c, 1 - c.rank(), width, o, 7);
      link->set_step(0);
      if (c.rank() == 0) {
        link->send_forward(act, 0);
        const Tensor g1 = link->recv_backward(0);
        link->send_forward(shifted, 1);
        const Tensor g2 = link->recv_backward(1);
        link->wait_sends();
        for (size_t i = 0; i < rows; ++i)
          for (size_t j = 0; j < width; ++j) {
            // The first gradient: exactly the consumer's at the kept positions, nothing elsewhere.
            if (g1.at(i, j) != 0.0f) REQUIRE(g1.at(i, j) == grad.at(i, j));
            if (g2.at(i, j) == 0.0f) continue;
            // The second: its own, plus (with feedback) what the first did not carry at that position.
            const bool owed = feedback && g1.at(i, j) == 0.0f;
            REQUIRE(g2.at(i, j) == Approx(grad.at(i, j) * (owed ? 2.0f : 1.0f)).margin(1e-6));
          }
        REQUIRE(link->payload_uncompressed() == 2 * rows * width * sizeof(float));
        REQUIRE(link->payload_sent() < link->payload_uncompressed() / 2);
      } else {
        for (size_t micro = 0; micro < 2; ++micro) {
          const Tensor& source = micro == 0 ? act : shifted;
          const Tensor a = link->recv_forward(micro);
          for (size_t i = 0; i < rows; ++i) {
            // Exactly the k largest magnitudes of the row, their values exact (f32).
            std::vector<float> mags;
            for (size_t j = 0; j < width; ++j) mags.push_back(std::abs(source.at(i, j)));
            std::sort(mags.rbegin(), mags.rend());
            size_t kept = 0;
            for (size_t j = 0; j < width; ++j)
              if (a.at(i, j) != 0.0f) {
                ++kept;
                REQUIRE(a.at(i, j) == source.at(i, j));
                REQUIRE(std::abs(source.at(i, j)) >= mags[k - 1]);
              }
            REQUIRE(kept == k);
          }
          link->send_backward(grad, micro);
        }
        link->wait_sends();
      }
    });
  }
}

TEST_CASE("pipeline boundary: a message of the wrong width is refused, naming the boundary") {
  comm::run_local(2, [&](comm::Communicator& c) {
    auto link = comm::comm_exchanges().stage_link(c, 1 - c.rank(), c.rank() == 0 ? 8 : 9, {}, 7);
    link->set_step(0);
    if (c.rank() == 0) {
      link->send_forward(Tensor(2, 8), 0);
      link->wait_sends();
    } else {
      REQUIRE_THROWS_WITH(link->recv_forward(0), Catch::Contains("pipeline boundary: rank 0 sent a bad activation "
                                                                 "message: 8 columns, this boundary carries 9"));
    }
  });
}
