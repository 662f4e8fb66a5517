// Packed data files (core/data/packed_file.h): the packed form reads back exactly what its text parses
// to (whole, block by block, through the streaming readers), carries the text's content hash, and a
// flipped byte, a truncation, a damaged header, another kind of data or a forged id is refused naming
// the file and the block.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/data/ctr_reader.h"
#include "core/data/data_format.h"
#include "core/data/fingerprint.h"
#include "core/data/packed_file.h"
#include "core/data/synth_ctr.h"
#include "core/data/synth_xmc.h"
#include "core/data/xmc_file.h"
#include "core/data/xmc_reader.h"
#include "error_of.h"
#include "temp_dir.h"

using namespace frugal;
namespace fs = std::filesystem;

namespace {

void require_same_points(const data::Dataset& a, const data::Dataset& b) {
  REQUIRE(a.size() == b.size());
  REQUIRE(a.num_features == b.num_features);
  REQUIRE(a.num_labels == b.num_labels);
  REQUIRE(a.points.feature_offsets == b.points.feature_offsets);
  REQUIRE(a.points.feature_ids == b.points.feature_ids);
  REQUIRE(a.points.feature_values == b.points.feature_values);  // bit for bit: the parsed floats
  REQUIRE(a.points.label_offsets == b.points.label_offsets);
  REQUIRE(a.points.label_ids == b.points.label_ids);
}

// A small synthetic XMC text file (with points without labels) in `dir`.
std::string write_text(const TempDir& dir) {
  data::SynthXmcOptions o;
  o.features = 500;
  o.labels = 80;
  o.train = 1000;
  o.test = 10;
  o.nnz = 12;
  data::Dataset d = data::generate_synth_xmc(o).train;
  const uint32_t id = 7;
  const float value = 0.25f;
  d.points.add_point({&id, 1}, {&value, 1}, {});  // no labels
  d.points.add_point({}, {}, {});                   // neither
  const std::string path = dir / "train.txt";
  data::XmcFile::write(d, path);
  return path;
}

}  // namespace

TEST_CASE("a packed XMC file reads back what its text parses to, whole and block by block") {
  TempDir dir;
  const std::string text = write_text(dir), packed = dir / "train.fpk";
  const data::PackedHeader h = data::pack_xmc_file(text, packed, /*block_points=*/128);
  const data::Dataset want = data::XmcFile::open(text);
  CHECK(h.points == want.size());
  CHECK(h.blocks() == (want.size() + 127) / 128);
  CHECK(data::is_packed_file(packed));
  CHECK_FALSE(data::is_packed_file(text));
  CHECK(data::guess_data_format(packed) == data::DataFormat::xmc);

  const data::Dataset got = data::XmcFile::open(packed);
  require_same_points(want, got);
  // The same data, the same identity: ranks reading the text and the packed form agree.
  CHECK(got.content_hash == want.content_hash);
  CHECK_FALSE(want.content_hash.empty());
  CHECK(data::fingerprint(packed) == data::fingerprint(text));  // what predict, evaluate and DLRM compare
  CHECK_FALSE(data::file_fingerprint(packed) == data::fingerprint(text));

  // A range of blocks: those points only.
  const data::Dataset part = data::load_packed_points(packed, 2, 3);
  data::Dataset expect;
  expect.num_features = want.num_features;
  expect.num_labels = want.num_labels;
  expect.points.assign_points(want.points, 256, 384);
  require_same_points(expect, part);

  // The streaming reader (predict, evaluate) serves the same points in chunks of any size.
  data::XmcReader reader(packed);
  CHECK(reader.num_points() == want.size());
  data::Dataset streamed;
  streamed.num_features = reader.num_features();
  streamed.num_labels = reader.num_labels();
  while (reader.read(streamed.points, 77) > 0) {
  }
  require_same_points(want, streamed);

  // A data set held in memory packs to the same points.
  const std::string again = dir / "again.fpk";
  data::pack_dataset(want, again, 1000);
  require_same_points(want, data::XmcFile::open(again));
  CHECK(data::fingerprint(again) == data::file_fingerprint(again));  // no text behind it: its own
}

TEST_CASE("packed Criteo logs read back sample for sample, raw values included") {
  TempDir dir;
  data::SynthCtrOptions o;
  o.train = 700;
  o.test = 50;
  data::write_synth_ctr(o, dir.path.string());
  const std::string text = dir / "train.tsv", packed = dir / "train.fpk";
  data::pack_ctr_file(text, packed, 100);
  CHECK(data::guess_data_format(packed) == data::DataFormat::criteo);
  CHECK(data::fingerprint(packed) == data::fingerprint(text));
  data::CtrReader a(text), b(packed);
  data::CtrRecord ra, rb;
  size_t n = 0;
  while (a.next_record(ra)) {
    REQUIRE(b.next_record(rb));
    REQUIRE(ra.label == rb.label);
    for (size_t i = 0; i < data::kCtrDense; ++i) {
      REQUIRE(ra.ints[i] == rb.ints[i]);
      REQUIRE(ra.int_missing[i] == rb.int_missing[i]);
    }
    for (size_t i = 0; i < data::kCtrCats; ++i) REQUIRE(ra.cats[i] == rb.cats[i]);
    ++n;
  }
  CHECK_FALSE(b.next_record(rb));
  CHECK(n == 700);
  // Rewound for the next epoch; load_ctr (DLRM's whole-file reader) takes the packed form too.
  b.rewind();
  CHECK(b.next_record(rb));
  const data::CtrDataset x = data::load_ctr(text), y = data::load_ctr(packed);
  CHECK(x.labels == y.labels);
  CHECK(x.dense == y.dense);
  CHECK(x.cats == y.cats);
  // Each kind refuses to be read as the other.
  CHECK_THAT(error_of([&] { data::XmcFile::open(packed); }), Catch::Contains("not a sparse data set"));
  const std::string points = dir / "points.fpk";
  data::pack_dataset(data::generate_synth_xmc({.features = 50, .labels = 5, .train = 20, .test = 1, .nnz = 3,
                                               .labels_per_point = 1, .prototype_size = 3})
                         .train,
                     points);
  CHECK_THAT(error_of([&] { data::CtrReader r(points); }), Catch::Contains("not Criteo-format click logs"));
}

TEST_CASE("a damaged, truncated or forged packed file is refused naming the file and the block") {
  TempDir dir;
  const std::string text = write_text(dir), packed = dir / "train.fpk";
  const data::PackedHeader h = data::pack_xmc_file(text, packed, 128);

  SECTION("a flipped byte in block 3's feature ids") {
    const data::Dataset d = data::XmcFile::open(text);
    flip_byte(packed, h.sections[1].offset + 4 * (d.points.feature_offsets[256] + 5));  // block 3: points 256-383
    const std::string e = error_of([&] { data::XmcFile::open(packed); });
    CHECK_THAT(e, Catch::Contains(packed) && Catch::Contains("block 3 of") && Catch::Contains("checksum"));
    // The blocks before it still read (a shard that does not hold it is not refused).
    CHECK(data::load_packed_points(packed, 0, 2).size() == 256);
    // Two damaged blocks: the first is named, whichever thread reads it.
    flip_byte(packed, h.sections[1].offset + 4 * (d.points.feature_offsets[640] + 2));  // block 6
    for (int i = 0; i < 5; ++i) CHECK_THAT(error_of([&] { data::XmcFile::open(packed); }), Catch::Contains("block 3 of"));
  }
  SECTION("a truncated file") {
    fs::resize_file(packed, fs::file_size(packed) - 10);
    CHECK_THAT(error_of([&] { data::XmcFile::open(packed); }), Catch::Contains(packed) && Catch::Contains("truncated"));
    fs::resize_file(packed, 20);
    CHECK_THAT(error_of([&] { data::XmcFile::open(packed); }), Catch::Contains("truncated"));
  }
  SECTION("a damaged header") {
    flip_byte(packed, fs::file_size(packed) - 30);
    CHECK_THAT(error_of([&] { data::XmcFile::open(packed); }), Catch::Contains("header is damaged"));
  }
  SECTION("another version") {
    flip_byte(packed, 8);
    CHECK_THAT(error_of([&] { data::XmcFile::open(packed); }), Catch::Contains("version"));
  }
  SECTION("a forged file: ids past the header's dimensions, with checksums that match") {
    data::Dataset d = data::XmcFile::open(text);
    d.points.label_ids[3] = d.num_labels;  // packed from memory, no reader's check on the way
    data::pack_dataset(d, packed, 128);
    CHECK_THAT(error_of([&] { data::XmcFile::open(packed); }),
               Catch::Contains(packed) && Catch::Contains("label id 80 >= L = 80"));
  }
  SECTION("a model's input width, as the text reader checks it") {
    data::XmcReader reader(packed);
    reader.limit_features(10, "the model's input width");
    SparseBatch out;
    CHECK_THAT(error_of([&] {
                 while (reader.read(out, 1000) > 0) {
                 }
               }),
               Catch::Contains(">= the model's input width = 10"));
  }
}
