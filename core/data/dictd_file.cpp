#include "core/data/dictd_file.h"

#include <algorithm>
#include <fstream>

#include <fmt/format.h>
#include <zlib.h>

#include "core/check.h"
#include "core/regular_file.h"
#include "core/quote.h"

namespace frugal::data {
namespace {

std::string read_gzip_or_plain(const std::string& path) {
  gzFile f = gzdopen(open_regular_fd(path, "a dictd file"), "rb");
  if (f == nullptr) throw Error(fmt::format("{}: cannot open for reading", path));
  // 128 KiB chunks: GCIDE's ~14 MB text still takes only ~100 reads, and a small file does not pay
  // for allocating and clearing 1 MiB buffers (they made the dictd fuzz target 1.5x slower).
  gzbuffer(f, 1 << 17);
  std::string out;
  std::vector<char> buf(1 << 17);
  while (true) {
    const int got = gzread(f, buf.data(), static_cast<unsigned>(buf.size()));
    if (got < 0) {
      int code = 0;
      const std::string msg = gzerror(f, &code);
      gzclose(f);
      throw Error(fmt::format("{}: truncated or corrupt data after {} bytes: {}", path, out.size(), msg));
    }
    if (got == 0) break;
    out.append(buf.data(), static_cast<size_t>(got));
  }
  gzclose(f);
  return out;
}

}  // namespace

uint64_t DictdFile::decode_number(std::string_view digits) {
  if (digits.empty() || digits.size() > 10) throw Error(fmt::format("bad dictd number {}", quote_input(digits)));
  uint64_t v = 0;
  for (const char c : digits) {
    int d = -1;
    if (c >= 'A' && c <= 'Z') d = c - 'A';
    else if (c >= 'a' && c <= 'z') d = c - 'a' + 26;
    else if (c >= '0' && c <= '9') d = c - '0' + 52;
    else if (c == '+') d = 62;
    else if (c == '/') d = 63;
    if (d < 0) throw Error(fmt::format("bad dictd number {}: '{}' is not a base64 digit", quote_input(digits), c));
    v = v * 64 + static_cast<uint64_t>(d);
  }
  return v;
}

DictdFile DictdFile::open(const std::string& index_path, const std::string& dict_path) {
  std::string text = read_gzip_or_plain(dict_path);
  std::ifstream in = open_regular_file(index_path, "a dictd index", std::ios::in);
  return parse(in, std::move(text), index_path, dict_path);
}

DictdFile DictdFile::parse(std::istream& in, std::string text, const std::string& index_path,
                           const std::string& dict_path) {
  DictdFile d;
  d.text_ = std::move(text);
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const size_t t1 = line.find('\t'), t2 = t1 == std::string::npos ? t1 : line.find('\t', t1 + 1);
    if (t2 == std::string::npos || line.find('\t', t2 + 1) != std::string::npos)
      throw Error(fmt::format("{}:{}: expected 'headword<TAB>offset<TAB>length', got {}", index_path, line_no,
                              quote_input(line)));
    DictdEntry e;
    e.headword = line.substr(0, t1);
    try {
      e.offset = decode_number(std::string_view(line).substr(t1 + 1, t2 - t1 - 1));
      e.length = decode_number(std::string_view(line).substr(t2 + 1));
    } catch (const Error& err) {
      throw Error(fmt::format("{}:{}: {}", index_path, line_no, err.what()));
    }
    if (e.offset > d.text_.size() || e.length > d.text_.size() - e.offset)
      throw Error(fmt::format("{}:{}: {} points at bytes {}..{}, past the end of {} ({} bytes): index and "
                              "dictionary do not belong together",
                              index_path, line_no, quote_input(e.headword), e.offset, e.offset + e.length, dict_path,
                              d.text_.size()));
    d.entries_.push_back(std::move(e));
  }
  if (in.bad()) throw Error(fmt::format("{}:{}: read error", index_path, line_no));
  return d;
}

std::vector<DictdEntry> DictdFile::articles() const {
  std::vector<DictdEntry> out;
  for (const DictdEntry& e : entries_)
    if (!e.headword.starts_with("00-")) out.push_back(e);  // 00-database-info, 00-gcide-url, ...
  std::sort(out.begin(), out.end(), [](const DictdEntry& a, const DictdEntry& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.length < b.length;
  });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const DictdEntry& a, const DictdEntry& b) {
                          return a.offset == b.offset && a.length == b.length;
                        }),
            out.end());
  return out;
}

}  // namespace frugal::data
