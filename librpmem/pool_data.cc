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
// (whatever the pool's state); then the state, the lane, the range. A call
// the pool completes locally (it runs ahead of its target) marks what it
// covers and is done (`local`).
int Pool::check(PoolCall call, size_t offset, size_t length, unsigned lane, bool guard_header,
                bool &local) noexcept {
  local = false;
  if (guard_header && has_headers_ && offset < kPoolHdrSize && length > 0) {
    set_errormsg("offset (%zu) in pool is less than %zu bytes", offset, kPoolHdrSize);
    return EINVAL;
  }
  int err = 0;
  Admit where = life_.admit(call, err);
  if (where == Admit::kRefuse) return err;
  if (lane >= lanes_.size()) {
    set_errormsg("invalid lane number (%u), pool has %zu lanes", lane, lanes_.size());
    return EINVAL;
  }
  if (offset > size_ || length > size_ - offset) {
    set_errormsg("offset (%zu) + length (%zu) exceeds pool size (%zu)", offset, length, size_);
    return EINVAL;
  }
  while (where == Admit::kLocal) {
    if (life_.while_behind([&] { mark_local(lane, offset, length); })) {
      local = true;
      return 0;
    }
    where = life_.admit(call, err);  // it is not behind any more
    if (where == Admit::kRefuse) return err;
  }
  return 0;
}

// What a call that completes locally covers, and what its lane had not had
// acknowledged when the target was lost, goes into the out-of-sync map; a
// write arms the catch-up (a pool opened behind waits for one: until the
// application writes, its memory need not hold the pool).
void Pool::mark_local(unsigned lane, uint64_t offset, uint64_t length) noexcept {
  mark_unacknowledged(lane);
  if (length == 0) return;
  ahead_->oos->mark(offset, length);
  if (!ahead_->armed.exchange(true)) wake();
}

template <class F>
std::error_code Pool::on_lane(unsigned lane, uint64_t offset, uint64_t length, F &&f) {
  if (ahead_ && life_.state() == PoolState::kCatchingUp) {
    if (length > 0) ahead_->touched->mark(offset, length);
    ahead_->lane_used[lane].store(std::chrono::steady_clock::now().time_since_epoch().count(),
                                  std::memory_order_relaxed);
  }
  return lanes_.with(lane, std::forward<F>(f));
}

int Pool::lane_result(std::error_code ec, PoolCall call, const char *op, unsigned lane,
                      uint64_t offset, uint64_t length) noexcept {
  if (!ec) return 0;
  const int err = ec.value();
  if (err == ECONNRESET || err == EPROTO) {
    // The target is gone for good (the lane rode out what it could): the
    // pool is lost, or runs ahead of it, so that calls blocked on other
    // lanes return too; a write then completes locally, marked.
    std::string why;
    try {
      why = lanes_.with(lane, [](transport::InitiatorLane &l) { return l.failure(); });
    } catch (...) {
    }
    life_.lose(why.empty() ? strerror(err) : why);
    if (ahead_ && call != PoolCall::kRead &&
        life_.ran_ahead([&] { mark_local(lane, offset, length); }))
      return 0;
    int refused = 0;
    if (call == PoolCall::kRead && life_.admit(call, refused) == Admit::kRefuse &&
        refused == ESTALE)
      return refused;
    return life_.lost_error(call);
  }
  set_errormsg("%s operation failed: %s", op, strerror(err));
  return err;
}

int Pool::write_range(transport::DataOp op, PoolCall call, const char *name, size_t offset,
                      size_t length, unsigned lane, unsigned flags) noexcept {
  if (int err = check_flags(flags, RPMEM_PERSIST_RELAXED | kLevels)) return err;
  bool local = false;
  if (int err = check(call, offset, length, lane, true, local)) return err;
  if (length == 0 || local) return 0;
  const unsigned lf = lane_flags(flags);
  const std::error_code ec = on_lane(lane, offset, length, [&](transport::InitiatorLane &l) {
    return l.write(op, offset, length, lf);
  });
  return lane_result(ec, call, name, lane, offset, length);
}

int Pool::persist(size_t offset, size_t length, unsigned lane, unsigned flags) noexcept {
  return write_range(transport::DataOp::kPersist, PoolCall::kPersist, "persist", offset, length,
                     lane, flags);
}

// PMDK's deep_persist had one text for every failure after the header
// check: "persist operation failed". What went wrong is in the library's
// log.
int Pool::deep_persist(size_t offset, size_t length, unsigned lane) noexcept {
  bool local = false;
  if (has_headers_ && offset < kPoolHdrSize && length)
    return check(PoolCall::kDeepPersist, offset, length, lane, true, local);
  int err = 0;
  if (life_.admit(PoolCall::kDeepPersist, err) == Admit::kRefuse) return err;
  err = check(PoolCall::kDeepPersist, offset, length, lane, false, local);
  if (err == 0 && length > 0 && !local) {
    const std::error_code ec = on_lane(lane, offset, length, [&](transport::InitiatorLane &l) {
      return l.write(transport::DataOp::kDeepPersist, offset, length, 0);
    });
    err = lane_result(ec, PoolCall::kDeepPersist, "persist", lane, offset, length);
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
  bool local = false;
  if (int err = check(PoolCall::kDrain, 0, 0, lane, false, local)) return err;
  if (local) return 0;
  const unsigned lf = lane_flags(flags);
  const std::error_code ec =
      on_lane(lane, 0, 0, [&](transport::InitiatorLane &l) { return l.drain(lf); });
  return lane_result(ec, PoolCall::kDrain, "drain", lane);
}

// PMDK's read said "read operation failed: " and why, for a bad argument
// too. A replica behind its pool is no source (ESTALE).
int Pool::read(void *buf, size_t offset, size_t length, unsigned lane) noexcept {
  int err = 0;
  if (life_.admit(PoolCall::kRead, err) == Admit::kRefuse) return err;
  bool local = false;
  if ((err = check(PoolCall::kRead, offset, length, lane, false, local))) {
    if (err != ESTALE) set_errormsg("read operation failed: %s", strerror(err));
    return err;
  }
  if (length == 0) return 0;
  const std::error_code ec =
      lanes_.with(lane, [&](transport::InitiatorLane &l) { return l.read(buf, offset, length); });
  return lane_result(ec, PoolCall::kRead, "read", lane);
}

}  // namespace rpmem
