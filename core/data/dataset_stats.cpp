#include "core/data/dataset_stats.h"

#include <algorithm>
#include <bit>

#include <fmt/format.h>

namespace frugal::data {

DatasetStats compute_stats(const Dataset& data) {
  DatasetStats s;
  s.points = data.size();
  s.features = data.num_features;
  s.labels = data.num_labels;
  s.average_nonzeros = data.average_nonzeros();
  s.average_labels = data.average_labels();
  // Counted in arrays of the declared sizes where those are no larger than the ids themselves (one
  // pass: sorting the 53M feature ids of a 1.7M-point set took seconds of every run's start), else
  // over the ids that occur (sorted runs): a header may declare 2^32 - 1 labels for a file that uses ten.
  const auto modest = [](uint64_t declared, uint64_t entries) { return declared <= std::max<uint64_t>(1 << 20, entries); };
  const auto distinct = [](std::vector<uint32_t> ids, std::vector<uint64_t>* runs) {
    std::sort(ids.begin(), ids.end());
    size_t n = 0;
    for (size_t i = 0; i < ids.size();) {
      size_t j = i;
      while (j < ids.size() && ids[j] == ids[i]) ++j;
      if (runs != nullptr) runs->push_back(j - i);
      ++n;
      i = j;
    }
    return n;
  };
  if (modest(data.num_features, data.points.feature_ids.size())) {
    std::vector<uint8_t> seen(data.num_features, 0);
    for (const uint32_t f : data.points.feature_ids)
      if (f < data.num_features) seen[f] = 1;
    s.features_used = static_cast<size_t>(std::count(seen.begin(), seen.end(), uint8_t{1}));
  } else {
    std::vector<uint32_t> seen_features;
    for (const uint32_t f : data.points.feature_ids)
      if (f < data.num_features) seen_features.push_back(f);
    s.features_used = distinct(std::move(seen_features), nullptr);
  }
  const bool count_labels = modest(data.num_labels, data.points.label_ids.size());
  std::vector<uint32_t> seen_labels;
  std::vector<uint32_t> label_points(count_labels ? data.num_labels : 0, 0);
  std::vector<uint64_t> label_freq;  // the points of each label that occurs
  size_t same = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    const auto labels = data.points.labels_of(i);
    s.points_without_labels += labels.empty();
    s.points_without_features += data.points.features_of(i).empty();
    for (const uint32_t l : labels)
      if (l < data.num_labels) {
        if (count_labels)
          ++label_points[l];
        else
          seen_labels.push_back(l);
      }
    if (i > 0 && !labels.empty()) {
      const auto prev = data.points.labels_of(i - 1);
      same += !prev.empty() && prev[0] == labels[0];
    }
  }
  if (count_labels) {
    for (const uint32_t n : label_points)
      if (n > 0) label_freq.push_back(n);
  } else {
    distinct(std::move(seen_labels), &label_freq);
  }
  s.adjacent_same_label = data.size() > 1 ? static_cast<double>(same) / static_cast<double>(data.size() - 1) : 0.0;
  add_label_stats(s, label_freq);
  return s;
}

void add_label_stats(DatasetStats& s, const std::vector<uint64_t>& label_freq) {
  s.max_label_frequency = label_freq.empty() ? 0 : *std::max_element(label_freq.begin(), label_freq.end());
  s.labels_used = label_freq.size();
  // Bins: 0, 1, 2, 3-4, 5-8, ...: bin b >= 1 holds frequencies in (2^(b-2), 2^(b-1)].
  const auto bin_of = [](uint64_t f) { return f == 0 ? 0 : 1 + static_cast<size_t>(std::bit_width(f - 1)); };
  s.label_histogram.resize(bin_of(s.max_label_frequency) + 1);
  for (size_t b = 0; b < s.label_histogram.size(); ++b) {
    s.label_histogram[b].lo = b <= 1 ? b : (uint64_t{1} << (b - 2)) + 1;
    s.label_histogram[b].hi = b <= 1 ? b : uint64_t{1} << (b - 1);
  }
  s.label_histogram[0].labels = s.labels - s.labels_used;
  for (const uint64_t f : label_freq) ++s.label_histogram[bin_of(f)].labels;
  // Occurrences by support: label_freq[l] occurrences have support label_freq[l].
  std::vector<uint64_t> supports;
  uint64_t occurrences = 0, rare = 0;
  for (const uint64_t f : label_freq)
    if (f > 0) {
      supports.push_back(f);
      occurrences += f;
      rare += f <= 2 ? f : 0;
    }
  std::sort(supports.begin(), supports.end());
  for (uint64_t seen = 0; const uint64_t f : supports)
    if ((seen += f) * 2 >= occurrences) {
      s.median_label_support = f;
      break;
    }
  s.rare_label_share = occurrences > 0 ? static_cast<double>(rare) / static_cast<double>(occurrences) : 0.0;
}

std::string DatasetStats::format(const std::string& indent) const {
  std::string out;
  const auto line = [&](const std::string& text) { out += indent + text + "\n"; };
  line(fmt::format("points               {}", points));
  line(fmt::format("features             {} ({} occur)", features, features_used));
  line(fmt::format("labels               {} ({} occur)", labels, labels_used));
  line(fmt::format("nonzeros per point   {:.2f}", average_nonzeros));
  line(fmt::format("labels per point     {:.2f}", average_labels));
  line(fmt::format("points per label     {:.2f} (of those that occur; most frequent: {})",
                   labels_used ? average_labels * static_cast<double>(points) / static_cast<double>(labels_used) : 0.0,
                   max_label_frequency));
  line(fmt::format("label support        median {} training points behind a label occurrence; {:.1f}% of "
                   "occurrences have a label with <= 2 points",
                   median_label_support, 100.0 * rare_label_share));
  line(fmt::format("without labels       {} points", points_without_labels));
  line(fmt::format("without features     {} points", points_without_features));
  line(fmt::format("neighbours sharing their first label: {:.1f}%{}", 100.0 * adjacent_same_label,
                   looks_sorted() ? " (sorted by label: shuffle before taking a prefix or a sequential split)" : ""));
  line("label frequency histogram (points per label: labels)");
  for (const HistogramBin& b : label_histogram) {
    if (b.labels == 0 && b.lo != 0) continue;  // empty bins are noise on a log scale
    const std::string range = b.lo == b.hi ? fmt::format("{}", b.lo) : fmt::format("{}-{}", b.lo, b.hi);
    line(fmt::format("  {:>13}: {}", range, b.labels));
  }
  return out;
}

}  // namespace frugal::data
