// SPDX-License-Identifier: BSD-3-Clause
// One client thread streaming into its lane of a pool, as an application
// would while the network or the target misbehaves: 4 KiB blocks, each
// persisted, or flushed and drained (every third), and every fifth read
// back and compared with the local pool. It keeps its first failure (errno,
// rpmem_errormsg() after the call that failed, when), how many calls
// succeeded, the longest call and when it ended, and how many calls took
// kStalled or more and the time spent in them.
#ifndef RPMEM_TESTS_INTEGRATION_BLOCK_WRITER_H
#define RPMEM_TESTS_INTEGRATION_BLOCK_WRITER_H

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "librpmem.h"

namespace rpmem_test {

class BlockWriter {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kBlock = 4096;
  // A call this long waited for TCP's own timers (200 ms at least) or for
  // the network.
  static constexpr std::chrono::milliseconds kStalled{150};

  ~BlockWriter() { join(); }

  // Writes blocks [base, base + blocks * kBlock) of `local` through `lane`,
  // round and round, until join() or the first failure.
  void start(RPMEMpool *rpp, uint8_t *local, unsigned lane, size_t base, size_t blocks) {
    thread_ = std::thread([=, this] { run(rpp, local, lane, base, blocks); });
  }
  // Waits for the first failure (the thread's end).
  void wait() {
    if (thread_.joinable()) thread_.join();
  }
  // Stops the writer and waits for it.
  void join() {
    stop_ = true;
    wait();
  }

  std::atomic<uint64_t> calls{0};
  int err = 0;      // errno of the first failure; -1: a read found other bytes
  std::string msg;  // what failed, and rpmem_errormsg()
  Clock::time_point failed_at{};
  Clock::duration longest{};
  Clock::time_point longest_end{};
  uint64_t stalls = 0;        // calls of kStalled or more
  Clock::duration stalled{};  // in those calls

 private:
  void run(RPMEMpool *rpp, uint8_t *local, unsigned lane, size_t base, size_t blocks) {
    std::vector<uint8_t> back(kBlock);
    for (uint64_t v = 1; !stop_.load(); ++v) {
      const size_t off = base + (v % blocks) * kBlock;
      std::memset(local + off, static_cast<int>(v * 7 + lane), kBlock);
      std::memcpy(local + off, &v, sizeof(v));
      const auto start = Clock::now();
      const char *what = "persist";
      int rc;
      if (v % 3 == 0) {
        what = "flush";
        rc = rpmem_flush(rpp, off, kBlock, lane, 0);
        if (rc == 0) {
          what = "drain";
          rc = rpmem_drain(rpp, lane, 0);
        }
      } else {
        rc = rpmem_persist(rpp, off, kBlock, lane, 0);
      }
      if (rc == 0 && v % 5 == 0) {
        what = "read";
        rc = rpmem_read(rpp, back.data(), off, kBlock, lane);
        if (rc == 0 && std::memcmp(back.data(), local + off, kBlock) != 0) {
          err = -1;
          msg = "read back other bytes than were persisted";
          return;
        }
      }
      const auto end = Clock::now();
      if (rc != 0) {
        err = errno;
        msg = std::string(what) + ": " + rpmem_errormsg();
        failed_at = end;
        return;
      }
      ++calls;
      if (end - start >= kStalled) {
        ++stalls;
        stalled += end - start;
      }
      if (end - start > longest) {
        longest = end - start;
        longest_end = end;
      }
    }
  }

  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace rpmem_test

#endif  // RPMEM_TESTS_INTEGRATION_BLOCK_WRITER_H
