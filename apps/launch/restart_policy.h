// Elastic restart for `frugal launch --max-restarts N`, torchrun's model: when a rank dies the whole
// job is stopped and started again, at most N times. Restarting every rank (not only the dead one)
// is what keeps a restarted run equal to an uninterrupted one: all ranks go back to the same
// checkpoint. The launcher runs any command, so the policy reads the one thing it needs from it:
// the command's `--checkpoint DIR`. A restart resumes from DIR (`--resume DIR` replaces any
// `--resume` of the command) once DIR holds a checkpoint, else it starts the command afresh.
#pragma once

#include <string>
#include <vector>

namespace frugal::cli {

class RestartPolicy {
 public:
  RestartPolicy(std::vector<std::string> command, int max_restarts);

  int max_restarts() const { return max_restarts_; }
  bool can_restart(int restarts_done) const { return restarts_done < max_restarts_; }
  // The command's --checkpoint DIR ("" when it has none: restarts start from scratch).
  const std::string& checkpoint() const { return checkpoint_; }
  // The command for a start after `restarts` restarts (0: the command as given).
  std::vector<std::string> command_for(int restarts) const;
  // What that start does, for the launcher's message ("resuming from DIR", "from scratch: ...").
  std::string describe(int restarts) const;

 private:
  bool has_checkpoint() const;  // DIR holds a committed checkpoint (or an epoch folder's manifest)

  std::vector<std::string> command_;
  std::string checkpoint_;
  int max_restarts_;
};

}  // namespace frugal::cli
