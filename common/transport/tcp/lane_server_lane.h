// SPDX-License-Identifier: BSD-3-Clause
// Inside the tcp lane server (lane_server.cc, lane_server_step.cc): a lane's
// state (LaneServer::Lane) and its buffered receive side (LaneReader).
#ifndef RPMEM_COMMON_TRANSPORT_TCP_LANE_SERVER_LANE_H
#define RPMEM_COMMON_TRANSPORT_TCP_LANE_SERVER_LANE_H

#include "common/transport/copy_words.h"
#include "common/transport/flush_ranges.h"
#include "common/transport/tcp/lane_server.h"

#include <sys/epoll.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstring>
#include <memory>

namespace rpmem::transport::tcp {

inline constexpr size_t kLaneBuffer = 256 * 1024;
inline constexpr size_t kMaxPendingFlushes = 64;

// Buffered receive side of one lane. It never waits: each call takes what
// has arrived, and an error (EOF included) is kept.
class LaneReader {
 public:
  explicit LaneReader(ByteStream &s) : s_(s), buf_(new uint8_t[kLaneBuffer]) {}

  size_t buffered() const { return w_ - r_; }
  const uint8_t *data() const { return buf_.get() + r_; }
  void consume(size_t n) { r_ += n; }

  // Appends what has arrived to what is buffered; `got`: bytes added.
  std::error_code fill(size_t &got) {
    got = 0;
    if (error_) return error_;
    if (r_ == w_) {
      r_ = w_ = 0;
    } else if (r_ > 0) {
      std::memmove(buf_.get(), buf_.get() + r_, w_ - r_);
      w_ -= r_;
      r_ = 0;
    }
    error_ = s_.recv_scratch_nowait(buf_.get() + w_, kLaneBuffer - w_, got);
    w_ += got;
    return error_;
  }

  // Payload straight into the pool: what is buffered, then what has
  // arrived. `done`: bytes of dst written.
  std::error_code take_direct(uint8_t *dst, size_t n, size_t &done) {
    done = std::min(n, buffered());
    std::memcpy(dst, data(), done);
    consume(done);
    if (done == n || error_) return error_;
    size_t got = 0;
    error_ = s_.recv_nowait(dst + done, n - done, got);
    done += got;
    return error_;
  }

  // Payload through the buffer, copied with whole-word stores. Until the
  // last byte has come, it stops at a word boundary of the destination and
  // keeps the bytes of a partly received word: no word is ever written in
  // two parts. `done`: bytes of dst written.
  std::error_code take_atomic(uint8_t *dst, size_t n, size_t &done) {
    done = 0;
    for (;;) {
      size_t take = std::min(n - done, buffered());
      if (take < n - done) {
        const size_t cut = reinterpret_cast<uintptr_t>(dst + done + take) % 8;
        take = take >= cut ? take - cut : 0;
      }
      if (take > 0) {
        copy_words(dst + done, data(), take);
        consume(take);
        done += take;
      }
      if (done == n) return {};
      size_t got = 0;
      if (auto ec = fill(got)) return ec;
      if (got == 0) return {};
    }
  }

 private:
  ByteStream &s_;
  std::unique_ptr<uint8_t[]> buf_;
  size_t r_ = 0, w_ = 0;
  std::error_code error_;
};

// One lane: its stream, its receive buffer, where it is in its request, the
// reply in progress, and the flushes it has not made durable yet.
struct LaneServer::Lane {
  enum class State {
    kHeader,   // waiting for (the rest of) a request header
    kPayload,  // receiving a write's payload into the pool
    kReply,    // sending a reply
  };

  Lane(std::unique_ptr<ByteStream> s, unsigned number_, TargetPool &pool_)
      : stream(std::move(s)), number(number_), pool(pool_), in(*stream) {}
  ~Lane() {  // what was flushed is made durable however the lane ends
    std::error_code ignored;
    persist_flushes(ignored);
  }
  Lane(const Lane &) = delete;
  Lane &operator=(const Lane &) = delete;

  void persist_flushes(std::error_code &error, bool only_visible = false) {
    for (const auto &r : flushes.ranges()) {
      std::error_code ec = only_visible ? pool.made_visible(r.offset, r.length)
                                        : pool.persist(r.offset, r.length, false);
      if (ec && !error) error = ec;
    }
    flushes.clear();
    if (!only_visible) flush_persistent = false;
  }
  void flush_pending() { persist_flushes(flush_error); }
  // The flushes made visible only (a visible drain), or, while the lane is
  // idle, as far as they asked for.
  void flush_visible() { persist_flushes(flush_error, true); }
  void flush_idle() { persist_flushes(flush_error, !flush_persistent); }

  std::unique_ptr<ByteStream> stream;
  const unsigned number;
  TargetPool &pool;
  LaneReader in;
  FlushRanges flushes{kMaxPendingFlushes};
  std::error_code flush_error;    // reported by the next drain
  bool flush_persistent = false;  // a flush since the last drain asked for persistent

  State state = State::kHeader;
  proto::DataRequest req{};
  bool visible = false;              // req is acknowledged once visible (TargetPool::visible)
  LaneCounters *counters = nullptr;  // null: not counted
  int64_t started_ns = 0;            // the request's header came (counted lanes)
  // The payload is taken whole into the buffer and written in one step (a
  // persistent persist or a flush to a pool on a disk); `written` is how
  // that went.
  bool whole = false;
  std::error_code written;
  uint8_t *dst = nullptr;  // where the rest of the payload goes
  size_t left = 0;         // payload bytes still to come

  uint8_t reply[proto::kDataReplySize] = {};
  iovec iov[2] = {};
  iovec *unsent = iov;  // the reply still to send: unsent[0..nunsent)
  int nunsent = 0;

  uint32_t interest = EPOLLIN;  // what epoll watches for
  bool runnable = false;        // in runnable_
  bool dirty = false;           // in dirty_
};

}  // namespace rpmem::transport::tcp

#endif  // RPMEM_COMMON_TRANSPORT_TCP_LANE_SERVER_LANE_H
