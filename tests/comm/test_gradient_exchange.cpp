// DCT-DP gradient exchange over in-process ranks: keep = 1 is the exact sum of the replicas'
// gradients; with keep < 1 the result is the sum of what each replica's thresholder sent and
// error feedback conserves mass over steps; the dense fallback agrees with the sparse path; every
// rank ends with bitwise the same result; payload accounting matches the messages.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "comm/codec.h"
#include "comm/dct/gradient_exchange.h"
#include "comm/local_communicator.h"
#include "comm/replica_reducer.h"
#include "comm/dct/thresholder.h"
#include "core/rng.h"

using namespace frugal;
using namespace frugal::comm;

namespace {

struct Grad {
  std::vector<uint32_t> rows;
  Tensor values;
};

// Rank `rank`'s gradient at `step`: `touched` random distinct rows of `total_rows`, normal values.
Grad make_grad(int rank, int step, size_t total_rows, size_t cols, size_t touched) {
  Rng rng = Rng(99).split(static_cast<uint64_t>(rank) * 1000 + static_cast<uint64_t>(step));
  std::vector<uint32_t> all(total_rows);
  for (size_t i = 0; i < total_rows; ++i) all[i] = static_cast<uint32_t>(i);
  for (size_t i = 0; i < touched; ++i) std::swap(all[i], all[i + rng.below(total_rows - i)]);
  Grad g;
  g.rows.assign(all.begin(), all.begin() + touched);
  std::sort(g.rows.begin(), g.rows.end());
  g.values = Tensor(touched, cols);
  for (float& x : g.values.span()) x = rng.normal();
  return g;
}

uint64_t seed_of(int rank) { return Rng(7).split(static_cast<uint64_t>(rank)).next_u64(); }

struct Result {
  std::vector<uint32_t> rows;
  std::vector<float> values;
  bool operator==(const Result& o) const {  // bitwise, so -0 != +0 and NaN payloads count
    return rows == o.rows && values.size() == o.values.size() &&
           std::memcmp(values.data(), o.values.data(), values.size() * sizeof(float)) == 0;
  }
};
Result result_of(const std::vector<uint32_t>& rows, const Tensor& values) {
  return {rows, std::vector<float>(values.span().begin(), values.span().end())};
}

// Sparse messages (flat indices) summed in rank order, the first contribution taken as is: the
// order GradientExchange documents, so the comparison can be bitwise.
Result merge(const std::vector<std::pair<std::vector<uint32_t>, std::vector<float>>>& per_rank, size_t cols) {
  std::map<uint32_t, float> sum;
  for (const auto& [idx, val] : per_rank)
    for (size_t j = 0; j < idx.size(); ++j) {
      auto [it, fresh] = sum.emplace(idx[j], val[j]);
      if (!fresh) it->second += val[j];
    }
  Result r;
  for (const auto& [i, v] : sum) {
    const auto row = static_cast<uint32_t>(i / cols);
    if (r.rows.empty() || r.rows.back() != row) {
      r.rows.push_back(row);
      r.values.resize(r.values.size() + cols, 0.0f);
    }
    r.values[(r.rows.size() - 1) * cols + i % cols] = v;
  }
  return r;
}

// Every rank's results, step by step, must be bitwise those of rank 0.
void require_identical(const std::vector<std::vector<Result>>& out) {
  for (size_t r = 1; r < out.size(); ++r) {
    REQUIRE(out[r].size() == out[0].size());
    for (size_t s = 0; s < out[0].size(); ++s) {
      INFO("rank " << r << " step " << s);
      REQUIRE(out[r][s] == out[0][s]);
    }
  }
}

}  // namespace

TEST_CASE("dp exchange: keep = 1 gives the exact sum of the replicas' gradients over the union of rows") {
  const size_t rows = 1000, cols = 8, touched = 30;
  const int steps = 3;
  for (const int p : {2, 3, 4}) {
    std::vector<std::vector<Result>> out(p), reduced(p);
    std::vector<uint64_t> fallbacks(p);
    run_local(p, [&](Communicator& c) {
      GradientExchange ex({.keep = 1.0f, .seed = seed_of(c.rank())}, rows, cols, "w");
      for (int s = 0; s < steps; ++s) {
        Grad g = make_grad(c.rank(), s, rows, cols, touched);
        ex.exchange(c, g.rows, g.values);
        out[c.rank()].push_back(result_of(g.rows, g.values));
        if (p == 2) {  // the uncompressed reference: an all-reduce over the union of touched rows
          std::vector<uint32_t> uni;
          for (int r = 0; r < p; ++r) {
            const Grad o = make_grad(r, s, rows, cols, touched);
            uni.insert(uni.end(), o.rows.begin(), o.rows.end());
          }
          std::sort(uni.begin(), uni.end());
          uni.erase(std::unique(uni.begin(), uni.end()), uni.end());
          const Grad mine = make_grad(c.rank(), s, rows, cols, touched);
          Tensor dense(uni.size(), cols);
          for (size_t k = 0; k < mine.rows.size(); ++k) {
            const size_t at = std::lower_bound(uni.begin(), uni.end(), mine.rows[k]) - uni.begin();
            std::memcpy(dense.row(at), mine.values.row(k), cols * sizeof(float));
          }
          c.all_reduce(dense.span()).wait();
          reduced[c.rank()].push_back(result_of(uni, dense));
        }
      }
      fallbacks[c.rank()] = ex.dense_fallbacks();
    });
    INFO(p << " ranks");
    require_identical(out);
    REQUIRE(fallbacks[0] == 0);
    for (int s = 0; s < steps; ++s) {
      std::vector<std::pair<std::vector<uint32_t>, std::vector<float>>> msgs;
      std::map<uint32_t, double> exact;
      for (int r = 0; r < p; ++r) {
        const Grad g = make_grad(r, s, rows, cols, touched);
        auto& [idx, val] = msgs.emplace_back();
        for (size_t k = 0; k < g.rows.size(); ++k)
          for (size_t j = 0; j < cols; ++j) {
            idx.push_back(static_cast<uint32_t>(g.rows[k] * cols + j));
            val.push_back(g.values.at(k, j));
            exact[g.rows[k] * cols + j] += g.values.at(k, j);
          }
      }
      const Result expected = merge(msgs, cols);
      REQUIRE(out[0][s] == expected);
      for (const auto& [i, v] : exact) {
        const size_t at = std::lower_bound(expected.rows.begin(), expected.rows.end(), i / cols) - expected.rows.begin();
        REQUIRE(out[0][s].values[at * cols + i % cols] == Approx(v).margin(1e-5));
      }
      if (p == 2) REQUIRE(out[0][s] == reduced[0][s]);  // bitwise the uncompressed all-reduce
    }
  }
}

TEST_CASE("dp exchange: keep < 1 sums what each replica sent; sent + residuals conserve the gradients") {
  const size_t rows = 2000, cols = 16, touched = 100;
  const int steps = 6;
  for (const auto wire : {ValueType::f32, ValueType::bf16}) {
    for (const int p : {2, 3, 4}) {
      INFO(p << " ranks, wire " << static_cast<int>(wire));
      const DpCompression base{.keep = 0.05f, .reestimate_every = 2, .sample_size = 500, .wire = wire};
      std::vector<std::vector<Result>> out(p);
      std::vector<std::vector<float>> residual(p);
      std::vector<uint64_t> fallbacks(p), sent_bytes(p), uncompressed(p);
      run_local(p, [&](Communicator& c) {
        DpCompression o = base;
        o.seed = seed_of(c.rank());
        GradientExchange ex(o, rows, cols, "w");
        for (int s = 0; s < steps; ++s) {
          Grad g = make_grad(c.rank(), s, rows, cols, touched);
          ex.exchange(c, g.rows, g.values);
          out[c.rank()].push_back(result_of(g.rows, g.values));
        }
        residual[c.rank()].assign(ex.thresholder().residual().begin(), ex.thresholder().residual().end());
        fallbacks[c.rank()] = ex.dense_fallbacks();
        sent_bytes[c.rank()] = ex.payload_sent();
        uncompressed[c.rank()] = ex.payload_uncompressed();
      });
      require_identical(out);

      // Shadow thresholders with the same options and inputs send what each rank sent.
      std::vector<Thresholder> shadow;
      for (int r = 0; r < p; ++r)
        shadow.emplace_back(ThresholdOptions{.keep = base.keep, .reestimate_every = base.reestimate_every,
                                             .exact = base.exact_tau, .sample_size = base.sample_size,
                                             .seed = seed_of(r)}, rows * cols);
      std::vector<double> gradients(rows * cols, 0.0), delivered(rows * cols, 0.0);
      std::vector<uint64_t> expected_bytes(p, 0);
      for (int s = 0; s < steps; ++s) {
        std::vector<std::pair<std::vector<uint32_t>, std::vector<float>>> msgs(p);
        for (int r = 0; r < p; ++r) {
          const Grad g = make_grad(r, s, rows, cols, touched);
          for (size_t k = 0; k < g.rows.size(); ++k)
            for (size_t j = 0; j < cols; ++j) gradients[g.rows[k] * cols + j] += g.values.at(k, j);
          shadow[r].compress_rows(cols, g.rows, g.values.data(), wire, msgs[r].first, msgs[r].second);
          // One tiny all-reduce (2 floats, ring model) and the message to each peer.
          expected_bytes[r] += 2 * (p - 1) * 8 / p + sparse_encoded_bytes(rows * cols, msgs[r].first, wire) * (p - 1);
        }
        INFO("step " << s);
        REQUIRE(out[0][s] == merge(msgs, cols));  // sparse path: same order, bitwise
        for (size_t k = 0; k < out[0][s].rows.size(); ++k)
          for (size_t j = 0; j < cols; ++j)
            delivered[out[0][s].rows[k] * cols + j] += out[0][s].values[k * cols + j];
      }
      for (int r = 0; r < p; ++r) {
        REQUIRE(std::equal(residual[r].begin(), residual[r].end(), shadow[r].residual().begin()));
        for (size_t i = 0; i < rows * cols; ++i) delivered[i] += residual[r][i];
        REQUIRE(fallbacks[r] == 0);
        REQUIRE(sent_bytes[r] == expected_bytes[r]);
        REQUIRE(uncompressed[r] == steps * (2 * (p - 1) * rows * cols * 4 / p));
      }
      // Only the summation order differs between the two sides.
      for (size_t i = 0; i < rows * cols; ++i) REQUIRE(delivered[i] == Approx(gradients[i]).margin(1e-4));
    }
  }
}

TEST_CASE("dp exchange: a dense-ish gradient takes the dense fallback, which agrees with the sparse path") {
  // Rank r touches rows r .. r+44; rank p-1's last row is all zeros and nobody else touches it: it
  // must still come back (keep = 1 sends zeros). The same rows of a 5000-row parameter go sparse.
  const size_t cols = 16, touched = 45;
  for (const int p : {2, 3, 4}) {
    INFO(p << " ranks");
    auto grad = [&](int rank) {
      Grad g;
      for (size_t k = 0; k < touched; ++k) g.rows.push_back(static_cast<uint32_t>(rank + k));
      g.values = make_grad(rank, 0, touched, cols, touched).values;
      if (rank == p - 1) std::fill(g.values.row(touched - 1), g.values.row(touched - 1) + cols, 0.0f);
      return g;
    };
    std::vector<std::vector<Result>> dense(p), sparse(p);
    std::vector<uint64_t> dense_fallbacks(p), sparse_fallbacks(p), dense_sent(p);
    run_local(p, [&](Communicator& c) {
      GradientExchange small({.keep = 1.0f, .seed = seed_of(c.rank())}, 50, cols, "small");
      GradientExchange large({.keep = 1.0f, .seed = seed_of(c.rank())}, 5000, cols, "large");
      Grad a = grad(c.rank()), b = grad(c.rank());
      small.exchange(c, a.rows, a.values);
      large.exchange(c, b.rows, b.values);
      dense[c.rank()].push_back(result_of(a.rows, a.values));
      sparse[c.rank()].push_back(result_of(b.rows, b.values));
      dense_fallbacks[c.rank()] = small.dense_fallbacks();
      sparse_fallbacks[c.rank()] = large.dense_fallbacks();
      dense_sent[c.rank()] = small.payload_sent();
    });
    require_identical(dense);
    require_identical(sparse);
    REQUIRE(dense_fallbacks[0] == 1);
    REQUIRE(sparse_fallbacks[0] == 0);
    // The fallback's payload: the dense parameter plus one flag per row, ring model, plus the sizes.
    REQUIRE(dense_sent[0] == 2 * (p - 1) * 8 / p + 2 * (p - 1) * ((50 * cols + 50) * 4) / p);
    const Result& d = dense[0][0];
    const Result& s = sparse[0][0];
    REQUIRE(d.rows == s.rows);
    REQUIRE(d.rows.size() == touched + p - 1);  // rows 0 .. touched + p - 2, the zero row included
    REQUIRE(d.rows.back() == touched + p - 2);
    for (size_t i = 0; i < d.values.size(); ++i) REQUIRE(d.values[i] == Approx(s.values[i]).margin(1e-5));
    for (size_t j = 0; j < cols; ++j) REQUIRE(d.values[(d.rows.size() - 1) * cols + j] == 0.0f);
  }
}

TEST_CASE("dp exchange: payload accounting; keep = 0.01 on a dense parameter compresses > 20x") {
  const size_t rows = 200, cols = 64;
  for (const int p : {2, 4}) {
    std::vector<uint64_t> sent(p), uncompressed(p), exchanges(p);
    run_local(p, [&](Communicator& c) {
      GradientExchange ex({.keep = 0.01f, .reestimate_every = 1, .exact_tau = true, .seed = seed_of(c.rank())},
                          rows, cols, "w");
      for (int s = 0; s < 3; ++s) {
        Grad g = make_grad(c.rank(), s, rows, cols, rows);  // every row touched
        ex.exchange(c, g.rows, g.values);
      }
      sent[c.rank()] = ex.payload_sent();
      uncompressed[c.rank()] = ex.payload_uncompressed();
      exchanges[c.rank()] = ex.exchanges();
    });
    INFO(p << " ranks: sent " << sent[0] << ", uncompressed " << uncompressed[0]);
    REQUIRE(exchanges[0] == 3);
    REQUIRE(uncompressed[0] == 3 * (2 * (p - 1) * rows * cols * 4 / p));
    REQUIRE(sent[0] > 0);
    REQUIRE(static_cast<double>(uncompressed[0]) / static_cast<double>(sent[0]) > 20.0);
  }
}

TEST_CASE("dp exchange: one rank returns what it sent; a peer's bad message names the exchange and the rank") {
  run_local(1, [](Communicator& c) {
    GradientExchange ex({.keep = 1.0f}, 10, 4, "w");
    Grad g = make_grad(0, 0, 10, 4, 3);
    const Grad copy = make_grad(0, 0, 10, 4, 3);
    ex.exchange(c, g.rows, g.values);
    REQUIRE(g.rows == copy.rows);
    REQUIRE(std::equal(g.values.span().begin(), g.values.span().end(), copy.values.span().begin()));
    REQUIRE(ex.payload_sent() == 0);
  });

  // Rank 1 speaks bf16 to an f32 rank 0 (and the reverse): both refuse the other's message.
  REQUIRE_THROWS_WITH(
      run_local(2, [](Communicator& c) {
        GradientExchange ex({.keep = 1.0f, .wire = c.rank() == 0 ? ValueType::f32 : ValueType::bf16}, 100, 4, "emb");
        Grad g = make_grad(c.rank(), 0, 100, 4, 5);
        ex.exchange(c, g.rows, g.values);
      }),
      Catch::Contains("gradient exchange of 'emb'") && Catch::Contains("bad message from rank"));

  REQUIRE_THROWS(GradientExchange({.keep = 1.5f}, 10, 4));
  REQUIRE_THROWS(GradientExchange({}, 70000, 70000));  // 4.9e9 entries: beyond 32-bit indices
}

// Three parameters of the given shapes and names, and the pointer list a reducer takes.
struct ThreeParams {
  std::vector<Parameter> params;
  std::vector<Parameter*> pointers;
  ThreeParams(const size_t (&shapes)[3][2], const char* const (&names)[3]) {
    for (size_t i = 0; i < 3; ++i) params.push_back({names[i], Tensor(shapes[i][0], shapes[i][1]), {}});
    for (Parameter& p : params) pointers.push_back(&p);
  }
};

TEST_CASE("dp reducer: several parameters' exchanges fused into two collectives give the per-parameter bits") {
  // Three parameters: "a" thresholded (sparse path), "b" at keep 1 over every row (the dense
  // fallback), "c" with no touched rows (nothing to exchange). Three ranks, three steps.
  const DpCompression options{.keep = 0.1f, .seed = 5, .per_parameter = {{"b", 1.0f}}};
  const size_t shapes[3][2] = {{200, 4}, {50, 8}, {30, 2}};
  const char* names[3] = {"a", "b", "c"};
  std::vector<std::vector<Result>> fused(3), separate(3);
  std::vector<uint64_t> fused_payload(3), separate_payload(3);
  std::mutex mu;
  run_local(3, [&](Communicator& c) {
    ThreeParams set(shapes, names);
    std::vector<Parameter>& params = set.params;
    const std::vector<Parameter*>& pointers = set.pointers;
    const auto reducer = make_replica_reducer(c, pointers, {.mode = ReduceMode::thresholded, .dp = options});
    std::vector<std::unique_ptr<GradientExchange>> one_by_one;
    for (size_t i = 0; i < 3; ++i) {
      DpCompression o = options;  // the seed and keep the reducer gives parameter i
      o.seed = Rng(options.seed).split(static_cast<uint64_t>(c.rank())).split(i).next_u64();
      o.keep = options.keep_for(names[i]);
      one_by_one.push_back(std::make_unique<GradientExchange>(o, shapes[i][0], shapes[i][1], names[i]));
    }
    std::vector<Result> mine_fused, mine_separate;
    for (int step = 0; step < 3; ++step) {
      const size_t touched[3] = {20, shapes[1][0], 0};
      for (size_t i = 0; i < 3; ++i) {
        Grad g = make_grad(c.rank(), step * 3 + static_cast<int>(i), shapes[i][0], shapes[i][1], touched[i]);
        params[i].grad.rows = g.rows;
        params[i].grad.values = g.values;
        one_by_one[i]->exchange(c, g.rows, g.values);
        mine_separate.push_back(result_of(g.rows, g.values));
      }
      reducer->reduce();
      for (size_t i = 0; i < 3; ++i) mine_fused.push_back(result_of(params[i].grad.rows, params[i].grad.values));
    }
    uint64_t separate_sent = 0;
    for (const auto& e : one_by_one) separate_sent += e->payload_sent();
    REQUIRE(one_by_one[1]->dense_fallbacks() == 3);
    std::lock_guard<std::mutex> lock(mu);
    fused[c.rank()] = mine_fused;
    separate[c.rank()] = mine_separate;
    fused_payload[c.rank()] = reducer->payload_sent();
    separate_payload[c.rank()] = separate_sent;
  });
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    REQUIRE(fused[r] == separate[r]);
    // The same collectives' bytes, plus each gathered message's 8-byte length to the 2 peers (3 steps).
    REQUIRE(fused_payload[r] == separate_payload[r] + 3 * 8 * 2);
  }
  REQUIRE(fused[0][0].rows.size() > 0);
  REQUIRE(fused[0][2].rows.empty());

  // A rank whose parameter has other columns: its message does not decode, and the error names the
  // parameter and the rank.
  REQUIRE_THROWS_WITH(run_local(2, [&](Communicator& c) {
                        Parameter p{"emb", Tensor(100, c.rank() == 0 ? 4 : 5), {}};
                        const auto reducer = make_replica_reducer(c, {&p}, {.mode = ReduceMode::thresholded,
                                                                             .dp = {.keep = 0.5f}});
                        const Grad g = make_grad(c.rank(), 0, 100, p.value.cols(), 5);
                        p.grad.rows = g.rows;
                        p.grad.values = g.values;
                        reducer->reduce();
                      }),
                      Catch::Contains("gradient exchange of 'emb'") && Catch::Contains("bad message from rank"));
}

TEST_CASE("touched-rows reducer: every parameter's union of rows summed in rank order, in two collectives") {
  const size_t shapes[3][2] = {{40, 3}, {10, 5}, {7, 2}};
  const char* names[3] = {"a", "b", "c"};
  std::vector<std::vector<Result>> out(3);
  std::vector<std::vector<std::pair<std::vector<uint32_t>, std::vector<float>>>> sent(3);  // per param, per rank
  for (auto& s : sent) s.resize(3);
  std::vector<uint64_t> traffic(3);
  std::mutex mu;
  run_local(3, [&](Communicator& c) {
    ThreeParams set(shapes, names);
    std::vector<Parameter>& params = set.params;
    const std::vector<Parameter*>& pointers = set.pointers;
    const auto reducer = make_replica_reducer(c, pointers, {.mode = ReduceMode::touched_rows});
    const size_t touched[3] = {6, 10, c.rank() == 1 ? 2u : 0u};  // "c": only rank 1 touches it
    for (size_t i = 0; i < 3; ++i) {
      const Grad g = make_grad(c.rank(), 40 + static_cast<int>(i), shapes[i][0], shapes[i][1], touched[i]);
      params[i].grad.rows = g.rows;
      params[i].grad.values = g.values;
      std::vector<uint32_t> flat;
      for (const uint32_t r : g.rows)
        for (size_t col = 0; col < shapes[i][1]; ++col) flat.push_back(static_cast<uint32_t>(r * shapes[i][1] + col));
      std::lock_guard<std::mutex> lock(mu);
      sent[i][c.rank()] = {flat, std::vector<float>(g.values.span().begin(), g.values.span().end())};
    }
    const uint64_t messages_before = c.stats().total().messages_sent;
    reducer->reduce();
    std::lock_guard<std::mutex> lock(mu);
    for (size_t i = 0; i < 3; ++i) out[c.rank()].push_back(result_of(params[i].grad.rows, params[i].grad.values));
    traffic[c.rank()] = c.stats().total().messages_sent - messages_before;
  });
  require_identical(out);
  for (size_t i = 0; i < 3; ++i) {
    INFO("parameter " << names[i]);
    // The union's rows, each the sum over the ranks that touched it (0 + x is x: the ranks that
    // did not touch a row add zeros first).
    REQUIRE(out[0][i] == merge(sent[i], shapes[i][1]));
  }
  REQUIRE(out[0][2].rows.size() == 2);
  // Two collectives whatever the number of parameters: in a 3-rank direct exchange each sends its
  // 2 peers one message per collective.
  REQUIRE(traffic[0] == 2 * 2);

  REQUIRE_THROWS_WITH(run_local(2, [&](Communicator& c) {
                        Parameter a{"a", Tensor(10, 2), {}}, b{"b", Tensor(10, 2), {}};
                        std::vector<Parameter*> params{&a};
                        if (c.rank() == 1) params.push_back(&b);  // a rank with another model
                        const auto reducer = make_replica_reducer(c, params, {.mode = ReduceMode::touched_rows});
                        reducer->reduce();
                      }),
                      Catch::Contains("gradient sum") && Catch::Contains("rank"));
}
