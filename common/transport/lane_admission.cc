// SPDX-License-Identifier: BSD-3-Clause
// LaneAdmission and secrets_equal: which lane connections a target admits.
#include "common/transport/lane_admission.h"

namespace rpmem::transport {

bool secrets_equal(const proto::Secret &a, const proto::Secret &b) noexcept {
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

LaneAdmission::LaneAdmission(const proto::Secret &secret, unsigned max_lanes)
    : secret_(secret),
      max_lanes_(max_lanes),
      taken_(std::make_unique<std::atomic<uint32_t>[]>(max_lanes)) {}

const char *LaneAdmission::admit(const proto::Secret &secret, unsigned lane, unsigned nlanes,
                                 unsigned epoch, bool &returned) noexcept {
  if (!secrets_equal(secret, secret_)) return "wrong session secret";
  if (nlanes > max_lanes_ || lane >= max_lanes_) return "more lanes than granted";
  unsigned expected = 0;
  if (!nlanes_.compare_exchange_strong(expected, nlanes) && expected != nlanes)
    return "inconsistent lane count";
  const uint32_t mark = epoch + 1;
  uint32_t seen = taken_[lane].load();
  do {
    if (seen >= mark)
      return epoch == 0 ? "lane already connected"
                        : "lane connection of a past epoch (replayed or late)";
  } while (!taken_[lane].compare_exchange_weak(seen, mark));
  returned = seen != 0;
  return nullptr;
}

void LaneAdmission::release(unsigned lane) noexcept {
  if (lane < max_lanes_ && taken_[lane].load() == 1) taken_[lane].store(0);
}

}  // namespace rpmem::transport
