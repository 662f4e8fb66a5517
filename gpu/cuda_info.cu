// gpu/cuda_info.h with the CUDA runtime.
#include "gpu/cuda_info.h"

#include <cuda_runtime.h>

namespace frugal::gpu {

bool cuda_built() { return true; }

int device_count() {
  int n = 0;
  // cudaErrorNoDevice, cudaErrorInsufficientDriver, a missing libcuda...: no device, quietly.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear it, so that no later call reports it
    return 0;
  }
  return n;
}

}  // namespace frugal::gpu
