// What the CUDA side of this build can see, without any CUDA header: for apps/ (a `--device`
// option) and tests. A build without CUDA (-Dcuda=disabled, or no nvcc) answers "not built" and 0.
#pragma once

namespace frugal::gpu {

// Whether this libfrugal was built with the CUDA backend (gpu/cuda_backend.h).
bool cuda_built();

// CUDA devices visible to this process: 0 without CUDA in the build, without a driver or without a
// device (the errors of cudaGetDeviceCount are answered 0, never thrown).
int device_count();

}  // namespace frugal::gpu
