#include "comm/cluster_key.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <zmq.h>

#include "core/check.h"

namespace frugal::comm {

ClusterKey generate_cluster_key() {
  char pub[41], sec[41];
  FRUGAL_CHECK(zmq_curve_keypair(pub, sec) == 0,
               fmt::format("cannot make a CURVE key pair: {} (libzmq built without CURVE?)",
                           zmq_strerror(zmq_errno())));
  return {pub, sec};
}

void save_cluster_key(const ClusterKey& key, const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  FRUGAL_CHECK(fd >= 0, fmt::format("cannot create cluster key file {}: {}", path,
                                    std::strerror(errno)));
  const std::string text = fmt::format("public: {}\nsecret: {}\n", key.public_z85, key.secret_z85);
  const ssize_t n = ::write(fd, text.data(), text.size());
  ::close(fd);
  FRUGAL_CHECK(n == static_cast<ssize_t>(text.size()),
               fmt::format("cannot write cluster key file {}", path));
}

ClusterKey load_cluster_key(const std::string& path) {
  struct stat st{};
  FRUGAL_CHECK(::stat(path.c_str(), &st) == 0,
               fmt::format("cannot read cluster key file {}: {}", path, std::strerror(errno)));
  FRUGAL_CHECK((st.st_mode & 077) == 0,
               fmt::format("cluster key file {} is readable by others (mode {:o}); run chmod 600 {}",
                           path, st.st_mode & 0777, path));
  std::ifstream in(path);
  ClusterKey key;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    std::istringstream ls(line);
    std::string name, value;
    ls >> name >> value;
    if (name == "public:") {
      key.public_z85 = value;
    } else if (name == "secret:") {
      key.secret_z85 = value;
    } else {
      FRUGAL_CHECK(false, fmt::format("{}:{}: expected 'public: KEY' or 'secret: KEY'", path, line_no));
    }
  }
  FRUGAL_CHECK(key.public_z85.size() == 40 && key.secret_z85.size() == 40,
               fmt::format("{}: needs a 40-character 'public:' and 'secret:' key (made by frugal "
                           "keygen)", path));
  char derived[41];
  FRUGAL_CHECK(zmq_curve_public(derived, key.secret_z85.c_str()) == 0 &&
                   key.public_z85 == derived,
               fmt::format("{}: the public key does not belong to the secret key", path));
  return key;
}

}  // namespace frugal::comm
