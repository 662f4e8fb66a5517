#include "comm/cluster_key.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <zmq.h>

#include "core/check.h"
#include "core/regular_file.h"
#include "core/staged_file.h"

namespace frugal::comm {

ClusterKey generate_cluster_key() {
  char pub[41], sec[41];
  FRUGAL_CHECK(zmq_curve_keypair(pub, sec) == 0,
               fmt::format("cannot make a CURVE key pair: {} (libzmq built without CURVE?)",
                           zmq_strerror(zmq_errno())));
  return {pub, sec};
}

void save_cluster_key(const ClusterKey& key, const std::string& path) {
  // Written whole under a temporary name (mode 0600) and linked into place only when complete and
  // only when no key is there: a full disk leaves no empty key file behind to block the retry.
  FRUGAL_CHECK(!std::filesystem::exists(std::filesystem::symlink_status(path)),
               fmt::format("cluster key file {}: exists already (it is not overwritten)", path));
  StagedFile file(path);
  file.write(fmt::format("public: {}\nsecret: {}\n", key.public_z85, key.secret_z85));
  file.commit(/*exclusive=*/true);
}

ClusterKey load_cluster_key(const std::string& path) {
  struct stat st{};
  FRUGAL_CHECK(::stat(path.c_str(), &st) == 0,
               fmt::format("cannot read cluster key file {}: {}", path, std::strerror(errno)));
  FRUGAL_CHECK((st.st_mode & 077) == 0,
               fmt::format("cluster key file {} is readable by others (mode {:o}); run chmod 600 {}",
                           path, st.st_mode & 0777, path));
  std::ifstream in = open_regular_file(path, "a cluster key file (frugal keygen)", std::ios::in);
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
