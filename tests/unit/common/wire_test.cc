// SPDX-License-Identifier: BSD-3-Clause
// The wire primitives stated once (wire.h) and what both lane wires share:
// byte order, the bounded reader, the errno bound, the lane operations and
// each wire's codes for them, the request header and the lane claim against
// golden bytes, the names logs give transports and methods, the one "peer
// is gone" set, and the counters' grouping of deep persists.
#include "common/wire.h"

#include "common/proto.h"
#include "common/transport/lane_stats.h"
#include "common/transport/tcp/socket_io.h"
#include "common/transport/tcp/tls_setup.h"
#include "common/transport/verbs/verbs_wire.h"

#include <gtest/gtest.h>

#include <openssl/ssl.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace rpmem {
namespace {

using wire::LaneOp;

constexpr LaneOp kAllOps[] = {LaneOp::kPersist, LaneOp::kDeepPersist, LaneOp::kFlush,
                              LaneOp::kDrain, LaneOp::kRead};

TEST(Wire, IntegersAreLittleEndianAtAnyWidth) {
  uint8_t b[8] = {};
  wire::store_le(b, 0x0102030405060708, 8);
  const uint8_t golden[8] = {8, 7, 6, 5, 4, 3, 2, 1};
  EXPECT_EQ(std::memcmp(b, golden, 8), 0);
  EXPECT_EQ(wire::load_le(b, 8), 0x0102030405060708u);
  EXPECT_EQ(wire::load_le(b, 2), 0x0708u);
  wire::store_le32(b, 0xa1b2c3d4);
  EXPECT_EQ(b[0], 0xd4);
  EXPECT_EQ(b[3], 0xa1);
  EXPECT_EQ(wire::load_le32(b), 0xa1b2c3d4u);
  EXPECT_EQ(b[4], 4);  // untouched
}

TEST(Wire, WriterAppendsAndReaderReadsBackUntilTheEnd) {
  wire::Writer w;
  w.u8(1);
  w.u16(0x0302);
  w.u32(0x07060504);
  w.u64(0x0f0e0d0c0b0a0908);
  w.raw("xy", 2);
  std::memcpy(w.grow(1), "z", 1);
  const std::vector<uint8_t> b = w.take();
  ASSERT_EQ(b.size(), 18u);
  for (uint8_t i = 0; i < 15; ++i) EXPECT_EQ(b[i], i + 1);
  wire::Reader r(b);
  EXPECT_EQ(r.u8(), 1);
  EXPECT_EQ(r.u16(), 0x0302);
  EXPECT_EQ(r.u32(), 0x07060504u);
  EXPECT_EQ(r.u64(), 0x0f0e0d0c0b0a0908u);
  char xyz[3];
  EXPECT_TRUE(r.raw(xyz, 3));
  EXPECT_EQ(std::string(xyz, 3), "xyz");
  EXPECT_TRUE(r.done());
  EXPECT_EQ(r.u8(), 0);  // past the end: zero, and the decode failed
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.done());
}

TEST(Wire, AReadPastTheEndFailsEveryLaterRead) {
  const uint8_t b[3] = {1, 2, 3};
  wire::Reader r(b);
  EXPECT_EQ(r.u32(), 0u);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.u8(), 0);  // the bytes are there, but the decode already failed
  EXPECT_EQ(r.take(0), nullptr);
}

TEST(Wire, AnErrnoOnTheWireIsBelow4096) {
  EXPECT_EQ(wire::kErrnoLimit, 4096u);
  EXPECT_TRUE(wire::is_errno(0));
  EXPECT_TRUE(wire::is_errno(4095));
  EXPECT_FALSE(wire::is_errno(4096));
  EXPECT_EQ(wire::errno_of(EIO), EIO);
  EXPECT_EQ(wire::errno_of(4096), EPROTO);
  EXPECT_EQ(wire::errno_of(UINT32_MAX), EPROTO);
}

TEST(LaneOps, TcpCodesAreUnchangedAndTranslateBothWays) {
  EXPECT_EQ(static_cast<int>(proto::data_op(LaneOp::kPersist)), 1);
  EXPECT_EQ(static_cast<int>(proto::data_op(LaneOp::kDeepPersist)), 2);
  EXPECT_EQ(static_cast<int>(proto::data_op(LaneOp::kFlush)), 3);
  EXPECT_EQ(static_cast<int>(proto::data_op(LaneOp::kDrain)), 4);
  EXPECT_EQ(static_cast<int>(proto::data_op(LaneOp::kRead)), 5);
  for (LaneOp op : kAllOps) EXPECT_EQ(proto::lane_op(proto::data_op(op)), op);
}

TEST(LaneOps, VerbsCodesAreUnchangedAndAFlushHasNone) {
  using transport::verbs::MsgOp;
  EXPECT_EQ(static_cast<int>(*transport::verbs::msg_op(LaneOp::kPersist)), 1);
  EXPECT_EQ(static_cast<int>(*transport::verbs::msg_op(LaneOp::kDeepPersist)), 2);
  EXPECT_EQ(static_cast<int>(*transport::verbs::msg_op(LaneOp::kDrain)), 3);
  EXPECT_EQ(static_cast<int>(*transport::verbs::msg_op(LaneOp::kRead)), 4);
  EXPECT_FALSE(transport::verbs::msg_op(LaneOp::kFlush));
  for (LaneOp op : kAllOps) {
    if (auto m = transport::verbs::msg_op(op)) {
      EXPECT_EQ(transport::verbs::lane_op(*m), op);
    }
  }
}

TEST(LaneWires, BothWiresShareOneRequestHeader) {
  const uint8_t golden[proto::kRequestHeaderSize] = {4,    1,    0,    0,    0,    0,    0,    0,
                                                     0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
                                                     0x10, 0,    0,    0,    0,    0,    0,    0};
  uint8_t b[proto::kRequestHeaderSize];
  proto::encode(proto::RequestHeader{4, 1, 0x0102030405060708, 16}, b);
  EXPECT_EQ(std::memcmp(b, golden, sizeof(b)), 0);
  auto h = proto::decode_request_header(golden);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->op, 4);
  EXPECT_EQ(h->flags, 1);
  EXPECT_EQ(h->offset, 0x0102030405060708u);
  EXPECT_EQ(h->length, 16u);
  for (size_t i = 2; i < 8; ++i) {
    uint8_t bad[proto::kRequestHeaderSize];
    std::memcpy(bad, golden, sizeof(bad));
    bad[i] = 1;
    EXPECT_FALSE(proto::decode_request_header(bad)) << i;
  }
  // A tcp drain request is the same bytes as the header of code 4.
  uint8_t drain[proto::kDataRequestSize];
  proto::encode(proto::DataRequest{proto::DataOp::kDrain, 1, 0x0102030405060708, 16}, drain);
  EXPECT_EQ(std::memcmp(drain, golden, sizeof(drain)), 0);
}

TEST(LaneWires, TheLaneHelloCarriesTheClaimAfterItsVersion) {
  proto::LaneHello h;
  for (size_t i = 0; i < h.proof.size(); ++i) h.proof[i] = static_cast<uint8_t>(i + 1);
  h.lane = 3;
  h.epoch = 2;
  h.nlanes = 9;
  uint8_t b[proto::kLaneHelloSize];
  proto::encode(h, b);
  const proto::LaneClaim c = proto::decode_lane_claim(b + 8);
  EXPECT_EQ(c.proof, h.proof);
  EXPECT_EQ(c.lane, 3u | 2u << 16);  // u16 lane, u16 epoch
  EXPECT_EQ(c.nlanes, 9u);
  uint8_t again[proto::kLaneClaimSize];
  proto::encode(c, again);
  EXPECT_EQ(std::memcmp(again, b + 8, sizeof(again)), 0);
}

TEST(LaneWires, TheHelloReplyIsAStatusWordAndAZeroWord) {
  uint8_t b[proto::kLaneHelloReplySize];
  std::memset(b, 0xff, sizeof(b));
  proto::encode_lane_hello_reply(EACCES, b);
  const uint8_t golden[proto::kLaneHelloReplySize] = {EACCES, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(std::memcmp(b, golden, sizeof(b)), 0);
  EXPECT_EQ(proto::decode_lane_hello_reply(b), static_cast<uint32_t>(EACCES));
  proto::encode_lane_hello_reply(0, b);
  EXPECT_EQ(proto::decode_lane_hello_reply(b), 0u);
}

TEST(Names, TransportsLanesAndMethodsAsLogsGiveThem) {
  using proto::TransportKind;
  EXPECT_STREQ(proto::transport_name(TransportKind::kTcp), "tcp");
  EXPECT_STREQ(proto::transport_name(TransportKind::kVerbs), "verbs");
  EXPECT_STREQ(proto::lanes_name(TransportKind::kTcp, 0), "tcp");
  EXPECT_STREQ(proto::lanes_name(TransportKind::kTcp, proto::kLaneTls), "tcp+tls");
  EXPECT_STREQ(proto::lanes_name(TransportKind::kTcp, proto::kLaneTls | proto::kLaneSealed),
               "tcp+sealed");
  EXPECT_STREQ(proto::lanes_name(TransportKind::kVerbs, 0), "verbs");
  EXPECT_STREQ(proto::method_name(proto::PersistMethod::kGpspm), "GPSPM");
  EXPECT_STREQ(proto::method_name(proto::PersistMethod::kApm), "APM");
}

TEST(PeerGone, OneSetForEveryStream) {
  using transport::tcp::io_error;
  using transport::tcp::peer_gone;
  for (int e : {EPIPE, ECONNRESET, ENOTCONN, ESHUTDOWN}) {
    EXPECT_TRUE(peer_gone(e)) << e;
    EXPECT_EQ(io_error(e).value(), ECONNRESET) << e;
  }
  for (int e : {0, EAGAIN, EINTR, ETIMEDOUT, EBADF, EIO, ECONNABORTED}) {
    EXPECT_FALSE(peer_gone(e)) << e;
  }
  EXPECT_EQ(io_error(ETIMEDOUT).value(), ETIMEDOUT);
  EXPECT_EQ(io_error(EBADF).value(), EBADF);
}

TEST(TlsSetup, OnlyTheLanesOwnSocketBioIsCorked) {
  std::string why;
  const std::vector<uint8_t> key(32, 7);
  auto ctx = transport::tcp::make_psk_context(false, key, why);
  ASSERT_TRUE(ctx) << why;
  SSL *ssl = SSL_new(ctx.get());
  ASSERT_NE(ssl, nullptr);
  BIO *mem = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, mem, mem);
  EXPECT_FALSE(transport::tcp::cork(ssl, true));  // another BIO: nothing done
  EXPECT_FALSE(transport::tcp::cork(ssl, false));
  SSL_free(ssl);
}

TEST(LaneCounters, ADeepPersistCountsAndIsTimedAsAPersist) {
  transport::LaneCounters c;
  const int64_t t = transport::LaneCounters::now_ns();
  c.served(LaneOp::kDeepPersist, 100, t, false);
  c.served(LaneOp::kPersist, 20, t, true);
  c.served(LaneOp::kFlush, 5, t, false);
  c.served(LaneOp::kDrain, 0, t, false);
  c.served(LaneOp::kRead, 7, t, false);
  transport::LaneTotals s;
  c.add_to(s);
  EXPECT_EQ(s.persists, 2u);
  EXPECT_EQ(s.persisted_bytes, 120u);
  EXPECT_EQ(s.flushes, 1u);
  EXPECT_EQ(s.flushed_bytes, 5u);
  EXPECT_EQ(s.drains, 1u);
  EXPECT_EQ(s.reads, 1u);
  EXPECT_EQ(s.read_bytes, 7u);
  EXPECT_EQ(s.failed, 1u);
  EXPECT_EQ(s.timed(), 3u);  // the persists and the drain
}

}  // namespace
}  // namespace rpmem
