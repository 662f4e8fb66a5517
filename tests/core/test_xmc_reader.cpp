// The streaming XMC reader: chunks of any size give the points of the whole-file reader; errors
// name file:line, including those found only at the end (too few or too many points) and feature
// ids beyond a model's input width.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/check.h"
#include "core/data/xmc_file.h"
#include "core/data/xmc_reader.h"
#include "core/quote.h"

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
  CHECK_THROWS_WITH(XmcReader("/nonexistent/x.txt"), Catch::Contains("/nonexistent/x.txt: no such file"));
}

namespace {

// The message XmcFile::open gives for a file holding `text`.
std::string open_error(const std::string& text) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("frugal_xmc_limits_" + std::to_string(::getpid()) + ".txt")).string();
  {
    std::ofstream out(path, std::ios::binary);
    out << text;
  }
  std::string message = "no error";
  try {
    frugal::data::XmcFile::open(path);
  } catch (const frugal::Error& e) {
    message = e.what();
  }
  std::filesystem::remove(path);
  return message;
}

}  // namespace

TEST_CASE("xmc reader: header counts are checked, never reserved blindly") {
  // From a file: N must fit uint32 and the lines the file has.
  const std::string huge = open_error("1000000000000 5 5\n0 1:1\n");
  CHECK_THAT(huge, Catch::Contains("frugal_xmc_limits_") && Catch::Contains(".txt:1: N = 1000000000000 points"));
  const std::string more = open_error("1000000 5 5\n0 1:1\n");
  CHECK_THAT(more, Catch::Contains(".txt:1: the header says N = 1000000 points but the file has only 6 bytes"));
  CHECK_THAT(open_error("99999999999999999999999 5 5\n"), Catch::Contains(".txt:1: bad token") &&
                                                              Catch::Contains("the number of points N"));
  CHECK_THAT(open_error("1 5 4294967296\n0 1:1\n"), Catch::Contains(".txt:1: bad token '4294967296'"));
  CHECK(open_error("1 5 5\n0 1:1\n") == "no error");
  // From a stream (size unknown): the count is still bounded, and a large N that fits only fails at the end.
  CHECK_THAT(error_of("1000000000000 5 5\n0 1:1\n", 1), Catch::Contains("t.txt:1: N = 1000000000000 points"));
  std::istringstream in("4000000000 5 5\n0 1:1\n");
  CHECK_THROWS_WITH(frugal::data::XmcFile::read(in, "t.txt"),
                    Catch::Contains("t.txt:2: file has 1 points but the header says N = 4000000000"));
}

TEST_CASE("xmc reader: a line over the cap is an error naming file:line") {
  std::string text = "2 10 4\n0 1:1\n0 ";
  text.append(XmcReader::kMaxLineBytes + 10, '1');
  text += ":1\n";
  const std::string message = error_of(text, 1);
  CHECK_THAT(message, Catch::Contains("t.txt:3: line longer than 67108864 bytes"));
  CHECK(message.size() < 200);
  // No newline at all: the same error, not a read of the whole stream into one line.
  std::string header(XmcReader::kMaxLineBytes + 1, '7');
  CHECK_THAT(error_of(header, 1), Catch::Contains("t.txt:1: line longer than"));
  // Just under the cap is still read (and fails on its content).
  std::string below = "1 10 4\n0 ";
  below.append(100000, 'x');
  CHECK_THAT(error_of(below + "\n", 1), Catch::Contains("t.txt:2: bad token 'xxx"));
}

TEST_CASE("xmc reader: a 10 MB bad token is quoted truncated") {
  std::string text = "1 10 4\n0 ";
  text.append(size_t{10} << 20, 'z');
  text += "\n";
  const std::string message = error_of(text, 1);
  CHECK_THAT(message, Catch::Contains("t.txt:2: bad token 'zzzz") && Catch::Contains("... (10485760 bytes)") &&
                          Catch::Contains("expected feature:value"));
  CHECK(message.size() < 200);
  CHECK(frugal::quote_input("abc") == "'abc'");
  CHECK(frugal::quote_input(std::string(64, 'a')) == "'" + std::string(64, 'a') + "'");
  CHECK(frugal::quote_input(std::string(65, 'a')) == "'" + std::string(64, 'a') + "'... (65 bytes)");
}
