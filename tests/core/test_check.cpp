#include <catch2/catch.hpp>

#include "core/check.h"

TEST_CASE("FRUGAL_CHECK throws with file, line and rank") {
  frugal::set_error_rank(3);
  try {
    FRUGAL_CHECK(1 + 1 == 3, "arithmetic is broken");
    FAIL("no throw");
  } catch (const frugal::Error& e) {
    const std::string what = e.what();
    REQUIRE_THAT(what, Catch::Contains("arithmetic is broken"));
    REQUIRE_THAT(what, Catch::Contains("test_check.cpp:"));
    REQUIRE_THAT(what, Catch::Contains("rank 3"));
  }
  frugal::set_error_rank(0);
  REQUIRE_NOTHROW([] { FRUGAL_CHECK(true, "fine"); }());
}
