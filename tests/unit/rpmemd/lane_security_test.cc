// SPDX-License-Identifier: BSD-3-Clause
// choose_lane_security(): what a session's lanes run in, for each data-tls
// policy, data-seal and client.
#include "rpmemd/lane_security.h"

#include <gtest/gtest.h>

namespace rpmemd {
namespace {

namespace proto = rpmem::proto;
using proto::Status;

constexpr uint32_t kTls = proto::kLaneTls;
constexpr uint32_t kSealed = proto::kLaneTls | proto::kLaneSealed;

// "c" cleartext, "t" TLS, "s" sealed, "x" refused.
std::string choice(DataTls policy, bool seal, uint16_t minor, uint32_t flags) {
  auto s = choose_lane_security(policy, seal, minor, flags);
  if (s.status != Status::kSuccess) {
    EXPECT_EQ(s.status, Status::kProvNoSup);
    EXPECT_FALSE(s.why.empty());
    return "x";
  }
  EXPECT_EQ(s.lane_flags(), s.sealed ? kSealed : s.tls ? kTls : 0u);
  return s.sealed ? "s" : s.tls ? "t" : "c";
}

TEST(LaneSecurity, EachPolicyForEachClient) {
  const uint16_t old = proto::kMinorLaneTls - 1, tls = proto::kMinorLaneTls,
                 seals = proto::kMinorSealed;
  EXPECT_EQ(choice(DataTls::kNo, true, seals, 0), "c");
  EXPECT_EQ(choice(DataTls::kNo, true, seals, kTls), "x") << "asks for what the daemon has not";
  EXPECT_EQ(choice(DataTls::kAllow, true, seals, 0), "c");
  EXPECT_EQ(choice(DataTls::kAllow, true, tls, kTls), "t");
  EXPECT_EQ(choice(DataTls::kAllow, true, seals, kSealed), "s");
  EXPECT_EQ(choice(DataTls::kAllow, false, seals, kSealed), "t") << "data-seal = no";
  EXPECT_EQ(choice(DataTls::kYes, true, old, 0), "c") << "a client that cannot";
  EXPECT_EQ(choice(DataTls::kYes, true, tls, 0), "t") << "did not ask, can: gets TLS";
  EXPECT_EQ(choice(DataTls::kYes, true, tls, kSealed), "t") << "cannot seal (protocol 1.3)";
  EXPECT_EQ(choice(DataTls::kRequire, true, old, 0), "x");
  EXPECT_EQ(choice(DataTls::kRequire, true, seals, kSealed), "s");
}

TEST(LaneSecurity, ARefusalSaysWhy) {
  auto s = choose_lane_security(DataTls::kRequire, true, 2, 0);
  EXPECT_EQ(s.why,
            "data-tls = require: the client (protocol 1.2) cannot run its data lanes inside TLS");
}

}  // namespace
}  // namespace rpmemd
