// Reader for the IDX files of MNIST and Fashion-MNIST (gzip-compressed or plain: zlib's gzread
// reads both). An image file (magic 0x00000803: N x rows x cols unsigned bytes, big-endian sizes)
// and a label file (magic 0x00000801: N unsigned bytes) make a Dataset with one point per image:
// features are the pixel positions (row-major) with value pixel/255, zero pixels left out (they add
// nothing to x W), and one label per point. Every error names the file and what was expected.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/dataset.h"

namespace frugal::data {

struct IdxImages {
  size_t count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // count x rows x cols
};

class IdxFile {
 public:
  static IdxImages read_images(const std::string& path);
  static std::vector<uint8_t> read_labels(const std::string& path);
  // Reads PREFIX-images-idx3-ubyte[.gz] and PREFIX-labels-idx1-ubyte[.gz] (the names MNIST and
  // Debian's dataset-fashion-mnist use: PREFIX is e.g. /usr/share/datasets/fashion-mnist/train).
  // The path of either file itself is accepted as well. num_labels is the largest label + 1.
  static Dataset open(const std::string& prefix);
  // The file names `open` reads for `prefix` (the .gz name when that file exists, else the plain one).
  static std::string images_path(const std::string& prefix);
  static std::string labels_path(const std::string& prefix);
  static Dataset to_dataset(const IdxImages& images, std::span<const uint8_t> labels, const std::string& source);
};

}  // namespace frugal::data
