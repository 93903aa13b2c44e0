// SPDX-License-Identifier: BSD-3-Clause
// Tests of choose_lane_security: what the client offered and the target
// granted (lane flags, transport, service or ssh) to the lanes' security.
#include "librpmem/lane_security.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>

namespace rpmem {
namespace {

using proto::kLaneSealed;
using proto::kLaneTls;
using proto::TransportKind;
using ::testing::HasSubstr;

constexpr uint32_t kTlsSealed = kLaneTls | kLaneSealed;

LaneSecurity chosen(uint32_t offered, uint32_t granted, TransportKind t, bool service) {
  auto r = choose_lane_security(offered, granted, t, service);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? r.value() : LaneSecurity::kCleartext;
}

std::string refused(uint32_t offered, uint32_t granted, TransportKind t, bool service) {
  auto r = choose_lane_security(offered, granted, t, service);
  EXPECT_FALSE(r.ok());
  if (r.ok()) return {};
  EXPECT_EQ(r.error().code.value(), EPROTO);
  return r.error().message;
}

TEST(LaneSecurity, CleartextWhenNothingOfferedOrGranted) {
  EXPECT_EQ(chosen(0, 0, TransportKind::kTcp, false), LaneSecurity::kCleartext);
  EXPECT_EQ(chosen(0, 0, TransportKind::kVerbs, true), LaneSecurity::kCleartext);
  // Able to seal, but the target does not: cleartext is fine unless TLS was asked.
  EXPECT_EQ(chosen(kLaneSealed, 0, TransportKind::kTcp, true), LaneSecurity::kCleartext);
}

TEST(LaneSecurity, SealedWhenOfferedAndGrantedWithTls) {
  EXPECT_EQ(chosen(kLaneSealed, kTlsSealed, TransportKind::kTcp, true), LaneSecurity::kSealed);
  EXPECT_EQ(chosen(kTlsSealed, kTlsSealed, TransportKind::kTcp, false), LaneSecurity::kSealed);
}

TEST(LaneSecurity, SealedBitWithoutTlsBitIsNotSealing) {
  // kLaneSealed counts only beside kLaneTls: alone it grants nothing.
  EXPECT_EQ(chosen(kLaneSealed, kLaneSealed, TransportKind::kTcp, true), LaneSecurity::kCleartext);
  EXPECT_THAT(refused(kTlsSealed, kLaneSealed, TransportKind::kTcp, true),
              HasSubstr("did not put the data lanes inside TLS"));
}

TEST(LaneSecurity, TlsWithCertificatesToAServiceAndWithTheSessionKeyOverSsh) {
  EXPECT_EQ(chosen(kLaneTls, kLaneTls, TransportKind::kTcp, true), LaneSecurity::kTlsCertificates);
  EXPECT_EQ(chosen(kLaneTls, kLaneTls, TransportKind::kTcp, false), LaneSecurity::kTlsSessionKey);
  // The target may put the lanes in TLS though the client did not ask.
  EXPECT_EQ(chosen(0, kLaneTls, TransportKind::kTcp, false), LaneSecurity::kTlsSessionKey);
}

TEST(LaneSecurity, FailsWithEprotoWhenTlsLanesAreNotTcp) {
  EXPECT_THAT(refused(kLaneTls, kLaneTls, TransportKind::kVerbs, true),
              HasSubstr("over a transport other than tcp"));
  EXPECT_THAT(refused(kTlsSealed, kTlsSealed, TransportKind::kVerbs, false),
              HasSubstr("over a transport other than tcp"));
}

TEST(LaneSecurity, FailsWithEprotoWhenSealedWithoutTheOffer) {
  EXPECT_THAT(refused(kLaneTls, kTlsSealed, TransportKind::kTcp, true),
              HasSubstr("which this client did not offer"));
  EXPECT_THAT(refused(0, kTlsSealed, TransportKind::kTcp, false),
              HasSubstr("which this client did not offer"));
}

TEST(LaneSecurity, FailsWithEprotoWhenTlsAskedAndLanesCleartext) {
  EXPECT_THAT(refused(kLaneTls, 0, TransportKind::kTcp, true),
              HasSubstr("did not put the data lanes inside TLS (RPMEM_DATA_TLS=1)"));
  EXPECT_THAT(refused(kTlsSealed, 0, TransportKind::kVerbs, false),
              HasSubstr("did not put the data lanes inside TLS (RPMEM_DATA_TLS=1)"));
}

}  // namespace
}  // namespace rpmem
