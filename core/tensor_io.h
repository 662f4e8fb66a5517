// cereal helpers for Tensors and file headers, shared by checkpoints of layers and optimizer. Internal header: it
// pulls in cereal's binary archive.
#pragma once

#include <cstdint>
#include <string>

#include <cereal/archives/binary.hpp>

#include "core/tensor.h"

namespace frugal {

void save_tensor(cereal::BinaryOutputArchive& ar, const Tensor& t);
// Reads a tensor and checks it has the expected shape, naming `what` if not.
void load_tensor(cereal::BinaryInputArchive& ar, Tensor& t, size_t rows, size_t cols, const std::string& what);

// frugal's binary files start with an 8-byte magic and a format version. check_file_header reads
// them and throws, naming `path`, when the file is not `what` (e.g. "a frugal checkpoint") or has
// another version.
void save_file_header(cereal::BinaryOutputArchive& ar, const char (&magic)[8], uint32_t version);
void check_file_header(cereal::BinaryInputArchive& ar, const char (&magic)[8], uint32_t version, const std::string& path,
                       const std::string& what);

}  // namespace frugal
