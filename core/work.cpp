#include "core/work.h"

#include <fmt/format.h>

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

Work::Work() : state_(std::make_shared<detail::WorkState>()) { state_->complete(); }

void Work::wait() const {
  state_->wait();
  if (auto e = state_->error()) std::rethrow_exception(e);
}

void Work::wait(std::chrono::milliseconds timeout) const {
  if (!state_->wait_until(std::chrono::steady_clock::now() + timeout)) {
    throw TimeoutError(fmt::format("communication still running after {} ms (rank {})",
                                   timeout.count(), error_rank()));
  }
  if (auto e = state_->error()) std::rethrow_exception(e);
}

bool Work::done() const { return state_->done(); }

}  // namespace frugal::comm
