// MachineProbe: what this machine's cores and memory reach, measured, for the roofline of a
// training step (`frugal bench roofline`). Each probe runs `threads` threads (each on its own share
// of the data, initialized by the thread that uses it) and reports the best of `repeats` timed runs.
#pragma once

#include <cstddef>
#include <string>

namespace frugal::kernels {

struct ProbeOptions {
  size_t threads = 1;
  size_t array_bytes = size_t{256} << 20;   // stream: each of its three arrays
  size_t table_bytes = size_t{1} << 30;     // gather: the table rows are read from
  size_t row_bytes = 512;                   // gather: one row (128 floats, the default hidden width)
  int repeats = 5;
};

struct ProbeResult {
  std::string isa;            // the vector instructions the FMA probe used: avx512f, avx2+fma or scalar
  double flops_per_s = 0.0;   // fused multiply-adds on independent registers, 2 flops each
  double stream_bytes_per_s = 0.0;  // a[i] = b[i] + s * c[i] over arrays far larger than cache (3 arrays counted)
  double gather_bytes_per_s = 0.0;  // rows of row_bytes at random positions of the table, summed
};

ProbeResult probe_machine(const ProbeOptions& options);

}  // namespace frugal::kernels
