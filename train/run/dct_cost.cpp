#include "train/run/dct_cost.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "core/rng.h"
#include "core/step_profile.h"
#include "core/tensor.h"

namespace frugal::run {

namespace {
// Seconds `collective` takes on the slowest rank of `group` (every rank gets the same figure).
template <typename F>
double slowest_seconds(comm::Communicator& group, F&& collective) {
  const auto start = std::chrono::steady_clock::now();
  collective();
  std::vector<float> seconds{static_cast<float>(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count())};
  group.all_reduce(seconds, comm::ReduceOp::max).wait();
  return seconds[0];
}
}  // namespace

double probe_link_rate(comm::Communicator& group, size_t bytes) {
  std::vector<std::vector<std::byte>> all;
  group.all_gather_bytes(std::vector<std::byte>(64), all).wait();  // connections open, peers ready
  const size_t peers = static_cast<size_t>(std::max(1, group.size() - 1));
  // A first message pays for buffers and scheduling that a 1 MB gather on a fast link does not
  // amortize (loopback measured 42 MB/s, like a 1 Gbit link): the payload doubles until a gather
  // takes 50 ms (or reaches 16 MB a peer), and the last one gives the rate. Every rank takes the
  // same decisions from the slowest rank's time.
  size_t each = std::max<size_t>(size_t{64} << 10, bytes / peers);
  for (;;) {
    const std::vector<std::byte> payload(each);
    const double seconds = slowest_seconds(group, [&] { group.all_gather_bytes(payload, all).wait(); });
    if (seconds >= 0.05 || each >= (size_t{16} << 20)) {
      const double moved = static_cast<double>(each) * static_cast<double>(peers);
      return moved / std::max(seconds, 1e-9);
    }
    each *= 2;
  }
}

DctDpCost dct_dp_cost(const train::FitResult& fit, double link_bytes_per_s) {
  DctDpCost c;
  const double steps = static_cast<double>(std::max<size_t>(1, fit.steps));
  c.link_bytes_per_s = link_bytes_per_s;
  c.cpu_seconds_per_step = fit.profile[profile::Phase::compress].seconds / steps;
  c.bytes_saved_per_step =
      (static_cast<double>(fit.dp_payload_touched) - static_cast<double>(fit.dp_payload_sent)) / steps;
  c.wire_seconds_saved_per_step = link_bytes_per_s > 0 ? c.bytes_saved_per_step / link_bytes_per_s : 0.0;
  return c;
}

nlohmann::json to_json(const DctDpCost& c) {
  return {{"link_bytes_per_s", c.link_bytes_per_s}, {"cpu_seconds_per_step", c.cpu_seconds_per_step},
          {"bytes_saved_per_step", c.bytes_saved_per_step},
          {"wire_seconds_saved_per_step", c.wire_seconds_saved_per_step}, {"pays", c.pays()}};
}

std::string does_not_pay_note(const DctDpCost& c, const std::string& flag) {
  return fmt::format("note: {} does not pay on this link: thresholding, encoding and merging cost {:.2f} ms of "
                     "CPU per step, and the {:.0f} bytes per step it saves against the exact exchange take {:.2f} ms "
                     "at the {:.0f} MB/s measured between the replicas; without {} the steps would be faster",
                     flag, 1e3 * c.cpu_seconds_per_step, c.bytes_saved_per_step, 1e3 * c.wire_seconds_saved_per_step,
                     c.link_bytes_per_s / 1e6, flag);
}

DpExchangeCost dp_exchange_cost(const train::FitResult& fit, double link_bytes_per_s) {
  DpExchangeCost c;
  const double steps = static_cast<double>(std::max<size_t>(1, fit.steps));
  c.link_bytes_per_s = link_bytes_per_s;
  c.wire_seconds_per_step =
      link_bytes_per_s > 0 ? static_cast<double>(fit.dp_payload_sent) / steps / link_bytes_per_s : 0.0;
  c.compute_seconds_per_step = std::max(0.0, (fit.seconds - fit.profile[profile::Phase::wait].seconds) / steps);
  return c;
}

nlohmann::json to_json(const DpExchangeCost& c) {
  return {{"link_bytes_per_s", c.link_bytes_per_s}, {"wire_seconds_per_step", c.wire_seconds_per_step},
          {"compute_seconds_per_step", c.compute_seconds_per_step}, {"would_pay", c.would_pay()}};
}

std::string would_pay_note(const DpExchangeCost& c) {
  return fmt::format("note: the data-parallel exchange outweighs the computation on this link: {:.2f} ms of wire a "
                     "step at the {:.0f} MB/s measured between the replicas against {:.2f} ms of compute; "
                     "--compress auto reached the uncompressed run's P@1 in 0.21-0.52 of its time at 100 Mbit-1 Gbit "
                     "on long-tail XMC sets (bench/REPORT.md, \"Compression that adapts\")",
                     1e3 * c.wire_seconds_per_step, c.link_bytes_per_s / 1e6, 1e3 * c.compute_seconds_per_step);
}

bool replicas_share_one_network(comm::Communicator& group) {
  // This machine's name and network namespace (the link /proc/self/ns/net names its inode).
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::error_code ec;
  const std::string id = std::string(host) + "|" + std::filesystem::read_symlink("/proc/self/ns/net", ec).string();
  std::vector<std::byte> mine(id.size());
  std::memcpy(mine.data(), id.data(), id.size());
  std::vector<std::vector<std::byte>> all;
  group.all_gather_bytes(mine, all).wait();
  return std::all_of(all.begin(), all.end(), [&](const std::vector<std::byte>& other) { return other == mine; });
}


CompressChoice probe_compress_choice(comm::Communicator& replicas, double link_bytes_per_s,
                                     const comm::DpCompression& auto_options) {
  // 1,024 rows of 128 (an XMC output layer's shape), 40 steps for the controller to settle from
  // keep 1 (5% a step), 10 timed: ~0.2 s on one core. A few fixed gradients in turn, so that making
  // them is not timed and every replica measures the same work.
  constexpr size_t kRows = 1024, kCols = 128, kSettle = 40, kTimed = 10, kGradients = 4;
  const int ranks = replicas.size();
  comm::GradientExchange exchange(auto_options, kRows, kCols, "compress-probe");
  Rng rng(0xc0de);
  std::vector<Tensor> gradients;
  for (size_t g = 0; g < kGradients; ++g) {
    Tensor& t = gradients.emplace_back(kRows, kCols);
    for (size_t i = 0; i < kRows * kCols; ++i) t.data()[i] = rng.normal();
  }
  std::vector<uint32_t> rows;
  Tensor values(kRows, kCols);
  double seconds = 0.0, message_bytes = 0.0;
  for (size_t step = 0; step < kSettle + kTimed; ++step) {
    rows.resize(kRows);
    for (size_t r = 0; r < kRows; ++r) rows[r] = static_cast<uint32_t>(r);
    values = gradients[step % kGradients];  // a deep copy: the exchange writes the sum into it
    const auto start = std::chrono::steady_clock::now();
    exchange.compress(std::max(ranks, 2), rows, values);
    // Every replica's message is decoded and merged: this one's, P times over.
    const std::vector<std::span<const std::byte>> parts(static_cast<size_t>(std::max(ranks, 2)), exchange.message());
    exchange.finish_sparse(parts, rows, values);
    if (step >= kSettle) {
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      message_bytes += static_cast<double>(exchange.message().size());
    }
  }
  std::vector<float> slowest{static_cast<float>(seconds)};  // summed over steps: the slowest replica's sum
  replicas.all_reduce(slowest, comm::ReduceOp::max).wait();
  const double entries = static_cast<double>(kRows * kCols * kTimed);
  CompressChoice c;
  c.replicas = ranks;
  c.link_bytes_per_s = link_bytes_per_s;
  c.keep = exchange.thresholder().keep();
  c.cpu_seconds_per_entry = static_cast<double>(slowest[0]) / entries;
  // The two exchanges themselves, timed on this link: the uncompressed one all-reduces 4 bytes an
  // entry, auto all-gathers its messages (the probe's bytes an entry). Sized up from 256k entries
  // until the all-reduce takes 50 ms (at most 4M), so that a fast link is timed past its start-up.
  const double message_per_entry = message_bytes / entries;
  for (size_t n = size_t{1} << 18;; n *= 2) {
    std::vector<float> dense(n, 1.0f);
    const double reduce = slowest_seconds(replicas, [&] { replicas.all_reduce(dense).wait(); });
    std::vector<std::vector<std::byte>> all;
    const std::vector<std::byte> message(static_cast<size_t>(message_per_entry * static_cast<double>(n)) + 1);
    const double gather = slowest_seconds(replicas, [&] { replicas.all_gather_bytes(message, all).wait(); });
    if (reduce >= 0.05 || n >= (size_t{1} << 22)) {
      c.wire_seconds_off_per_entry = reduce / static_cast<double>(n);
      c.wire_seconds_auto_per_entry = gather / static_cast<double>(n);
      break;
    }
  }
  return c;
}

nlohmann::json to_json(const CompressChoice& c) {
  return {{"replicas", c.replicas}, {"link_bytes_per_s", c.link_bytes_per_s}, {"keep", c.keep},
          {"cpu_ns_per_entry", 1e9 * c.cpu_seconds_per_entry},
          {"wire_ns_off_per_entry", 1e9 * c.wire_seconds_off_per_entry},
          {"wire_ns_auto_per_entry", 1e9 * c.wire_seconds_auto_per_entry}, {"pays", c.pays()},
          {"chosen", c.pays() ? "auto" : "off"}};
}

std::string compress_choice_note(const CompressChoice& c) {
  return fmt::format("compress link: {} between the {} replicas ({:.0f} MB/s measured): the uncompressed exchange "
                     "takes {:.1f} ns of wire per gradient entry, --compress auto's {:.1f} ns plus {:.1f} ns of CPU, "
                     "so {} (--compress off or auto fixes the choice)",
                     c.pays() ? "a slow link" : "a fast link", c.replicas, c.link_bytes_per_s / 1e6,
                     1e9 * c.wire_seconds_off_per_entry, 1e9 * c.wire_seconds_auto_per_entry,
                     1e9 * c.cpu_seconds_per_entry,
                     c.pays() ? "DCT-DP compresses (--compress auto)" : "the exchange stays uncompressed");
}

}  // namespace frugal::run
