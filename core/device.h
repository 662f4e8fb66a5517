// Compute backends as the public API sees them: handles to place a model on (Model::set_backend),
// found by name or chosen from a device name ("cpu", "cuda", "cuda:N", "auto") as the `--device`
// flag of `frugal train`, `predict` and `evaluate` names it, and their threads. A Backend's ops and
// the structs they take are internal (core/backend.h, not installed): layers and optimizers call
// them, a user never does. Nothing here knows CUDA: a CUDA backend registers itself as "cuda" (gpu/)
// only when the build has CUDA and a device is visible.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace frugal {

class Backend;
namespace comm {
class Communicator;
}

// Where a layer, optimizer or sampler never placed on a backend computes: "cpu", else the first
// registered (a build without the CPU kernels). Not settable: a device is chosen by placing the
// model on it. Throws when none is registered.
Backend& host_backend();
// Every registered backend, in registration order (after running every pending probe).
std::vector<Backend*> backends();
// The backend of that name (after running that name's pending probe), or nullptr.
Backend* find_backend(std::string_view name);

// Threads `backend`'s ops use on the host for the rest of the process; 0 = all cores. (`frugal
// train --threads`; host_backend() for a model never placed elsewhere.)
void set_threads(Backend& backend, int threads);
int threads(const Backend& backend);

// Whether `spec` is a device name this function set understands: cpu, cuda, cuda:N (N a decimal
// number), auto, emulated (the counting device of kernels/emulated_backend.h, for testing). Says nothing about whether that device exists.
bool is_device_spec(std::string_view spec);

// The backend `spec` names. auto: "cuda" when a CUDA backend is registered, else "cpu". cuda:N: the
// backend registered as "cuda:N" when there is one, else device 0 is the "cuda" backend (the
// Backend interface has no device index, so the "cuda" backend is the one device it drives) and
// any other N fails naming N. Throws frugal::Error naming the problem (no CUDA backend: a build
// without CUDA or no GPU visible).
Backend& resolve_device(std::string_view spec);

// The device name of a resolved backend, as logs and metrics record it ("cpu", "cuda", ...).
std::string device_name(const Backend& backend);

// Whether a device name (device_name's) is a GPU's: cuda, cuda:N (not cpu, not emulated).
bool is_gpu(std::string_view device);

// Whether the ranks of `group` compute on different kinds of device (some on a GPU, some on the
// CPU), given this rank's device name: the same answer on every rank. Collective over the group
// (two 1-float all-reduces); false for a null or 1-rank group.
bool group_mixes_devices(comm::Communicator* group, std::string_view device);

}  // namespace frugal
