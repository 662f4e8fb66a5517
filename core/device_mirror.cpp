#include "core/device_mirror.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "core/check.h"

namespace frugal {
namespace {

// Every live mirror, so that freeing mirrored host data reaches them. Lock order: this mutex, then a
// mirror's.
// Never destroyed: a tensor freed during the process's exit may still look here.
std::mutex& registry_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::vector<DeviceMirror*>& registry() {
  static auto* mirrors = new std::vector<DeviceMirror*>;
  return *mirrors;
}

std::string describe(const Tensor& t) { return fmt::format("{}x{} {}", t.rows(), t.cols(), dtype_name(t.dtype())); }

}  // namespace

void forget_device_copies(const void* data) noexcept {
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (DeviceMirror* m : registry()) m->forget(data);
}

DeviceMirror::DeviceMirror(Memory& memory) : memory_(memory) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().push_back(this);
}

DeviceMirror::~DeviceMirror() {
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    std::erase(registry(), this);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [host, e] : entries_) memory_.release(e.device);
}

DeviceMirror::Entry* DeviceMirror::lookup(const Tensor& t) {
  const auto it = entries_.find(t.raw());
  if (it == entries_.end()) return nullptr;
  Entry& e = it->second;
  if (e.rows == t.rows() && e.cols == t.cols() && e.dtype == t.dtype()) return &e;
  // Resized in place (same allocation): its stamp says written, so the old copy is no use.
  FRUGAL_CHECK(!e.ahead, fmt::format("device mirror: a {}x{} tensor whose device copy has changes the host has not "
                                     "seen was resized to {} on the host (flush first)",
                                     e.rows, e.cols, describe(t)));
  drop(it);
  return nullptr;
}

void DeviceMirror::drop(std::unordered_map<const void*, Entry>::iterator it) noexcept {
  bytes_ -= it->second.bytes;
  memory_.release(it->second.device);
  entries_.erase(it);
}

void* DeviceMirror::acquire(const Tensor& t) {
  if (t.raw() == nullptr || t.bytes() == 0) return nullptr;
  FRUGAL_CHECK(t.stamp() != nullptr, "device mirror: only tensors in host buffers of their own can be mirrored");
  std::lock_guard<std::mutex> lock(mutex_);
  TensorStamp& stamp = *t.stamp();
  Entry* e = lookup(t);
  const bool written = stamp.host_written.load(std::memory_order_acquire);
  if (e != nullptr && !written) return e->device;
  if (e != nullptr)
    FRUGAL_CHECK(!e->ahead, fmt::format("device mirror: the host wrote a {} tensor whose device copy has changes it "
                                        "has not seen (Backend::flush_state() must run before host code touches "
                                        "optimizer state)",
                                        describe(t)));
  if (e == nullptr) {
    Entry fresh;
    fresh.bytes = t.bytes();
    fresh.rows = t.rows();
    fresh.cols = t.cols();
    fresh.dtype = t.dtype();
    fresh.stamp = &stamp;
    fresh.device = memory_.allocate(t, fresh.bytes);
    e = &entries_.emplace(t.raw(), fresh).first->second;
    bytes_ += fresh.bytes;
    stamp.mirrored.store(true, std::memory_order_release);
  }
  // Cleared before the copy: a host write racing with it marks the tensor again. A failed copy
  // marks it again too, so the next use does not take a copy that never arrived.
  stamp.host_written.store(false, std::memory_order_release);
  try {
    memory_.upload(e->device, t.raw(), e->bytes);
  } catch (...) {
    stamp.host_written.store(true, std::memory_order_release);
    throw;
  }
  ++traffic_.uploads;
  traffic_.uploaded_bytes += e->bytes;
  return e->device;
}

const void* DeviceMirror::find(const Tensor& t) {
  if (t.raw() == nullptr || t.stamp() == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = entries_.find(t.raw());
  if (it == entries_.end() || it->second.rows != t.rows() || it->second.cols != t.cols() ||
      it->second.dtype != t.dtype())
    return nullptr;
  if (t.stamp()->host_written.load(std::memory_order_acquire)) return nullptr;
  return it->second.device;
}

const void* DeviceMirror::find_range(const void* p, size_t bytes) {
  const auto* q = static_cast<const std::byte*>(p);
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [host, e] : entries_) {
    if (e.dtype != Dtype::f32) continue;  // the pointers asked about are floats
    const auto* base = static_cast<const std::byte*>(host);
    if (q < base || q + bytes > base + e.bytes) continue;
    // The entry exists, so the data and its stamp do.
    if (e.stamp->host_written.load(std::memory_order_acquire)) return nullptr;
    return static_cast<const std::byte*>(e.device) + (q - base);
  }
  return nullptr;
}

void DeviceMirror::changed(const Tensor& t, bool written_back) {
  std::lock_guard<std::mutex> lock(mutex_);
  Entry* e = lookup(t);
  FRUGAL_CHECK(e != nullptr, fmt::format("device mirror: a {} tensor changed on the device has no device copy",
                                         describe(t)));
  e->ahead = !written_back;
  // A write-through wrote rows through non-const accessors, marking the tensor; the host has the
  // device's values now.
  if (written_back) t.stamp()->host_written.store(false, std::memory_order_release);
}

void DeviceMirror::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [host, e] : entries_) {
    if (!e.ahead) continue;
    // A host write since the device got ahead: one side's changes would be lost.
    FRUGAL_CHECK(!e.stamp->host_written.load(std::memory_order_acquire),
                 fmt::format("device mirror: the host wrote a {}x{} {} tensor whose device copy has changes it has "
                             "not seen (Backend::flush_state() must run before host code touches optimizer state)",
                             e.rows, e.cols, dtype_name(e.dtype)));
    // The host data is alive (freeing it drops the entry) and unchanged since: writing it directly
    // keeps its written mark as it was.
    memory_.download(const_cast<void*>(host), e.device, e.bytes);
    e.ahead = false;
    ++traffic_.flushes;
    traffic_.flushed_bytes += e.bytes;
  }
}

size_t DeviceMirror::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

size_t DeviceMirror::entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

DeviceMirror::Traffic DeviceMirror::traffic() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return traffic_;
}

void DeviceMirror::forget(const void* data) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = entries_.find(data);
  if (it != entries_.end()) drop(it);
}

}  // namespace frugal
