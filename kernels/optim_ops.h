// Optimizer row updates on the CPU (behind the CPU Backend, kernels/cpu_backend.h; the contract is
// core/backend.h's RowUpdate). Rows are independent and split over oneTBB threads; each row's
// arithmetic is element-wise, compiled for AVX-512, AVX2 and generic x86-64 (picked at run time),
// so every variant and thread count gives the same bits.
#pragma once

#include "core/backend.h"

namespace frugal::kernels {

void adam_rows(const RowUpdate& u);
void sgd_rows(const RowUpdate& u);
void adagrad_rows(const RowUpdate& u);
void rowwise_adagrad_rows(const RowUpdate& u);
void rowwise_adam_rows(const RowUpdate& u);

}  // namespace frugal::kernels
