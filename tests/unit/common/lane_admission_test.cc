// SPDX-License-Identifier: BSD-3-Clause
// Tests of which lane connections a target admits: the proof of the
// secret, the lane count, and each lane once per epoch, so that a lane
// comes back only at a higher epoch and a recording of an earlier
// connection is refused; a claim that showed the secret opens epoch 0 only.
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

constexpr ClaimRules kShown{false, true};  // the secret itself, inside TLS or sealed frames
constexpr ClaimRules kMac{true, true};

// A claim of lane `lane` of `nlanes` at `epoch` with a MAC of `secret`.
proto::Secret mac_of(const proto::Secret &secret, unsigned lane, unsigned nlanes, uint16_t epoch) {
  proto::Secret proof{};
  EXPECT_FALSE(prove(secret, {lane, epoch, nlanes}, true, proof));
  return proof;
}

TEST(LaneAdmission, EachLaneOnceAtEpochZero) {
  LaneAdmission a(secret_of(1), 4, kShown);
  EXPECT_EQ(refusal(a.admit(secret_of(2), 0, 2)), "wrong session secret");
  EXPECT_EQ(refusal(a.admit(secret_of(1), 0, 2)), "admitted");
  EXPECT_EQ(refusal(a.admit(secret_of(1), 1, 3)), "inconsistent lane count");
  EXPECT_EQ(refusal(a.admit(secret_of(1), 0, 2)), "lane already connected");
  EXPECT_EQ(refusal(a.admit(secret_of(1), 1, 5)), "more lanes than granted");
  EXPECT_EQ(a.session_nlanes(), 2u);
}

TEST(LaneAdmission, ALaneComesBackOnlyAtAHigherEpoch) {
  const proto::Secret secret = secret_of(1);
  LaneAdmission a(secret, 4, kMac);
  bool returned = true;
  const proto::Secret first = mac_of(secret, 1, 2, 0), back = mac_of(secret, 1, 2, 1);
  EXPECT_EQ(refusal(a.admit(first, 1, 2, 0, returned)), "admitted");
  EXPECT_FALSE(returned);
  EXPECT_EQ(refusal(a.admit(back, 1, 2, 1, returned)), "admitted");
  EXPECT_TRUE(returned);
  // A recording of either connection, or a late attempt: refused.
  EXPECT_EQ(refusal(a.admit(back, 1, 2, 1, returned)),
            "lane connection of a past epoch (replayed or late)");
  EXPECT_EQ(refusal(a.admit(first, 1, 2, 0, returned)), "lane already connected");
  // Epochs may be skipped (an attempt that never reached the target).
  EXPECT_EQ(refusal(a.admit(mac_of(secret, 1, 2, 5), 1, 2, 5, returned)), "admitted");
  EXPECT_EQ(refusal(a.admit(mac_of(secret, 1, 2, 4), 1, 2, 4, returned)),
            "lane connection of a past epoch (replayed or late)");
  // A lane never admitted may come at any epoch, and has not come back.
  EXPECT_EQ(refusal(a.admit(mac_of(secret, 0, 2, 7), 0, 2, 7, returned)), "admitted");
  EXPECT_FALSE(returned);
  // The proof still decides first.
  EXPECT_EQ(refusal(a.admit(mac_of(secret_of(9), 1, 2, 6), 1, 2, 6, returned)),
            "wrong session secret");
}

// What a recording of a claim gives a stranger: nothing. The MAC binds the
// lane, the epoch and the lane count; the secret itself is no proof.
TEST(LaneAdmission, ARecordedClaimCannotBeTurnedIntoAnotherEpochOrLane) {
  const proto::Secret secret = secret_of(3);
  LaneAdmission a(secret, 4, kMac);
  bool returned = false;
  const proto::Secret seen = mac_of(secret, 0, 2, 0);
  ASSERT_EQ(refusal(a.admit(seen, 0, 2, 0, returned)), "admitted");
  for (unsigned epoch : {1u, 2u, 65535u})
    EXPECT_EQ(refusal(a.admit(seen, 0, 2, epoch, returned)), "wrong session secret") << epoch;
  EXPECT_EQ(refusal(a.admit(seen, 1, 2, 0, returned)), "wrong session secret");
  EXPECT_EQ(refusal(a.admit(secret, 0, 2, 1, returned)), "wrong session secret");
  proto::Secret altered = seen;
  altered[0] ^= 1;  // another nonce under the same MAC
  EXPECT_EQ(refusal(a.admit(altered, 0, 2, 1, returned)), "wrong session secret");
  // None of them burnt an epoch: the lane comes back at 1.
  EXPECT_EQ(refusal(a.admit(mac_of(secret, 0, 2, 1), 0, 2, 1, returned)), "admitted");
  EXPECT_TRUE(returned);
}

// A client before 1.9 shows its secret: on cleartext lanes it is admitted
// at epoch 0 only; inside encrypted lanes it may come back from 1.6 on.
TEST(LaneAdmission, AClaimThatShowsTheSecretOpensEpochZeroOnlyOnCleartextLanes) {
  const proto::Secret secret = secret_of(5);
  for (uint16_t minor : {uint16_t{5}, uint16_t{6}, uint16_t{8}}) {
    LaneAdmission clear(secret, 2, claim_rules(minor, false));
    bool returned = false;
    EXPECT_EQ(refusal(clear.admit(secret, 0, 2, 0, returned)), "admitted") << minor;
    EXPECT_EQ(refusal(clear.admit(secret, 0, 2, 1, returned)),
              "a lane that comes back from a client that shows its secret (protocol before 1.9)")
        << minor;
    EXPECT_EQ(refusal(clear.admit(secret, 1, 2, 3, returned)),
              "a lane that comes back from a client that shows its secret (protocol before 1.9)")
        << minor;
  }
  EXPECT_FALSE(claim_rules(5, true).comeback);
  EXPECT_TRUE(claim_rules(6, true).comeback);
  EXPECT_FALSE(claim_rules(6, true).mac);
  EXPECT_TRUE(claim_rules(proto::kMinorProofs, false).mac);
  EXPECT_TRUE(claim_rules(proto::kMinorProofs, false).comeback);
  // A 1.9 session takes no claim that shows the secret.
  LaneAdmission mac(secret, 2, kMac);
  EXPECT_EQ(refusal(mac.admit(secret, 0, 2)), "wrong session secret");
}

TEST(LaneAdmission, ReleaseFreesOnlyAFirstAdmissionAndNotItsClaim) {
  const proto::Secret s = secret_of(1);
  LaneAdmission a(s, 2, kMac);
  bool returned = false;
  const proto::Secret first = mac_of(s, 0, 2, 0);
  EXPECT_EQ(refusal(a.admit(first, 0, 2)), "admitted");
  a.release(0);  // its set-up failed: the lane may connect again
  EXPECT_EQ(refusal(a.admit(first, 0, 2)), "lane connection replayed");
  EXPECT_EQ(refusal(a.admit(mac_of(s, 0, 2, 0), 0, 2)), "admitted");
  EXPECT_EQ(refusal(a.admit(mac_of(s, 0, 2, 3), 0, 2, 3, returned)), "admitted");
  a.release(0);  // a later epoch stays taken
  EXPECT_EQ(refusal(a.admit(mac_of(s, 0, 2, 3), 0, 2, 3, returned)),
            "lane connection of a past epoch (replayed or late)");
}

TEST(LaneProof, AMacProvesOnlyItsSecretLaneEpochAndCountAndEachIsFresh) {
  const proto::Secret s = secret_of(7);
  proto::Secret a{}, b{};
  ASSERT_FALSE(prove(s, {3, 9, 4}, true, a));
  ASSERT_FALSE(prove(s, {3, 9, 4}, true, b));
  EXPECT_NE(a, b) << "two claims of one lane and epoch share a nonce";
  EXPECT_NE(a, s) << "the proof is the secret";
  EXPECT_TRUE(proves(s, {3, 9, 4}, true, a));
  EXPECT_TRUE(proves(s, {3, 9, 4}, true, b));
  EXPECT_FALSE(proves(s, {3, 10, 4}, true, a));
  EXPECT_FALSE(proves(s, {2, 9, 4}, true, a));
  EXPECT_FALSE(proves(s, {3, 9, 5}, true, a));
  EXPECT_FALSE(proves(secret_of(8), {3, 9, 4}, true, a));
  proto::Secret shown{};
  ASSERT_FALSE(prove(s, {3, 9, 4}, false, shown));
  EXPECT_EQ(shown, s);
  EXPECT_TRUE(proves(s, {0, 0, 1}, false, s));
}

}  // namespace
}  // namespace rpmem::transport
