// The GCIDE builder on a four-article excerpt of the real dictionary (fixtures/gcide): the
// expected definitions, headword labels (several for one article), vocabulary, tf-idf values and
// masking; a split that leaves no test label unseen; dictd index errors with file:line.
#include <catch2/catch.hpp>

#include "tests/data/error_of.h"
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "core/check.h"
#include "core/data/dictd_file.h"
#include "core/data/gcide_builder.h"
#include "core/data/gcide_text.h"

using namespace frugal::data;
using Catch::Contains;

namespace {

const std::string kDir = std::string(FRUGAL_TEST_DATA) + "/gcide";

const DictdFile& excerpt() {
  static const DictdFile d = DictdFile::open(kDir + "/gcide.index", kDir + "/gcide.dict");
  return d;
}

std::string article_of(const std::string& headword, size_t nth = 0) {
  for (const DictdEntry& e : excerpt().entries())
    if (e.headword == headword && nth-- == 0) return std::string(excerpt().text(e));
  FAIL("no entry " << headword);
  return "";
}

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

}  // namespace

TEST_CASE("gcide text: headwords, senses, sub-entries and markup") {
  const GcideArticle banc = parse_gcide_article(article_of("Banc"));
  CHECK(banc.headwords == std::vector<std::string>{"Banc", "Bancus", "Bank"});
  REQUIRE(banc.definitions.size() == 1);
  CHECK_THAT(banc.definitions[0], Contains("A bench; a high seat") && Contains("tribunal or court."));
  CHECK_THAT(banc.definitions[0], !Contains("full court") && !Contains("Webster"));  // sub-entry, source

  const GcideArticle bank = parse_gcide_article(article_of("Bank", 1));
  CHECK(bank.headwords == std::vector<std::string>{"Bank"});
  REQUIRE(bank.definitions.size() == 4);  // four numbered senses; "To bank a fire" is a sub-entry
  CHECK(gcide_words(bank.definitions[1]) == std::vector<std::string>{"to", "heap", "or", "pile", "up", "as", "to",
                                                                     "bank", "sand"});
  CHECK_THAT(bank.definitions[3], Contains("(Engineering)") && !Contains("embers"));

  const GcideArticle abandon = parse_gcide_article(article_of("Abandon"));
  CHECK(abandon.headwords == std::vector<std::string>{"Abandon"});
  REQUIRE(abandon.definitions.size() == 1);  // the etymology spans two header lines
  CHECK(gcide_words(abandon.definitions[0]) == std::vector<std::string>{"abandonment", "relinquishment"});

  CHECK(gcide_words(resolve_gcide_markup("A[\"e]ronautics b[a^][ng]k [1913 Webster] {Bank} \\Bank\\ en[thorn]")) ==
        std::vector<std::string>{"aeronautics", "bangk", "bank", "enth"});
}

TEST_CASE("gcide builder: points, labels, vocabulary and tf-idf of the excerpt") {
  const GcideSet s = build_gcide(excerpt(), {.min_count = 1, .max_df = 1.0, .test_fraction = 0.0});
  CHECK(s.articles == 4);
  CHECK(s.articles_without_headword == 0);
  CHECK(s.definitions == 7);  // Abandon n. 1, Banc 1, Bank v. t. 4, hindsight 1
  REQUIRE(s.all.size() == 7);
  CHECK(s.train.size() == 7);
  CHECK(s.test.size() == 0);
  CHECK(s.label_names == std::vector<std::string>{"abandon", "banc", "bancus", "bank", "hindsight"});
  CHECK(s.all.num_labels == 5);
  CHECK(s.feature_names.size() == 75);
  CHECK(std::is_sorted(s.feature_names.begin(), s.feature_names.end()));
  for (const char* w : {"relinquishment", "tribunal", "embank", "banked", "foresight", "to"}) CHECK(has(s.feature_names, w));
  // Masked headwords, sources, tags, etymologies, pronunciations and sub-entries are no features.
  for (const char* w : {"abandon", "banc", "bancus", "bank", "hindsight", "webster", "obs", "pjc", "wordnet",
                        "abandonner", "ll", "imp", "cus", "fire", "embers", "prius", "sarcasm"})
    CHECK_FALSE(has(s.feature_names, w));
  // The points follow the dictionary: Abandon, Banc (three labels), Bank x 4, hindsight.
  const auto labels = [&](size_t i) {
    const auto l = s.all.points.labels_of(i);
    return std::vector<uint32_t>(l.begin(), l.end());
  };
  CHECK(labels(0) == std::vector<uint32_t>{0});
  CHECK(labels(1) == std::vector<uint32_t>{1, 2, 3});
  for (size_t i = 2; i < 6; ++i) CHECK(labels(i) == std::vector<uint32_t>{3});
  CHECK(labels(6) == std::vector<uint32_t>{4});
  // "To heap or pile up; as, to bank sand." with idf = ln(8 / (1 + df)) + 1 over the 7 definitions:
  // df(to) = df(or) = 4, df(as) = 3, the rest 1; "to" counts twice; then L2 normalized.
  const auto ids = s.all.points.features_of(3);
  const auto vals = s.all.points.values_of(3);
  std::map<std::string, float> point;
  for (size_t j = 0; j < ids.size(); ++j) point[s.feature_names[ids[j]]] = vals[j];
  REQUIRE(point.size() == 7);
  CHECK(point["to"] == Approx(0.486974).epsilon(1e-4));
  CHECK(point["as"] == Approx(0.280448).epsilon(1e-4));
  CHECK(point["or"] == Approx(0.243487).epsilon(1e-4));
  for (const char* w : {"heap", "pile", "sand", "up"}) CHECK(point[w] == Approx(0.395259).epsilon(1e-4));
  for (size_t i = 0; i < s.all.size(); ++i) {
    double norm = 0;
    for (const float v : s.all.points.values_of(i)) norm += double{v} * v;
    CHECK(norm == Approx(1.0));
  }
}

TEST_CASE("gcide builder: min count and max share shape the vocabulary; emptied points and labels go") {
  const GcideSet s = build_gcide(excerpt(), {.min_count = 2, .max_df = 0.5, .test_fraction = 0.0});
  // df >= 2 and <= 3.5: "or", "of" and "to" (4 definitions each) are too common.
  CHECK(s.feature_names == std::vector<std::string>{"an", "as", "banked", "the", "with"});
  CHECK(s.definitions_without_features == 2);  // Abandon n. and Banc keep no word
  CHECK(s.all.size() == 5);
  CHECK(s.label_names == std::vector<std::string>{"bank", "hindsight"});
  CHECK(s.all.points.values_of(1).size() == 1);  // "to heap or pile up; as, ..." keeps only "as"
  CHECK(s.all.points.values_of(1)[0] == Approx(1.0f));
}

TEST_CASE("gcide builder: the split leaves no test label unseen in training") {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const GcideSet s = build_gcide(excerpt(), {.min_count = 1, .max_df = 1.0, .test_fraction = 0.5, .seed = seed});
    // Only "bank" has points to spare: the four senses of Bank v. t. can go, Banc's point must stay.
    CHECK(s.test.size() == 4);
    std::set<uint32_t> train(s.train.points.label_ids.begin(), s.train.points.label_ids.end());
    for (const uint32_t l : s.test.points.label_ids) CHECK(train.count(l) == 1);
    CHECK(s.train.size() + s.test.size() == 7);
  }
}

TEST_CASE("dictd: a gzip-compressed text reads the same; index errors name file:line") {
  const auto dir = std::filesystem::temp_directory_path() / ("frugal_dictd_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ifstream plain(kDir + "/gcide.dict", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(plain)), std::istreambuf_iterator<char>());
  const std::string gz = (dir / "gcide.dict.dz").string();
  gzFile f = gzopen(gz.c_str(), "wb");
  REQUIRE(f != nullptr);
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  CHECK(DictdFile::open(kDir + "/gcide.index", gz).articles().size() == 4);

  const auto index_with = [&](const std::string& second_line) {
    const std::string path = (dir / "bad.index").string();
    std::ofstream(path) << "Abandon\tBS\tCE\n" << second_line << "\n";
    return path;
  };
  const std::string dict = kDir + "/gcide.dict";
  CHECK_THAT(error_of([&] { DictdFile::open(index_with("Bank\tD!\tGU"), dict); }),
             Contains("bad.index:2") && Contains("'!' is not a base64 digit"));
  CHECK_THAT(error_of([&] { DictdFile::open(index_with("Bank\tDW"), dict); }),
             Contains("bad.index:2") && Contains("expected 'headword<TAB>offset<TAB>length'"));
  CHECK_THAT(error_of([&] { DictdFile::open(index_with("Bank\tZZZ\tGU"), dict); }),
             Contains("bad.index:2") && Contains("past the end"));
  CHECK_THAT(error_of([&] { DictdFile::open(kDir + "/gcide.index", (dir / "none.dict").string()); }),
             Contains("none.dict") && Contains("no such file"));
  // A long bad line (here 1 MB without tabs) is quoted truncated, with its length.
  const std::string long_error = error_of([&] { DictdFile::open(index_with(std::string(1 << 20, 'w')), dict); });
  CHECK_THAT(long_error, Contains("bad.index:2") && Contains("'wwww") && Contains("... (1048576 bytes)"));
  CHECK(long_error.size() < 200 + dir.string().size());
  std::filesystem::remove_all(dir);
}
