// Criteo-format data: the line parser and the streaming reader (every malformed-line class gives
// its exact file:line:column message; chunks of any size, rewind, gzip and plain give the same
// samples), synth-ctr's files read back as generated, and the statistics of a hand-made file.
#include <catch2/catch.hpp>
#include <stdlib.h>
#include <zlib.h>

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/check.h"
#include "core/data/ctr_reader.h"
#include "core/data/ctr_stats.h"
#include "core/data/synth_ctr.h"
#include "error_of.h"
#include "temp_dir.h"

namespace fs = std::filesystem;
using namespace frugal::data;

namespace {

// label, I1..I13, C1..C26 with I2 = -2, I5 missing, C3 missing, C26 upper-case.
std::vector<std::string> good_fields() {
  std::vector<std::string> f = {"1"};
  for (int j = 1; j <= 13; ++j) f.push_back(j == 2 ? "-2" : j == 5 ? "" : std::to_string(j * 10));
  for (int j = 1; j <= 26; ++j) f.push_back(j == 3 ? "" : j == 26 ? "ABCDEF01" : fmt::format("{:08x}", 0x10 * j));
  return f;
}

std::string join(const std::vector<std::string>& f) {
  std::string s;
  for (size_t i = 0; i < f.size(); ++i) s += (i ? "\t" : "") + f[i];
  return s;
}

// The message of reading "good line \n bad line \n" as t.tsv: the bad line is line 2.
std::string error_of_line(const std::string& bad) {
  std::istringstream in(join(good_fields()) + "\n" + bad + "\n");
  return error_of([&] {
    CtrReader r(in, "t.tsv");
    CtrBatch b;
    while (r.next(3, b) > 0) {
    }
  });
}

std::string with_field(size_t column, const std::string& value) {  // column 1-based
  auto f = good_fields();
  f[column - 1] = value;
  return join(f);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_gz(const std::string& path, const std::string& data) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, data.data(), static_cast<unsigned>(data.size())) == static_cast<int>(data.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

void require_same(const CtrBatch& a, const CtrBatch& b) {
  REQUIRE(a.size == b.size);
  CHECK(a.labels == b.labels);
  CHECK(a.dense == b.dense);
  CHECK(a.cats == b.cats);
}

}  // namespace

TEST_CASE("ctr: a line becomes label, transformed dense values and ids") {
  const CtrRecord r = parse_ctr_line(join(good_fields()) + "\r", "t.tsv", 1);  // CRLF is fine
  CHECK(r.label == 1);
  CHECK(r.ints[1] == -2);
  CHECK(r.int_missing[4]);
  CHECK(!r.int_missing[0]);
  CHECK(r.cats[0] == 0x10);
  CHECK(r.cats[2] == kMissingCategory);
  CHECK(r.cats[25] == 0xabcdef01);
  CtrBatch b;
  append_record(r, b);
  b.validate();
  REQUIRE(b.size == 1);
  CHECK(b.dense[0] == Approx(std::log(11.0)));  // I1 = 10
  CHECK(b.dense[1] == 0.0f);                    // negative -> 0
  CHECK(b.dense[4] == 0.0f);                    // missing -> 0
  CHECK(b.dense[12] == Approx(std::log(131.0)));
  std::string line;
  format_ctr_line(r, line);
  CHECK(line == [] {  // lower-case hex on output; otherwise the same text
    auto f = good_fields();
    f[40 - 1] = "abcdef01";
    return join(f) + "\n";
  }());
  CHECK(ctr_column_name(1) == "label");
  CHECK(ctr_column_name(4) == "I3");
  CHECK(ctr_column_name(31) == "C17");
}

TEST_CASE("ctr: every malformed line names file:line, the column and the bad text") {
  CHECK(error_of_line("") == "t.tsv:2: 1 tab-separated fields: expected 40 (label, I1-I13, C1-C26)");
  auto fewer = good_fields();
  fewer.pop_back();
  CHECK(error_of_line(join(fewer)) == "t.tsv:2: 39 tab-separated fields: expected 40 (label, I1-I13, C1-C26)");
  CHECK(error_of_line(join(good_fields()) + "\t") ==
        "t.tsv:2: 41 tab-separated fields: expected 40 (label, I1-I13, C1-C26)");
  CHECK(error_of_line(with_field(1, "2")) == "t.tsv:2: column 1 (label): bad label '2': expected 0 or 1");
  CHECK(error_of_line(with_field(1, "")) == "t.tsv:2: column 1 (label): bad label '': expected 0 or 1");
  CHECK(error_of_line(with_field(4, "x1")) == "t.tsv:2: column 4 (I3): bad value 'x1': expected an integer");
  CHECK(error_of_line(with_field(4, "1.5")) == "t.tsv:2: column 4 (I3): bad value '1.5': expected an integer");
  CHECK(error_of_line(with_field(14, "99999999999999999999")) ==
        "t.tsv:2: column 14 (I13): integer '99999999999999999999' out of range (64-bit)");
  CHECK(error_of_line(with_field(31, "zz")) == "t.tsv:2: column 31 (C17): bad id 'zz': expected hex digits");
  CHECK(error_of_line(with_field(31, "-1")) == "t.tsv:2: column 31 (C17): bad id '-1': expected hex digits");
  CHECK(error_of_line(with_field(15, "12345678123456781")) ==
        "t.tsv:2: column 15 (C1): id '12345678123456781' is longer than 16 hex digits");
  CHECK(error_of_line(with_field(40, "100000000")) ==
        "t.tsv:2: column 40 (C26): id '100000000' equals the missing-value id 2^32 (kMissingCategory)");
  // 16 hex digits are the most an id may have, and ids past 32 bits are accepted.
  CHECK(error_of_line(with_field(15, "ffffffffffffffff")) == "no error");
  // A huge bad token is quoted up to 64 bytes and its length.
  CHECK(error_of_line(with_field(4, std::string(1000, 'x'))) ==
        "t.tsv:2: column 4 (I3): bad value '" + std::string(64, 'x') + "'... (1000 bytes): expected an integer");
  // A line past the cap (a file without newlines) is refused, not read whole.
  CHECK(error_of_line(std::string(CtrReader::kMaxLineBytes + 1, '0')) ==
        "t.tsv:2: line longer than 67108864 bytes: is this a Criteo-format TSV file?");
}

TEST_CASE("ctr: synth-ctr files read back in chunks of any size, rewind and gzip give the same") {
  TempDir dir;
  const SynthCtrInfo info = write_synth_ctr({.train = 3000, .test = 700, .seed = 5}, dir.path.string());
  const CtrDataset train = load_ctr(dir / "train.tsv"), test = load_ctr(dir / "test.tsv");
  train.validate();
  REQUIRE(train.size == 3000);
  REQUIRE(test.size == 700);
  double clicks = 0;
  for (const float l : train.labels) clicks += l;
  CHECK(clicks == static_cast<double>(info.train_clicks));
  CHECK(clicks / 3000 == Approx(0.25).margin(0.05));
  CHECK(info.vocab_sizes.size() == 26);
  CHECK(info.vocab_sizes.front() == 10);
  CHECK(info.vocab_sizes.back() == 100000);
  // The planted model is learnable but noisy: its Bayes AUC is well above 0.5 and below 1.
  CHECK(info.bayes_auc > 0.7);
  CHECK(info.bayes_auc < 0.95);
  CHECK(read_all(dir / "info.json").find(fmt::format("\"bayes_auc\": {:.6g}", info.bayes_auc)) != std::string::npos);

  for (const size_t chunk : {size_t{1}, size_t{7}, size_t{4096}}) {
    CtrReader r(dir / "train.tsv");
    CtrBatch b, all;
    for (int pass = 0; pass < 2; ++pass) {  // the second pass after rewind()
      all.clear();
      while (r.next(chunk, b) > 0) {
        CHECK(b.size <= chunk);
        for (size_t i = 0; i < b.size; ++i) all.append(b, i);
      }
      CHECK(r.line() == 3000);
      CHECK(r.next(chunk, b) == 0);  // stays at the end
      require_same(all, train);
      r.rewind();
      CHECK(r.line() == 0);
    }
  }
  // Parsing and formatting each line gives the file back byte for byte.
  std::string again;
  CtrReader raw(dir / "test.tsv");
  for (CtrRecord rec; raw.next_record(rec);) format_ctr_line(rec, again);
  CHECK(again == read_all(dir / "test.tsv"));

  write_gz(dir / "train.tsv.gz", read_all(dir / "train.tsv"));
  require_same(load_ctr(dir / "train.tsv.gz"), train);

  // The same seed writes the same files; another seed other ones.
  TempDir same, other;
  write_synth_ctr({.train = 3000, .test = 700, .seed = 5}, same.path.string());
  write_synth_ctr({.train = 3000, .test = 700, .seed = 6}, other.path.string());
  CHECK(read_all(same / "train.tsv") == read_all(dir / "train.tsv"));
  CHECK(read_all(same / "info.json") == read_all(dir / "info.json"));
  CHECK(read_all(other / "train.tsv") != read_all(dir / "train.tsv"));
}

TEST_CASE("ctr: gzip errors and bad options are named") {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 2000; ++i) text += join(good_fields()) + "\n";
  write_gz(dir / "t.tsv.gz", text);
  const std::string gz = read_all(dir / "t.tsv.gz");
  std::ofstream(dir / "cut.tsv.gz", std::ios::binary) << gz.substr(0, gz.size() / 2);
  CHECK_THAT(error_of([&] { load_ctr(dir / "cut.tsv.gz"); }),
             Catch::Matches(".*/cut\\.tsv\\.gz:[0-9]+: read error: truncated or corrupt gzip data: .*"));
  CHECK(load_ctr(dir / "t.tsv.gz").size == 2000);
  CHECK(error_of([&] { load_ctr(dir / "missing.tsv"); }) == dir / "missing.tsv" + ": no such file (expected a data file)");
  CHECK_THAT(error_of([&] { write_synth_ctr({.zipf = 0}, dir / "x"); }),
             Catch::StartsWith("SynthCtrOptions::zipf must be in (0, 10]"));
}

TEST_CASE("ctr: statistics of a hand-made file") {
  // Four samples; C1 holds a, a, b, missing; I1 holds 5, missing, -3, 7; C2..C26 one id each.
  const std::vector<std::pair<std::string, std::string>> rows = {{"5", "a"}, {"", "a"}, {"-3", "b"}, {"7", ""}};
  std::string text;
  for (size_t i = 0; i < rows.size(); ++i) {
    auto f = good_fields();
    f[0] = std::string(i == 0 ? "1" : "0");
    f[1] = rows[i].first;
    f[14] = rows[i].second;
    text += join(f) + "\n";
  }
  std::istringstream in(text);
  CtrReader r(in, "s.tsv");
  const CtrStats s = compute_ctr_stats(r);
  CHECK(s.samples == 4);
  CHECK(s.clicks == 1);
  CHECK(s.dense[0].missing == 1);
  CHECK(s.dense[0].negative == 1);
  CHECK(s.dense[0].min == -3);
  CHECK(s.dense[0].max == 7);
  CHECK(s.dense[4].missing == 4);  // I5 is empty in every line
  const CtrFieldStats& c1 = s.cats[0];
  CHECK(c1.distinct == 2);
  CHECK(c1.missing == 1);
  CHECK(c1.top_id == 0xa);
  CHECK(c1.top_count == 2);
  CHECK(c1.ids_once == 1);
  CHECK(c1.ids_2_9 == 1);
  CHECK(s.cats[1].distinct == 1);
  CHECK(s.cats[1].ids_2_9 == 1);
  CHECK(s.cats[2].missing == 4);  // C3 is empty in every line
  CHECK(s.cats[2].distinct == 0);
  const std::string text_out = s.format();
  CHECK_THAT(text_out, Catch::Contains("clicks    1 (CTR 25.00%)"));
  CHECK_THAT(text_out, Catch::Contains("0000000a (66.67%)"));  // 2 of the 3 present values
}

TEST_CASE("ctr: many distinct ids and counts past 100 land in the right bins") {
  std::string text;
  for (int i = 0; i < 1500; ++i) {
    auto f = good_fields();
    f[14] = fmt::format("{:x}", i < 120 ? 7 : 1000 + i);  // C1: id 7 120 times, 1380 ids once
    f[15] = fmt::format("{:x}", i % 50);                   // C2: 50 ids, 30 times each
    text += join(f) + "\n";
  }
  std::istringstream in(text);
  CtrReader r(in, "m.tsv");
  const CtrStats s = compute_ctr_stats(r);
  CHECK(s.cats[0].distinct == 1381);
  CHECK(s.cats[0].ids_100_plus == 1);
  CHECK(s.cats[0].ids_once == 1380);
  CHECK(s.cats[0].top_id == 7);
  CHECK(s.cats[1].distinct == 50);
  CHECK(s.cats[1].ids_10_99 == 50);
  CHECK(s.cats[1].top_id == 0);  // all tie at 30: the smallest id
}
