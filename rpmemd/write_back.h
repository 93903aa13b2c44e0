// SPDX-License-Identifier: BSD-3-Clause
// WriteBack: the thread that makes a pool's visible bytes persistent within
// rpmemd's visible-writeback bound, for a session granted the visible
// level on a medium where visible costs less than persistent (the page
// cache). It looks every quarter of the bound and writes the pool back when
// its oldest visible byte not yet durable is half the bound old, so that
// the write-back starts at the latest three quarters of the bound after
// the byte's acknowledgement.
#ifndef RPMEMD_WRITE_BACK_H
#define RPMEMD_WRITE_BACK_H

#include "common/transport/persister.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace rpmemd {

class WriteBack {
 public:
  // Starts the thread; throws std::system_error when there is none.
  WriteBack(rpmem::transport::Persister &persister, std::chrono::milliseconds bound);
  ~WriteBack();  // stops and joins the thread
  WriteBack(const WriteBack &) = delete;
  WriteBack &operator=(const WriteBack &) = delete;

 private:
  void run() noexcept;

  rpmem::transport::Persister &persister_;
  const std::chrono::milliseconds bound_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace rpmemd

#endif  // RPMEMD_WRITE_BACK_H
