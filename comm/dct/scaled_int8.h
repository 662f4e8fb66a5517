// Scaled int8 rows: DCT-MP's one-byte wire values (ValueType::i8). A row of n values travels as one
// bf16 scale s (the row's largest magnitude, rounded up to bf16) and n signed bytes q in
// [-127, 127]; the receiver reads q * s / 127. One byte per kept activation instead of two (bf16)
// or four (f32), at a relative error of at most 1/254 of the row's largest value.
//
// Activations round to nearest, so every rank decodes the same masked layer output. Their
// gradients round stochastically (keyed by the caller, so the same seed gives the same bits): small
// entries are then unbiased instead of flushed to zero, and the sum over ranks stays an unbiased
// estimate of the exact one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace frugal::comm {

// Bytes of a row of n values (0 for an empty row: no scale either).
inline size_t scaled_i8_bytes(size_t n) { return n == 0 ? 0 : 2 + n; }

// Writes scaled_i8_bytes(values.size()) bytes at `out`. `stochastic_key`: 0 rounds to nearest;
// else the seed of the stochastic rounding (a hash of it and each value's index).
void write_scaled_i8(std::span<const float> values, std::byte* out, uint32_t stochastic_key = 0);
// Reads a row written by write_scaled_i8 into `values` (its size gives n). Any bytes decode to
// finite or non-finite floats without failing: lengths are the caller's to check.
void read_scaled_i8(const std::byte* in, std::span<float> values);

}  // namespace frugal::comm
