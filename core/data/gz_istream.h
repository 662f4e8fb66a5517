// An std::istream over a file that may be gzip-compressed: zlib's gzread decompresses a .gz file
// and passes any other file through unchanged, so one reader serves both (the Criteo Kaggle file
// is usually kept compressed). A corrupt or truncated gzip stream makes the stream bad(), and
// error() says what zlib reported, for the reader to put next to its file:line.
#pragma once

#include <istream>
#include <memory>
#include <string>

namespace frugal::data {

class GzIstream : public std::istream {
 public:
  explicit GzIstream(const std::string& path);  // throws frugal::Error "{path}: cannot open for reading"
  ~GzIstream() override;
  GzIstream(const GzIstream&) = delete;
  GzIstream& operator=(const GzIstream&) = delete;

  bool compressed() const;    // false: a plain file passed through
  std::string error() const;  // zlib's message after a read error, else ""

 private:
  class Buf;
  std::unique_ptr<Buf> buf_;
};

}  // namespace frugal::data
