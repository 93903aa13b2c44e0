// SPDX-License-Identifier: BSD-3-Clause
// The process's write-back thread and the pools in its care (write_back.h).
#include "rpmemd/write_back.h"

#include "common/log.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace rpmemd {
namespace {

using std::chrono::milliseconds;

class Registry {
 public:
  ~Registry() {  // at exit: every session has taken its pool out
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void add(WriteBack *w) {
    std::lock_guard lock(mu_);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });  // may throw
    pools_.push_back(w);
    cv_.notify_all();  // a shorter bound: look sooner
  }
  void remove(WriteBack *w) {
    std::lock_guard lock(mu_);  // not while the thread writes it back
    std::erase(pools_, w);
  }

 private:
  void run() noexcept;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<WriteBack *> pools_;
  bool stop_ = false;
  std::thread thread_;
};

Registry &registry() {
  static Registry r;
  return r;
}

void Registry::run() noexcept {
  std::unique_lock lock(mu_);
  while (!stop_) {
    milliseconds period{1000};
    for (const WriteBack *w : pools_)
      period = std::min(period, std::max(milliseconds(1), w->bound / 4));
    cv_.wait_for(lock, period);
    for (WriteBack *w : pools_) {
      // An error is logged by the persister; the bytes stay counted as not
      // durable, and the next look tries again.
      const auto age = w->persister.unpersisted_age();
      if (age >= w->bound / 2 && !w->persister.write_back(w->bound / 2))
        RPMEM_LOG_INFO(
            "visible bytes written back, the oldest %lld ms after its acknowledgement",
            static_cast<long long>(std::chrono::duration_cast<milliseconds>(age).count()));
    }
  }
}

}  // namespace

WriteBack::WriteBack(rpmem::transport::Persister &p, milliseconds b) : persister(p), bound(b) {
  registry().add(this);
}

WriteBack::~WriteBack() { registry().remove(this); }

}  // namespace rpmemd
