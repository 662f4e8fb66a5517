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

Dataset XmcFile::open(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("{}: cannot open for reading", path));
  return read(in, path);
}

Dataset XmcFile::read(std::istream& in, const std::string& name) {
  Dataset data;
  data.source = name;
  std::string line;
  size_t line_no = 1;
  if (!std::getline(in, line)) throw Error(fmt::format("{}:1: empty file: expected header 'N F L'", name));
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
  std::vector<uint32_t> ids, labels;
  std::vector<float> values;
  while (std::getline(in, line)) {
    ++line_no;
    LineParser p(name, line_no, line);
    const auto tok = p.tokens();
    if (tok.empty()) {
      // A trailing empty line at the end of the file is tolerated; an empty line in the middle is
      // a point with neither labels nor features, which the format cannot express.
      if (in.peek() == std::char_traits<char>::eof()) break;
      p.fail("empty line: expected 'labels features'");
    }
    if (data.size() >= n) p.fail(fmt::format("more points than the header's N = {}", n));
    ids.clear();
    values.clear();
    labels.clear();
    size_t first_feature = 0;
    if (tok[0].find(':') == std::string_view::npos) {  // label list present
      first_feature = 1;
      std::string_view list = tok[0];
      while (!list.empty()) {
        const size_t comma = list.find(',');
        const std::string_view item = list.substr(0, comma);
        const auto label = p.parse_number<uint32_t>(item, "a label id");
        if (label >= data.num_labels)
          p.fail(fmt::format("label id {} >= L = {}", label, data.num_labels));
        labels.push_back(label);
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
        if (list.empty()) p.fail(fmt::format("bad token '{}': trailing comma in label list", tok[0]));
      }
    }
    for (size_t t = first_feature; t < tok.size(); ++t) {
      const size_t colon = tok[t].find(':');
      if (colon == std::string_view::npos) p.fail(fmt::format("bad token '{}': expected feature:value", tok[t]));
      const auto id = p.parse_number<uint32_t>(tok[t].substr(0, colon), "a feature id");
      const auto value = p.parse_number<float>(tok[t].substr(colon + 1), "a feature value");
      if (id >= data.num_features)
        p.fail(fmt::format("feature id {} >= F = {}", id, data.num_features));
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
