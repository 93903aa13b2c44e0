// SPDX-License-Identifier: BSD-3-Clause
// RecordingPersister: the persister of the target-side unit tests (lane
// server, tcp and verbs targets). It records every persist, can fail them
// with a chosen errno or hold them until released, counts whole writes
// (durable, posted and visible), and takes the traits of whichever medium a
// test stands for.
#ifndef RPMEM_TESTS_RECORDING_PERSISTER_H
#define RPMEM_TESTS_RECORDING_PERSISTER_H

#include "common/transport/copy_words.h"
#include "common/transport/persister.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <system_error>
#include <vector>

namespace rpmem_test {

using rpmem::transport::MediumTraits;

// A file in the page cache (a NIC may not write into it) whose persists do
// not wait for a device: what a test of the bounded and staged paths needs.
inline constexpr MediumTraits kRecordedFile{"disk",
                                            "a file in the page cache",
                                            "a file in the page cache",
                                            "pmem_msync",
                                            false,
                                            false,
                                            false,
                                            true};
// The same on a disk: payloads come as whole durable or posted writes.
inline constexpr MediumTraits kRecordedDisk{"disk",
                                            "a file in the page cache",
                                            "a file in the page cache",
                                            "pmem_msync",
                                            false,
                                            true,
                                            false,
                                            true};
inline constexpr MediumTraits kRecordedRam{"ram", "a file in RAM", "a file in RAM", "pmem_msync",
                                           true,  false,           false,           false};
inline constexpr MediumTraits kRecordedPmem{
    "pmem", "persistent memory", "persistent memory", "pmem_persist", true, false, true, false};

class RecordingPersister final : public rpmem::transport::Persister {
 public:
  struct Call {
    size_t offset, length;
    bool deep;
    friend bool operator==(const Call &, const Call &) = default;
  };

  explicit RecordingPersister(uint8_t *base) : base_(base) {}

  // The medium this persister stands for; set before the target starts.
  MediumTraits medium = kRecordedFile;

  const MediumTraits &traits() const noexcept override { return medium; }
  std::error_code persist(size_t offset, size_t length, bool deep) noexcept override {
    std::unique_lock lock(mu_);
    calls_.push_back({offset, length, deep});
    ++entered_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !hold_; });
    return failure();
  }
  // On a medium that waits for a device: one durable write, counted (no
  // persist recorded); elsewhere whole-word stores and a persist.
  std::error_code write_durable(size_t offset, const uint8_t *src, size_t length,
                                bool deep) noexcept override {
    if (!medium.waits_for_device) {
      rpmem::transport::copy_words(base_ + offset, src, length);
      return persist(offset, length, deep);
    }
    std::lock_guard lock(mu_);
    ++durable_writes;
    std::memcpy(base_ + offset, src, length);
    return failure();
  }
  std::error_code write_posted(size_t offset, const uint8_t *src, size_t length) noexcept override {
    std::lock_guard lock(mu_);
    ++posted_writes;
    std::memcpy(base_ + offset, src, length);
    return {};
  }
  std::error_code persist_mapped(void *, size_t) noexcept override { return {}; }
  std::error_code sync_all() noexcept override { return {}; }
  // The visible level, where it costs less (medium.visible_cheaper):
  // recorded apart from the persists; elsewhere the persistent calls.
  std::error_code write_visible(size_t offset, const uint8_t *src,
                                size_t length) noexcept override {
    if (!medium.visible_cheaper) return write_durable(offset, src, length, false);
    std::lock_guard lock(mu_);
    ++visible_writes;
    std::memcpy(base_ + offset, src, length);
    visible_.push_back({offset, length, false});
    return {};
  }
  std::error_code made_visible(size_t offset, size_t length) noexcept override {
    if (!medium.visible_cheaper) return persist(offset, length, false);
    std::lock_guard lock(mu_);
    visible_.push_back({offset, length, false});
    return {};
  }
  std::error_code persist_visible() noexcept override {
    ++visible_persisted;
    return {};
  }

  std::atomic<unsigned> durable_writes{0}, posted_writes{0}, visible_writes{0},
      visible_persisted{0};
  std::vector<Call> visible() {
    std::lock_guard lock(mu_);
    return visible_;
  }

  // Every later persist and durable write fails with err (0: none fails).
  void fail_with(int err) {
    std::lock_guard lock(mu_);
    fail_ = err;
  }
  // Persists wait while held.
  void hold(bool on) {
    std::lock_guard lock(mu_);
    hold_ = on;
    cv_.notify_all();
  }
  bool wait_entered(unsigned n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return entered_ >= n; });
  }
  std::vector<Call> calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }
  void clear_calls() {
    std::lock_guard lock(mu_);
    calls_.clear();
  }
  // True when every byte of [off, off+len) lies in some recorded persist
  // (sampled every 512 bytes).
  bool covered(size_t off, size_t len) {
    auto log = calls();
    for (size_t i = off; i < off + len; i += 512) {
      bool in = false;
      for (auto &p : log) in = in || (i >= p.offset && i < p.offset + p.length);
      if (!in) return false;
    }
    return true;
  }

 private:
  std::error_code failure() const {
    return fail_ ? std::error_code(fail_, std::generic_category()) : std::error_code{};
  }

  uint8_t *base_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Call> calls_;
  std::vector<Call> visible_;
  unsigned entered_ = 0;
  int fail_ = 0;
  bool hold_ = false;
};

}  // namespace rpmem_test

#endif  // RPMEM_TESTS_RECORDING_PERSISTER_H
