// Softmax cross-entropy over active sets and top-k ranking on the CPU (behind the CPU Backend,
// kernels/cpu_backend.h; the contracts are core/backend.h's xent_* and top_k). Parallel over
// samples; each sample's sums run in a fixed order, so the bits do not depend on the threads.
#pragma once

#include <cstdint>
#include <span>

#include "core/backend.h"

namespace frugal::kernels {

void xent_max(std::span<const float> z, const XentBatch& batch, std::span<float> max);
void xent_sums(std::span<const float> z, const XentBatch& batch, std::span<const float> max, std::span<float> sums);
void xent_loss_grad(std::span<float> z, const XentBatch& batch, std::span<const float> max,
                    std::span<const float> sums, std::span<double> losses);

void top_k(const TopKRows& in, size_t k, std::span<uint32_t> labels, std::span<float> scores);

}  // namespace frugal::kernels
