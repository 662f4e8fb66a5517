#include "core/rng.h"

#include <cmath>
#include <numbers>

namespace frugal {

float Rng::normal() {
  // 1 - u keeps the logarithm's argument in (0, 1].
  const float u1 = 1.0f - uniform();
  const float u2 = uniform();
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(2.0f * std::numbers::pi_v<float> * u2);
}

}  // namespace frugal
