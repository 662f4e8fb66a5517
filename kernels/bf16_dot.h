// Products over bf16 weight rows with the CPU's bf16 dot-product instruction (AVX512-BF16's
// vdpbf16ps: 32 bf16 pairs multiplied exactly and added into 16 f32 sums), where the CPU has it.
// The weights are read as stored, without widening them first; the f32 side (an activation, a
// point's dLoss/dlogit or feature values) is rounded to bf16 (to nearest, ties to even) once, which
// is the only change to the result: |got - f32| <= 2^-8 * sum |a_i * w_i| (+ 1e-6 for the values
// the instruction flushes to zero), see tests/kernels/test_bf16_dot.cpp.
//
// A process-wide mode picks these kernels or the widened f32 ones (kernels/vector_ops.h): `off`
// gives the bits the f32 kernels give on the widened rows; `auto` (the default) uses the bf16
// instruction where the CPU has it. Either way the results are deterministic: the same bits for the
// same inputs on the same CPU, whatever the thread count (each output is one thread's fixed order).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace frugal::kernels {

enum class Bf16Dot { auto_, on, off };

// Whether this CPU (and its OS) runs AVX512-BF16.
bool bf16_dot_available();
// Sets the mode for every later op on bf16 weights. `on` where bf16_dot_available() is false
// throws frugal::Error (nothing changes).
void set_bf16_dot(Bf16Dot mode);
Bf16Dot bf16_dot();
// Whether the ops on bf16 weights use the kernels below now (the mode resolved on this CPU).
bool bf16_dot_active();
// "auto", "on", "off" (a flag's value); throws frugal::Error naming the text otherwise.
Bf16Dot bf16_dot_from_string(std::string_view text);
std::string_view bf16_dot_name(Bf16Dot mode);

// The kernels; callable only where bf16_dot_available() (they use its instructions).
// out[e] = <a rounded to bf16, row ids[e] of w> for e < count, rows of n bf16 values ld apart (an
// output layer's logits of one point: a is rounded once for all its rows).
void dot_rows_bf16(const float* a, const uint16_t* w, size_t ld, const uint32_t* ids, size_t count, size_t n,
                   float* out);
// y += sum over e < count of (alpha[e] rounded to bf16) * row ids[e] of w, skipping the rows whose
// alpha[e] is 0 (dLoss/dh of a point over its active labels; a sparse input's features). The rows
// go two at a time, their elements interleaved so that one instruction adds both rows' products
// into each column; the sums start at 0 and are added to y at the end.
void axpy_rows_bf16(const float* alpha, const uint16_t* w, size_t ld, const uint32_t* ids, size_t count, size_t n,
                    float* y);

}  // namespace frugal::kernels
