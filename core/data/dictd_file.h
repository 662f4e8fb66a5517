// Reader for a dictd database: a .index file of `headword TAB offset TAB length` lines (offsets
// and lengths in dictd's base64 digits A-Za-z0-9+/) and the .dict text they point into, plain or
// gzip/dictzip-compressed (zlib reads both). Debian's dict-gcide installs
// /usr/share/dictd/gcide.index and gcide.dict.dz in this form.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

namespace frugal::data {

struct DictdEntry {
  std::string headword;
  uint64_t offset = 0, length = 0;
};

class DictdFile {
 public:
  // Reads the whole index and the whole (decompressed) text; errors name index:line.
  static DictdFile open(const std::string& index_path, const std::string& dict_path);
  // The same from the index as a stream and the text already decompressed (open's second half; the
  // fuzz target tests/fuzz/fuzz_dictd.cpp feeds it bytes); the names are for messages.
  static DictdFile parse(std::istream& index, std::string text, const std::string& index_name,
                         const std::string& dict_name);

  const std::vector<DictdEntry>& entries() const { return entries_; }
  std::string_view text(const DictdEntry& e) const { return std::string_view(text_).substr(e.offset, e.length); }
  // The distinct articles (several headwords may point at one), in text order, without dictd's
  // own 00-database-* records.
  std::vector<DictdEntry> articles() const;

  // dictd's base64 number ("B4s5L"); throws on a digit outside A-Za-z0-9+/.
  static uint64_t decode_number(std::string_view digits);

 private:
  std::string text_;
  std::vector<DictdEntry> entries_;
};

}  // namespace frugal::data
