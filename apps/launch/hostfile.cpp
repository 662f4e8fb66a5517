#include "apps/launch/hostfile.h"

#include <algorithm>
#include <cctype>
#include <fstream>

#include <fmt/format.h>

#include "core/check.h"
#include "core/regular_file.h"
#include "core/parse.h"
#include "core/quote.h"

namespace frugal::cli {
namespace {

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// The remote wrapper (see hostfile.h). $1 is the directory, the rest the rank's command. setsid,
// where the host has it, puts the rank in a process group of its own so that stopping it reaches
// the processes it started too. The watcher reads the ssh channel through fd 3 because an
// asynchronous command's stdin is /dev/null in a non-interactive sh unless it is redirected.
constexpr std::string_view kWrapper =
    "cd \"$1\" 2>/dev/null; shift; "
    "exec 3<&0; "
    "if command -v setsid >/dev/null 2>&1; then setsid \"$@\" </dev/null & else \"$@\" </dev/null & fi; "
    "rank=$!; "
    "{ while read -r _; do :; done; "
    "kill -TERM -- -$rank 2>/dev/null || kill -TERM $rank; "
    "sleep {grace} </dev/null; "
    "kill -KILL -- -$rank 2>/dev/null || kill -KILL $rank; } <&3 >/dev/null 2>&1 & "
    "watch=$!; exec 3<&-; "
    "wait $rank; status=$?; "
    "kill -KILL $watch 2>/dev/null; "
    "exit $status";

}  // namespace

std::vector<HostfileEntry> read_hostfile(const std::string& path) {
  std::ifstream in = open_regular_file(path, "a hostfile", std::ios::in);
  std::vector<HostfileEntry> hosts;
  std::string raw;
  const std::string expected = "expected `host` or `host slots=K` (K >= 1), one host per line";
  for (int line = 1; std::getline(in, raw); ++line) {
    const std::string text = trim(std::string_view(raw).substr(0, raw.find('#')));
    if (text.empty()) continue;
    const size_t blank = text.find_first_of(" \t");
    HostfileEntry e{text.substr(0, blank), 1, line};
    // The host is an argument of the --ssh command: one starting with '-' would be read as an
    // option (ssh's -oProxyCommand=... runs a command), so only a host name or user@host passes.
    const bool host_ok = std::all_of(e.host.begin(), e.host.end(), [](unsigned char c) {
      return std::isalnum(c) || std::string_view("._-@:[]%").find(static_cast<char>(c)) != std::string_view::npos;
    });
    if (e.host.front() == '-' || !host_ok)
      throw Error(fmt::format("--hostfile {} line {}: {} is not a host name (expected `host` or `user@host`: "
                              "letters, digits, '.', '-', '_', ':', '[', ']'; not starting with '-')",
                              path, line, quote_input(e.host)));
    if (blank != std::string::npos) {
      const std::string option = trim(std::string_view(text).substr(blank));
      const std::string where = fmt::format("--hostfile {} line {}", path, line);
      if (!option.starts_with("slots=") || option.find_first_of(" \t") != std::string::npos)
        throw Error(fmt::format("{}: '{}': {}", where, text, expected));
      e.slots = parse_number<int>(where + " slots", option.substr(6), "an integer, at least 1",
                                  [](int k) { return k >= 1; });
    }
    hosts.push_back(std::move(e));
  }
  FRUGAL_CHECK(!hosts.empty(), fmt::format("--hostfile {}: no host in the file ({})", path, expected));
  return hosts;
}

std::vector<std::string> place_ranks(const std::vector<HostfileEntry>& hosts, int ranks, const std::string& path) {
  std::vector<std::string> placed;
  for (const auto& h : hosts) {
    for (int s = 0; s < h.slots && static_cast<int>(placed.size()) < ranks; ++s) placed.push_back(h.host);
  }
  if (static_cast<int>(placed.size()) < ranks) {
    long slots = 0;
    for (const auto& h : hosts) slots += h.slots;
    throw Error(fmt::format("-n {}: --hostfile {} has {} slot(s) on {} host(s); add hosts or slots=K, or ask "
                            "for fewer ranks",
                            ranks, path, slots, hosts.size()));
  }
  return placed;
}

std::string host_address(std::string_view destination) {
  const size_t at = destination.rfind('@');
  return std::string(at == std::string_view::npos ? destination : destination.substr(at + 1));
}

std::string shell_quote(std::string_view text) {
  const bool safe = !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) {
    return std::isalnum(c) || std::string_view("_@%+=:,./-").find(static_cast<char>(c)) != std::string_view::npos;
  });
  if (safe) return std::string(text);
  std::string q = "'";
  for (const char c : text) {
    if (c == '\'') {
      q.append("'\\''");  // close the quote, an escaped quote, open again
    } else {
      q.push_back(c);
    }
  }
  q.push_back('\'');
  return q;
}

std::vector<std::string> split_words(std::string_view text, std::string_view what) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (const char c : text) {
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else {
        word += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  FRUGAL_CHECK(quote == 0, fmt::format("{} '{}': a quote is not closed", what, text));
  if (in_word) words.push_back(std::move(word));
  FRUGAL_CHECK(!words.empty(), fmt::format("{} '{}': expected a command, e.g. \"ssh -i KEY\"", what, text));
  return words;
}

std::string remote_command(const std::string& directory, const std::map<std::string, std::string>& env,
                           const std::vector<std::string>& command, int grace_seconds) {
  std::string wrapper(kWrapper);
  wrapper.replace(wrapper.find("{grace}"), 7, std::to_string(std::max(grace_seconds, 0)));
  std::string s = "sh -c ";
  s.append(shell_quote(wrapper)).append(" frugal-rank ").append(shell_quote(directory)).append(" env");
  for (const auto& [name, value] : env) s.append(" ").append(shell_quote(fmt::format("{}={}", name, value)));
  for (const auto& word : command) s.append(" ").append(shell_quote(word));
  return s;
}

}  // namespace frugal::cli
