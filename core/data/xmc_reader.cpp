#include "core/data/xmc_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string_view>

#include <fmt/format.h>

#include "core/check.h"
#include "core/regular_file.h"
#include "core/data/line_input.h"
#include "core/data/packed_file.h"
#include "core/data/point_checks.h"
#include "core/quote.h"

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
      fail(fmt::format("bad token {}: expected {}", quote_input(token), what));
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

constexpr std::string_view kHint = "is this an XMC text file?";

bool is_feature(std::string_view token) { return token.find(':') != std::string_view::npos; }

}  // namespace

XmcReader::XmcReader(const std::string& path) : name_(path) {
  if (is_packed_file(path)) {
    packed_ = std::make_unique<PackedReader>(path);
    const PackedHeader& h = packed_->header();
    if (h.kind != PackedKind::points)
      throw Error(fmt::format("{}: packed Criteo click logs, not an XMC data set (they train --model dlrm)", path));
    num_points_ = h.points;
    num_features_ = h.features;
    num_labels_ = h.labels;
    return;
  }
  owned_ = std::make_unique<std::ifstream>(open_regular_file(path, "an XMC data file", std::ios::in));
  in_ = owned_.get();
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  if (!ec) size_limit_ = bytes;
  read_header();
}

XmcReader::XmcReader(std::istream& in, const std::string& name) : in_(&in), name_(name) { read_header(); }

XmcReader::~XmcReader() = default;
XmcReader::XmcReader(XmcReader&&) noexcept = default;
XmcReader& XmcReader::operator=(XmcReader&&) noexcept = default;

void XmcReader::read_header() {
  if (!read_line(*in_, line_, kMaxLineBytes, name_, line_no_, kHint))
    throw Error(fmt::format("{}:1: empty file: expected header 'N F L'", name_));
  // A UTF-8 byte-order mark, as some Windows editors write, is not part of the header.
  if (line_.starts_with("\xEF\xBB\xBF")) line_.erase(0, 3);
  LineParser p(name_, line_no_, line_);
  const auto tok = p.tokens();
  if (tok.size() != 3)
    p.fail(fmt::format("bad header {}: expected 'N F L' (points, features, labels)", quote_input(line_)));
  num_points_ = p.parse_number<uint64_t>(tok[0], "the number of points N");
  num_features_ = p.parse_number<uint32_t>(tok[1], "the number of features F");
  num_labels_ = p.parse_number<uint32_t>(tok[2], "the number of labels L");
  // Ids are uint32: a count past that is a corrupt header, not a data set (and must not be reserved).
  if (num_points_ > UINT32_MAX)
    p.fail(fmt::format("N = {} points in the header: expected at most {}", num_points_, UINT32_MAX));
  // Every point takes a line, so a file of S bytes holds at most S points.
  if (size_limit_ != UINT64_MAX) {
    const uint64_t rest = size_limit_ - std::min<uint64_t>(size_limit_, line_.size() + 1);
    if (num_points_ > rest)
      p.fail(fmt::format("the header says N = {} points but the file has only {} bytes after it", num_points_,
                         rest));
  }
}

void XmcReader::limit_features(uint32_t limit, const std::string& what) {
  feature_limit_ = limit;
  limit_what_ = what;
}

size_t XmcReader::read(SparseBatch& out, size_t max_points) {
  FRUGAL_CHECK(max_points > 0, "XmcReader::read: ask for at least one point");
  if (finished_) return 0;
  if (packed_) return read_packed(out, max_points);
  size_t added = 0;
  while (added < max_points && read_line(*in_, line_, kMaxLineBytes, name_, line_no_ + 1, kHint)) {
    ++line_no_;
    if (parse_point(out)) ++added;
  }
  if (added < max_points) {  // the stream is exhausted
    if (in_->bad()) throw Error(fmt::format("{}:{}: read error", name_, line_no_));
    if (points_read_ != num_points_)
      throw Error(fmt::format("{}:{}: file has {} points but the header says N = {}", name_, line_no_, points_read_,
                              num_points_));
    finished_ = true;
  }
  return added;
}

size_t XmcReader::read_packed(SparseBatch& out, size_t max_points) {
  size_t added = 0;
  while (added < max_points) {
    if (packed_served_ == packed_points_.size()) {
      if (packed_block_ == packed_->header().blocks()) {
        finished_ = true;
        break;
      }
      packed_points_.clear();
      packed_served_ = 0;
      packed_->read_points(packed_block_++, packed_points_, feature_limit_, limit_what_);
      continue;
    }
    const size_t i = packed_served_++;
    out.add_point(packed_points_.features_of(i), packed_points_.values_of(i), packed_points_.labels_of(i));
    ++added;
    ++points_read_;
  }
  return added;
}

bool XmcReader::parse_point(SparseBatch& out) {
  LineParser p(name_, line_no_, line_);
  const auto tok = p.tokens();
  if (tok.empty()) {
    // Blank lines after the last point are tolerated. Inside the file, a line of spaces is a
    // point with neither labels nor features (what sklearn's dump_svmlight_file writes for one);
    // a line with no separator at all is not a point.
    if (points_read_ >= num_points_) return false;  // a later non-blank line is still "more points than N"
    if (line_.find_first_of(" \t") == std::string::npos) {
      if (in_->peek() == std::char_traits<char>::eof()) return false;
      p.fail("empty line: expected 'labels features' (a point with neither is a line holding one space)");
    }
  }
  if (points_read_ >= num_points_) p.fail(fmt::format("more points than the header's N = {}", num_points_));
  ids_.clear();
  values_.clear();
  labels_.clear();
  // The entry checks every face of frugal shares (core/data/point_checks.h); the error names file:line.
  const PointLimits limits{.num_features = num_features_, .num_labels = num_labels_, .feature_limit = feature_limit_,
                           .limit_what = limit_what_};
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
        if (std::string why = label_problem(limits, label); !why.empty()) p.fail(why);
        labels_.push_back(label);
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
        if (list.empty()) p.fail(fmt::format("bad token {}: trailing comma in label list", quote_input(tok[t])));
      }
    }
  }
  for (size_t t = first_feature; t < tok.size(); ++t) {
    const size_t colon = tok[t].find(':');
    if (colon == std::string_view::npos)
      p.fail(fmt::format("bad token {}: expected feature:value", quote_input(tok[t])));
    const auto id = p.parse_number<uint32_t>(tok[t].substr(0, colon), "a feature id");
    const auto value = p.parse_number<float>(tok[t].substr(colon + 1), "a feature value");
    if (std::string why = feature_problem(limits, id, value, tok[t]); !why.empty()) p.fail(why);
    ids_.push_back(id);
    values_.push_back(value);
  }
  out.add_point(ids_, values_, labels_);
  ++points_read_;
  return true;
}

}  // namespace frugal::data
