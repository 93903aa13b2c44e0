// SPDX-License-Identifier: BSD-3-Clause
// Pool's data path: persist, deep_persist, flush, drain and read on a lane,
// their argument checks, and a lane's failure made the pool's (sticky).
#include "librpmem/errormsg.h"
#include "librpmem/pool.h"

#include <cstring>

#include "librpmem.h"

namespace rpmem {

namespace {

// A call's level: RPMEM_*_VISIBLE, RPMEM_*_PERSISTENT or neither (the
// pool's).
static_assert(RPMEM_FLUSH_VISIBLE == RPMEM_PERSIST_VISIBLE &&
              RPMEM_DRAIN_VISIBLE == RPMEM_PERSIST_VISIBLE &&
              RPMEM_FLUSH_PERSISTENT == RPMEM_PERSIST_PERSISTENT &&
              RPMEM_DRAIN_PERSISTENT == RPMEM_PERSIST_PERSISTENT);
constexpr unsigned kLevels = RPMEM_PERSIST_VISIBLE | RPMEM_PERSIST_PERSISTENT;

}  // namespace

int Pool::check_flags(unsigned flags, unsigned allowed) noexcept {
  if ((flags & ~allowed) != 0) {
    set_errormsg("invalid flags (0x%x)", flags);
    return EINVAL;
  }
  if ((flags & kLevels) == kLevels) {
    set_errormsg("invalid flags (0x%x): both the visible and the persistent level", flags);
    return EINVAL;
  }
  return 0;
}

// The lane's flags for a call's: visible where the call (or, without a
// level of its own, the pool) asks for it and the target grants it.
unsigned Pool::lane_flags(unsigned flags) const noexcept {
  const bool visible = (flags & RPMEM_PERSIST_VISIBLE) != 0 ||
                       ((flags & RPMEM_PERSIST_PERSISTENT) == 0 && visible_pool_);
  return ((flags & RPMEM_PERSIST_RELAXED) ? transport::kWriteRelaxed : 0) |
         (visible && visible_granted_.load(std::memory_order_relaxed) ? transport::kWriteVisible
                                                                      : 0);
}

int Pool::check(size_t offset, size_t length, unsigned lane, bool guard_header) noexcept {
  if (guard_header && has_headers_ && offset < kPoolHdrSize && length > 0) {
    set_errormsg("offset (%zu) in pool is less than %zu bytes", offset, kPoolHdrSize);
    return EINVAL;
  }
  if (int err = error_.load(std::memory_order_relaxed)) {
    set_errormsg("connection lost: %s", lost_why().c_str());
    return err;
  }
  if (lane >= lanes_.size()) {
    set_errormsg("invalid lane number (%u), pool has %zu lanes", lane, lanes_.size());
    return EINVAL;
  }
  if (offset > size_ || length > size_ - offset) {
    set_errormsg("offset (%zu) + length (%zu) exceeds pool size (%zu)", offset, length, size_);
    return EINVAL;
  }
  return 0;
}

int Pool::lane_result(std::error_code ec, const char *op, unsigned lane) noexcept {
  if (!ec) return 0;
  int err = ec.value();
  if (err == ECONNRESET || err == EPROTO) {
    // The target is gone for good (the lane rode out what it could): fail
    // every lane now, so that calls blocked on other lanes return too, and
    // every later call fails fast.
    std::string why;
    try {
      why = lanes_[lane]->failure();
    } catch (...) {
    }
    if (why.empty()) why = strerror(err);
    lose(why);
    set_errormsg("%s operation failed: %s", op, lost_why().c_str());
    return ECONNRESET;
  }
  set_errormsg("%s operation failed: %s", op, strerror(err));
  return err;
}

int Pool::write_range(transport::DataOp op, const char *name, size_t offset, size_t length,
                      unsigned lane, unsigned flags) noexcept {
  if (int err = check_flags(flags, RPMEM_PERSIST_RELAXED | kLevels)) return err;
  if (int err = check(offset, length, lane, true)) return err;
  if (length == 0) return 0;
  return lane_result(lanes_[lane]->write(op, offset, length, lane_flags(flags)), name, lane);
}

int Pool::persist(size_t offset, size_t length, unsigned lane, unsigned flags) noexcept {
  return write_range(transport::DataOp::kPersist, "persist", offset, length, lane, flags);
}

// PMDK's deep_persist and read had one text for every failure after the
// header check: "persist operation failed" and "read operation failed: ...".
// What went wrong is in the library's log.
int Pool::deep_persist(size_t offset, size_t length, unsigned lane) noexcept {
  if (error_.load(std::memory_order_relaxed) || (has_headers_ && offset < kPoolHdrSize && length))
    return check(offset, length, lane, true);  // the header, or a lost connection
  int err = check(offset, length, lane, false);
  if (err == 0 && length > 0)
    err = lane_result(lanes_[lane]->write(transport::DataOp::kDeepPersist, offset, length, 0),
                      "persist", lane);
  if (err != 0) set_errormsg("persist operation failed");
  return err;
}

int Pool::flush(size_t offset, size_t length, unsigned lane, unsigned flags) noexcept {
  return write_range(transport::DataOp::kFlush, "flush", offset, length, lane, flags);
}

int Pool::drain(unsigned lane, unsigned flags) noexcept {
  if (int err = check_flags(flags, kLevels)) return err;
  if (int err = check(0, 0, lane, false)) return err;
  return lane_result(lanes_[lane]->drain(lane_flags(flags)), "drain", lane);
}

int Pool::read(void *buf, size_t offset, size_t length, unsigned lane) noexcept {
  if (error_.load(std::memory_order_relaxed)) return check(offset, length, lane, false);
  int err = check(offset, length, lane, false);
  if (err == 0 && length > 0)
    err = lane_result(lanes_[lane]->read(buf, offset, length), "read", lane);
  if (err == ECONNRESET)
    set_errormsg("read operation failed: %s", lost_why().c_str());
  else if (err != 0)
    set_errormsg("read operation failed: %s", strerror(err));
  return err;
}

}  // namespace rpmem
