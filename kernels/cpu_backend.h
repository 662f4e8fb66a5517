// The CPU Backend ("cpu"): oneDNN for dense products, vectorized oneTBB-parallel kernels for the
// rest (kernels/*.h). It registers itself when libfrugal is loaded (a static registrar in
// cpu_backend.cpp); layers reach it through host_backend() (core/backend.h).
#pragma once

#include <memory>

#include "core/backend.h"

namespace frugal::kernels {

class CpuBackend : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  Device device() const override { return {}; }
  bool supports(Op op) const override;
  void synchronize() override {}
  void set_num_threads(int threads) override;
  int num_threads() const override;
  // bf16 products (kernels::matmul_bf16, oneDNN's AVX512-BF16 matmul) only where the --bf16-dot
  // mode is active on this CPU (kernels/bf16_dot.h): the instruction is what makes them pay, and
  // `off` asks for f32 arithmetic. Decided when called: a later mode change does not undo it.
  bool set_bf16_products(bool on) override;

  // Every op of core/backend_ops.h.
  FRUGAL_BACKEND_OVERRIDES
  std::unique_ptr<RowWorkspace> make_row_workspace(size_t num_rows) override;

 private:
  bool bf16_products_ = false;
};

}  // namespace frugal::kernels
