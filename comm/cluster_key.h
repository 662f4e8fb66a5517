// The cluster key: one CURVE key pair shared by every rank of a run, made by `frugal keygen` and
// passed with --cluster-key FILE (or FRUGAL_CLUSTER_KEY). With it, ZeroMQ links are authenticated
// and encrypted and a process without the file can neither join, read nor inject frames.
// The file holds two lines, "public: <40 Z85 chars>" and "secret: <40 Z85 chars>", mode 0600.
#pragma once

#include <string>

namespace frugal::comm {

struct ClusterKey {
  std::string public_z85;  // 40 characters
  std::string secret_z85;  // 40 characters
};

ClusterKey generate_cluster_key();
// Writes the key with mode 0600; refuses to overwrite an existing file.
void save_cluster_key(const ClusterKey& key, const std::string& path);
// Reads and checks a key file: format, key lengths, the public key matching the secret one, and
// that the file is not readable by group or others.
ClusterKey load_cluster_key(const std::string& path);

}  // namespace frugal::comm
