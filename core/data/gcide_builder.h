// Builds an extreme-classification data set from the GCIDE dictionary (Debian's dict-gcide): the
// reverse-dictionary task "which word does this definition define?". Each definition (numbered
// sense, see gcide_text.h) is a point; its features are its words, tf-idf weighted and L2
// normalized, over a vocabulary of words used by at least `min_count` definitions; its labels are
// its article's headwords (several where one article defines several spellings, "Banc, Bancus,
// Bank"). The headwords themselves are removed from their own definitions, or the task would be a
// lookup. A seeded split (data::split) keeps every test label present in training.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dataset.h"
#include "core/data/dictd_file.h"

namespace frugal::data {

struct GcideOptions {
  uint32_t min_count = 3;     // definitions a word must appear in to become a feature
  double max_df = 0.2;        // ... and at most this share of them (drops "the", "of", "or", ...)
  // Keep only headwords defined by at least this many definitions (1: all). Most headwords have a
  // single definition, which can only ever be in training; raising this trades label count for
  // points per label.
  uint32_t min_label_points = 1;
  double test_fraction = 0.2;
  uint64_t seed = 1;
  void validate() const;
};

struct GcideSet {
  Dataset all;                  // every point, in dictionary order (sorted by headword)
  Dataset train, test;          // the seeded split of `all`
  std::vector<std::string> feature_names, label_names;  // id -> word, id -> headword (lower case)
  size_t articles = 0, articles_without_headword = 0;
  size_t definitions = 0, definitions_without_features = 0;  // the latter are left out
  size_t definitions_of_rare_labels = 0;  // left out: all their labels have < min_label_points points
};

GcideSet build_gcide(const DictdFile& dict, const GcideOptions& options);

}  // namespace frugal::data
