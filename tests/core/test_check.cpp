#include <catch2/catch.hpp>

#include "core/check.h"

TEST_CASE("FRUGAL_CHECK throws the message alone, with file, line and rank beside it (Error::where)") {
  frugal::set_error_rank(3);
  try {
    FRUGAL_CHECK(1 + 1 == 3, "arithmetic is broken");
    FAIL("no throw");
  } catch (const frugal::Error& e) {
    REQUIRE(std::string(e.what()) == "arithmetic is broken");  // the user's words only
    const std::string& where = e.where();  // for --verbose and bug reports
    REQUIRE_THAT(where, Catch::Contains("test_check.cpp:"));
    REQUIRE_THAT(where, Catch::Contains("rank 3"));
    REQUIRE_THAT(where, Catch::Contains("1 + 1 == 3"));
  }
  frugal::set_error_rank(0);
  REQUIRE_NOTHROW([] { FRUGAL_CHECK(true, "fine"); }());
}
