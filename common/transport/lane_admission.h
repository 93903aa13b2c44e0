// SPDX-License-Identifier: BSD-3-Clause
// Which lane connections a target admits, the same for every provider: a
// claim that proves the session secret (lane_proof.h), a lane count that is
// the same for all lanes and within the grant, and each lane once per
// epoch. A lane comes back (its connection broke or stalled) with a higher
// epoch than any it was admitted with: a connection of an earlier epoch,
// replayed or late, is refused.
//
// What a session's claims must be depends on its client (ClaimRules): from
// protocol minor 9 a MAC of a fresh nonce, at any epoch above the lane's
// last; before it the secret itself, which on cleartext lanes crossed the
// wire where anyone could record it, and so opens epoch 0 only (such a
// client's lanes do not come back). Thread-safe.
#ifndef RPMEM_COMMON_TRANSPORT_LANE_ADMISSION_H
#define RPMEM_COMMON_TRANSPORT_LANE_ADMISSION_H

#include "common/proto.h"
#include "common/transport/lane_proof.h"

#include <memory>
#include <mutex>

namespace rpmem::transport {

struct ClaimRules {
  bool mac = false;       // proofs are MACs (lane_proof.h), else the secret itself
  bool comeback = false;  // a lane may connect again at a higher epoch
};
// The rules for a session whose client speaks protocol minor
// `client_minor`, on lanes that are `encrypted` (TLS or sealed: a claim
// inside them is not seen on the wire) or not.
ClaimRules claim_rules(uint16_t client_minor, bool encrypted) noexcept;

class LaneAdmission {
 public:
  LaneAdmission(const proto::Secret &secret, unsigned max_lanes, ClaimRules rules);

  // Why the lane `lane` of `nlanes`, at `epoch`, with `proof` of the
  // secret, is refused, or nullptr when it is admitted (and from then on
  // taken at that epoch; `returned` then says whether the lane had been
  // admitted before). Requires lane < nlanes (the decoder checks it).
  const char *admit(const proto::Secret &proof, unsigned lane, unsigned nlanes, unsigned epoch,
                    bool &returned) noexcept;
  const char *admit(const proto::Secret &proof, unsigned lane, unsigned nlanes) noexcept {
    bool returned = false;
    return admit(proof, lane, nlanes, 0, returned);
  }

  // Lets `lane` connect again at epoch 0, where it was just admitted (its
  // admitted connection failed to set up), with a claim of its own: the
  // very claim admitted stays refused.
  void release(unsigned lane) noexcept;

  // The lane count of the first admitted lane (0: none yet).
  unsigned session_nlanes() const noexcept;
  unsigned max_lanes() const noexcept { return max_lanes_; }
  const ClaimRules &rules() const noexcept { return rules_; }

 private:
  struct Taken {
    uint32_t mark = 0;      // 0 never admitted, else the epoch last admitted with + 1
    proto::Secret proof{};  // the claim last admitted
    bool released = false;  // its connection failed to set up
  };
  const proto::Secret secret_;
  const unsigned max_lanes_;
  const ClaimRules rules_;
  mutable std::mutex mu_;
  unsigned nlanes_ = 0;             // guarded by mu_
  std::unique_ptr<Taken[]> taken_;  // guarded by mu_
};

}  // namespace rpmem::transport

#endif  // RPMEM_COMMON_TRANSPORT_LANE_ADMISSION_H
