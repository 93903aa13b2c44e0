// SPDX-License-Identifier: BSD-3-Clause
// Tests of which lane connections a target admits: the secret, the lane
// count, and each lane once per epoch, so that a lane comes back only at a
// higher epoch and a recording of an earlier connection is refused.
#include "common/transport/lane_admission.h"

#include <gtest/gtest.h>

#include <string>

namespace rpmem::transport {
namespace {

proto::Secret secret_of(uint8_t seed) {
  proto::Secret s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(seed + i);
  return s;
}

std::string refusal(const char *why) { return why ? why : "admitted"; }

TEST(LaneAdmission, EachLaneOnceAtEpochZero) {
  LaneAdmission a(secret_of(1), 4);
  EXPECT_EQ(refusal(a.admit(secret_of(2), 0, 2)), "wrong session secret");
  EXPECT_EQ(refusal(a.admit(secret_of(1), 0, 2)), "admitted");
  EXPECT_EQ(refusal(a.admit(secret_of(1), 1, 3)), "inconsistent lane count");
  EXPECT_EQ(refusal(a.admit(secret_of(1), 0, 2)), "lane already connected");
  EXPECT_EQ(refusal(a.admit(secret_of(1), 1, 5)), "more lanes than granted");
  EXPECT_EQ(a.session_nlanes(), 2u);
}

TEST(LaneAdmission, ALaneComesBackOnlyAtAHigherEpoch) {
  LaneAdmission a(secret_of(1), 4);
  const proto::Secret s = secret_of(1);
  bool returned = true;
  EXPECT_EQ(refusal(a.admit(s, 1, 2, 0, returned)), "admitted");
  EXPECT_FALSE(returned);
  EXPECT_EQ(refusal(a.admit(s, 1, 2, 1, returned)), "admitted");
  EXPECT_TRUE(returned);
  // A recording of either connection, or a late attempt: refused.
  EXPECT_EQ(refusal(a.admit(s, 1, 2, 1, returned)),
            "lane connection of a past epoch (replayed or late)");
  EXPECT_EQ(refusal(a.admit(s, 1, 2, 0, returned)), "lane already connected");
  // Epochs may be skipped (an attempt that never reached the target).
  EXPECT_EQ(refusal(a.admit(s, 1, 2, 5, returned)), "admitted");
  EXPECT_EQ(refusal(a.admit(s, 1, 2, 4, returned)),
            "lane connection of a past epoch (replayed or late)");
  // A lane never admitted may come at any epoch, and has not come back.
  EXPECT_EQ(refusal(a.admit(s, 0, 2, 7, returned)), "admitted");
  EXPECT_FALSE(returned);
  // The secret still decides first.
  EXPECT_EQ(refusal(a.admit(secret_of(9), 1, 2, 6, returned)), "wrong session secret");
}

TEST(LaneAdmission, ReleaseFreesOnlyAFirstAdmission) {
  LaneAdmission a(secret_of(1), 2);
  const proto::Secret s = secret_of(1);
  bool returned = false;
  EXPECT_EQ(refusal(a.admit(s, 0, 2)), "admitted");
  a.release(0);  // its set-up failed: the lane may connect again
  EXPECT_EQ(refusal(a.admit(s, 0, 2)), "admitted");
  EXPECT_EQ(refusal(a.admit(s, 0, 2, 3, returned)), "admitted");
  a.release(0);  // a later epoch stays taken
  EXPECT_EQ(refusal(a.admit(s, 0, 2, 3, returned)),
            "lane connection of a past epoch (replayed or late)");
}

}  // namespace
}  // namespace rpmem::transport
