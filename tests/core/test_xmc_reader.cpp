// The streaming XMC reader: chunks of any size give the points of the whole-file reader; errors
// name file:line, including those found only at the end (too few or too many points) and feature
// ids beyond a model's input width.
#include <catch2/catch.hpp>
#include <sstream>

#include "core/check.h"
#include "core/data/xmc_file.h"
#include "core/data/xmc_reader.h"

using frugal::SparseBatch;
using frugal::data::XmcReader;

namespace {

const std::string kFile = "5 10 4\n0,3 1:0.5 9:1\n 2:1\n3 0:2\n1 4:1 5:2\n \n\n";  // a point of nothing, a blank end

std::string error_of(const std::string& text, size_t chunk, uint32_t limit = UINT32_MAX) {
  std::istringstream in(text);
  try {
    XmcReader r(in, "t.txt");
    if (limit != UINT32_MAX) r.limit_features(limit, "the model's input features F");
    SparseBatch b;
    while (r.read(b, chunk) > 0) {
    }
  } catch (const frugal::Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("xmc reader: any chunk size gives the whole file's points") {
  std::istringstream whole_in(kFile);
  const auto whole = frugal::data::XmcFile::read(whole_in, "t.txt");
  for (const size_t chunk : {size_t{1}, size_t{2}, size_t{5}, size_t{100}}) {
    std::istringstream in(kFile);
    XmcReader r(in, "t.txt");
    CHECK(r.num_points() == 5);
    CHECK(r.num_features() == 10);
    CHECK(r.num_labels() == 4);
    SparseBatch all, part;
    size_t n = 0, calls = 0;
    while ((n = r.read(part, chunk)) > 0) {
      CHECK(n <= chunk);
      CHECK(part.size() == n);
      for (size_t i = 0; i < part.size(); ++i) all.add_point(part.features_of(i), part.values_of(i), part.labels_of(i));
      part.clear();
      ++calls;
    }
    CHECK(calls == (5 + chunk - 1) / chunk);
    CHECK(r.points_read() == 5);
    CHECK(r.read(part, chunk) == 0);  // stays done
    CHECK(all.feature_ids == whole.points.feature_ids);
    CHECK(all.feature_values == whole.points.feature_values);
    CHECK(all.label_ids == whole.points.label_ids);
    CHECK(all.label_offsets == whole.points.label_offsets);
  }
}

TEST_CASE("xmc reader: errors name file:line, whatever the chunk size") {
  for (const size_t chunk : {size_t{1}, size_t{3}}) {
    CHECK_THAT(error_of("2 10 4\n0 1:1\n", chunk), Catch::Contains("t.txt:2: file has 1 points but the header says N = 2"));
    CHECK_THAT(error_of("1 10 4\n0 1:1\n1 2:1\n", chunk), Catch::Contains("t.txt:3: more points than the header's N = 1"));
    CHECK_THAT(error_of("2 10 4\n0 1:1\n1 2:x\n", chunk), Catch::Contains("t.txt:3: bad token 'x': expected a feature value"));
    CHECK_THAT(error_of("2 10 4\n0 1:1\n1 7:1\n", chunk, 5),
               Catch::Contains("t.txt:3: feature id 7 >= the model's input features F = 5"));
  }
  CHECK(error_of("2 10 4\n0 1:1\n1 4:1\n", 1, 5) == "no error");
  CHECK_THAT(error_of("", 1), Catch::Contains("t.txt:1: empty file"));
  CHECK_THROWS_WITH(XmcReader("/nonexistent/x.txt"), Catch::Contains("/nonexistent/x.txt: cannot open"));
}
