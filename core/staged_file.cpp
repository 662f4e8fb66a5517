#include "core/staged_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal {

StagedFile::StagedFile(std::string target)
    : target_(std::move(target)), temp_(fmt::format("{}.tmp-{}", target_, ::getpid())) {
  FRUGAL_CHECK(!target_.empty(), "an output file needs a name");
  struct stat st{};
  if (::stat(target_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    FRUGAL_CHECK(!S_ISDIR(st.st_mode), fmt::format("{}: is a folder; expected the name of a file to write", target_));
    // A device or FIFO (/dev/null, /dev/stdout, a pipe): written in place, never replaced by a
    // file renamed over it; its writes are checked all the same.
    const int fd = ::open(target_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) throw Error(fmt::format("{}: cannot open for writing: {}", target_, std::strerror(errno)));
    file_ = ::fdopen(fd, "wb");
    if (file_ == nullptr) {
      ::close(fd);
      throw Error(fmt::format("{}: cannot open for writing: {}", target_, std::strerror(errno)));
    }
    direct_ = true;
    return;
  }
  // 0600 until committed: a key file must never be readable by others, not even while written.
  const int fd = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw Error(fmt::format("{}: cannot create: {}", target_, std::strerror(errno)));
  file_ = ::fdopen(fd, "wb");
  if (file_ == nullptr) {
    ::close(fd);
    ::unlink(temp_.c_str());
    throw Error(fmt::format("{}: cannot create: {}", target_, std::strerror(errno)));
  }
}

StagedFile::~StagedFile() {
  if (file_ == nullptr) return;
  std::fclose(file_);
  if (!direct_) ::unlink(temp_.c_str());
}

void StagedFile::write(std::string_view bytes) {
  FRUGAL_CHECK(file_ != nullptr, fmt::format("{}: written after it was committed", target_));
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size())
    throw Error(fmt::format("{}: write failed: {}", target_, std::strerror(errno)));
}

void StagedFile::commit(bool exclusive) {
  FRUGAL_CHECK(file_ != nullptr, fmt::format("{}: committed twice", target_));
  if (direct_) {
    FRUGAL_CHECK(!exclusive, fmt::format("{}: exists already (it is not overwritten)", target_));
    const bool flushed = std::fflush(file_) == 0 && std::ferror(file_) == 0;
    const int error = errno;
    const int rc = std::fclose(file_);
    file_ = nullptr;
    if (!flushed || rc != 0) throw Error(fmt::format("{}: write failed: {}", target_, std::strerror(flushed ? errno : error)));
    return;
  }
  const bool ok = std::fflush(file_) == 0 && std::ferror(file_) == 0 && ::fsync(::fileno(file_)) == 0;
  const int error = errno;
  const int rc = std::fclose(file_);
  file_ = nullptr;
  if (!ok || rc != 0) {
    ::unlink(temp_.c_str());
    throw Error(fmt::format("{}: write failed: {}", target_, std::strerror(ok ? errno : error)));
  }
  if (!exclusive) {  // as a plain create would have made it
    const mode_t mask = ::umask(0);
    ::umask(mask);
    ::chmod(temp_.c_str(), 0666 & ~mask);
  }
  // link() fails when the target exists: the no-overwrite commit. rename() replaces it.
  const bool moved = exclusive ? ::link(temp_.c_str(), target_.c_str()) == 0 : ::rename(temp_.c_str(), target_.c_str()) == 0;
  const int move_error = errno;
  if (exclusive || !moved) ::unlink(temp_.c_str());
  if (!moved)
    throw Error(fmt::format("{}: {}", target_,
                            move_error == EEXIST ? "exists already (it is not overwritten)" : std::strerror(move_error)));
}

}  // namespace frugal
