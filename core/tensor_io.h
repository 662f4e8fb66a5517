// cereal helpers for Tensors, shared by checkpoints of layers and optimizer. Internal header: it
// pulls in cereal's binary archive.
#pragma once

#include <string>

#include <cereal/archives/binary.hpp>

#include "core/tensor.h"

namespace frugal {

void save_tensor(cereal::BinaryOutputArchive& ar, const Tensor& t);
// Reads a tensor and checks it has the expected shape, naming `what` if not.
void load_tensor(cereal::BinaryInputArchive& ar, Tensor& t, size_t rows, size_t cols, const std::string& what);

}  // namespace frugal
