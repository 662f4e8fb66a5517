#include "core/data/gz_istream.h"

#include <streambuf>
#include <vector>

#include <fmt/format.h>
#include <zlib.h>

#include "core/check.h"
#include "core/regular_file.h"

namespace frugal::data {

class GzIstream::Buf : public std::streambuf {
 public:
  explicit Buf(const std::string& path)
      : file_(gzdopen(open_regular_fd(path, "a data file"), "rb")), data_(1 << 20) {
    if (file_ == nullptr) throw Error(fmt::format("{}: cannot open for reading", path));
    gzbuffer(file_, 1 << 20);
  }
  ~Buf() override { gzclose(file_); }

  bool direct() { return gzdirect(file_) == 1; }
  const std::string& error() const { return error_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    const int got = gzread(file_, data_.data(), static_cast<unsigned>(data_.size()));
    int code = Z_OK;
    const char* msg = got <= 0 ? gzerror(file_, &code) : nullptr;
    // A truncated gzip stream ends in a zlib error rather than a short read: that is no clean end.
    if (got < 0 || (got == 0 && code != Z_OK && code != Z_STREAM_END)) {
      error_ = fmt::format("truncated or corrupt gzip data: {}", msg ? msg : "unknown zlib error");
      throw Error(error_);  // std::istream turns this into badbit
    }
    if (got == 0) return traits_type::eof();
    setg(data_.data(), data_.data(), data_.data() + got);
    return traits_type::to_int_type(*gptr());
  }

 private:
  gzFile file_;
  std::vector<char> data_;
  std::string error_;
};

GzIstream::GzIstream(const std::string& path) : std::istream(nullptr), buf_(std::make_unique<Buf>(path)) {
  rdbuf(buf_.get());
}

GzIstream::~GzIstream() = default;

bool GzIstream::compressed() const { return !buf_->direct(); }
std::string GzIstream::error() const { return buf_->error(); }

}  // namespace frugal::data
