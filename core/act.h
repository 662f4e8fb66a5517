// Act: the activation a layer applies to its pre-activations (layers' options, Backend ops).
#pragma once

namespace frugal {

enum class Act { none, relu };

}  // namespace frugal
