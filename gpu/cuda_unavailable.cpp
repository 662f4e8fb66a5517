// A build without the CUDA backend (-Dcuda=disabled, or no nvcc): the queries of gpu/cuda_info.h
// answer "not built" and no device, and nothing registers as "cuda".
#include "gpu/cuda_info.h"

namespace frugal::gpu {

bool cuda_built() { return false; }
int device_count() { return 0; }

}  // namespace frugal::gpu
