#include "core/data/ctr_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "core/check.h"
#include "core/quote.h"

namespace frugal::data {
namespace {

[[noreturn]] void fail_field(const std::string& name, size_t line_no, size_t column, const std::string& what) {
  throw Error(fmt::format("{}:{}: column {} ({}): {}", name, line_no, column, ctr_column_name(column), what));
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

uint64_t parse_hex(std::string_view token, const std::string& name, size_t line_no, size_t column) {
  if (token.size() > 16)
    fail_field(name, line_no, column, fmt::format("id {} is longer than 16 hex digits", quote_input(token)));
  uint64_t value = 0;
  for (const char c : token) {
    const int d = hex_digit(c);
    if (d < 0) fail_field(name, line_no, column, fmt::format("bad id {}: expected hex digits", quote_input(token)));
    value = (value << 4) | static_cast<uint64_t>(d);
  }
  if (value == kMissingCategory)
    fail_field(name, line_no, column,
               fmt::format("id {} equals the missing-value id 2^32 (kMissingCategory)", quote_input(token)));
  return value;
}

int64_t parse_int(std::string_view token, const std::string& name, size_t line_no, size_t column) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (ec == std::errc::result_out_of_range)
    fail_field(name, line_no, column, fmt::format("integer {} out of range (64-bit)", quote_input(token)));
  if (ec != std::errc() || end != token.data() + token.size())
    fail_field(name, line_no, column, fmt::format("bad value {}: expected an integer", quote_input(token)));
  return value;
}

char* put_hex(char* p, uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  int digits = 8;
  while (digits < 16 && (v >> (4 * digits)) != 0) ++digits;
  for (int d = digits - 1; d >= 0; --d) *p++ = kDigits[(v >> (4 * d)) & 0xf];
  return p;
}

}  // namespace

std::string ctr_column_name(size_t column) {
  FRUGAL_CHECK(column >= 1 && column <= kCtrColumns, fmt::format("no Criteo column {}", column));
  if (column == 1) return "label";
  if (column <= 1 + kCtrDense) return fmt::format("I{}", column - 1);
  return fmt::format("C{}", column - 1 - kCtrDense);
}

float ctr_dense_transform(int64_t x) { return static_cast<float>(std::log1p(static_cast<double>(std::max<int64_t>(x, 0)))); }

void CtrBatch::clear() {
  size = 0;
  labels.clear();
  dense.clear();
  cats.clear();
}

void CtrBatch::reserve(size_t samples) {
  labels.reserve(samples);
  dense.reserve(samples * kCtrDense);
  cats.reserve(samples * kCtrCats);
}

void CtrBatch::append(const CtrBatch& from, size_t i) {
  FRUGAL_CHECK(i < from.size, fmt::format("CtrBatch::append: sample {} of {}", i, from.size));
  labels.push_back(from.labels[i]);
  const auto d = from.dense_of(i);
  dense.insert(dense.end(), d.begin(), d.end());
  const auto c = from.cats_of(i);
  cats.insert(cats.end(), c.begin(), c.end());
  ++size;
}

void CtrBatch::validate() const {
  FRUGAL_CHECK(labels.size() == size && dense.size() == size * kCtrDense && cats.size() == size * kCtrCats,
               fmt::format("CtrBatch of {} samples holds {} labels, {} dense and {} categorical values", size,
                           labels.size(), dense.size(), cats.size()));
}

CtrRecord parse_ctr_line(std::string_view text, const std::string& name, size_t line_no) {
  if (text.ends_with('\r')) text.remove_suffix(1);  // CRLF line endings
  std::string_view fields[kCtrColumns];
  size_t count = 0, start = 0;
  while (true) {
    const size_t tab = text.find('\t', start);
    if (count < kCtrColumns) fields[count] = text.substr(start, tab == std::string_view::npos ? tab : tab - start);
    ++count;
    if (tab == std::string_view::npos) break;
    start = tab + 1;
  }
  if (count != kCtrColumns)
    throw Error(fmt::format("{}:{}: {} tab-separated fields: expected {} (label, I1-I13, C1-C26)", name, line_no,
                            count, kCtrColumns));
  CtrRecord r;
  if (fields[0] != "0" && fields[0] != "1")
    fail_field(name, line_no, 1, fmt::format("bad label {}: expected 0 or 1", quote_input(fields[0])));
  r.label = fields[0] == "1";
  for (size_t j = 0; j < kCtrDense; ++j) {
    const std::string_view f = fields[1 + j];
    r.int_missing[j] = f.empty();
    if (!f.empty()) r.ints[j] = parse_int(f, name, line_no, 2 + j);
  }
  for (size_t j = 0; j < kCtrCats; ++j) {
    const std::string_view f = fields[1 + kCtrDense + j];
    r.cats[j] = f.empty() ? kMissingCategory : parse_hex(f, name, line_no, 2 + kCtrDense + j);
  }
  return r;
}

void append_record(const CtrRecord& r, CtrBatch& out) {
  out.labels.push_back(static_cast<float>(r.label));
  for (size_t j = 0; j < kCtrDense; ++j) out.dense.push_back(r.int_missing[j] ? 0.0f : ctr_dense_transform(r.ints[j]));
  out.cats.insert(out.cats.end(), r.cats, r.cats + kCtrCats);
  ++out.size;
}

void format_ctr_line(const CtrRecord& r, std::string& out) {
  char buf[kCtrColumns * 24];  // an int64 takes at most 20 characters, a hex id 16
  char* p = buf;
  *p++ = r.label ? '1' : '0';
  for (size_t j = 0; j < kCtrDense; ++j) {
    *p++ = '\t';
    if (!r.int_missing[j]) p = std::to_chars(p, buf + sizeof buf, r.ints[j]).ptr;
  }
  for (size_t j = 0; j < kCtrCats; ++j) {
    *p++ = '\t';
    if (r.cats[j] != kMissingCategory) p = put_hex(p, r.cats[j]);
  }
  *p++ = '\n';
  out.append(buf, p);
}

}  // namespace frugal::data
