// The XMC reader against small hand-written files in each convention of the repository's files as
// published (tests/data/fixtures/xmc), and the errors a malformed or 1-based file gives.
#include <catch2/catch.hpp>

#include "tests/data/error_of.h"

#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/data/dataset_stats.h"
#include "core/data/xmc_file.h"

using frugal::data::XmcFile;
using Catch::Contains;

namespace {

std::string fixture(const std::string& name) { return std::string(FRUGAL_TEST_DATA) + "/xmc/" + name; }

std::vector<uint32_t> labels(const frugal::data::Dataset& d, size_t i) {
  const auto l = d.points.labels_of(i);
  return {l.begin(), l.end()};
}

std::vector<uint32_t> features(const frugal::data::Dataset& d, size_t i) {
  const auto f = d.points.features_of(i);
  return {f.begin(), f.end()};
}

}  // namespace

TEST_CASE("xmc conventions: Amazon-670K (sorted by label, points without labels)") {
  const auto d = XmcFile::open(fixture("amazon_670k_style.txt"));
  REQUIRE(d.size() == 10);
  CHECK(d.num_features == 20);
  CHECK(d.num_labels == 6);
  CHECK(labels(d, 2) == std::vector<uint32_t>{0, 3});
  CHECK(labels(d, 6) == std::vector<uint32_t>{2, 4, 5});
  CHECK(labels(d, 8).empty());
  CHECK(features(d, 8) == std::vector<uint32_t>{6, 9});
  CHECK(d.points.values_of(8)[1] == Approx(0.6f));
  CHECK(labels(d, 9).empty());
  CHECK(features(d, 9) == std::vector<uint32_t>{10});
  const auto stats = frugal::data::compute_stats(d);
  CHECK(stats.points_without_labels == 2);
  CHECK(stats.looks_sorted());  // 5 of 9 neighbours share their first label
}

TEST_CASE("xmc conventions: Delicious-200K (long label lists, scientific notation)") {
  const auto d = XmcFile::open(fixture("delicious_200k_style.txt"));
  REQUIRE(d.size() == 3);
  CHECK(labels(d, 0).size() == 26);
  CHECK(labels(d, 0).back() == 25);
  CHECK(d.points.values_of(0)[3] == Approx(0.0125f));
  CHECK(d.points.values_of(0)[4] == Approx(0.3f));
  CHECK(d.points.values_of(0)[7] == Approx(0.25f));
  CHECK(labels(d, 2) == std::vector<uint32_t>{5, 29});
}

TEST_CASE("xmc conventions: WikiLSHTC-325K original form (labels separated by \", \")") {
  const auto d = XmcFile::open(fixture("wikilshtc_325k_style.txt"));
  REQUIRE(d.size() == 4);
  CHECK(labels(d, 0) == std::vector<uint32_t>{545, 32});
  CHECK(features(d, 0) == std::vector<uint32_t>{8, 18});
  CHECK(d.points.values_of(0)[1] == 2.0f);
  CHECK(labels(d, 1) == std::vector<uint32_t>{314, 165, 416});
  CHECK(features(d, 1).size() == 4);
  CHECK(labels(d, 3) == std::vector<uint32_t>{0});
}

TEST_CASE("xmc conventions: a file written on Windows (BOM, CRLF, tabs, empty point, no final newline)") {
  const auto d = XmcFile::open(fixture("windows_crlf.txt"));
  REQUIRE(d.size() == 3);
  CHECK(labels(d, 0) == std::vector<uint32_t>{1, 2});
  CHECK(features(d, 0) == std::vector<uint32_t>{0, 3});
  CHECK(d.points.values_of(0)[1] == 0.5f);
  CHECK(labels(d, 1).empty());
  CHECK(features(d, 1).empty());
  CHECK(labels(d, 2).empty());
  CHECK(features(d, 2) == std::vector<uint32_t>{4});
  CHECK(XmcFile::open(fixture("trailing_blank_lines.txt")).size() == 2);
}

TEST_CASE("xmc conventions: malformed files name file:line and what was expected") {
  CHECK_THAT(error_of([] { XmcFile::open(fixture("one_based.txt")); }),
             Contains("one_based.txt:2") && Contains("feature id 4 >= F = 4") && Contains("1-based"));
  CHECK_THAT(error_of([] { XmcFile::open(fixture("short.txt")); }),
             Contains("short.txt:") && Contains("file has 2 points but the header says N = 3"));
  CHECK_THAT(error_of([] { XmcFile::open(fixture("trailing_comma.txt")); }),
             Contains("trailing_comma.txt:3") && Contains("trailing comma"));
  // Blank lines after the last point are fine; a point after them is still one too many.
  CHECK_THAT(error_of([] {
               std::istringstream in("1 3 3\n0 0:1\n\n1 1:1\n");
               XmcFile::read(in, "t.txt");
             }),
             Contains("t.txt:4") && Contains("more points than the header's N = 1"));
}
