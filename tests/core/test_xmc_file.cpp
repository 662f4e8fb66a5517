// The XMC reader: well-formed files in each convention parse; every malformed case yields an error
// naming file:line and the problem, never a crash.
#include <catch2/catch.hpp>
#include <sstream>

#include "core/check.h"
#include "core/data/xmc_file.h"

using frugal::data::XmcFile;

namespace {
frugal::data::Dataset parse(const std::string& text) {
  std::istringstream in(text);
  return XmcFile::read(in, "t.txt");
}
std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const frugal::Error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("xmc: parses labels, features, empty label lists and a trailing newline") {
  const auto d = parse("3 10 5\n0,4 1:0.5 9:1.25\n 2:1\n3 0:2e-1\n");
  REQUIRE(d.size() == 3);
  REQUIRE(d.num_features == 10);
  REQUIRE(d.num_labels == 5);
  REQUIRE(d.points.labels_of(0).size() == 2);
  REQUIRE(d.points.labels_of(0)[1] == 4);
  REQUIRE(d.points.features_of(0)[1] == 9);
  REQUIRE(d.points.values_of(0)[1] == 1.25f);
  REQUIRE(d.points.labels_of(1).empty());
  REQUIRE(d.points.features_of(1)[0] == 2);
  REQUIRE(d.points.values_of(2)[0] == Approx(0.2f));
}

TEST_CASE("xmc: round trip through write and open") {
  const auto d = parse("2 10 5\n0,4 1:0.5 9:1.25\n3 0:2\n");
  const std::string path = "xmc_roundtrip_test.txt";
  XmcFile::write(d, path);
  const auto e = XmcFile::open(path);
  REQUIRE(e.points.feature_ids == d.points.feature_ids);
  REQUIRE(e.points.feature_values == d.points.feature_values);
  REQUIRE(e.points.label_ids == d.points.label_ids);
  std::remove(path.c_str());
}

TEST_CASE("xmc: malformed input gives named errors with file:line") {
  using Catch::Contains;
  CHECK_THAT(error_of(""), Contains("t.txt:1") && Contains("empty file"));
  CHECK_THAT(error_of("3 10\n"), Contains("t.txt:1") && Contains("bad header"));
  CHECK_THAT(error_of("x 10 5\n"), Contains("t.txt:1") && Contains("bad token 'x'"));
  CHECK_THAT(error_of("1 10 5\n0 1:abc\n"), Contains("t.txt:2") && Contains("bad token 'abc'"));
  CHECK_THAT(error_of("1 10 5\n0 1:0.5 7\n"), Contains("t.txt:2") && Contains("expected feature:value"));
  CHECK_THAT(error_of("1 10 5\n0 :0.5\n"), Contains("t.txt:2") && Contains("feature id"));
  CHECK_THAT(error_of("1 10 5\n0 12:0.5\n"), Contains("t.txt:2") && Contains("feature id 12 >= F = 10"));
  CHECK_THAT(error_of("2 10 5\n0 1:1\n0,5 1:0.5\n"), Contains("t.txt:3") && Contains("label id 5 >= L = 5"));
  CHECK_THAT(error_of("1 10 5\n0,,1 1:1\n"), Contains("t.txt:2") && Contains("label id"));
  CHECK_THAT(error_of("1 10 5\n0, 1:1\n"), Contains("t.txt:2") && Contains("trailing comma"));
  CHECK_THAT(error_of("1 10 5\n0 1:nan\n"), Contains("t.txt:2") && Contains("non-finite"));
  CHECK_THAT(error_of("1 10 5\n0 1:inf\n"), Contains("t.txt:2") && Contains("non-finite"));
  CHECK_THAT(error_of("3 10 5\n0 1:1\n1 2:1\n"), Contains("2 points but the header says N = 3"));
  CHECK_THAT(error_of("1 10 5\n0 1:1\n1 2:1\n"), Contains("t.txt:3") && Contains("more points than the header"));
  CHECK_THAT(error_of("2 10 5\n0 1:1\n\n1 2:1\n"), Contains("t.txt:3") && Contains("empty line"));
  CHECK_THAT(error_of("1 10 5\n-1 1:1\n"), Contains("t.txt:2") && Contains("bad token '-1'"));
  try {
    XmcFile::open("/nonexistent/file.txt");
    FAIL("no error");
  } catch (const frugal::Error& e) {
    CHECK_THAT(e.what(), Contains("/nonexistent/file.txt") && Contains("no such file"));
  }
}
