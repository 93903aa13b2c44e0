// SPDX-License-Identifier: BSD-3-Clause
// When a tcp lane that waits for a reply sends a probe (proto::DataOp::kProbe,
// protocol minor 11): the rule, apart from the socket, for the unit tests.
//
// Why: a lane has one request in flight, so a lost request (its last
// segment) or a lost reply is always the last data its sender sent. TCP
// finds such a tail loss only by its timers: the tail loss probe, which
// Linux delays by TCP_RTO_MIN (200 ms) when one packet is in flight, as a
// reply always is, or the retransmission timeout (200 ms at least). A probe
// is data behind the loss, in both directions: the target's TCP receives it
// past the hole of a lost request, or the client's TCP receives the probe's
// reply past the hole of a lost reply, and either answers with a selective
// acknowledgement, from which the sender's RACK marks the lost segment lost
// and sends it again within about a round trip.
//
// Why not a new connection (the lane's way back from an outage): it costs
// a handshake and a lane hello on top (and its SYN, when lost, waits a
// second), and an epoch of the lane's 65,535 each time (a lane that lost
// 2 % of a thousand persists a second would run out within the hour); and
// what it sends again must keep a drain's promise. A probe sends nothing
// again: TCP delivers the same bytes once, and no claim, epoch or replay is
// involved. It costs 32 bytes and a 16-byte reply, so one sent for a reply
// that was only slow (a persist waiting for a disk) costs nearly nothing,
// and the rule needs no proof of a loss.
#ifndef RPMEM_COMMON_TRANSPORT_TCP_REPLY_PROBE_H
#define RPMEM_COMMON_TRANSPORT_TCP_REPLY_PROBE_H

#include <algorithm>
#include <chrono>

namespace rpmem::transport::tcp {

// The first probe of a wait comes after kProbeRtts of the connection's
// smoothed round trips (TCP_INFO, which holds the target's time to answer
// too: its acknowledgement rides on the reply), and no sooner than
// kProbeFloor: on a link of a few milliseconds a loss then costs about
// 5-10 ms; on loopback a reply is this late only when the machine is busy.
inline constexpr std::chrono::milliseconds kProbeFloor{5};
inline constexpr int kProbeRtts = 2;
// Each next probe (the last one, or its reply, may be lost too) comes twice
// as far into the wait, until the gap passes kProbeLast: from there on the
// lane's look at its connection (kStallCheck) and TCP's own timers do.
inline constexpr std::chrono::milliseconds kProbeLast{500};

class ProbeSchedule {
 public:
  using Clock = std::chrono::steady_clock;

  // A wait for a reply begins: its request is sent. Its first probe is due
  // as far into it as the last round trip the connection told (fire()), so
  // that a wait is woken early only when that changed.
  void start(Clock::time_point now) noexcept {
    start_ = now;
    due_ = now + first_;
    gap_ = {};
    sent_ = 0;
  }
  // When to ask fire() next: the wait's poll ends there at the latest
  // (Clock::time_point::max(): no more probes in this wait).
  Clock::time_point due() const noexcept { return due_; }
  // Asked at `now` (at or after due()), the reply not in yet: whether to
  // probe now. `srtt`: the connection's smoothed round trip (0: unknown).
  // Not before kProbeRtts of it into the wait (due() moves there).
  bool fire(Clock::time_point now, std::chrono::microseconds srtt) noexcept {
    if (now < due_) return false;
    first_ = std::max<Clock::duration>(kProbeFloor, kProbeRtts * srtt);
    if (sent_ == 0) {
      if (now < start_ + first_) {
        due_ = start_ + first_;
        return false;
      }
      gap_ = now - start_;
    } else {
      gap_ *= 2;
    }
    ++sent_;
    due_ = gap_ > kProbeLast ? Clock::time_point::max() : now + gap_;
    return true;
  }
  // Probes of this wait so far, and how long it has been.
  unsigned sent() const noexcept { return sent_; }
  Clock::duration waited(Clock::time_point now) const noexcept { return now - start_; }

 private:
  Clock::time_point start_{};
  Clock::time_point due_ = Clock::time_point::max();
  Clock::duration gap_{};
  unsigned sent_ = 0;
  Clock::duration first_ = kProbeFloor;  // the first probe's time into a wait
};

}  // namespace rpmem::transport::tcp

#endif  // RPMEM_COMMON_TRANSPORT_TCP_REPLY_PROBE_H
