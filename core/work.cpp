#include "core/work.h"

#include <fmt/format.h>

#include "core/step_profile.h"

namespace frugal::comm {
namespace detail {

void WorkState::complete() {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
}

void WorkState::fail(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    error_ = std::move(error);
    done_ = true;
  }
  cv_.notify_all();
}

bool WorkState::wait_until(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  return cv_.wait_until(lock, deadline, [&] { return done_; });
}

void WorkState::wait() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return done_; });
}

std::exception_ptr WorkState::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

bool WorkState::done() const {
  std::lock_guard lock(mutex_);
  return done_;
}

}  // namespace detail

namespace {
thread_local double waited = 0.0;

// Adds the time an unfinished operation keeps this thread blocked to `waited`.
class WaitClock {
 public:
  explicit WaitClock(const detail::WorkState& state) : running_(!state.done()) {
    if (running_) start_ = std::chrono::steady_clock::now();
  }
  ~WaitClock() {
    if (running_) waited += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  WaitClock(const WaitClock&) = delete;
  WaitClock& operator=(const WaitClock&) = delete;

 private:
  bool running_;
  std::chrono::steady_clock::time_point start_{};
};
}  // namespace

double waited_seconds() { return waited; }

Work::Work() : state_(std::make_shared<detail::WorkState>()) { state_->complete(); }

void Work::wait() const {
  {
    const profile::Scope phase(profile::Phase::wait);
    const WaitClock clock(*state_);
    state_->wait();
  }
  if (auto e = state_->error()) std::rethrow_exception(e);
}

void Work::wait(std::chrono::milliseconds timeout) const {
  const profile::Scope phase(profile::Phase::wait);
  const WaitClock clock(*state_);
  if (!state_->wait_until(std::chrono::steady_clock::now() + timeout)) {
    throw TimeoutError(fmt::format("communication still running after {} ms (rank {})",
                                   timeout.count(), error_rank()));
  }
  if (auto e = state_->error()) std::rethrow_exception(e);
}

bool Work::done() const { return state_->done(); }

}  // namespace frugal::comm
