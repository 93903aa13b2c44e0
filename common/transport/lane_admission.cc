// SPDX-License-Identifier: BSD-3-Clause
// LaneAdmission: which lane connections a target admits.
#include "common/transport/lane_admission.h"

namespace rpmem::transport {

ClaimRules claim_rules(uint16_t client_minor, bool encrypted) noexcept {
  const bool mac = client_minor >= proto::kMinorProofs;
  return {mac, mac || (encrypted && client_minor >= proto::kMinorResume)};
}

LaneAdmission::LaneAdmission(const proto::Secret &secret, unsigned max_lanes, ClaimRules rules)
    : secret_(secret),
      max_lanes_(max_lanes),
      rules_(rules),
      taken_(std::make_unique<Taken[]>(max_lanes)) {}

const char *LaneAdmission::admit(const proto::Secret &proof, unsigned lane, unsigned nlanes,
                                 unsigned epoch, bool &returned) noexcept {
  if (epoch > UINT16_MAX ||
      !proves(secret_, {lane, static_cast<uint16_t>(epoch), nlanes}, rules_.mac, proof))
    return "wrong session secret";
  if (nlanes > max_lanes_ || lane >= max_lanes_) return "more lanes than granted";
  if (epoch > 0 && !rules_.comeback)
    return "a lane that comes back from a client that shows its secret (protocol before 1.9)";
  std::lock_guard lock(mu_);
  if (nlanes_ == 0)
    nlanes_ = nlanes;
  else if (nlanes_ != nlanes)
    return "inconsistent lane count";
  Taken &t = taken_[lane];
  const uint32_t mark = epoch + 1;
  if (rules_.mac && t.released && secrets_equal(t.proof, proof)) return "lane connection replayed";
  if (t.mark >= mark)
    return epoch == 0 ? "lane already connected"
                      : "lane connection of a past epoch (replayed or late)";
  returned = t.mark != 0;
  t.mark = mark;
  t.proof = proof;
  t.released = false;
  return nullptr;
}

void LaneAdmission::release(unsigned lane) noexcept {
  std::lock_guard lock(mu_);
  if (lane < max_lanes_ && taken_[lane].mark == 1) {
    taken_[lane].mark = 0;
    taken_[lane].released = true;
  }
}

unsigned LaneAdmission::session_nlanes() const noexcept {
  std::lock_guard lock(mu_);
  return nlanes_;
}

}  // namespace rpmem::transport
