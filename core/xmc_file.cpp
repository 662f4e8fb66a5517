#include "core/xmc_file.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal::data {
namespace {

class LineParser {
 public:
  LineParser(const std::string& name, size_t line_no, std::string_view text)
      : name_(name), line_no_(line_no), text_(text) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(fmt::format("{}:{}: {}", name_, line_no_, what));
  }

  template <class T>
  T parse_number(std::string_view token, const char* what) const {
    T value{};
    const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
    if (ec != std::errc() || end != token.data() + token.size() || token.empty())
      fail(fmt::format("bad token '{}': expected {}", token, what));
    return value;
  }

  // Splits the line into whitespace-separated tokens.
  std::vector<std::string_view> tokens() const {
    std::vector<std::string_view> out;
    size_t i = 0;
    while (i < text_.size()) {
      while (i < text_.size() && (text_[i] == ' ' || text_[i] == '\t' || text_[i] == '\r')) ++i;
      const size_t start = i;
      while (i < text_.size() && text_[i] != ' ' && text_[i] != '\t' && text_[i] != '\r') ++i;
      if (i > start) out.push_back(text_.substr(start, i - start));
    }
    return out;
  }

 private:
  const std::string& name_;
  size_t line_no_;
  std::string_view text_;
};

}  // namespace

namespace {

// Sizes counted in a first pass over the raw bytes, so the point arrays are allocated once at their
// final size: growing them by doubling would hold up to three times the data at the moment of a
// reallocation, which is what runs a small machine out of memory on Amazon-670K-sized files.
struct Counts {
  uint64_t colons = 0, commas = 0, lines = 0;
};

Counts count_bytes(const std::string& path) {
  Counts c;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return c;
  std::vector<char> buf(1 << 22);
  size_t got = 0;
  while ((got = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
    for (size_t i = 0; i < got; ++i) {
      c.colons += buf[i] == ':';
      c.commas += buf[i] == ',';
      c.lines += buf[i] == '\n';
    }
  }
  std::fclose(f);
  return c;
}

bool is_feature(std::string_view token) { return token.find(':') != std::string_view::npos; }

Dataset read_xmc(std::istream& in, const std::string& name, const Counts* counts) {
  Dataset data;
  data.source = name;
  std::string line;
  size_t line_no = 1;
  if (!std::getline(in, line)) throw Error(fmt::format("{}:1: empty file: expected header 'N F L'", name));
  // A UTF-8 byte-order mark, as some Windows editors write, is not part of the header.
  if (line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);
  uint64_t n = 0;
  {
    LineParser p(name, line_no, line);
    const auto tok = p.tokens();
    if (tok.size() != 3) p.fail(fmt::format("bad header '{}': expected 'N F L' (points, features, labels)", line));
    n = p.parse_number<uint64_t>(tok[0], "the number of points N");
    data.num_features = p.parse_number<uint32_t>(tok[1], "the number of features F");
    data.num_labels = p.parse_number<uint32_t>(tok[2], "the number of labels L");
  }
  data.points.feature_offsets.reserve(n + 1);
  data.points.label_offsets.reserve(n + 1);
  if (counts != nullptr) {
    data.points.feature_ids.reserve(counts->colons);
    data.points.feature_values.reserve(counts->colons);
    data.points.label_ids.reserve(counts->commas + std::min<uint64_t>(n, counts->lines));
  }
  const auto one_based_hint = [](uint32_t id, uint32_t limit) {
    return id == limit ? " (ids are 0-based: is this file 1-based?)" : "";
  };
  std::vector<uint32_t> ids, labels;
  std::vector<float> values;
  while (std::getline(in, line)) {
    ++line_no;
    LineParser p(name, line_no, line);
    const auto tok = p.tokens();
    if (tok.empty()) {
      // Blank lines after the last point are tolerated. Inside the file, a line of spaces is a
      // point with neither labels nor features (what sklearn's dump_svmlight_file writes for one);
      // a line with no separator at all is not a point.
      if (data.size() >= n) continue;  // a later non-blank line is still "more points than N"
      if (line.find_first_of(" \t") == std::string::npos) {
        if (in.peek() == std::char_traits<char>::eof()) break;
        p.fail("empty line: expected 'labels features' (a point with neither is a line holding one space)");
      }
    }
    if (data.size() >= n) p.fail(fmt::format("more points than the header's N = {}", n));
    ids.clear();
    values.clear();
    labels.clear();
    size_t first_feature = 0;
    if (!tok.empty() && !is_feature(tok[0])) {  // label list present
      // "1,2,3" is the repository's form; "1, 2, 3" (LSHTC's original files) continues the list
      // into the next tokens while a token ends with a comma and the next is no feature.
      size_t last = 0;
      while (tok[last].ends_with(',') && last + 1 < tok.size() && !is_feature(tok[last + 1])) ++last;
      first_feature = last + 1;
      for (size_t t = 0; t <= last; ++t) {
        std::string_view list = tok[t];
        if (t < last) list.remove_suffix(1);  // the separating comma
        while (!list.empty()) {
          const size_t comma = list.find(',');
          const std::string_view item = list.substr(0, comma);
          const auto label = p.parse_number<uint32_t>(item, "a label id");
          if (label >= data.num_labels)
            p.fail(fmt::format("label id {} >= L = {}{}", label, data.num_labels, one_based_hint(label, data.num_labels)));
          labels.push_back(label);
          if (comma == std::string_view::npos) break;
          list.remove_prefix(comma + 1);
          if (list.empty()) p.fail(fmt::format("bad token '{}': trailing comma in label list", tok[t]));
        }
      }
    }
    for (size_t t = first_feature; t < tok.size(); ++t) {
      const size_t colon = tok[t].find(':');
      if (colon == std::string_view::npos) p.fail(fmt::format("bad token '{}': expected feature:value", tok[t]));
      const auto id = p.parse_number<uint32_t>(tok[t].substr(0, colon), "a feature id");
      const auto value = p.parse_number<float>(tok[t].substr(colon + 1), "a feature value");
      if (id >= data.num_features)
        p.fail(fmt::format("feature id {} >= F = {}{}", id, data.num_features, one_based_hint(id, data.num_features)));
      if (!std::isfinite(value)) p.fail(fmt::format("non-finite value in '{}'", tok[t]));
      ids.push_back(id);
      values.push_back(value);
    }
    data.points.add_point(ids, values, labels);
  }
  if (in.bad()) throw Error(fmt::format("{}:{}: read error", name, line_no));
  if (data.size() != n)
    throw Error(fmt::format("{}:{}: file has {} points but the header says N = {}", name, line_no,
                            data.size(), n));
  return data;
}

}  // namespace

Dataset XmcFile::open(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("{}: cannot open for reading", path));
  const Counts counts = count_bytes(path);
  return read_xmc(in, path, &counts);
}

Dataset XmcFile::read(std::istream& in, const std::string& name) { return read_xmc(in, name, nullptr); }

void XmcFile::write(const Dataset& data, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) throw Error(fmt::format("{}: cannot open for writing", path));
  fmt::memory_buffer buf;
  fmt::format_to(std::back_inserter(buf), "{} {} {}\n", data.size(), data.num_features, data.num_labels);
  for (size_t i = 0; i < data.size(); ++i) {
    const auto labels = data.points.labels_of(i);
    for (size_t j = 0; j < labels.size(); ++j)
      fmt::format_to(std::back_inserter(buf), fmt::runtime(j == 0 ? "{}" : ",{}"), labels[j]);
    const auto ids = data.points.features_of(i);
    const auto vals = data.points.values_of(i);
    for (size_t j = 0; j < ids.size(); ++j)
      fmt::format_to(std::back_inserter(buf), " {}:{}", ids[j], vals[j]);
    buf.push_back('\n');
    if (buf.size() > (1u << 20)) {
      std::fwrite(buf.data(), 1, buf.size(), f);
      buf.clear();
    }
  }
  std::fwrite(buf.data(), 1, buf.size(), f);
  const bool ok = std::ferror(f) == 0;
  if (std::fclose(f) != 0 || !ok) throw Error(fmt::format("{}: write failed", path));
}

}  // namespace frugal::data
