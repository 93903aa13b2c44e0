// SPDX-License-Identifier: BSD-3-Clause
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
      taken_(std::make_unique<std::atomic<bool>[]>(max_lanes)) {}

const char *LaneAdmission::admit(const proto::Secret &secret, unsigned lane,
                                 unsigned nlanes) noexcept {
  if (!secrets_equal(secret, secret_)) return "wrong session secret";
  if (nlanes > max_lanes_ || lane >= max_lanes_) return "more lanes than granted";
  unsigned expected = 0;
  if (!nlanes_.compare_exchange_strong(expected, nlanes) && expected != nlanes)
    return "inconsistent lane count";
  if (taken_[lane].exchange(true)) return "lane already connected";
  return nullptr;
}

void LaneAdmission::release(unsigned lane) noexcept {
  if (lane < max_lanes_) taken_[lane].store(false);
}

}  // namespace rpmem::transport
