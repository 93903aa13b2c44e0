// SPDX-License-Identifier: BSD-3-Clause
// Warnings about refused connections, at most a few lines a second for each
// reason: a crowd of strangers cannot flood the log, and every reason still
// shows. What was held back is counted and logged with the next window.
// Not thread-safe: one per event loop.
#ifndef RPMEM_COMMON_REFUSAL_LOG_H
#define RPMEM_COMMON_REFUSAL_LOG_H

#include "common/log.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace rpmem {

class RefusalLog {
 public:
  // `what`: "data connection", "connection"...
  explicit RefusalLog(const char *what) : what_(what) {}
  ~RefusalLog() { flush(); }
  RefusalLog(const RefusalLog &) = delete;
  RefusalLog &operator=(const RefusalLog &) = delete;

  // `why` is compared by address: a string literal (or strerror's text).
  void refused(const std::string &peer, const char *why) {
    count(why);
    const auto now = std::chrono::steady_clock::now();
    if (now - window_ >= std::chrono::seconds(1)) {
      flush();
      window_ = now;
    }
    auto it =
        std::find_if(kinds_.begin(), kinds_.end(), [&](const Kind &k) { return k.why == why; });
    if (it == kinds_.end() && kinds_.size() < kMaxKinds) {
      kinds_.push_back({why, 0, 0});
      it = kinds_.end() - 1;
    }
    if (it == kinds_.end() || it->logged++ < kPerSecond)
      RPMEM_LOG_WARN("%s from %s refused: %s", what_, peer.c_str(), why);
    else
      ++it->held_back;
  }

  // Counts a refusal by reason without a log line (the caller logs it).
  void count(const char *why) {
    auto it =
        std::find_if(totals_.begin(), totals_.end(), [&](const auto &t) { return t.first == why; });
    if (it == totals_.end() && totals_.size() < kMaxTotals) {
      totals_.emplace_back(why, 0);
      it = totals_.end() - 1;
    }
    ++(it == totals_.end() ? other_ : it->second);
  }
  // Every refusal since this log began, by reason, in the order they first
  // came ("other reasons" past the first kMaxTotals).
  std::vector<std::pair<std::string, uint64_t>> totals() const {
    std::vector<std::pair<std::string, uint64_t>> t(totals_.begin(), totals_.end());
    if (other_) t.emplace_back("other reasons", other_);
    return t;
  }

  void flush() {
    for (const Kind &k : kinds_)
      if (k.held_back > 0) RPMEM_LOG_WARN("%u more %ss refused: %s", k.held_back, what_, k.why);
    kinds_.clear();
  }

 private:
  static constexpr unsigned kPerSecond = 5;
  static constexpr size_t kMaxKinds = 16;
  static constexpr size_t kMaxTotals = 64;
  struct Kind {
    const char *why;
    unsigned logged, held_back;
  };
  const char *what_;
  std::chrono::steady_clock::time_point window_{};
  std::vector<Kind> kinds_;
  std::vector<std::pair<const char *, uint64_t>> totals_;
  uint64_t other_ = 0;
};

}  // namespace rpmem

#endif  // RPMEM_COMMON_REFUSAL_LOG_H
