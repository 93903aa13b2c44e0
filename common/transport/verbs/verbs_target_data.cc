// SPDX-License-Identifier: BSD-3-Clause
// Verbs provider, target side, its data path: a lane's thread, which polls
// or sleeps on its completion queue, serves each request (GPSPM persists,
// reads through the window, drains of the window) and replies.
#include "common/log.h"
#include "common/transport/copy_words.h"
#include "common/transport/spin_gauge.h"
#include "common/transport/verbs/verbs_target.h"
#include "common/transport/verbs/verbs_target_lane.h"

#include <poll.h>
#include <sched.h>

#include <chrono>
#include <cstring>

namespace rpmem::transport::verbs {

namespace {

// At most one verbs lane thread per two CPUs polls for the next request.
using LaneSpinSlots = SpinSlots<VerbsTarget::Lane>;

}  // namespace

void VerbsTarget::lane_loop(Lane &lane) {
  using Clock = std::chrono::steady_clock;
  bool armed = true;  // armed before rdma_accept
  // After a reply the lane polls its CQ for about as long as the next
  // request has been taking to come (WaitSpin: 1.25x the moving average,
  // 20 us to 200 us; none while such polls keep missing), then sleeps on
  // the completion channel. A wake-up from the channel costs more than an
  // RNIC's round trip (about 100 us under emulation), and a client that
  // persists in a loop sends its next request a turn-around after the reply.
  WaitSpin spin;
  Clock::time_point idle_since{}, spin_until{};
  LaneSpinSlots::Hold slot;  // while polling
  for (;;) {
    Completion wc[4];
    const int n = poll(lane.cq.get(), wc, 4);
    if (n < 0) return fatal("verbs lane: ibv_poll_cq failed");
    // Reply completions first: the one for the previous reply may sit
    // behind the next request in this batch, and serve() waits for it.
    for (int i = 0; i < n; ++i) {
      if (!wc[i].ok) {
        if (!state_.stopping())
          RPMEM_LOG_INFO("verbs lane %u closed: %s", lane.index, wc[i].status);
        disconnect(lane.id.get());
        return;
      }
      if (wc[i].wr_id == kWrReply) lane.reply_busy = false;
    }
    bool served = false;
    for (int i = 0; i < n; ++i) {
      if (wc[i].wr_id != kWrRecv) continue;
      if (!served && idle_since != Clock::time_point{}) {
        const auto now = Clock::now();
        spin.took(now - idle_since);
        if (spin_until != Clock::time_point{}) spin.spun(now <= spin_until);
      }
      served = true;
      if (!serve(lane, wc[i].byte_len)) {
        disconnect(lane.id.get());
        return;
      }
    }
    if (served) {
      idle_since = Clock::now();
      const auto budget = spin.budget();
      spin_until = budget.count() > 0 ? idle_since + budget : Clock::time_point{};
    }
    if (n > 0) continue;
    if (spin_until != Clock::time_point{}) {
      const bool in_time = Clock::now() < spin_until;
      if (in_time && slot.take()) {
        ::sched_yield();  // rxe's and the client's threads may need this CPU
        continue;
      }
      if (!in_time) spin.spun(false);  // polled the whole budget in vain
      spin_until = {};                 // or no slot: sleep, and record nothing
    }
    slot.release();
    if (!armed) {  // arm, then poll once more: nothing slips between the two
      if (arm(lane.cq.get())) return fatal("verbs lane: ibv_req_notify_cq failed");
      armed = true;
      continue;
    }
    if (!sleep(lane, armed)) return;
  }
}

// Sleeps until the lane's completion channel, its connection or stop() has
// something. False when the lane ends (disconnected, or the session failed).
bool VerbsTarget::sleep(Lane &lane, bool &armed) {
  pollfd p[4] = {{fd_of(lane.comp.get()), POLLIN, 0},
                 {fd_of(lane.channel.get()), POLLIN, 0},
                 {state_.wake_fd(), POLLIN, 0},
                 {lane.kick, POLLIN, 0}};
  if (::poll(p, 4, -1) < 0 && errno != EINTR) {
    fatal("verbs lane: poll failed");
    return false;
  }
  if (p[3].revents || lane.replaced.load()) {
    RPMEM_LOG_INFO("verbs lane %u: a new connection takes its place", lane.index);
    return false;
  }
  if (p[2].revents || state_.stopping()) {
    disconnect(lane.id.get());
    return false;
  }
  if (p[1].revents) {
    CmEvent ev;
    while (!next_event(lane.channel.get(), 0, ev)) {
      if (ev.type == RDMA_CM_EVENT_ESTABLISHED) {
        RPMEM_LOG_INFO("verbs lane %u established", lane.index);
        continue;
      }
      RPMEM_LOG_INFO("verbs lane %u: %s", lane.index, rdma_event_str(ev.type));
      disconnect(lane.id.get());
      return false;
    }
  }
  if (p[0].revents) {
    consume_events(lane.comp.get());
    armed = false;
  }
  return true;
}

bool VerbsTarget::serve(Lane &lane, uint32_t byte_len) {
  const uint8_t *msg = lane.buf.get();
  auto h = decode_msg({msg, byte_len});
  const std::string who = "verbs lane " + std::to_string(lane.index);
  if (!h) {
    fatal(who + ": malformed request");
    return false;
  }
  LaneCounters *counters = params_.counters ? params_.counters->lane(lane.index) : nullptr;
  const int64_t started_ns = counters ? LaneCounters::now_ns() : 0;
  std::error_code status;
  // A deep persist is always persistent; so is a request the session was
  // not granted visible for.
  const bool visible = h->op != MsgOp::kDeepPersist && pool_.visible(h->flags & kMsgVisible);
  if (h->op == MsgOp::kDrain) {
    const bool ok = windows_ ? drain_window(lane, msg + kMsgHeaderSize, h->length, visible, status)
                             : drain_ranges(lane, msg + kMsgHeaderSize, h->length, visible, status);
    if (!ok) return false;
  } else if (h->op == MsgOp::kRead) {
    const char *why = !windows_             ? "read request on a lane without a window"
                      : h->length > window_ ? "read larger than the window"
                                            : pool_.refusal(h->offset, h->length, false);
    if (why) {
      fatal(who + ": " + why);
      return false;
    }
    std::memcpy(windows_.get() + lane.index * window_, pool_.base() + h->offset, h->length);
  } else if (h->flags & kMsgInline) {
    if (const char *why = pool_.refusal(h->offset, h->length, true)) {
      fatal(who + ": " + why);
      return false;
    }
    const uint8_t *data = msg + kMsgHeaderSize;
    status = visible
                 ? pool_.write_visible(h->offset, data, h->length)
                 : pool_.write_durable(h->offset, data, h->length, h->op == MsgOp::kDeepPersist);
  } else {
    // What the NIC wrote into the pool itself; on the bounded path nothing is.
    const char *why = windows_ ? "persist of RDMA-written bytes on a lane with a window"
                               : pool_.refusal(h->offset, h->length, false);
    if (why) {
      fatal(who + ": " + why);
      return false;
    }
    status = visible ? pool_.made_visible(h->offset, h->length)
                     : pool_.persist(h->offset, h->length, h->op == MsgOp::kDeepPersist);
  }
  // The next request may come as soon as the reply is out: receive first.
  if (auto ec = post_recv(lane.id->qp, kWrRecv, lane.buf.get(), kRecvSize, lane.mr->lkey)) {
    RPMEM_LOG_ERR("%s: ibv_post_recv failed: %s", who.c_str(), ec.message().c_str());
    return false;
  }
  while (lane.reply_busy) {  // the previous reply's SEND; the client is waiting anyway
    Completion wc[1];
    const int n = poll(lane.cq.get(), wc, 1);
    if (n < 0 || (n == 1 && !wc[0].ok)) return false;
    if (n == 1 && wc[0].wr_id == kWrReply) lane.reply_busy = false;
    if (state_.stopping() || lane.replaced.load(std::memory_order_relaxed)) return false;
  }
  if (counters) {
    counters->served(lane_op(h->op), h->length, started_ns, bool(status));
    if (visible && h->op != MsgOp::kDrain) counters->visible(h->length);
  }
  encode_reply(static_cast<uint32_t>(status.value()), lane.reply_buf());
  if (auto ec = post_send(lane.id->qp, kWrReply, lane.reply_buf(), kReplySize, lane.mr->lkey)) {
    RPMEM_LOG_ERR("%s: ibv_post_send failed: %s", who.c_str(), ec.message().c_str());
    return false;
  }
  lane.reply_busy = true;
  return true;
}

bool VerbsTarget::drain_ranges(Lane &lane, const uint8_t *ranges, uint64_t n, bool visible,
                               std::error_code &status) {
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t off, len;
    decode_range(ranges + i * kRangeSize, off, len);
    if (const char *why = pool_.refusal(off, len, false)) {
      fatal("verbs lane " + std::to_string(lane.index) + ": drain " + why);
      return false;
    }
    auto ec = visible ? pool_.made_visible(off, len) : pool_.persist(off, len, false);
    if (ec && !status) status = ec;
  }
  if (!visible && !status) status = pool_.persist_visible();
  return true;
}

bool VerbsTarget::drain_window(Lane &lane, const uint8_t *ranges, uint64_t n, bool visible,
                               std::error_code &status) {
  const uint8_t *window = windows_.get() + lane.index * window_;
  uint64_t at = 0;  // where the next range's bytes are in the window
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t off, len;
    decode_range(ranges + i * kRangeSize, off, len);
    const char *why =
        len > window_ - at ? "drain ranges larger than the window" : pool_.refusal(off, len, false);
    if (why) {
      fatal("verbs lane " + std::to_string(lane.index) + ": drain " + why);
      return false;
    }
    // Bytes of the pool header are never written (refusal() keeps writes
    // out of it; a flush that names it has nothing there to copy).
    const uint64_t from = std::max<uint64_t>(off, pool_.writable_from());
    if (from < off + len) {
      // On pmem whole-word stores (streaming for large copies) and a flush;
      // in the page cache a durable write of the file.
      const uint8_t *src = window + at + (from - off);
      auto ec = visible ? pool_.write_visible(from, src, off + len - from)
                        : pool_.write_durable(from, src, off + len - from);
      if (ec && !status) status = ec;
    }
    at += len;
  }
  if (!visible && !status) status = pool_.persist_visible();
  return true;
}

}  // namespace rpmem::transport::verbs
