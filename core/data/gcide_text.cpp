#include "core/data/gcide_text.h"

#include <algorithm>

namespace frugal::data {
namespace {

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The letters an escape such as [a^], ['e], [=oo], [ae], [imac], [thorn] stands for.
std::string escape_letters(std::string_view inner) {
  const bool has_mark = std::any_of(inner.begin(), inner.end(), [](char c) { return !is_letter(c); });
  std::string letters;
  for (const char c : inner)
    if (is_letter(c)) letters += c;
  if (has_mark || letters.size() <= 2) return letters;  // [a^] -> a, [=oo] -> oo, [ae] -> ae, [ng] -> ng
  if (letters == "eth" || letters == "thorn") return "th";
  return letters.substr(0, 1);  // named accents: [imac] -> i, [aum] -> a, [yogh] -> y
}

// The index of the ']' matching the '[' at `open`, or npos when it is never closed.
size_t matching_bracket(std::string_view s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '[') ++depth;
    if (s[i] == ']' && --depth == 0) return i;
  }
  return std::string_view::npos;
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// "Banc \Banc\, Bancus \Ban"cus\, Bank \Bank\, n. [OF..." -> Banc, Bancus, Bank.
std::vector<std::string> headwords_of(std::string_view first_line) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    const size_t open = first_line.find(" \\", pos);
    if (open == std::string_view::npos) break;
    std::string_view word = trim(first_line.substr(pos, open - pos));
    if (!out.empty()) {  // between two items: ", " or " or "
      if (word.starts_with(",")) word = trim(word.substr(1));
      if (word.starts_with("or ")) word = trim(word.substr(3));
    }
    // After the first item, anything but a word before a backslash (a part of speech, an
    // etymology) ends the headwords.
    if (word.empty() || (!out.empty() && word.find_first_of("([.;,") != std::string_view::npos)) break;
    const size_t close = first_line.find('\\', open + 2);
    if (close == std::string_view::npos) break;
    std::string resolved(trim(resolve_gcide_markup(word)));
    if (!resolved.empty()) out.push_back(std::move(resolved));
    pos = close + 1;
  }
  return out;
}

bool starts_sense(std::string_view line) {  // "   12. text"
  if (!line.starts_with("   ") || line.size() < 6) return false;
  size_t i = 3;
  while (i < line.size() && line[i] >= '0' && line[i] <= '9') ++i;
  return i > 3 && i + 1 < line.size() && line[i] == '.' && line[i + 1] == ' ';
}

bool starts_subentry(std::string_view line) { return line.starts_with("   {"); }

}  // namespace

std::string resolve_gcide_markup(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '[') {
      const size_t close = matching_bracket(s, i);
      const size_t end = close == std::string_view::npos ? s.size() : close + 1;
      const std::string_view inner = s.substr(i + 1, (close == std::string_view::npos ? s.size() : close) - i - 1);
      const bool attached = (i > 0 && is_letter(s[i - 1])) || (end < s.size() && is_letter(s[end]));
      const bool escape = attached && inner.size() <= 8 &&
                          std::none_of(inner.begin(), inner.end(), [](char ch) { return is_space(ch) || ch == '['; });
      out += escape ? escape_letters(inner) : " ";
      i = end;
    } else if (c == '\\') {  // \pro*nun"ci*a`tion\ is not text
      const size_t end = s.find('\\', i + 1);
      out += ' ';
      i = end == std::string_view::npos ? s.size() : end + 1;
    } else if (c == '{' || c == '}') {
      ++i;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

GcideArticle parse_gcide_article(std::string_view article) {
  GcideArticle a;
  const auto lines = split_lines(article);
  if (lines.empty()) return a;
  a.headwords = headwords_of(lines[0]);
  // The header: the first line, and the following ones while an etymology it opens is unclosed
  // (at most a dozen: an unbalanced bracket must not swallow the article).
  size_t body = 1;
  int depth = 0;
  for (size_t l = 0; l < lines.size() && l < 12; ++l) {
    for (const char c : lines[l]) depth += c == '[' ? 1 : c == ']' ? -1 : 0;
    if (depth <= 0) {
      body = l + 1;
      break;
    }
  }
  std::string current;
  bool in_sense = false;
  const auto flush = [&] {
    std::string resolved = resolve_gcide_markup(current);
    if (!trim(resolved).empty()) a.definitions.push_back(std::move(resolved));
    current.clear();
  };
  for (size_t l = body; l < lines.size(); ++l) {
    if (starts_subentry(lines[l])) break;
    if (starts_sense(lines[l])) {
      // Text before the first numbered sense (rare: a general note) belongs to that sense.
      if (in_sense) flush();
      in_sense = true;
    }
    current.append(lines[l]);
    current += '\n';
  }
  flush();
  return a;
}

std::vector<std::string> gcide_words(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && !is_letter(text[i])) ++i;
    const size_t start = i;
    while (i < text.size() && is_letter(text[i])) ++i;
    if (i - start >= 2) {
      std::string w(text.substr(start, i - start));
      for (char& ch : w) ch = static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
      out.push_back(std::move(w));
    }
  }
  return out;
}

}  // namespace frugal::data
