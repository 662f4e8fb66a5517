#include "apps/launch/restart_policy.h"

#include <filesystem>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal::cli {
namespace fs = std::filesystem;
namespace {

// The value of `flag` in `argv` ("--flag VALUE" or "--flag=VALUE"; the last one wins, as in CLI11).
std::string flag_value(const std::vector<std::string>& argv, const std::string& flag) {
  std::string value;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == flag && i + 1 < argv.size()) value = argv[i + 1];
    else if (argv[i].rfind(flag + "=", 0) == 0) value = argv[i].substr(flag.size() + 1);
  }
  return value;
}

}  // namespace

RestartPolicy::RestartPolicy(std::vector<std::string> command, int max_restarts)
    : command_(std::move(command)), checkpoint_(flag_value(command_, "--checkpoint")), max_restarts_(max_restarts) {
  FRUGAL_CHECK(max_restarts >= 0, fmt::format("frugal launch: --max-restarts {} must be >= 0", max_restarts));
}

bool RestartPolicy::has_checkpoint() const {
  if (checkpoint_.empty()) return false;
  if (fs::is_regular_file(fs::path(checkpoint_) / "manifest.json")) return true;
  // Killed between an epoch folder's manifest and the top one: --resume finds the folder's.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(checkpoint_, ec))
    if (entry.path().filename().string().rfind("epoch-", 0) == 0 && fs::is_regular_file(entry.path() / "manifest.json"))
      return true;
  return false;
}

std::vector<std::string> RestartPolicy::command_for(int restarts) const {
  if (restarts == 0 || !has_checkpoint()) return command_;
  std::vector<std::string> out;
  for (size_t i = 0; i < command_.size(); ++i) {
    if (command_[i] == "--resume" && i + 1 < command_.size()) {
      ++i;  // and its value
      continue;
    }
    if (command_[i].rfind("--resume=", 0) == 0) continue;
    out.push_back(command_[i]);
  }
  out.push_back("--resume");
  out.push_back(checkpoint_);
  return out;
}

std::string RestartPolicy::describe(int restarts) const {
  if (checkpoint_.empty()) return "from scratch: the command saves no checkpoints (no --checkpoint DIR)";
  if (restarts > 0 && has_checkpoint()) return fmt::format("resuming from the newest intact checkpoint in {}", checkpoint_);
  return fmt::format("from scratch: no checkpoint in {} yet", checkpoint_);
}

}  // namespace frugal::cli
