// Work: the handle every communication call returns. The operation runs in the background; wait()
// blocks until it is done and rethrows whatever went wrong — a transport error, a peer that became
// unreachable, or the error another rank aborted the communicator with (the c10d contract).
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>

#include "core/check.h"

namespace frugal::comm {

// Any failure of communication: transport errors, unreachable peers, remote aborts, mismatched calls.
class CommError : public Error {
 public:
  using Error::Error;
};

// wait(timeout) expired before the operation finished; the operation itself keeps running.
class TimeoutError : public CommError {
 public:
  using CommError::CommError;
};

namespace detail {

// Shared between the Work handed to the caller and the thread that executes the operation.
class WorkState {
 public:
  void complete();
  void fail(std::exception_ptr error);
  // True when finished (successfully or not) by `deadline`.
  bool wait_until(std::chrono::steady_clock::time_point deadline);
  void wait();
  std::exception_ptr error() const;
  bool done() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

}  // namespace detail

class Work {
 public:
  Work();  // an operation that is already complete (size-1 communicators, empty messages)
  explicit Work(std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}

  // Blocks until the operation is done; rethrows its error. Buffers passed to the call that made
  // this Work must stay alive and untouched until then. Dropping a Work does not cancel anything.
  void wait() const;
  // As wait(), but throws TimeoutError when the operation is still running after `timeout`.
  void wait(std::chrono::milliseconds timeout) const;
  // Non-blocking: true once finished (wait() then returns or throws at once).
  bool done() const;

 private:
  std::shared_ptr<detail::WorkState> state_;
};

// Seconds the calling thread has spent blocked in Work::wait so far (a thread-local clock): the
// trainer subtracts it from a step's wall time to get the step's compute time.
double waited_seconds();

// Waits for every Work in order; the first error is rethrown after all of them finished.
template <class Range>
void wait_all(const Range& works) {
  std::exception_ptr first;
  for (const Work& w : works) {
    try {
      w.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace frugal::comm
