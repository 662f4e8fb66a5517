// SendLoans: payloads over the caller's memory, counted until the transport lets go of them.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "comm/send_loans.h"

using frugal::comm::detail::Payload;
using frugal::comm::detail::SendLoans;

TEST_CASE("send loans: a lent payload is the caller's memory, not a copy") {
  SendLoans loans;
  std::vector<std::byte> buf(100, std::byte{7});
  const Payload p = loans.lend(buf);
  CHECK(p.bytes().data() == buf.data());
  CHECK(p.size() == buf.size());
  CHECK(loans.outstanding() == 1);
}

TEST_CASE("send loans: a loan is back when its last copy is gone") {
  SendLoans loans;
  std::vector<std::byte> buf(16);
  {
    Payload a = loans.lend(buf);
    Payload b = a;  // what a transport keeps while a frame waits for the wire
    std::optional<Payload> c = loans.lend(std::span<const std::byte>(buf).first(4));
    CHECK(loans.outstanding() == 2);
    c.reset();
    CHECK(loans.outstanding() == 1);
    a = Payload();
    CHECK(loans.outstanding() == 1);  // b still holds it
  }
  CHECK(loans.outstanding() == 0);
  loans.wait_returned();  // nothing out: returns at once
}

TEST_CASE("send loans: wait_returned blocks until another thread releases the last payload") {
  SendLoans loans;
  std::vector<std::byte> buf(16);
  auto held = std::make_unique<Payload>(loans.lend(buf));
  std::atomic<bool> released{false};
  std::thread io([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    released = true;
    held.reset();  // as ZeroMQ's I/O thread closes the message it has written
  });
  loans.wait_returned();
  CHECK(released);
  CHECK(loans.outstanding() == 0);
  io.join();
}

TEST_CASE("send loans: a payload may outlive the SendLoans that lent it") {
  std::vector<std::byte> buf(16);
  Payload kept;
  {
    SendLoans loans;
    kept = loans.lend(buf);
  }
  CHECK(kept.bytes().data() == buf.data());
  kept = Payload();  // releasing it touches only the shared count
}
