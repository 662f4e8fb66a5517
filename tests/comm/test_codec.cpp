#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "comm/codec.h"
#include "core/crc32c.h"
#include "comm/frame.h"
#include "comm/half.h"
#include "comm/run_config.h"
#include "core/rng.h"

using namespace frugal;
using namespace frugal::comm;

namespace {
std::span<const std::byte> bytes_of(const char* s) { return {reinterpret_cast<const std::byte*>(s), std::strlen(s)}; }
}  // namespace

TEST_CASE("crc32c matches the published check values") {
  CHECK(crc32c(bytes_of("123456789")) == 0xe3069283u);  // RFC 3720 / iSCSI check value
  CHECK(crc32c({}) == 0u);
  std::vector<std::byte> zeros(32, std::byte{0});
  CHECK(crc32c(zeros) == 0x8a9136aau);  // RFC 3720 B.4: 32 bytes of zeros
  // Incremental == one shot, across the 8-byte fast path boundary.
  const char* text = "The quick brown fox jumps over the lazy dog";
  const auto all = bytes_of(text);
  CHECK(crc32c(all.subspan(13), crc32c(all.first(13))) == crc32c(all));
}

TEST_CASE("crc32c's three-stream path equals the byte-at-a-time table at every length and offset") {
  Rng rng(0xc2c);
  std::vector<std::byte> buf(3 * 8192 * 2 + 3 * 256 * 3 + 64);
  for (auto& b : buf) b = static_cast<std::byte>(rng.below(256));
  const auto all = std::span<const std::byte>(buf);
  // Lengths around each path's boundaries (3 x 8 KiB and 3 x 256 byte blocks, 8-byte words).
  std::vector<size_t> lengths = {0, 1, 7, 8, 9, 767, 768, 769, 770, 1535, 1536, 24575, 24576, 24577, 24583,
                                 49152, 49152 + 768 + 5};
  for (int i = 0; i < 40; ++i) lengths.push_back(rng.below(buf.size() - 8));
  for (const size_t n : lengths)
    for (const size_t offset : {0, 1, 3, 7}) {
      if (offset + n > buf.size()) continue;
      const auto part = all.subspan(offset, n);
      INFO("length " << n << ", offset " << offset);
      CHECK(crc32c(part) == crc32c_portable(part));
      CHECK(crc32c(part, 0x12345678u) == crc32c_portable(part, 0x12345678u));
    }
}

TEST_CASE("frame header round trip and every rejection") {
  FrameHeader h;
  h.kind = FrameKind::collective;
  h.op = 2;
  h.src = 3;
  h.step = 5;
  h.comm_id = 0x1122334455667788ULL;
  h.seq = 99;
  h.part = 4;
  h.sig = 0xdeadbeef;
  const std::vector<std::byte> payload(1000, std::byte{0x5a});
  const auto enc = encode_header(h, payload);
  const FrameHeader d = decode_header(enc);
  CHECK(d.kind == h.kind);
  CHECK(d.op == h.op);
  CHECK(d.src == h.src);
  CHECK(d.step == h.step);
  CHECK(d.comm_id == h.comm_id);
  CHECK(d.seq == h.seq);
  CHECK(d.part == h.part);
  CHECK(d.sig == h.sig);
  CHECK(d.payload_bytes == 1000);
  CHECK_NOTHROW(check_payload(d, payload));

  CHECK_THROWS_WITH(decode_header(std::span(enc).first(30)), Catch::Contains("truncated"));
  auto bad = enc;
  bad[0] = std::byte{'X'};
  CHECK_THROWS_WITH(decode_header(bad), Catch::Contains("magic"));
  bad = enc;
  bad[4] = std::byte{9};
  CHECK_THROWS_WITH(decode_header(bad), Catch::Contains("protocol version 9"));
  bad = enc;
  bad[26] ^= std::byte{1};  // flip a bit of the sequence number
  CHECK_THROWS_WITH(decode_header(bad), Catch::Contains("header checksum"));
  auto short_payload = payload;
  short_payload.resize(999);
  CHECK_THROWS_WITH(check_payload(d, short_payload), Catch::Contains("(truncated)"));
  auto changed = payload;
  changed[500] = std::byte{0};
  CHECK_THROWS_WITH(check_payload(d, changed), Catch::Contains("payload checksum"));
  FrameHeader k = h;
  k.kind = static_cast<FrameKind>(42);
  CHECK_THROWS_WITH(decode_header(encode_header(k, payload)), Catch::Contains("unknown message kind 42"));
}

TEST_CASE("f16 and bf16 conversions round to nearest even and keep specials") {
  for (float f : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.9604644775390625e-08f}) {
    CHECK(f16_to_float(float_to_f16(f)) == f);  // exactly representable in f16
  }
  CHECK(std::isinf(f16_to_float(float_to_f16(70000.0f))));
  CHECK(std::isnan(f16_to_float(float_to_f16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(f16_to_float(float_to_f16(1.0f + 1.0f / 2048)) == 1.0f);              // tie -> even
  CHECK(f16_to_float(float_to_f16(1.0f + 3.0f / 2048)) == 1.0f + 1.0f / 512);  // tie -> even (up)
  CHECK(bf16_to_float(float_to_bf16(1.0f)) == 1.0f);
  CHECK(bf16_to_float(float_to_bf16(3.0e38f)) == Approx(3.0e38f).epsilon(0.01));
  CHECK(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  frugal::Rng rng(7);
  for (int i = 0; i < 10000; ++i) {
    const float f = rng.uniform(-100.0f, 100.0f);
    CHECK(std::fabs(f16_to_float(float_to_f16(f)) - f) <= std::fabs(f) / 2048 + 1e-7f);
    CHECK(std::fabs(bf16_to_float(float_to_bf16(f)) - f) <= std::fabs(f) / 256);
  }
}

TEST_CASE("codecs: f32 round trips are exact, dense and sparse; auto picks the smaller") {
  frugal::Rng rng(3);
  std::vector<float> dense(1000);
  for (auto& v : dense) v = rng.uniform(-1.0f, 1.0f);
  std::vector<float> out(1000);
  decode_into(encode_dense(dense), out);
  CHECK(out == dense);

  std::vector<float> sparse(100000, 0.0f);
  std::vector<uint32_t> idx;
  std::vector<float> val;
  for (uint32_t i = 0; i < sparse.size(); i += 97 + i % 13) {
    sparse[i] = rng.uniform(-5.0f, 5.0f);
    idx.push_back(i);
    val.push_back(sparse[i]);
  }
  const auto enc = encode_auto(sparse);
  CHECK(peek(enc).layout == Layout::sparse);
  CHECK(enc.size() == sparse_encoded_bytes(sparse.size(), idx, ValueType::f32));
  CHECK(enc.size() < idx.size() * 6 + 16);  // 1-byte gaps mostly, 4-byte values
  std::vector<float> back(sparse.size(), 9.0f);
  decode_into(enc, back);
  CHECK(back == sparse);
  const SparseVector sv = decode(enc);
  CHECK(sv.indices == idx);
  CHECK(sv.values == val);
  CHECK(peek(encode_auto(dense)).layout == Layout::dense);
  CHECK(decode(encode_sparse(10, {}, {})).dim == 10);
}

TEST_CASE("codecs: f16 and bf16 values halve the bytes") {
  std::vector<float> v = {1.0f, -0.5f, 0.25f, 1000.0f};
  const auto h = encode_dense(v, ValueType::f16);
  CHECK(h.size() == 1 + 1 + 8);
  std::vector<float> out(4);
  decode_into(h, out);
  CHECK(out == v);
  const std::vector<uint32_t> idx = {3, 70000};
  const std::vector<float> val = {1.5f, -2.0f};
  const SparseVector sv = decode(encode_sparse(100000, idx, val, ValueType::bf16));
  CHECK(sv.indices == idx);
  CHECK(sv.values == val);
}

TEST_CASE("codecs: sign messages carry one bit per value and one scale") {
  const std::vector<uint32_t> idx = {0, 3, 4, 9, 200, 201, 202, 300, 301, 302, 999};
  std::vector<float> val(idx.size(), 2.5f);
  for (const size_t k : {1u, 2u, 7u, 10u}) val[k] = -2.5f;
  const auto enc = encode_sparse(1000, idx, val, ValueType::sign);
  // tag, dim (2 varint bytes), count, 11 gaps (those of 190 and 696 take 2 bytes), the scale, 2 bytes of bits
  CHECK(enc.size() == 1 + 2 + 1 + 13 + 4 + 2);
  CHECK(enc.size() == sparse_encoded_bytes(1000, idx, ValueType::sign));
  const SparseVector sv = decode(enc);
  CHECK(sv.indices == idx);
  CHECK(sv.values == val);
  CHECK(peek(enc).type == ValueType::sign);
  // No entries: no scale either.
  const auto none = encode_sparse(1000, std::vector<uint32_t>{}, std::vector<float>{}, ValueType::sign);
  CHECK(none.size() == 1 + 2 + 1);
  CHECK(decode(none).indices.empty());
  // Values of more than one magnitude, dense sign messages and broken scales or bits are refused.
  CHECK_THROWS_WITH(encode_sparse(1000, std::vector<uint32_t>{1, 2}, std::vector<float>{1.0f, -2.0f}, ValueType::sign),
                    Catch::Contains("not +-1"));
  CHECK_THROWS_WITH(encode_dense(val, ValueType::sign), Catch::Contains("sparse messages only"));
  CHECK_THROWS_WITH(decode(std::vector<std::byte>{std::byte{0x03}, std::byte{0}}), Catch::Contains("unknown tag"));
  auto stray = enc;
  stray.back() |= std::byte{0x80};  // bit 15: past the 11th entry
  CHECK_THROWS_WITH(decode(stray), Catch::Contains("beyond the last entry"));
  auto zero_scale = enc;
  std::fill_n(zero_scale.begin() + 17, 4, std::byte{0});
  CHECK_THROWS_WITH(decode(zero_scale), Catch::Contains("scale"));
  auto nan_scale = enc;
  std::fill_n(nan_scale.begin() + 17, 4, std::byte{0xff});
  CHECK_THROWS_WITH(decode(nan_scale), Catch::Contains("scale"));
  auto cut = enc;
  cut.pop_back();
  CHECK_THROWS_WITH(decode(cut), Catch::Contains("sign entries need"));
}

TEST_CASE("codecs: malformed input is rejected with a clear error") {
  CHECK_THROWS_AS(decode({}), CodecError);
  const std::vector<uint32_t> idx = {1, 5};
  const std::vector<float> val = {1.0f, 2.0f};
  auto enc = encode_sparse(10, idx, val);
  auto cut = encode_sparse(10000, std::vector<uint32_t>{1, 5000}, val);
  cut.pop_back();
  CHECK_THROWS_WITH(decode(cut), Catch::Contains("value bytes"));
  auto big = enc;
  big[3] = std::byte{20};  // a gap past the dimension
  CHECK_THROWS_WITH(decode(big), Catch::Contains(">= dimension"));
  std::vector<std::byte> tag = {std::byte{0x37}};
  CHECK_THROWS_WITH(decode(tag), Catch::Contains("unknown tag"));
  std::vector<std::byte> huge = {std::byte{0x10}, std::byte{0x0a}, std::byte{0xff}, std::byte{0xff},
                                 std::byte{0xff}, std::byte{0x0f}};
  CHECK_THROWS_WITH(decode(huge), Catch::Contains("do not fit"));
  CHECK_THROWS(encode_sparse(10, std::vector<uint32_t>{5, 5}, std::vector<float>{1, 2}));
  std::vector<float> wrong(9);
  CHECK_THROWS_WITH(decode_into(enc, wrong), Catch::Contains("dimension 10"));
}

TEST_CASE("codecs: inputs found by the fuzzer") {
  // fuzz_codec, crash-1489f923: an empty dense vector (the harness, not the codec, mishandled it).
  const std::vector<std::byte> empty_dense = {std::byte{0}, std::byte{0}};
  const SparseVector v = decode(empty_dense);
  CHECK(v.dim == 0);
  CHECK(v.values.empty());
  CHECK(decode(encode_sparse(v.dim, v.indices, v.values)).dim == 0);
}

TEST_CASE("run configuration hash and difference") {
  const RunConfig a = {{"lr", "0.001"}, {"hidden", "128"}};
  RunConfig b = a;
  CHECK(config_hash(a) == config_hash(b));
  CHECK(config_difference(a, 0, b, 1).empty());
  b["lr"] = "0.01";
  CHECK(config_hash(a) != config_hash(b));
  CHECK(config_difference(a, 0, b, 3) == "setting 'lr' differs: rank 0 has '0.001', rank 3 has '0.01'");
  b = a;
  b.erase("hidden");
  CHECK_THAT(config_difference(a, 0, b, 1), Catch::Contains("'hidden'"));
  // The cause before its consequences: an LSH rank records --logq, an exact one does not; the
  // sampler, which both ranks set, is named (not logq, which sorts first).
  const RunConfig lsh = {{"sampler", "lsh"}, {"logq", "on"}, {"hidden", "128"}};
  const RunConfig exact = {{"sampler", "exact"}, {"hidden", "128"}};
  CHECK(config_difference(lsh, 0, exact, 1) == "setting 'sampler' differs: rank 0 has 'lsh', rank 1 has 'exact'");
  CHECK(config_difference(exact, 1, lsh, 0) == "setting 'sampler' differs: rank 1 has 'exact', rank 0 has 'lsh'");
  // One flag that moves several recorded settings (--sampler also picks the automatic lr): all named.
  RunConfig exact_lr = exact;
  exact_lr["lr"] = "0.001";
  RunConfig lsh_lr = lsh;
  lsh_lr["lr"] = "0.01";
  CHECK(config_difference(lsh_lr, 0, exact_lr, 1) ==
        "setting 'lr' differs: rank 0 has '0.01', rank 1 has '0.001'; 'sampler' differs too: 'lsh' and 'exact'");
}
