// SPDX-License-Identifier: BSD-3-Clause
// Which lane connections a target admits, the same for every provider: the
// one-time session secret (compared in constant time), a lane count that is
// the same for all lanes and within the grant, and each lane once per
// epoch. A lane comes back (its connection broke or stalled) with a higher
// epoch than any it was admitted with: a connection of an earlier epoch,
// replayed or late, is refused. Thread-safe.
#ifndef RPMEM_COMMON_TRANSPORT_LANE_ADMISSION_H
#define RPMEM_COMMON_TRANSPORT_LANE_ADMISSION_H

#include "common/proto.h"

#include <atomic>
#include <memory>

namespace rpmem::transport {

// Constant time: how many leading bytes match does not show in the time.
bool secrets_equal(const proto::Secret &a, const proto::Secret &b) noexcept;

class LaneAdmission {
 public:
  LaneAdmission(const proto::Secret &secret, unsigned max_lanes);

  // Why the lane `lane` of `nlanes`, proving `secret`, at `epoch`, is
  // refused, or nullptr when it is admitted (and from then on taken at that
  // epoch; `returned` then says whether the lane had been admitted before).
  // Requires lane < nlanes (the decoder checks it).
  const char *admit(const proto::Secret &secret, unsigned lane, unsigned nlanes, unsigned epoch,
                    bool &returned) noexcept;
  const char *admit(const proto::Secret &secret, unsigned lane, unsigned nlanes) noexcept {
    bool returned = false;
    return admit(secret, lane, nlanes, 0, returned);
  }

  // Lets `lane` connect again at the epoch it was just admitted with (its
  // admitted connection failed to set up).
  void release(unsigned lane) noexcept;

  // The lane count of the first admitted lane (0: none yet).
  unsigned session_nlanes() const noexcept { return nlanes_.load(); }
  unsigned max_lanes() const noexcept { return max_lanes_; }

 private:
  const proto::Secret secret_;
  const unsigned max_lanes_;
  std::atomic<unsigned> nlanes_{0};
  // Per lane: 0 never admitted, else the epoch it was last admitted with + 1.
  std::unique_ptr<std::atomic<uint32_t>[]> taken_;
};

}  // namespace rpmem::transport

#endif  // RPMEM_COMMON_TRANSPORT_LANE_ADMISSION_H
