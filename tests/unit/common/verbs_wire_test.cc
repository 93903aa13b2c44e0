// SPDX-License-Identifier: BSD-3-Clause
// The verbs provider's codecs (provider data, connect private data, lane
// messages and replies) against golden bytes and malformed input, and the
// flushed-range bookkeeping of GPSPM lanes. No RDMA device needed.
#ifdef RPMEM_HAVE_VERBS
#include "common/transport/verbs/verbs_wire.h"

#include "common/transport/flush_ranges.h"

#include <gtest/gtest.h>

#include <sys/socket.h>

#include <vector>

namespace rpmem::transport::verbs {
namespace {

TEST(VerbsWire, ProviderInfoRoundTripsLittleEndian) {
  ProviderInfo in;
  in.method = proto::PersistMethod::kApm;
  in.raddr = 0x0102030405060708ull;
  in.rkey = 0xa1b2c3d4;
  in.family = AF_INET;
  in.addr = {10, 0, 2, 15};
  in.flags = kInfoStaged | kInfoBounded;
  in.window = 0x00100000;
  auto b = encode(in);
  ASSERT_EQ(b.size(), kProviderInfoSize);
  EXPECT_EQ(b[0], 1);     // version
  EXPECT_EQ(b[4], 2);     // APM
  EXPECT_EQ(b[8], 0x08);  // raddr, low byte first
  EXPECT_EQ(b[15], 0x01);
  EXPECT_EQ(b[16], 0xd4);  // rkey
  auto out = decode_provider_info(b);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->method, in.method);
  EXPECT_EQ(out->raddr, in.raddr);
  EXPECT_EQ(out->rkey, in.rkey);
  EXPECT_EQ(out->max_inline, kMaxInline);
  EXPECT_EQ(out->family, AF_INET);
  EXPECT_EQ(out->addr, in.addr);
  EXPECT_EQ(out->flags, kInfoStaged | kInfoBounded);
  EXPECT_EQ(b[26], kInfoStaged | kInfoBounded);
  EXPECT_EQ(out->window, 0x00100000u);
  EXPECT_EQ(b[30], 0x10);  // window, low byte first
}

TEST(VerbsWire, MalformedProviderInfoIsRefused) {
  auto good = encode(ProviderInfo{});
  EXPECT_FALSE(decode_provider_info({good.data(), good.size() - 1}));
  // version, method, max_inline, family, an unknown flag, reserved, a
  // window without kInfoBounded
  for (size_t at : {0u, 4u, 22u, 24u, 26u, 27u, 29u}) {
    auto b = good;
    b[at] ^= 0x40;
    EXPECT_FALSE(decode_provider_info(b)) << "byte " << at;
  }
  // kInfoBounded with a window smaller than a page
  ProviderInfo bounded;
  bounded.flags = kInfoStaged | kInfoBounded;
  bounded.window = 4095;
  EXPECT_FALSE(decode_provider_info(encode(bounded)));
  bounded.window = 4096;
  EXPECT_TRUE(decode_provider_info(encode(bounded)));
}

TEST(VerbsWire, ReadRequestCarriesNoPayload) {
  uint8_t b[kMsgHeaderSize + 8] = {};
  encode(MsgHeader{MsgOp::kRead, 0, 4096, 65536}, b);
  auto m = decode_msg({b, kMsgHeaderSize});
  ASSERT_TRUE(m);
  EXPECT_EQ(m->op, MsgOp::kRead);
  EXPECT_EQ(m->length, 65536u);
  EXPECT_FALSE(decode_msg({b, kMsgHeaderSize + 8})) << "a payload";
  b[1] = kMsgInline;
  EXPECT_FALSE(decode_msg({b, kMsgHeaderSize})) << "flags";
}

TEST(VerbsWire, ConnectDataCarriesSecretAndLaneAndIgnoresPadding) {
  ConnectData c;
  for (size_t i = 0; i < c.proof.size(); ++i) c.proof[i] = static_cast<uint8_t>(i);
  c.lane = 3;
  c.nlanes = 4;
  uint8_t raw[kConnectDataSize];
  encode(c, raw);
  std::vector<uint8_t> padded(raw, raw + sizeof(raw));
  padded.resize(56, 0);  // the CM pads private data
  auto d = decode_connect_data(padded);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->proof, c.proof);
  EXPECT_EQ(d->lane, 3u);
  EXPECT_EQ(d->nlanes, 4u);
  EXPECT_FALSE(decode_connect_data({raw, sizeof(raw) - 1}));
  c.lane = 4;  // not below nlanes
  encode(c, raw);
  EXPECT_FALSE(decode_connect_data({raw, sizeof(raw)}));
  raw[0] ^= 1;
  EXPECT_FALSE(decode_connect_data({raw, sizeof(raw)}));
}

// Protocol minor 8: a lane that comes back carries its epoch in the high
// half of the claim's lane field, as a tcp lane hello does; epoch 0 is the
// encoding every older client sends.
TEST(VerbsWire, ConnectDataCarriesTheEpochBesideTheLane) {
  ConnectData c;
  c.proof[5] = 9;
  c.lane = 3;
  c.epoch = 517;
  c.nlanes = 4;
  uint8_t raw[kConnectDataSize];
  encode(c, raw);
  auto d = decode_connect_data({raw, sizeof(raw)});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->lane, 3u);
  EXPECT_EQ(d->epoch, 517u);
  EXPECT_EQ(d->nlanes, 4u);
  // The claim's u32 lane on the wire: lane | epoch << 16.
  EXPECT_EQ(proto::decode_lane_claim(raw + 4).lane, 3u | 517u << 16);
  c.epoch = 0;
  encode(c, raw);
  EXPECT_EQ(proto::decode_lane_claim(raw + 4).lane, 3u) << "what a client of minor < 8 sends";
  EXPECT_EQ(decode_connect_data({raw, sizeof(raw)})->epoch, 0u);
}

TEST(VerbsWire, MessagesMustMatchTheirPayload) {
  std::vector<uint8_t> m(kMsgHeaderSize + 100);
  encode(MsgHeader{MsgOp::kPersist, kMsgInline, 4096, 100}, m.data());
  auto h = decode_msg(m);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->offset, 4096u);
  EXPECT_EQ(h->length, 100u);
  EXPECT_FALSE(decode_msg({m.data(), m.size() - 1})) << "short inline payload";
  encode(MsgHeader{MsgOp::kPersist, 0, 4096, 100}, m.data());
  EXPECT_FALSE(decode_msg(m)) << "payload without the inline flag";
  EXPECT_TRUE(decode_msg({m.data(), kMsgHeaderSize}));
  encode(MsgHeader{MsgOp::kDrain, 0, 0, 2}, m.data());
  EXPECT_TRUE(decode_msg({m.data(), kMsgHeaderSize + 2 * kRangeSize}));
  EXPECT_FALSE(decode_msg({m.data(), kMsgHeaderSize + kRangeSize}));
  m[0] = 9;
  EXPECT_FALSE(decode_msg({m.data(), kMsgHeaderSize}));
  m[0] = 1;
  m[3] = 1;  // reserved
  EXPECT_FALSE(decode_msg({m.data(), kMsgHeaderSize}));
}

TEST(VerbsWire, RepliesCarryAPositiveErrnoOrZero) {
  uint8_t r[kReplySize];
  encode_reply(EIO, r);
  EXPECT_EQ(decode_reply(r), std::optional<uint32_t>(EIO));
  r[0] ^= 1;
  EXPECT_FALSE(decode_reply(r));
  encode_reply(70000, r);
  EXPECT_FALSE(decode_reply(r));
}

TEST(FlushRanges, AdjacentRangesMergeAndOverflowCollapsesIntoOne) {
  FlushRanges f(3);
  f.add(100, 10);
  f.add(110, 10);  // adjacent
  f.add(105, 2);   // inside
  ASSERT_EQ(f.ranges().size(), 1u);
  EXPECT_EQ(f.ranges()[0].offset, 100u);
  EXPECT_EQ(f.ranges()[0].length, 20u);
  f.add(1000, 1);
  f.add(2000, 1);
  EXPECT_EQ(f.ranges().size(), 3u);
  f.add(50, 5);  // a fourth: collapse, then append
  ASSERT_EQ(f.ranges().size(), 2u);
  EXPECT_EQ(f.ranges()[0].offset, 100u);
  EXPECT_EQ(f.ranges()[0].length, 1901u);
  EXPECT_EQ(f.ranges()[1].offset, 50u);
  f.add(7, 0);
  EXPECT_EQ(f.ranges().size(), 2u);
  f.clear();
  EXPECT_TRUE(f.empty());
}

TEST(FlushRanges, CapacityOneWidensTheOnlyRange) {
  FlushRanges f(1);
  f.add(100, 10);
  f.add(10, 10);
  ASSERT_EQ(f.ranges().size(), 1u);
  EXPECT_EQ(f.ranges()[0].offset, 10u);
  EXPECT_EQ(f.ranges()[0].length, 100u);
}

}  // namespace
}  // namespace rpmem::transport::verbs
#endif  // RPMEM_HAVE_VERBS
