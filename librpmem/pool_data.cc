// SPDX-License-Identifier: BSD-3-Clause
// Pool's data path: persist, deep_persist, flush, drain and read on a lane,
// their argument checks, the pool's state asked once (PoolLife::admit), and
// a lane lost for good made the pool's loss.
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

// A write into the header of a pool that has one is a bad argument first
// (whatever the pool's state); then the state, the lane, the range.
int Pool::check(PoolCall call, size_t offset, size_t length, unsigned lane,
                bool guard_header) noexcept {
  if (guard_header && has_headers_ && offset < kPoolHdrSize && length > 0) {
    set_errormsg("offset (%zu) in pool is less than %zu bytes", offset, kPoolHdrSize);
    return EINVAL;
  }
  if (int err = life_.admit(call)) return err;
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

int Pool::lane_result(std::error_code ec, PoolCall call, const char *op, unsigned lane) noexcept {
  if (!ec) return 0;
  const int err = ec.value();
  if (err == ECONNRESET || err == EPROTO) {
    // The target is gone for good (the lane rode out what it could): the
    // pool is lost, so that calls blocked on other lanes return too, and
    // every later call fails fast.
    std::string why;
    try {
      why = lanes_.with(lane, [](transport::InitiatorLane &l) { return l.failure(); });
    } catch (...) {
    }
    life_.lose(why.empty() ? strerror(err) : why);
    return life_.lost_error(call);
  }
  set_errormsg("%s operation failed: %s", op, strerror(err));
  return err;
}

int Pool::write_range(transport::DataOp op, PoolCall call, const char *name, size_t offset,
                      size_t length, unsigned lane, unsigned flags) noexcept {
  if (int err = check_flags(flags, RPMEM_PERSIST_RELAXED | kLevels)) return err;
  if (int err = check(call, offset, length, lane, true)) return err;
  if (length == 0) return 0;
  const unsigned lf = lane_flags(flags);
  const std::error_code ec = lanes_.with(
      lane, [&](transport::InitiatorLane &l) { return l.write(op, offset, length, lf); });
  return lane_result(ec, call, name, lane);
}

int Pool::persist(size_t offset, size_t length, unsigned lane, unsigned flags) noexcept {
  return write_range(transport::DataOp::kPersist, PoolCall::kPersist, "persist", offset, length,
                     lane, flags);
}

// PMDK's deep_persist had one text for every failure after the header
// check: "persist operation failed". What went wrong is in the library's
// log.
int Pool::deep_persist(size_t offset, size_t length, unsigned lane) noexcept {
  if (has_headers_ && offset < kPoolHdrSize && length)
    return check(PoolCall::kDeepPersist, offset, length, lane, true);
  if (int err = life_.admit(PoolCall::kDeepPersist)) return err;
  int err = check(PoolCall::kDeepPersist, offset, length, lane, false);
  if (err == 0 && length > 0) {
    const std::error_code ec = lanes_.with(lane, [&](transport::InitiatorLane &l) {
      return l.write(transport::DataOp::kDeepPersist, offset, length, 0);
    });
    err = lane_result(ec, PoolCall::kDeepPersist, "persist", lane);
  }
  if (err != 0) set_errormsg("persist operation failed");
  return err;
}

int Pool::flush(size_t offset, size_t length, unsigned lane, unsigned flags) noexcept {
  return write_range(transport::DataOp::kFlush, PoolCall::kFlush, "flush", offset, length, lane,
                     flags);
}

int Pool::drain(unsigned lane, unsigned flags) noexcept {
  if (int err = check_flags(flags, kLevels)) return err;
  if (int err = check(PoolCall::kDrain, 0, 0, lane, false)) return err;
  const unsigned lf = lane_flags(flags);
  const std::error_code ec =
      lanes_.with(lane, [&](transport::InitiatorLane &l) { return l.drain(lf); });
  return lane_result(ec, PoolCall::kDrain, "drain", lane);
}

// PMDK's read said "read operation failed: " and why, for a bad argument
// too.
int Pool::read(void *buf, size_t offset, size_t length, unsigned lane) noexcept {
  if (int err = life_.admit(PoolCall::kRead)) return err;
  if (int err = check(PoolCall::kRead, offset, length, lane, false)) {
    set_errormsg("read operation failed: %s", strerror(err));
    return err;
  }
  if (length == 0) return 0;
  const std::error_code ec =
      lanes_.with(lane, [&](transport::InitiatorLane &l) { return l.read(buf, offset, length); });
  return lane_result(ec, PoolCall::kRead, "read", lane);
}

}  // namespace rpmem
