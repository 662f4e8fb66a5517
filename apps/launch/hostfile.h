// `frugal launch --hostfile FILE`: the hosts of a multi-host run, and the command line that starts
// one rank on one of them over ssh.
//
// FILE has one host per line, `host` or `host slots=K` (K ranks may run there; default 1), `#`
// starting a comment, blank lines ignored. Ranks fill the hosts in file order: ranks 0..K0-1 on the
// first host, the next K1 on the second, and so on.
//
// Stopping a remote rank: killing the local ssh client does not stop the remote command (sshd sends
// it no signal when the connection drops unless it has a terminal, and a forced terminal, ssh -tt,
// would merge its stderr into its stdout and echo). So the remote command is wrapped in a small
// POSIX sh script that starts the rank in the background and reads its own stdin, which is the ssh
// channel: the launcher keeps the write end of that pipe open for as long as the rank should run.
// When the launcher closes it (another rank failed), or the ssh client or the launcher dies (even
// by SIGKILL: the kernel closes the pipe), or the connection drops, the read sees end of file and
// the wrapper sends the rank SIGTERM, then SIGKILL after the grace period. The wrapper exits with
// the rank's status, which ssh passes back.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace frugal::cli {

struct HostfileEntry {
  std::string host;  // as ssh takes it: "name" or "user@name"
  int slots = 1;
  int line = 0;
};

// Throws frugal::Error naming the file and the line of a malformed entry, or the file when it
// cannot be read or lists no host.
std::vector<HostfileEntry> read_hostfile(const std::string& path);

// The host of each of `ranks` ranks (in file order, filling slots); throws naming the file, the
// ranks asked for and the slots it has when they do not fit.
std::vector<std::string> place_ranks(const std::vector<HostfileEntry>& hosts, int ranks, const std::string& path);

// The address part of an ssh destination: "user@node1" -> "node1".
std::string host_address(std::string_view destination);

// `text` as one word for a POSIX shell: single-quoted unless it is made of safe characters only.
std::string shell_quote(std::string_view text);

// --ssh "ssh -i KEY -o X=Y": the words of a command, split at blanks; single and double quotes
// group words ("ssh -i 'my key'"). Throws naming `what` on an unclosed quote or an empty command.
std::vector<std::string> split_words(std::string_view text, std::string_view what);

// The text ssh hands the remote login shell: the wrapper above, run in `directory` when it exists
// there (else the home directory, as mpirun does), running `env NAME=VALUE... COMMAND...`.
std::string remote_command(const std::string& directory, const std::map<std::string, std::string>& env,
                           const std::vector<std::string>& command, int grace_seconds);

}  // namespace frugal::cli
