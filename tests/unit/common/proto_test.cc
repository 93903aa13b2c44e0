// SPDX-License-Identifier: BSD-3-Clause
// Tests of the wire protocol: golden byte arrays for every message (written
// out by hand from the field order in proto.cc), round trips, and every way a
// decoder must refuse its input.
#include "common/proto.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

namespace rpmem::proto {
namespace {

Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const auto &p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::span<const uint8_t> payload_of(const Bytes &frame) {
  return std::span<const uint8_t>(frame).subspan(kFrameHeaderSize);
}

// Every proper prefix of a valid payload must be refused, and so must the
// payload with one more byte.
template <typename Decode>
void expect_exact_size(const Bytes &payload, Decode decode) {
  ASSERT_TRUE(decode(std::span<const uint8_t>(payload)).has_value());
  for (size_t n = 0; n < payload.size(); ++n)
    EXPECT_FALSE(decode(std::span<const uint8_t>(payload.data(), n)).has_value())
        << "accepted a prefix of " << n << " of " << payload.size() << " bytes";
  Bytes longer = payload;
  longer.push_back(0);
  EXPECT_FALSE(decode(std::span<const uint8_t>(longer)).has_value()) << "accepted a trailing byte";
}

// Attributes whose every field has a distinct value, and their 104 bytes.
PoolAttr sample_attr() {
  PoolAttr a;
  std::memcpy(a.signature.data(), "SIGNATUR", 8);
  a.major = 0x01020304;
  a.compat_features = 0x05060708;
  a.incompat_features = 0x090a0b0c;
  a.ro_compat_features = 0x0d0e0f10;
  for (uint8_t i = 0; i < 16; ++i) {
    a.poolset_uuid[i] = static_cast<uint8_t>(0x20 + i);
    a.uuid[i] = static_cast<uint8_t>(0x30 + i);
    a.next_uuid[i] = static_cast<uint8_t>(0x40 + i);
    a.prev_uuid[i] = static_cast<uint8_t>(0x50 + i);
    a.user_flags[i] = static_cast<uint8_t>(0x60 + i);
  }
  return a;
}

const Bytes kAttrGolden = {
    'S',  'I',  'G',  'N',  'A',  'T',  'U',  'R',                           // signature
    0x04, 0x03, 0x02, 0x01,                                                  // major
    0x08, 0x07, 0x06, 0x05,                                                  // compat
    0x0c, 0x0b, 0x0a, 0x09,                                                  // incompat
    0x10, 0x0f, 0x0e, 0x0d,                                                  // ro_compat
    0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b,  // poolset_uuid
    0x2c, 0x2d, 0x2e, 0x2f,                                                  //
    0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x3b,  // uuid
    0x3c, 0x3d, 0x3e, 0x3f,                                                  //
    0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4a, 0x4b,  // next_uuid
    0x4c, 0x4d, 0x4e, 0x4f,                                                  //
    0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x5b,  // prev_uuid
    0x5c, 0x5d, 0x5e, 0x5f,                                                  //
    0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x6b,  // user_flags
    0x6c, 0x6d, 0x6e, 0x6f,
};

Secret sample_secret() {
  Secret s;
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(0xa0 + i);
  return s;
}

const Bytes kSecretGolden = {0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa,
                             0xab, 0xac, 0xad, 0xae, 0xaf, 0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5,
                             0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xbb, 0xbc, 0xbd, 0xbe, 0xbf};

// --- attributes ---------------------------------------------------------------

TEST(ProtoAttr, EncodesStructRpmemPoolAttrLayoutLittleEndian) {
  ASSERT_EQ(kAttrGolden.size(), kPoolAttrWireSize);
  uint8_t out[kPoolAttrWireSize];
  std::memset(out, 0xee, sizeof(out));
  encode_attr(sample_attr(), out);
  EXPECT_EQ(Bytes(out, out + sizeof(out)), kAttrGolden);
}

TEST(ProtoAttr, DecodeInvertsEncode) {
  EXPECT_EQ(decode_attr(kAttrGolden.data()), sample_attr());
  EXPECT_TRUE(decode_attr(Bytes(kPoolAttrWireSize, 0).data()).is_zero());
}

// --- frame header ---------------------------------------------------------------

TEST(ProtoFrameHeader, DecodesTypeAndSize) {
  const Bytes hdr = {0x05, 0x00, 0x00, 0x00, 0x68, 0x00, 0x00, 0x00};
  auto h = decode_frame_header(hdr);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->type, MsgType::kSetAttr);
  EXPECT_EQ(h->size, 104u);
}

TEST(ProtoFrameHeader, AcceptsEveryKnownType) {
  for (uint8_t t = 1; t <= 10; ++t) {
    const Bytes hdr = {t, 0, 0, 0, 0, 0, 0, 0};
    auto h = decode_frame_header(hdr);
    ASSERT_TRUE(h) << int{t};
    EXPECT_EQ(static_cast<uint16_t>(h->type), t);
  }
}

TEST(ProtoFrameHeader, RejectsUnknownTypes) {
  for (int t : {0, 15, 0x100, 0xffff}) {
    const Bytes hdr = {static_cast<uint8_t>(t), static_cast<uint8_t>(t >> 8), 0, 0, 0, 0, 0, 0};
    EXPECT_FALSE(decode_frame_header(hdr)) << t;
  }
}

TEST(ProtoFrameHeader, RejectsNonZeroReserved) {
  EXPECT_FALSE(decode_frame_header(Bytes{1, 0, 1, 0, 0, 0, 0, 0}));
  EXPECT_FALSE(decode_frame_header(Bytes{1, 0, 0, 0x80, 0, 0, 0, 0}));
}

TEST(ProtoFrameHeader, RejectsFrameLargerThanLimit) {
  static_assert(kMaxControlPayload == 0x10000);
  EXPECT_TRUE(decode_frame_header(Bytes{1, 0, 0, 0, 0x00, 0x00, 0x01, 0x00}));   // 65536
  EXPECT_FALSE(decode_frame_header(Bytes{1, 0, 0, 0, 0x01, 0x00, 0x01, 0x00}));  // 65537
  EXPECT_FALSE(decode_frame_header(Bytes{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}));
}

TEST(ProtoFrameHeader, RejectsWrongLength) {
  const Bytes ok = {1, 0, 0, 0, 0, 0, 0, 0};
  for (size_t n = 0; n < ok.size(); ++n)
    EXPECT_FALSE(decode_frame_header(std::span<const uint8_t>(ok.data(), n))) << n;
  EXPECT_FALSE(decode_frame_header(Bytes{1, 0, 0, 0, 0, 0, 0, 0, 0}));
}

// --- Hello ------------------------------------------------------------------------

TEST(ProtoHello, EncodesGoldenBytes) {
  Hello m;
  m.major = 0x0102;
  m.minor = 0x0304;
  m.status = 0x05060708;
  m.transports = 0x090a0b0c;
  const Bytes golden = {
      0x01, 0x00, 0x00, 0x00, 0x0c, 0x00, 0x00, 0x00,  // kHello, reserved, size 12
      0x02, 0x01, 0x04, 0x03,                          // major, minor
      0x08, 0x07, 0x06, 0x05,                          // status
      0x0c, 0x0b, 0x0a, 0x09,                          // transports
  };
  EXPECT_EQ(encode(m), golden);
}

TEST(ProtoHello, DefaultsCarryProtocolVersion) {
  const Bytes golden = {0x01, 0x00, 0x00, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x01, 0x00,
                        0x0b, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00};
  Hello m;
  m.transports = transport_bit(TransportKind::kTcp);
  EXPECT_EQ(encode(m), golden);
}

TEST(ProtoKeepalive, IsAnEmptyFrameOfItsOwnType) {
  const Bytes golden = {0x0b, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  EXPECT_EQ(encode_keepalive(), golden);
  auto h = decode_frame_header(golden);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->type, MsgType::kKeepalive);
  EXPECT_EQ(h->size, 0u);
}

TEST(ProtoHello, RoundTrips) {
  Hello m;
  m.major = 7;
  m.minor = 9;
  m.status = EACCES;
  m.transports = 6;
  Bytes f = encode(m);
  auto h = decode_frame_header(std::span<const uint8_t>(f).first(kFrameHeaderSize));
  ASSERT_TRUE(h);
  EXPECT_EQ(h->type, MsgType::kHello);
  EXPECT_EQ(h->size, f.size() - kFrameHeaderSize);
  auto d = decode_hello(payload_of(f));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->major, 7);
  EXPECT_EQ(d->minor, 9);
  EXPECT_EQ(d->status, uint32_t{EACCES});
  EXPECT_EQ(d->transports, 6u);
}

TEST(ProtoHello, RejectsTruncatedAndTrailingBytes) {
  Bytes f = encode(Hello{});
  expect_exact_size(Bytes(f.begin() + kFrameHeaderSize, f.end()),
                    [](std::span<const uint8_t> p) { return decode_hello(p); });
}

// --- PoolRequest ------------------------------------------------------------------

PoolRequest sample_request() {
  PoolRequest m;
  m.major = 0x0102;
  m.minor = 0x0304;
  m.nlanes = 0x05060708;
  m.pool_size = 0x1112131415161718;
  m.transports = 0x090a0b0c;
  m.attr = sample_attr();
  m.pool_set = "a.set";
  return m;
}

const Bytes kRequestHead = {
    0x02, 0x01, 0x04, 0x03,                          // major, minor
    0x08, 0x07, 0x06, 0x05,                          // nlanes
    0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11,  // pool_size
    0x0c, 0x0b, 0x0a, 0x09,                          // transports
    0x00, 0x00, 0x00, 0x00,                          // lane_flags
};
const Bytes kRequestTail = {
    0x05, 0x00, 0x00, 0x00,  // name_len 5, reserved
    'a',  '.',  's',  'e',  't',
};

TEST(ProtoPoolRequest, EncodesCreateGoldenBytes) {
  const Bytes golden = cat({{0x02, 0x00, 0x00, 0x00, 0x89, 0x00, 0x00, 0x00},  // kCreate, 137
                            kRequestHead,
                            kAttrGolden,
                            kRequestTail});
  EXPECT_EQ(golden.size(), 8u + 137u);
  EXPECT_EQ(encode(MsgType::kCreate, sample_request()), golden);
}

TEST(ProtoPoolRequest, EncodesOpenGoldenBytes) {
  PoolRequest m = sample_request();
  m.attr = {};
  const Bytes golden = cat({{0x03, 0x00, 0x00, 0x00, 0x89, 0x00, 0x00, 0x00},
                            kRequestHead,
                            Bytes(104, 0),
                            kRequestTail});
  EXPECT_EQ(encode(MsgType::kOpen, m), golden);
}

TEST(ProtoPoolRequest, RoundTrips) {
  PoolRequest m = sample_request();
  auto d = decode_pool_request(payload_of(encode(MsgType::kCreate, m)));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->major, m.major);
  EXPECT_EQ(d->minor, m.minor);
  EXPECT_EQ(d->nlanes, m.nlanes);
  EXPECT_EQ(d->pool_size, m.pool_size);
  EXPECT_EQ(d->transports, m.transports);
  EXPECT_EQ(d->attr, m.attr);
  EXPECT_EQ(d->pool_set, m.pool_set);
}

TEST(ProtoPoolRequest, RejectsTruncatedAndTrailingBytes) {
  Bytes f = encode(MsgType::kCreate, sample_request());
  expect_exact_size(Bytes(f.begin() + kFrameHeaderSize, f.end()),
                    [](std::span<const uint8_t> p) { return decode_pool_request(p); });
}

TEST(ProtoPoolRequest, RejectsNonZeroReservedFields) {
  Bytes p = cat({kRequestHead, kAttrGolden, kRequestTail});
  ASSERT_TRUE(decode_pool_request(p));
  for (size_t at : {21u, 22u, 23u, 24u + 104u + 2u, 24u + 104u + 3u}) {
    Bytes bad = p;
    bad[at] = 1;
    EXPECT_FALSE(decode_pool_request(bad)) << "reserved byte " << at;
  }
  Bytes unknown_flag = p;
  unknown_flag[20] = 4;  // lane_flags: only kLaneTls and kLaneSealed are known
  EXPECT_FALSE(decode_pool_request(unknown_flag));
  unknown_flag[20] = 3;
  EXPECT_TRUE(decode_pool_request(unknown_flag));
}

TEST(ProtoPoolRequest, CarriesTheTlsLaneFlag) {
  Bytes p = cat({kRequestHead, kAttrGolden, kRequestTail});
  p[20] = 1;
  auto d = decode_pool_request(p);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->lane_flags, kLaneTls);
  PoolRequest m = sample_request();
  m.lane_flags = kLaneTls;
  Bytes f = encode(MsgType::kOpen, m);
  EXPECT_EQ(f[kFrameHeaderSize + 20], 1);
  auto back = decode_pool_request(payload_of(f));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->lane_flags, kLaneTls);
}

TEST(ProtoPoolRequest, RejectsEmptyName) {
  Bytes p = cat({kRequestHead, kAttrGolden, {0x00, 0x00, 0x00, 0x00}});
  EXPECT_FALSE(decode_pool_request(p));
  PoolRequest m = sample_request();
  m.pool_set.clear();
  EXPECT_FALSE(decode_pool_request(payload_of(encode(MsgType::kOpen, m))));
}

TEST(ProtoPoolRequest, AcceptsNameOfMaximumLength) {
  PoolRequest m = sample_request();
  m.pool_set.assign(kMaxPoolSetName, 'x');
  auto d = decode_pool_request(payload_of(encode(MsgType::kOpen, m)));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->pool_set, m.pool_set);
}

TEST(ProtoPoolRequest, RejectsNameLongerThan4096) {
  PoolRequest m = sample_request();
  m.pool_set.assign(kMaxPoolSetName + 1, 'x');
  EXPECT_FALSE(decode_pool_request(payload_of(encode(MsgType::kOpen, m))));
}

TEST(ProtoPoolRequest, RejectsNameContainingNul) {
  for (std::string name : {std::string("a\0b", 3), std::string("ab\0", 3), std::string(1, '\0')}) {
    PoolRequest m = sample_request();
    m.pool_set = name;
    EXPECT_FALSE(decode_pool_request(payload_of(encode(MsgType::kCreate, m))));
  }
}

TEST(ProtoPoolRequest, RejectsNameLengthBeyondPayload) {
  Bytes p = cat({kRequestHead, kAttrGolden, {0x06, 0x00, 0x00, 0x00, 'a', '.', 's', 'e', 't'}});
  EXPECT_FALSE(decode_pool_request(p));
}

// --- PoolResponse -----------------------------------------------------------------

PoolResponse sample_response() {
  PoolResponse m;
  m.status = Status::kSuccess;
  m.nlanes = 0x05060708;
  m.port = 0x0102;
  m.transport = TransportKind::kTcp;
  m.method = PersistMethod::kApm;
  m.pool_flags = kPoolHasHeaders;
  m.remote_size = 0x1112131415161718;
  m.secret = sample_secret();
  m.attr = sample_attr();
  m.provider_data = {0xd0, 0xd1, 0xd2};
  return m;
}

const Bytes kResponseHead = {
    0x00, 0x00, 0x00, 0x00,                          // status
    0x08, 0x07, 0x06, 0x05,                          // nlanes
    0x02, 0x01,                                      // port
    0x01, 0x00,                                      // transport kTcp
    0x02, 0x00, 0x00, 0x00,                          // method kApm
    0x01, 0x00, 0x00, 0x00,                          // pool_flags
    0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11,  // remote_size
};

TEST(ProtoPoolResponse, EncodesGoldenBytes) {
  const Bytes golden = cat({{0x04, 0x00, 0x00, 0x00, 0xab, 0x00, 0x00, 0x00},  // kPoolResp, 171
                            kResponseHead,
                            kSecretGolden,
                            kAttrGolden,
                            {0x03, 0x00, 0x00, 0x00, 0xd0, 0xd1, 0xd2}});
  EXPECT_EQ(golden.size(), 8u + 171u);
  EXPECT_EQ(encode(sample_response()), golden);
}

TEST(ProtoPoolResponse, EncodesErrorStatusGoldenBytes) {
  PoolResponse m;
  m.status = Status::kNoExist;
  const Bytes golden =
      cat({{0x04, 0x00, 0x00, 0x00, 0xa8, 0x00, 0x00, 0x00},
           {0x0b, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0, 0, 0, 0, 0, 0, 0},
           Bytes(8 + 32 + 104 + 4, 0)});
  EXPECT_EQ(encode(m), golden);
}

TEST(ProtoPoolResponse, RoundTrips) {
  PoolResponse m = sample_response();
  auto d = decode_pool_response(payload_of(encode(m)));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, m.status);
  EXPECT_EQ(d->nlanes, m.nlanes);
  EXPECT_EQ(d->port, m.port);
  EXPECT_EQ(d->transport, m.transport);
  EXPECT_EQ(d->method, m.method);
  EXPECT_EQ(d->pool_flags, m.pool_flags);
  EXPECT_EQ(d->remote_size, m.remote_size);
  EXPECT_EQ(d->secret, m.secret);
  EXPECT_EQ(d->attr, m.attr);
  EXPECT_EQ(d->provider_data, m.provider_data);
}

TEST(ProtoPoolResponse, WithoutTheExtensionIsWhatAnOlderClientDecodes) {
  PoolResponse m = sample_response();
  Bytes plain = encode(m);
  m.extended = true;
  m.lane_flags = 0;
  Bytes ext = encode(m);
  ASSERT_EQ(ext.size(), plain.size() + 8);  // flags, psk length, reserved
  EXPECT_TRUE(
      std::equal(plain.begin() + kFrameHeaderSize, plain.end(), ext.begin() + kFrameHeaderSize));
  auto d = decode_pool_response(payload_of(plain));
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->extended);
}

TEST(ProtoPoolResponse, RoundTripsTheLaneSecurityExtension) {
  PoolResponse m = sample_response();
  m.extended = true;
  m.lane_flags = kLaneTls;
  m.lane_psk = Bytes(32, 0x5a);
  Bytes f = encode(m);
  const size_t at = f.size() - 32 - 8;
  EXPECT_EQ(Bytes(f.begin() + static_cast<long>(at), f.begin() + static_cast<long>(at) + 8),
            (Bytes{0x01, 0, 0, 0, 0x20, 0, 0, 0}));
  auto d = decode_pool_response(payload_of(f));
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->extended);
  EXPECT_EQ(d->lane_flags, kLaneTls);
  EXPECT_EQ(d->lane_psk, m.lane_psk);
  // Without the extension it is what an older daemon sends; any part of
  // the extension, or a byte more, is refused.
  const Bytes p(f.begin() + kFrameHeaderSize, f.end());
  const size_t base = p.size() - 8 - 32;
  EXPECT_TRUE(decode_pool_response(std::span<const uint8_t>(p.data(), base)));
  for (size_t n = base + 1; n < p.size(); ++n)
    EXPECT_FALSE(decode_pool_response(std::span<const uint8_t>(p.data(), n))) << n;
  Bytes longer = p;
  longer.push_back(0);
  EXPECT_FALSE(decode_pool_response(longer));
}

TEST(ProtoPoolResponse, RejectsABadLaneSecurityExtension) {
  PoolResponse m = sample_response();
  m.extended = true;
  m.lane_flags = kLaneTls;
  m.lane_psk = Bytes(kMaxLanePsk, 1);
  ASSERT_TRUE(decode_pool_response(payload_of(encode(m))));
  m.lane_psk = Bytes(kMaxLanePsk + 1, 1);
  EXPECT_FALSE(decode_pool_response(payload_of(encode(m))));
  m.lane_psk.clear();
  m.lane_flags = 4;  // unknown
  EXPECT_FALSE(decode_pool_response(payload_of(encode(m))));
  m.lane_flags = kLaneTls;
  Bytes f = encode(m);
  f.back() = 1;  // reserved
  EXPECT_FALSE(decode_pool_response(payload_of(f)));
}

TEST(ProtoPoolResponse, RoundTripsEveryStatus) {
  for (uint32_t s = 1; s < static_cast<uint32_t>(Status::kCount); ++s) {
    PoolResponse m;
    m.status = static_cast<Status>(s);
    auto d = decode_pool_response(payload_of(encode(m)));
    ASSERT_TRUE(d) << s;
    EXPECT_EQ(d->status, m.status);
  }
}

TEST(ProtoPoolResponse, RejectsTruncatedAndTrailingBytes) {
  Bytes f = encode(sample_response());
  expect_exact_size(Bytes(f.begin() + kFrameHeaderSize, f.end()),
                    [](std::span<const uint8_t> p) { return decode_pool_response(p); });
}

// Offsets in the payload of sample_response().
constexpr size_t kRespStatus = 0, kRespNlanes = 4, kRespPort = 8, kRespTransport = 10,
                 kRespMethod = 12, kRespFlags = 16, kRespPdataLen = 164, kRespReserved = 166;

Bytes response_payload() {
  Bytes f = encode(sample_response());
  return Bytes(f.begin() + kFrameHeaderSize, f.end());
}

void put_u32(Bytes &b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u16(Bytes &b, size_t at, uint16_t v) {
  b[at] = static_cast<uint8_t>(v);
  b[at + 1] = static_cast<uint8_t>(v >> 8);
}

TEST(ProtoPoolResponse, RejectsStatus17AndAbove) {
  for (uint32_t s : {17u, 18u, 0x100u, 0xffffffffu}) {
    Bytes p = response_payload();
    put_u32(p, kRespStatus, s);
    EXPECT_FALSE(decode_pool_response(p)) << s;
  }
}

TEST(ProtoPoolResponse, RejectsSuccessWithPortZero) {
  Bytes p = response_payload();
  put_u16(p, kRespPort, 0);
  EXPECT_FALSE(decode_pool_response(p));
}

TEST(ProtoPoolResponse, RejectsSuccessWithZeroLanes) {
  Bytes p = response_payload();
  put_u32(p, kRespNlanes, 0);
  EXPECT_FALSE(decode_pool_response(p));
}

TEST(ProtoPoolResponse, RejectsSuccessWithUnknownTransport) {
  for (uint16_t t : std::initializer_list<uint16_t>{0, 3, 4, 31, 32, 0xffff}) {
    Bytes p = response_payload();
    put_u16(p, kRespTransport, t);
    EXPECT_FALSE(decode_pool_response(p)) << t;
  }
}

// A kind beyond the width of the transport mask must not wrap onto the bit
// of kTcp or kVerbs (1u << 33 is undefined; x86 computes 1u << 1).
TEST(ProtoPoolResponse, RejectsSuccessWithTransportBeyondMaskWidth) {
  for (uint16_t t : std::initializer_list<uint16_t>{33, 34, 65}) {
    Bytes p = response_payload();
    put_u16(p, kRespTransport, t);
    EXPECT_FALSE(decode_pool_response(p)) << t;
  }
}

TEST(ProtoPoolResponse, AcceptsVerbsTransportAndGpspm) {
  Bytes p = response_payload();
  put_u16(p, kRespTransport, 2);
  put_u32(p, kRespMethod, 1);
  auto d = decode_pool_response(p);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->transport, TransportKind::kVerbs);
  EXPECT_EQ(d->method, PersistMethod::kGpspm);
}

TEST(ProtoPoolResponse, RejectsSuccessWithUnknownMethod) {
  for (uint32_t m : {0u, 3u, 0xffffffffu}) {
    Bytes p = response_payload();
    put_u32(p, kRespMethod, m);
    EXPECT_FALSE(decode_pool_response(p)) << m;
  }
}

TEST(ProtoPoolResponse, AcceptsErrorStatusWithoutTransportPortOrLanes) {
  Bytes p = response_payload();
  put_u32(p, kRespStatus, static_cast<uint32_t>(Status::kBusy));
  put_u16(p, kRespPort, 0);
  put_u32(p, kRespNlanes, 0);
  put_u16(p, kRespTransport, 0);
  put_u32(p, kRespMethod, 0);
  auto d = decode_pool_response(p);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, Status::kBusy);
}

TEST(ProtoPoolResponse, RejectsUnknownPoolFlags) {
  for (uint32_t f : {2u, 0x80000000u, 3u}) {
    Bytes p = response_payload();
    put_u32(p, kRespFlags, f);
    EXPECT_FALSE(decode_pool_response(p)) << f;
  }
}

TEST(ProtoPoolResponse, RejectsNonZeroReserved) {
  Bytes p = response_payload();
  put_u16(p, kRespReserved, 1);
  EXPECT_FALSE(decode_pool_response(p));
}

TEST(ProtoPoolResponse, RejectsProviderDataLongerThanLimit) {
  PoolResponse m = sample_response();
  m.provider_data.assign(kMaxProviderData, 0x5a);
  auto d = decode_pool_response(payload_of(encode(m)));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->provider_data, m.provider_data);
  m.provider_data.push_back(0x5a);
  EXPECT_FALSE(decode_pool_response(payload_of(encode(m))));
}

TEST(ProtoPoolResponse, RejectsProviderDataLengthBeyondPayload) {
  Bytes p = response_payload();
  put_u16(p, kRespPdataLen, 4);
  EXPECT_FALSE(decode_pool_response(p));
}

// --- SetAttr, Close, StatusResponse -------------------------------------------------

TEST(ProtoSetAttr, EncodesGoldenBytes) {
  const Bytes golden = cat({{0x05, 0x00, 0x00, 0x00, 0x68, 0x00, 0x00, 0x00}, kAttrGolden});
  EXPECT_EQ(encode(SetAttrRequest{sample_attr()}), golden);
}

TEST(ProtoSetAttr, RoundTrips) {
  auto d = decode_set_attr(payload_of(encode(SetAttrRequest{sample_attr()})));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->attr, sample_attr());
}

TEST(ProtoSetAttr, RejectsTruncatedAndTrailingBytes) {
  expect_exact_size(kAttrGolden, [](std::span<const uint8_t> p) { return decode_set_attr(p); });
}

TEST(ProtoClose, EncodesGoldenBytes) {
  const Bytes golden = {0x07, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00};
  EXPECT_EQ(encode(CloseRequest{kCloseRemove}), golden);
  const Bytes golden0 = {0x07, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  EXPECT_EQ(encode(CloseRequest{0}), golden0);
}

TEST(ProtoClose, RoundTrips) {
  for (uint32_t f : {0u, kCloseRemove}) {
    auto d = decode_close(payload_of(encode(CloseRequest{f})));
    ASSERT_TRUE(d);
    EXPECT_EQ(d->flags, f);
  }
}

TEST(ProtoClose, RejectsUnknownFlags) {
  for (uint32_t f : {2u, 3u, 0x80000000u})
    EXPECT_FALSE(decode_close(payload_of(encode(CloseRequest{f})))) << f;
}

TEST(ProtoClose, RejectsTruncatedAndTrailingBytes) {
  expect_exact_size(Bytes{1, 0, 0, 0}, [](std::span<const uint8_t> p) { return decode_close(p); });
}

TEST(ProtoStatusResponse, EncodesGoldenBytes) {
  const Bytes set_attr = {0x06, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x0c, 0x00, 0x00, 0x00};
  EXPECT_EQ(encode(MsgType::kSetAttrResp, StatusResponse{Status::kNoAccess}), set_attr);
  const Bytes close = {0x08, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00};
  EXPECT_EQ(encode(MsgType::kCloseResp, StatusResponse{Status::kFatal}), close);
}

TEST(ProtoStatusResponse, RoundTripsEveryStatus) {
  for (uint32_t s = 0; s < static_cast<uint32_t>(Status::kCount); ++s) {
    auto d = decode_status_response(
        payload_of(encode(MsgType::kCloseResp, StatusResponse{static_cast<Status>(s)})));
    ASSERT_TRUE(d) << s;
    EXPECT_EQ(static_cast<uint32_t>(d->status), s);
  }
}

TEST(ProtoStatusResponse, RejectsStatus17AndAbove) {
  EXPECT_FALSE(decode_status_response(Bytes{17, 0, 0, 0}));
  EXPECT_FALSE(decode_status_response(Bytes{0, 0, 0, 1}));
  EXPECT_FALSE(decode_status_response(Bytes{0xff, 0xff, 0xff, 0xff}));
}

TEST(ProtoStatusResponse, RejectsTruncatedAndTrailingBytes) {
  expect_exact_size(Bytes{13, 0, 0, 0},
                    [](std::span<const uint8_t> p) { return decode_status_response(p); });
}

// --- Minor 6: reopening a service's pool ------------------------------------------------

// The request's reopen extension: only when `extended` (towards a daemon
// of minor >= 6), so that an older daemon gets the layout it knows.
TEST(ProtoPoolRequest, CarriesTheReopenExtensionOnlyWhenExtended) {
  PoolRequest m;
  m.nlanes = 2;
  m.pool_set = "p.set";
  const Bytes plain = encode(MsgType::kOpen, m);
  m.extended = true;
  m.reopen = true;
  for (size_t i = 0; i < m.token.size(); ++i) m.token[i] = static_cast<uint8_t>(0xa0 + i);
  const Bytes ext = encode(MsgType::kOpen, m);
  ASSERT_EQ(ext.size(), plain.size() + 4 + kTokenSize);
  EXPECT_TRUE(
      std::equal(plain.begin() + kFrameHeaderSize, plain.end(), ext.begin() + kFrameHeaderSize));
  auto d = decode_pool_request({ext.data() + kFrameHeaderSize, ext.size() - kFrameHeaderSize});
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->extended);
  EXPECT_TRUE(d->reopen);
  EXPECT_EQ(d->token, m.token);
  auto p = decode_pool_request({plain.data() + kFrameHeaderSize, plain.size() - kFrameHeaderSize});
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->extended);
  EXPECT_FALSE(p->reopen);
  // A reopen flag other than 0 or 1, or a cut extension: malformed.
  Bytes bad(ext.begin() + kFrameHeaderSize, ext.end());
  bad[plain.size() - kFrameHeaderSize] = 2;
  EXPECT_FALSE(decode_pool_request(bad));
  Bytes cut(ext.begin() + kFrameHeaderSize, ext.end() - 1);
  EXPECT_FALSE(decode_pool_request(cut));
  // A client of minor 5 has no extension: trailing bytes are malformed.
  Bytes old(ext.begin() + kFrameHeaderSize, ext.end());
  old[2] = 5;
  EXPECT_FALSE(decode_pool_request(old));
}

TEST(ProtoPoolResponse, CarriesTheTokenExtensionOnlyWhenTokened) {
  PoolResponse m;
  m.nlanes = 1;
  m.port = 7;
  m.transport = TransportKind::kTcp;
  m.extended = true;
  const Bytes plain = encode(m);
  m.tokened = true;
  m.token.assign(kTokenSize, 0x5a);
  const Bytes ext = encode(m);
  ASSERT_EQ(ext.size(), plain.size() + 4 + kTokenSize);
  auto d = decode_pool_response({ext.data() + kFrameHeaderSize, ext.size() - kFrameHeaderSize});
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->tokened);
  EXPECT_EQ(d->token, m.token);
  auto p = decode_pool_response({plain.data() + kFrameHeaderSize, plain.size() - kFrameHeaderSize});
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->tokened);
  EXPECT_TRUE(p->token.empty());
  Bytes odd(ext.begin() + kFrameHeaderSize, ext.end());
  odd[odd.size() - kTokenSize - 4] = 15;  // a token of 15 bytes
  EXPECT_FALSE(decode_pool_response(odd));
}

// --- Minor 7: durability levels -----------------------------------------------------

// The request's level extension: only when `leveled` (towards a daemon of
// minor >= 7), after the reopen extension.
TEST(ProtoPoolRequest, CarriesTheLevelExtensionOnlyWhenLeveled) {
  PoolRequest m;
  m.nlanes = 2;
  m.pool_set = "p.set";
  m.extended = true;
  const Bytes plain = encode(MsgType::kCreate, m);
  m.leveled = true;
  m.durability = Durability::kVisible;
  const Bytes ext = encode(MsgType::kCreate, m);
  ASSERT_EQ(ext.size(), plain.size() + 4);
  EXPECT_EQ(ext.back(), 0) << "u32 1, little-endian";
  EXPECT_EQ(ext[ext.size() - 4], 1);
  auto d = decode_pool_request({ext.data() + kFrameHeaderSize, ext.size() - kFrameHeaderSize});
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->leveled);
  EXPECT_EQ(d->durability, Durability::kVisible);
  auto p = decode_pool_request({plain.data() + kFrameHeaderSize, plain.size() - kFrameHeaderSize});
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->leveled);
  EXPECT_EQ(p->durability, Durability::kPersistent) << "without it, persistent";
  // An unknown level, or a client of minor 6 with trailing bytes: malformed.
  Bytes bad(ext.begin() + kFrameHeaderSize, ext.end());
  bad[bad.size() - 4] = 2;
  EXPECT_FALSE(decode_pool_request(bad));
  Bytes old(ext.begin() + kFrameHeaderSize, ext.end());
  old[2] = 6;
  EXPECT_FALSE(decode_pool_request(old));
}

TEST(ProtoPoolResponse, CarriesTheLevelsGrantedOnlyWhenLeveled) {
  PoolResponse m;
  m.nlanes = 1;
  m.port = 7;
  m.transport = TransportKind::kTcp;
  m.extended = m.tokened = true;
  const Bytes plain = encode(m);
  m.leveled = true;
  m.levels = level_bit(Durability::kPersistent) | level_bit(Durability::kVisible);
  const Bytes ext = encode(m);
  ASSERT_EQ(ext.size(), plain.size() + 4);
  auto d = decode_pool_response({ext.data() + kFrameHeaderSize, ext.size() - kFrameHeaderSize});
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->leveled);
  EXPECT_EQ(d->levels, 3u);
  auto p = decode_pool_response({plain.data() + kFrameHeaderSize, plain.size() - kFrameHeaderSize});
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->leveled);
  EXPECT_EQ(p->levels, level_bit(Durability::kPersistent)) << "an older daemon: persistent only";
  // A grant without persistent, or of an unknown level: malformed.
  for (uint8_t levels : std::initializer_list<uint8_t>{0, 2, 4, 7}) {
    Bytes bad(ext.begin() + kFrameHeaderSize, ext.end());
    bad[bad.size() - 4] = levels;
    EXPECT_FALSE(decode_pool_response(bad)) << int{levels};
  }
}

// --- Minor 10: running ahead, catching up ----------------------------------------

// The request's run-ahead extension: only when `ahead` (towards a daemon of
// minor >= 10), after the level extension; flags it does not know are
// malformed.
TEST(ProtoPoolRequest, CarriesTheRunAheadExtensionOnlyWhenAhead) {
  PoolRequest m;
  m.nlanes = 2;
  m.pool_set = "p.set";
  m.extended = m.leveled = true;
  const Bytes plain = encode(MsgType::kOpen, m);
  m.ahead = true;
  m.ahead_flags = kRunAhead | kOpenBehind;
  const Bytes ext = encode(MsgType::kOpen, m);
  ASSERT_EQ(ext.size(), plain.size() + 4);
  EXPECT_EQ(ext[ext.size() - 4], 3);
  auto d = decode_pool_request({ext.data() + kFrameHeaderSize, ext.size() - kFrameHeaderSize});
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->ahead);
  EXPECT_EQ(d->ahead_flags, kRunAhead | kOpenBehind);
  auto p = decode_pool_request({plain.data() + kFrameHeaderSize, plain.size() - kFrameHeaderSize});
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->ahead);
  EXPECT_EQ(p->ahead_flags, 0u);
  Bytes bad(ext.begin() + kFrameHeaderSize, ext.end());
  bad[bad.size() - 4] = 4;
  EXPECT_FALSE(decode_pool_request(bad));
  Bytes old(ext.begin() + kFrameHeaderSize, ext.end());
  old[2] = 9;  // a client of minor 9 with trailing bytes
  EXPECT_FALSE(decode_pool_request(old));
}

TEST(ProtoPoolState, RoundTripsAndRejectsAnUnknownState) {
  const PoolStateReport m{PoolSync::kResyncing, 1 << 20, 4096, 1500};
  const Bytes b = encode(m);
  auto h = decode_frame_header({b.data(), kFrameHeaderSize});
  ASSERT_TRUE(h);
  EXPECT_EQ(h->type, MsgType::kPoolState);
  EXPECT_EQ(h->size, b.size() - kFrameHeaderSize);
  Bytes payload(b.begin() + kFrameHeaderSize, b.end());
  auto d = decode_pool_state(payload);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->state, PoolSync::kResyncing);
  EXPECT_EQ(d->bytes_left, 1u << 20);
  EXPECT_EQ(d->bytes_done, 4096u);
  EXPECT_EQ(d->behind_ms, 1500u);
  payload[0] = 3;
  EXPECT_FALSE(decode_pool_state(payload));
  payload[0] = 2;
  payload.push_back(0);
  EXPECT_FALSE(decode_pool_state(payload)) << "trailing bytes";
}

TEST(ProtoChecksum, RequestRoundTripsWithinItsBounds) {
  ChecksumRequest m;
  m.ranges = {{1, 2}, {100, kMaxChecksumPages - 2}};
  const Bytes b = encode(m);
  ASSERT_LE(b.size() - kFrameHeaderSize, kMaxControlPayload);
  auto d = decode_checksum_request({b.data() + kFrameHeaderSize, b.size() - kFrameHeaderSize});
  ASSERT_TRUE(d);
  ASSERT_EQ(d->ranges.size(), 2u);
  EXPECT_EQ(d->ranges[1].first, 100u);
  EXPECT_EQ(d->ranges[1].count, kMaxChecksumPages - 2);
  // One page too many, a range of none, no range, too many ranges.
  m.ranges[0].count = 3;
  Bytes over = encode(m);
  EXPECT_FALSE(decode_checksum_request({over.data() + 8, over.size() - 8}));
  m.ranges[0].count = 0;
  over = encode(m);
  EXPECT_FALSE(decode_checksum_request({over.data() + 8, over.size() - 8}));
  EXPECT_FALSE(decode_checksum_request(Bytes{0, 0, 0, 0}));
  m.ranges.assign(kMaxChecksumRanges + 1, PageRange{0, 1});
  over = encode(m);
  EXPECT_FALSE(decode_checksum_request({over.data() + 8, over.size() - 8}));
  m.ranges.assign(kMaxChecksumRanges, PageRange{0, 1});
  over = encode(m);
  EXPECT_LE(over.size() - 8, kMaxControlPayload) << "the most ranges fit a frame";
  EXPECT_TRUE(decode_checksum_request({over.data() + 8, over.size() - 8}));
}

TEST(ProtoChecksum, ResponseRoundTripsAndFitsAFrame) {
  ChecksumResponse m;
  m.sums.assign(kMaxChecksumPages, 0x0123456789abcdefULL);
  const Bytes b = encode(m);
  EXPECT_LE(b.size() - kFrameHeaderSize, kMaxControlPayload);
  auto d = decode_checksum_response({b.data() + 8, b.size() - 8});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, Status::kSuccess);
  EXPECT_EQ(d->sums, m.sums);
  Bytes bad(b.begin() + 8, b.end());
  bad.pop_back();
  EXPECT_FALSE(decode_checksum_response(bad));
  bad.assign(b.begin() + 8, b.end());
  bad[0] = static_cast<uint8_t>(Status::kCount);
  EXPECT_FALSE(decode_checksum_response(bad));
}

// --- LaneHello ----------------------------------------------------------------------

const Bytes kLaneHelloGolden = cat({{'R', 'P', 'M', 'L', 0x02, 0x01, 0x04, 0x03},
                                    kSecretGolden,
                                    {0x03, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00}});

TEST(ProtoLaneHello, EncodesGoldenBytes) {
  LaneHello m;
  m.major = 0x0102;
  m.minor = 0x0304;
  m.proof = sample_secret();
  m.lane = 3;
  m.nlanes = 8;
  uint8_t out[kLaneHelloSize];
  encode(m, out);
  EXPECT_EQ(Bytes(out, out + sizeof(out)), kLaneHelloGolden);
}

TEST(ProtoLaneHello, RoundTrips) {
  auto d = decode_lane_hello(kLaneHelloGolden);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->major, 0x0102);
  EXPECT_EQ(d->minor, 0x0304);
  EXPECT_EQ(d->proof, sample_secret());
  EXPECT_EQ(d->lane, 3u);
  EXPECT_EQ(d->nlanes, 8u);
}

TEST(ProtoLaneHello, RejectsTruncatedAndTrailingBytes) {
  expect_exact_size(kLaneHelloGolden,
                    [](std::span<const uint8_t> p) { return decode_lane_hello(p); });
}

TEST(ProtoLaneHello, RejectsBadMagic) {
  for (size_t i = 0; i < 4; ++i) {
    Bytes b = kLaneHelloGolden;
    b[i] ^= 0x20;
    EXPECT_FALSE(decode_lane_hello(b)) << i;
  }
}

TEST(ProtoLaneHello, RejectsLaneNotBelowNlanes) {
  Bytes b = kLaneHelloGolden;
  put_u32(b, 40, 8);  // lane 8 of 8
  EXPECT_FALSE(decode_lane_hello(b));
  put_u32(b, 40, 0xffffffff);
  EXPECT_FALSE(decode_lane_hello(b));
  put_u32(b, 40, 7);
  EXPECT_TRUE(decode_lane_hello(b));
  put_u32(b, 40, 0);
  put_u32(b, 44, 0);  // no lanes at all
  EXPECT_FALSE(decode_lane_hello(b));
}

// Minor 6: the lane field's high half is the epoch of a lane that came back;
// epoch 0 is the layout of every earlier minor.
TEST(ProtoLaneHello, CarriesTheEpochInTheLaneFieldsHighHalf) {
  LaneHello m;
  m.proof = sample_secret();
  m.lane = 3;
  m.epoch = 0x0201;
  m.nlanes = 8;
  uint8_t out[kLaneHelloSize];
  encode(m, out);
  EXPECT_EQ(Bytes(out + 40, out + 44), (Bytes{0x03, 0x00, 0x01, 0x02}));
  auto d = decode_lane_hello(Bytes(out, out + sizeof(out)));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->lane, 3u);
  EXPECT_EQ(d->epoch, 0x0201);
  EXPECT_EQ(decode_lane_hello(kLaneHelloGolden)->epoch, 0);
}

TEST(ProtoLaneHello, RejectsMoreLanesThanANumberHolds) {
  Bytes b = kLaneHelloGolden;
  put_u32(b, 44, kMaxLaneNumber);
  EXPECT_TRUE(decode_lane_hello(b));
  put_u32(b, 44, kMaxLaneNumber + 1);
  EXPECT_FALSE(decode_lane_hello(b));
}

// --- DataRequest / DataReply ----------------------------------------------------------

TEST(ProtoDataRequest, EncodesGoldenBytes) {
  DataRequest m{DataOp::kFlush, kDataRelaxed, 0x0102030405060708, 0x1112131415161718};
  const Bytes golden = {
      0x03, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // op, flags, reserved
      0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,  // offset
      0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11,  // length
  };
  uint8_t out[kDataRequestSize];
  std::memset(out, 0xee, sizeof(out));
  encode(m, out);
  EXPECT_EQ(Bytes(out, out + sizeof(out)), golden);
}

TEST(ProtoDataRequest, RoundTripsEveryOp) {
  for (uint8_t op = 1; op <= 5; ++op) {
    for (uint8_t flags : {uint8_t{0}, kDataRelaxed}) {
      DataRequest m{static_cast<DataOp>(op), flags, 4096, 64};
      if (m.op == DataOp::kDrain) m.offset = m.length = 0;
      uint8_t out[kDataRequestSize];
      encode(m, out);
      auto d = decode_data_request(out);
      ASSERT_TRUE(d) << int{op};
      EXPECT_EQ(d->op, m.op);
      EXPECT_EQ(d->flags, flags);
      EXPECT_EQ(d->offset, m.offset);
      EXPECT_EQ(d->length, m.length);
    }
  }
}

Bytes request_bytes(DataRequest m) {
  uint8_t out[kDataRequestSize];
  encode(m, out);
  return Bytes(out, out + sizeof(out));
}

TEST(ProtoDataRequest, RejectsTruncatedAndTrailingBytes) {
  expect_exact_size(request_bytes({DataOp::kPersist, 0, 4096, 8}),
                    [](std::span<const uint8_t> p) { return decode_data_request(p); });
}

TEST(ProtoDataRequest, RejectsBadOp) {
  for (uint8_t op : std::initializer_list<uint8_t>{0, 7, 0x80, 0xff}) {
    Bytes b = request_bytes({DataOp::kPersist, 0, 4096, 8});
    b[0] = op;
    EXPECT_FALSE(decode_data_request(b)) << int{op};
  }
}

TEST(ProtoDataRequest, RejectsUnknownFlags) {
  for (uint8_t f : std::initializer_list<uint8_t>{4, 5, 0x80, 0xff}) {
    Bytes b = request_bytes({DataOp::kPersist, 0, 4096, 8});
    b[1] = f;
    EXPECT_FALSE(decode_data_request(b)) << int{f};
  }
}

// Minor 7: kDataVisible, alone or with kDataRelaxed.
TEST(ProtoDataRequest, TakesTheVisibleFlag) {
  for (uint8_t f : std::initializer_list<uint8_t>{2, 3}) {
    Bytes b = request_bytes({DataOp::kPersist, f, 4096, 8});
    auto d = decode_data_request(b);
    ASSERT_TRUE(d) << int{f};
    EXPECT_EQ(d->flags, f);
  }
}

TEST(ProtoDataRequest, RejectsNonZeroReserved) {
  for (size_t at = 2; at < 8; ++at) {
    Bytes b = request_bytes({DataOp::kRead, 0, 0, 8});
    b[at] = 1;
    EXPECT_FALSE(decode_data_request(b)) << at;
  }
}

TEST(ProtoDataRequest, RejectsDrainWithOffsetOrLength) {
  EXPECT_TRUE(decode_data_request(request_bytes({DataOp::kDrain, 0, 0, 0})));
  EXPECT_FALSE(decode_data_request(request_bytes({DataOp::kDrain, 0, 8, 0})));
  EXPECT_FALSE(decode_data_request(request_bytes({DataOp::kDrain, 0, 0, 8})));
  EXPECT_FALSE(decode_data_request(request_bytes({DataOp::kDrain, 0, 1ull << 63, 0})));
}

Bytes reply_bytes(DataReply m);

// Minor 11: a probe, op 6, carries nothing: no range, no flags.
TEST(ProtoDataRequest, TakesAProbeWithoutRangeOrFlags) {
  const Bytes probe = request_bytes({DataOp::kProbe, 0, 0, 0});
  EXPECT_EQ(probe[0], 6);
  auto d = decode_data_request(probe);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->op, DataOp::kProbe);
  EXPECT_FALSE(carries_payload(DataOp::kProbe));
  EXPECT_FALSE(decode_data_request(request_bytes({DataOp::kProbe, 0, 8, 0})));
  EXPECT_FALSE(decode_data_request(request_bytes({DataOp::kProbe, 0, 0, 8})));
  EXPECT_FALSE(decode_data_request(request_bytes({DataOp::kProbe, kDataRelaxed, 0, 0})));
  EXPECT_FALSE(decode_data_request(request_bytes({DataOp::kProbe, kDataVisible, 0, 0})));
  auto r = decode_data_reply(reply_bytes({0, DataOp::kProbe, 0}));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->op, DataOp::kProbe);
}

TEST(ProtoDataRequest, CarriesPayloadOnlyForWrites) {
  EXPECT_TRUE(carries_payload(DataOp::kPersist));
  EXPECT_TRUE(carries_payload(DataOp::kDeepPersist));
  EXPECT_TRUE(carries_payload(DataOp::kFlush));
  EXPECT_FALSE(carries_payload(DataOp::kDrain));
  EXPECT_FALSE(carries_payload(DataOp::kRead));
}

Bytes reply_bytes(DataReply m) {
  uint8_t out[kDataReplySize];
  encode(m, out);
  return Bytes(out, out + sizeof(out));
}

TEST(ProtoDataReply, EncodesGoldenBytes) {
  const Bytes golden = {
      0x05, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00,  // status EIO, op kRead, reserved
      0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11,  // length
  };
  static_assert(EIO == 5);
  EXPECT_EQ(reply_bytes({EIO, DataOp::kRead, 0x1112131415161718}), golden);
}

TEST(ProtoDataReply, RoundTrips) {
  auto d = decode_data_reply(reply_bytes({4095, DataOp::kDeepPersist, 77}));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, 4095u);
  EXPECT_EQ(d->op, DataOp::kDeepPersist);
  EXPECT_EQ(d->length, 77u);
}

TEST(ProtoDataReply, RejectsTruncatedAndTrailingBytes) {
  expect_exact_size(reply_bytes({0, DataOp::kPersist, 0}),
                    [](std::span<const uint8_t> p) { return decode_data_reply(p); });
}

TEST(ProtoDataReply, RejectsBadOp) {
  for (uint8_t op : std::initializer_list<uint8_t>{0, 7, 0xff}) {
    Bytes b = reply_bytes({0, DataOp::kPersist, 0});
    b[4] = op;
    EXPECT_FALSE(decode_data_reply(b)) << int{op};
  }
}

TEST(ProtoDataReply, RejectsNonZeroReserved) {
  for (size_t at = 5; at < 8; ++at) {
    Bytes b = reply_bytes({0, DataOp::kPersist, 0});
    b[at] = 1;
    EXPECT_FALSE(decode_data_reply(b)) << at;
  }
}

TEST(ProtoDataReply, RejectsStatusThatIsNotAnErrno) {
  EXPECT_FALSE(decode_data_reply(reply_bytes({4096, DataOp::kPersist, 0})));
  EXPECT_FALSE(decode_data_reply(reply_bytes({0xffffffff, DataOp::kPersist, 0})));  // -1
}

// --- status tables ------------------------------------------------------------------------

TEST(ProtoStatus, ToErrnoAndMessageMatchPmdkTable) {
  struct Row {
    Status status;
    int err;
    const char *msg;
  } rows[] = {
      {Status::kSuccess, 0, "Success"},
      {Status::kBadProto, EPROTONOSUPPORT, "Protocol version number mismatch"},
      {Status::kBadName, EINVAL, "Invalid pool descriptor"},
      {Status::kBadSize, EFBIG, "Invalid pool size"},
      {Status::kBadNlanes, EINVAL, "Invalid number of lanes"},
      {Status::kBadProvider, EINVAL, "Invalid provider"},
      {Status::kFatal, EREMOTEIO, "Fatal error"},
      {Status::kFatalConn, ECONNABORTED, "Fatal in-band connection error"},
      {Status::kBusy, EBUSY, "Pool already in use"},
      {Status::kExists, EEXIST, "Pool already exists"},
      {Status::kProvNoSup, EMEDIUMTYPE, "Provider not supported"},
      {Status::kNoExist, ENOENT, "Pool set or its part doesn't exist or it is unavailable"},
      {Status::kNoAccess, EACCES, "Pool set permission denied"},
      {Status::kPoolCfg, EINVAL, "Invalid pool set configuration"},
      {Status::kStale, ESTALE, "Pool opened by another session since"},
      {Status::kNoLevel, ENOTSUP, "Durability level not granted by the target"},
      {Status::kBehind, ESTALE, "Pool may be behind its master"},
  };
  ASSERT_EQ(std::size(rows), static_cast<size_t>(Status::kCount));
  for (size_t i = 0; i < std::size(rows); ++i) {
    EXPECT_EQ(static_cast<size_t>(rows[i].status), i);
    EXPECT_EQ(status_to_errno(rows[i].status), rows[i].err) << i;
    EXPECT_STREQ(status_message(rows[i].status), rows[i].msg) << i;
  }
}

TEST(ProtoStatus, OutOfRangeStatusIsEproto) {
  EXPECT_EQ(status_to_errno(Status::kCount), EPROTO);
  EXPECT_EQ(status_to_errno(static_cast<Status>(0xffffffffu)), EPROTO);
  EXPECT_NE(status_message(static_cast<Status>(99)), nullptr);
}

TEST(ProtoStatus, ErrnoToStatusMatchesPmdkTable) {
  EXPECT_EQ(errno_to_status(0), Status::kSuccess);
  EXPECT_EQ(errno_to_status(EEXIST), Status::kExists);
  EXPECT_EQ(errno_to_status(EACCES), Status::kNoAccess);
  EXPECT_EQ(errno_to_status(ENOENT), Status::kNoExist);
  EXPECT_EQ(errno_to_status(EWOULDBLOCK), Status::kBusy);
  EXPECT_EQ(errno_to_status(EAGAIN), Status::kBusy);
  EXPECT_EQ(errno_to_status(EBADF), Status::kBadName);
  EXPECT_EQ(errno_to_status(EINVAL), Status::kPoolCfg);
  EXPECT_EQ(errno_to_status(EFBIG), Status::kBadSize);
  for (int other : {EIO, ENOMEM, ENOSPC, EPERM, -1, 100000})
    EXPECT_EQ(errno_to_status(other), Status::kFatal) << other;
}

TEST(ProtoStatus, TransportBitsAreDistinct) {
  EXPECT_EQ(transport_bit(TransportKind::kTcp), 2u);
  EXPECT_EQ(transport_bit(TransportKind::kVerbs), 4u);
}

}  // namespace
}  // namespace rpmem::proto

namespace rpmem::proto {
namespace {

TEST(ProtoRemove, EncodesGoldenBytesAndRoundTrips) {
  RemoveRequest m{kRemoveForce | kRemovePoolSet, "a/b.set"};
  const Bytes expected = {
      9,   0,   0,   0,   15,  0,   0,   0,  // frame: type 9, 15 bytes
      3,   0,   0,   0,                      // flags
      7,   0,   0,   0,                      // name length, reserved
      'a', '/', 'b', '.', 's', 'e', 't',
  };
  EXPECT_EQ(encode(m), expected);
  auto d = decode_remove(std::span<const uint8_t>(expected).subspan(kFrameHeaderSize));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->flags, m.flags);
  EXPECT_EQ(d->pool_set, m.pool_set);
}

TEST(ProtoRemove, RejectsUnknownFlagsEmptyNamesAndNul) {
  auto payload = [](uint32_t flags, const std::string &name) {
    Bytes b = encode(RemoveRequest{flags, name});
    return Bytes(b.begin() + kFrameHeaderSize, b.end());
  };
  EXPECT_FALSE(decode_remove(payload(4, "p.set")));
  EXPECT_FALSE(decode_remove(payload(0, "")));
  EXPECT_FALSE(decode_remove(payload(0, std::string("p\0set", 5))));
  Bytes truncated = payload(0, "p.set");
  truncated.pop_back();
  EXPECT_FALSE(decode_remove(truncated));
}

}  // namespace
}  // namespace rpmem::proto
