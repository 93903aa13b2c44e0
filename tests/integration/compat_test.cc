// SPDX-License-Identifier: BSD-3-Clause
// A client of the previous release, protocol 1.5, against this daemon: it
// creates a pool without the reopen extension, takes a pool response
// without the token extension (its decoder takes no trailing bytes),
// connects its lanes with hellos of minor 5 -- in clear, inside TLS and
// sealed -- persists, flushes and drains bytes, reads them back, and
// closes; the bytes are checked in the pool's part file. (The reverse, this
// client against a 1.5 daemon, needs the old build and is checked apart.)
#include "tests/integration/harness.h"
#include "tests/integration/raw_peer.h"
#include "tests/integration/tls_peer.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace rpmem_test {
namespace {

constexpr size_t kPool = 4 * kMiB;
constexpr uint16_t kOldMinor = 5;  // the protocol of the previous release
static_assert(kOldMinor == proto::kMinorSealed);
constexpr uint32_t kLanes = 2;

proto::Bytes pattern(size_t n, uint8_t seed) {
  proto::Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 13);
  return b;
}

// The hello of lane `lane` as a 1.5 client sends it (its version, a u16
// at byte 6, says minor 5); the target's status.
template <class Peer>
std::optional<uint32_t> old_hello(Peer &peer, const proto::Secret &secret, uint32_t lane) {
  proto::Bytes h = lane_hello_bytes(secret, lane, kLanes, 0, false);
  rpmem::wire::store_le(h.data() + 6, kOldMinor, 2);
  uint8_t r[proto::kLaneHelloReplySize];
  if (!peer.send(h.data(), h.size()) || !peer.recv(r, sizeof(r))) return std::nullopt;
  return proto::decode_lane_hello_reply(r);
}

// One request and its reply (none for a flush); the reply's status, or -1.
template <class Peer>
int request(Peer &peer, proto::DataOp op, uint64_t offset, const proto::Bytes &payload,
            uint64_t length) {
  uint8_t hdr[proto::kDataRequestSize];
  proto::encode(proto::DataRequest{op, 0, offset, length}, hdr);
  proto::Bytes all(hdr, hdr + sizeof(hdr));
  all.insert(all.end(), payload.begin(), payload.end());
  if (!peer.send(all.data(), all.size())) return -1;
  if (op == proto::DataOp::kFlush) return 0;
  uint8_t r[proto::kDataReplySize];
  if (!peer.recv(r, sizeof(r))) return -1;
  auto reply = proto::decode_data_reply(r);
  if (!reply || reply->op != op) return -1;
  return static_cast<int>(reply->status);
}

// Reads [offset, +length) of the pool through `peer`.
template <class Peer>
std::optional<proto::Bytes> read_back(Peer &peer, uint64_t offset, uint64_t length) {
  if (request(peer, proto::DataOp::kRead, offset, {}, length) != 0) return std::nullopt;
  proto::Bytes b(length);
  if (!peer.recv(b.data(), b.size())) return std::nullopt;
  return b;
}

class OldClient : public ::testing::Test {
 protected:
  void SetUp() override {
    if (verbs_only()) GTEST_SKIP() << "the raw lanes here are tcp lanes, and tcp is disabled";
    target_.write_poolset("t.set", {{kPool, "t.part"}}, "OPTION NOHDRS\n");
  }

  // The create of a 1.5 client asking for `lane_flags`: no reopen
  // extension; the response is one its decoder takes.
  std::optional<proto::PoolResponse> create(RawDaemon &d, uint32_t lane_flags) {
    proto::Bytes p;
    auto h = d.read_frame(p);
    if (!h || h->type != proto::MsgType::kHello) return std::nullopt;
    auto hello = proto::decode_hello(p);
    if (!hello || hello->status != 0 || hello->major != proto::kMajor) return std::nullopt;
    proto::PoolRequest req = pool_request("t.set", kPool, kLanes, false);
    req.minor = kOldMinor;
    req.lane_flags = lane_flags;
    EXPECT_FALSE(req.extended);
    auto r = d.request(proto::MsgType::kCreate, req);
    if (!r) return std::nullopt;
    EXPECT_TRUE(r->extended);  // 1.5 takes the lane security extension (1.3)
    EXPECT_FALSE(r->tokened);  // ... and no token (1.6): it would refuse the bytes
    return r;
  }

  // Both lanes (made by `connect(lane)`) say hello and persist, flush and
  // drain, and read back bytes of their own; the daemon closes the pool on
  // request and exits; the bytes are in the part.
  template <class Connect>
  void lanes_write_and_read(RawDaemon &d, const proto::PoolResponse &r, Connect connect) {
    std::vector<std::pair<uint64_t, proto::Bytes>> written;
    for (uint32_t lane = 0; lane < kLanes; ++lane) {
      auto peer = connect(lane);
      ASSERT_EQ(old_hello(*peer, r.secret, lane), std::optional<uint32_t>(0)) << lane;
      const uint64_t at = 8192 + lane * 65536;
      const proto::Bytes persisted = pattern(5000, static_cast<uint8_t>(lane + 1));
      EXPECT_EQ(request(*peer, proto::DataOp::kPersist, at, persisted, persisted.size()), 0);
      const proto::Bytes flushed = pattern(3000, static_cast<uint8_t>(lane + 7));
      EXPECT_EQ(request(*peer, proto::DataOp::kFlush, at + 8192, flushed, flushed.size()), 0);
      EXPECT_EQ(request(*peer, proto::DataOp::kDrain, 0, {}, 0), 0);
      EXPECT_EQ(read_back(*peer, at, persisted.size()), std::optional<proto::Bytes>(persisted));
      EXPECT_EQ(read_back(*peer, at + 8192, flushed.size()), std::optional<proto::Bytes>(flushed));
      written.emplace_back(at, persisted);
      written.emplace_back(at + 8192, flushed);
    }
    ASSERT_TRUE(d.send(proto::encode(proto::CloseRequest{})));
    proto::Bytes p;
    auto h = d.read_frame(p);
    ASSERT_TRUE(h && h->type == proto::MsgType::kCloseResp);
    auto status = proto::decode_status_response(p);
    ASSERT_TRUE(status);
    EXPECT_EQ(status->status, proto::Status::kSuccess);
    d.shutdown_write();
    const auto st = d.wait();
    EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << describe_status(st);
    const std::vector<uint8_t> part = read_file(target_.part_path("t.part"));
    ASSERT_EQ(part.size(), kPool);
    for (const auto &[at, bytes] : written)
      EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), part.begin() + static_cast<long>(at)))
          << at;
  }

  Target target_;
};

TEST_F(OldClient, OfProtocol15WritesAndReadsThroughCleartextLanes) {
  RawDaemon d(target_);
  auto r = create(d, 0);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, proto::Status::kSuccess);
  EXPECT_EQ(r->transport, proto::TransportKind::kTcp);
  EXPECT_EQ(r->lane_flags, 0u);
  lanes_write_and_read(d, *r, [&](uint32_t) { return std::make_unique<PlainPeer>(r->port); });
}

TEST_F(OldClient, OfProtocol15WritesAndReadsThroughTlsLanes) {
  RawDaemon d(target_);
  auto r = create(d, proto::kLaneTls);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, proto::Status::kSuccess);
  ASSERT_EQ(r->lane_flags, proto::kLaneTls);
  const auto ctx = psk_client_context(r->lane_psk);
  lanes_write_and_read(d, *r, [&](uint32_t) {
    auto peer = std::make_unique<TlsPeer>(r->port, ctx);
    EXPECT_TRUE(peer->handshaken()) << peer->why();
    return peer;
  });
}

TEST_F(OldClient, OfProtocol15WritesAndReadsThroughSealedLanes) {
  RawDaemon d(target_);
  auto r = create(d, proto::kLaneTls | proto::kLaneSealed);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, proto::Status::kSuccess);
  ASSERT_EQ(r->lane_flags, proto::kLaneTls | proto::kLaneSealed);
  lanes_write_and_read(d, *r, [&](uint32_t lane) {
    return std::make_unique<SealedPeer>(r->port, r->lane_psk, lane, 0, false);  // 1.5's keys
  });
}

}  // namespace
}  // namespace rpmem_test
