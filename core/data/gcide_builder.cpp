#include "core/data/gcide_builder.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include <fmt/format.h>

#include "core/check.h"
#include "core/data/dataset_split.h"
#include "core/data/gcide_text.h"

namespace frugal::data {
namespace {

// Interns strings as dense ids in order of first appearance.
class Interner {
 public:
  uint32_t id(const std::string& s) {
    const auto [it, added] = ids_.try_emplace(s, static_cast<uint32_t>(names_.size()));
    if (added) names_.push_back(s);
    return it->second;
  }
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::string> names_;
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

// Old id -> new id, numbering the kept names alphabetically (so features.txt and labels.txt read as
// sorted lists). Dropped names map to UINT32_MAX.
std::vector<uint32_t> alphabetical_ids(const std::vector<std::string>& names, const std::vector<bool>& keep,
                                       std::vector<std::string>& kept_names) {
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < names.size(); ++i)
    if (keep[i]) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return names[a] < names[b]; });
  std::vector<uint32_t> remap(names.size(), UINT32_MAX);
  kept_names.clear();
  for (uint32_t i = 0; i < order.size(); ++i) {
    remap[order[i]] = i;
    kept_names.push_back(names[order[i]]);
  }
  return remap;
}

struct Definition {
  std::vector<uint32_t> labels, words;  // interned ids
};

}  // namespace

void GcideOptions::validate() const {
  FRUGAL_CHECK(min_count >= 1, "GcideOptions::min_count must be >= 1");
  FRUGAL_CHECK(max_df > 0.0 && max_df <= 1.0,
               fmt::format("GcideOptions::max_df {}: expected a share in (0, 1]", max_df));
  SplitOptions{.test_fraction = test_fraction, .seed = seed}.validate();
}

GcideSet build_gcide(const DictdFile& dict, const GcideOptions& options) {
  options.validate();
  GcideSet out;
  Interner labels, words;
  std::vector<Definition> defs;
  for (const DictdEntry& entry : dict.articles()) {
    ++out.articles;
    const GcideArticle article = parse_gcide_article(dict.text(entry));
    if (article.headwords.empty()) {
      ++out.articles_without_headword;
      continue;
    }
    std::vector<uint32_t> article_labels;
    std::vector<std::string> masked;
    for (const std::string& h : article.headwords) {
      const std::string name = lower(h);
      const uint32_t id = labels.id(name);
      if (std::find(article_labels.begin(), article_labels.end(), id) == article_labels.end())
        article_labels.push_back(id);
      masked.push_back(name);
    }
    for (const std::string& text : article.definitions) {
      ++out.definitions;
      Definition d{.labels = article_labels, .words = {}};
      for (const std::string& w : gcide_words(text))
        if (std::find(masked.begin(), masked.end(), w) == masked.end()) d.words.push_back(words.id(w));
      defs.push_back(std::move(d));
    }
  }
  // Document frequencies decide the vocabulary; they and the idf weights use every definition
  // (no label information is involved, so nothing about the test labels leaks into training).
  std::vector<uint32_t> df(words.names().size(), 0);
  std::vector<uint32_t> last_seen(words.names().size(), UINT32_MAX);
  for (uint32_t i = 0; i < defs.size(); ++i)
    for (const uint32_t w : defs[i].words)
      if (last_seen[w] != i) {
        last_seen[w] = i;
        ++df[w];
      }
  const auto max_df = static_cast<double>(defs.size()) * options.max_df;
  std::vector<bool> keep_word(df.size());
  for (size_t w = 0; w < df.size(); ++w) keep_word[w] = df[w] >= options.min_count && df[w] <= max_df;
  const auto feature_of = alphabetical_ids(words.names(), keep_word, out.feature_names);
  const double n = static_cast<double>(defs.size());
  std::vector<float> idf(df.size());
  for (size_t w = 0; w < df.size(); ++w) idf[w] = static_cast<float>(std::log((1.0 + n) / (1.0 + df[w])) + 1.0);

  // Points: tf-idf over the vocabulary, L2 normalized; a definition left without a feature is no
  // point (nothing to predict from), and a label left without points is no label.
  std::vector<std::vector<std::pair<uint32_t, float>>> features(defs.size());
  std::vector<uint32_t> label_points(labels.names().size(), 0);
  for (size_t i = 0; i < defs.size(); ++i) {
    auto& f = features[i];
    for (const uint32_t w : defs[i].words)
      if (feature_of[w] != UINT32_MAX) f.emplace_back(feature_of[w], idf[w]);
    std::sort(f.begin(), f.end());
    // Merge repeats: tf * idf.
    size_t k = 0;
    for (size_t j = 0; j < f.size(); ++j) {
      if (k > 0 && f[k - 1].first == f[j].first) f[k - 1].second += f[j].second;
      else f[k++] = f[j];
    }
    f.resize(k);
    if (f.empty()) {
      ++out.definitions_without_features;
      continue;
    }
    for (const uint32_t l : defs[i].labels) ++label_points[l];
  }
  std::vector<bool> label_used(labels.names().size());
  for (size_t l = 0; l < label_used.size(); ++l) label_used[l] = label_points[l] >= std::max(options.min_label_points, 1u);
  const auto label_of = alphabetical_ids(labels.names(), label_used, out.label_names);

  out.all.num_features = static_cast<uint32_t>(out.feature_names.size());
  out.all.num_labels = static_cast<uint32_t>(out.label_names.size());
  out.all.source = "gcide";
  std::vector<uint32_t> ids, point_labels;
  std::vector<float> values;
  for (size_t i = 0; i < defs.size(); ++i) {
    if (features[i].empty()) continue;
    double norm = 0.0;
    for (const auto& [id, v] : features[i]) norm += static_cast<double>(v) * v;
    const auto scale = static_cast<float>(1.0 / std::sqrt(norm));
    ids.clear();
    values.clear();
    for (const auto& [id, v] : features[i]) {
      ids.push_back(id);
      values.push_back(v * scale);
    }
    point_labels.clear();
    for (const uint32_t l : defs[i].labels)
      if (label_of[l] != UINT32_MAX) point_labels.push_back(label_of[l]);
    if (point_labels.empty()) {
      ++out.definitions_of_rare_labels;
      continue;
    }
    std::sort(point_labels.begin(), point_labels.end());
    out.all.points.add_point(ids, values, point_labels);
  }
  Split s = split(out.all, {.test_fraction = options.test_fraction, .seed = options.seed});
  out.train = std::move(s.train);
  out.test = std::move(s.test);
  out.train.source = "gcide train";
  out.test.source = "gcide test";
  return out;
}

}  // namespace frugal::data
