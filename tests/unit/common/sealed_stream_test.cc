// SPDX-License-Identifier: BSD-3-Clause
// Tests of sealed lanes over AF_UNIX socketpairs: what goes through, and
// each refusal -- another key, a replayed, reordered, altered or truncated
// frame, a lane number out of range -- with no unauthenticated byte given
// to the reader.
#include "common/transport/tcp/sealed_stream.h"

#include "common/transport/tcp/socket_io.h"
#include "common/transport/tcp/tls_stream.h"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace rpmem::transport::tcp {
namespace {

using Bytes = std::vector<uint8_t>;

SealKeys keys_of(uint8_t seed) {
  SealKeys k;
  k.on = true;
  for (size_t i = 0; i < k.master.size(); ++i) k.master[i] = static_cast<uint8_t>(seed + i * 7);
  return k;
}

void pair(int (&fds)[2]) {
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds), 0);
}

// A client of lane `lane` at `epoch` and a target of up to `max_lanes`
// lanes, both keyed by `keys`, over a socket pair.
struct Ends {
  std::unique_ptr<SealedStream> c, t;
};
Ends connected(const SealKeys &keys, uint32_t lane, uint32_t max_lanes, uint16_t epoch = 0) {
  int fds[2] = {-1, -1};
  pair(fds);
  return {SealedStream::client(fds[0], keys, lane, epoch),
          SealedStream::target(fds[1], keys, max_lanes)};
}

std::error_code send_msg(ByteStream &s, const std::string &text) {
  iovec iov{const_cast<char *>(text.data()), text.size()};
  return stream_send_all(s, &iov, 1, 1000);
}

// What lane `lane`'s client puts on the wire for `messages`: its lane
// number, then one frame each.
Bytes wire_of(const SealKeys &keys, uint32_t lane, const std::vector<std::string> &messages) {
  int fds[2];
  pair(fds);
  auto c = SealedStream::client(fds[0], keys, lane);
  for (const auto &m : messages) EXPECT_FALSE(send_msg(*c, m));
  Bytes out(1 << 20);
  const ssize_t n = ::recv(fds[1], out.data(), out.size(), 0);
  ::close(fds[1]);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

// The frames of a wire capture (after the lane number).
std::vector<Bytes> frames_of(const Bytes &wire) {
  std::vector<Bytes> frames;
  for (size_t at = 4; at + kSealedHeader <= wire.size();) {
    const uint32_t n = wire[at] | wire[at + 1] << 8 | wire[at + 2] << 16 | wire[at + 3] << 24;
    const size_t total = kSealedHeader + n + kSealedTag;
    frames.emplace_back(wire.begin() + at, wire.begin() + at + total);
    at += total;
  }
  return frames;
}

// Feeds `bytes` to a target stream (max 8 lanes), then closes the sending
// end; returns what one read for `want` bytes says and takes.
struct Read {
  std::error_code ec;
  std::string got;
};
std::vector<Read> target_reads(const SealKeys &keys, const Bytes &bytes,
                               const std::vector<size_t> &wants) {
  int fds[2];
  pair(fds);
  EXPECT_EQ(::send(fds[0], bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  ::close(fds[0]);
  auto t = SealedStream::target(fds[1], keys, 8);
  std::vector<Read> reads;
  for (size_t want : wants) {
    std::string buf(want, '\0');
    Read r;
    r.ec = stream_recv_all(*t, buf.data(), want, 1000);
    r.got = r.ec ? std::string() : buf;
    reads.push_back(r);
  }
  return reads;
}

Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const auto &p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
Bytes prefix(uint32_t lane) {
  return {static_cast<uint8_t>(lane), static_cast<uint8_t>(lane >> 8),
          static_cast<uint8_t>(lane >> 16), static_cast<uint8_t>(lane >> 24)};
}

const std::error_code kRefused{EPROTO, std::generic_category()};
const std::error_code kReset{ECONNRESET, std::generic_category()};

TEST(SealedStream, MessagesGoBothWaysAndTheTargetLearnsTheLane) {
  const SealKeys keys = keys_of(1);
  auto [c, t] = connected(keys, 3, 8);
  std::string a = "header..", b = "and its payload";
  iovec iov[2] = {{a.data(), a.size()}, {b.data(), b.size()}};
  ASSERT_FALSE(stream_send_all(*c, iov, 2, 1000));
  std::string got(a.size() + b.size(), '\0');
  ASSERT_FALSE(stream_recv_all(*t, got.data(), got.size(), 1000));
  EXPECT_EQ(got, a + b);
  EXPECT_EQ(t->lane(), 3);
  ASSERT_FALSE(send_msg(*t, "a reply"));
  std::string reply(7, '\0');
  ASSERT_FALSE(stream_recv_all(*c, reply.data(), reply.size(), 1000));
  EXPECT_EQ(reply, "a reply");
}

// A lane that comes back (protocol minor 6) says its epoch beside its
// number, and both ends key it for that epoch: the target learns both, and
// the keys of one epoch open nothing of another.
TEST(SealedStream, ALaneThatComesBackHasKeysOfItsEpoch) {
  const SealKeys keys = keys_of(1);
  auto [c, t] = connected(keys, 3, 8, 2);
  ASSERT_FALSE(send_msg(*c, "hello at epoch 2"));
  std::string got(16, '\0');
  ASSERT_FALSE(stream_recv_all(*t, got.data(), got.size(), 1000));
  EXPECT_EQ(got, "hello at epoch 2");
  EXPECT_EQ(t->lane(), 3);
  EXPECT_EQ(t->epoch(), 2);

  SealKey k0, k1, k2;
  ASSERT_TRUE(derive_lane_key(keys.master, 3, SealDirection::kToTarget, k0));
  ASSERT_TRUE(derive_lane_key(keys.master, 3, SealDirection::kToTarget, k1, 1));
  ASSERT_TRUE(derive_lane_key(keys.master, 3, SealDirection::kToTarget, k2, 2));
  EXPECT_NE(k0, k1);
  EXPECT_NE(k1, k2);
  // Epoch 0 frames under an epoch-1 prefix (the lane number's high half):
  // the target keys epoch 1 and the hello does not authenticate.
  Bytes wire = wire_of(keys, 3, {"a recorded hello"});
  wire[6] = 1;
  const auto reads = target_reads(keys, wire, {16});
  EXPECT_EQ(reads[0].ec, kRefused);
  EXPECT_EQ(reads[0].got, "");
}

TEST(SealedStream, NoPlaintextOnTheWire) {
  const std::string secret = "the lane secret and the pool's bytes";
  const Bytes wire = wire_of(keys_of(1), 0, {secret});
  ASSERT_EQ(wire.size(), 4 + kSealedHeader + secret.size() + kSealedTag);
  const std::string on_wire(wire.begin(), wire.end());
  EXPECT_EQ(on_wire.find("secret"), std::string::npos);
}

TEST(SealedStream, ALargeMessageCrossesInFramesWhole) {
  const SealKeys keys = keys_of(2);
  auto [c, t] = connected(keys, 0, 1);
  std::string big((1 << 20) + 17, '\0');
  std::mt19937 rng(5);
  for (auto &ch : big) ch = static_cast<char>(rng());
  std::thread sender([&] { EXPECT_FALSE(send_msg(*c, big)); });
  std::string got(big.size(), '\0');
  EXPECT_FALSE(stream_recv_all(*t, got.data(), got.size(), 5000));
  sender.join();
  EXPECT_TRUE(got == big);
}

TEST(SealedStream, TheSameBytesTwiceSealDifferently) {
  const Bytes wire = wire_of(keys_of(1), 0, {"same bytes", "same bytes"});
  const auto frames = frames_of(wire);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_NE(frames[0], frames[1]) << "each frame has a nonce of its own";
}

TEST(SealedStream, AnotherKeyIsRefused) {
  const Bytes wire = wire_of(keys_of(1), 0, {"hello"});
  const auto reads = target_reads(keys_of(9), wire, {5});
  EXPECT_EQ(reads[0].ec, kRefused);
}

TEST(SealedStream, AFlippedBitIsRefusedAndNothingOfTheFrameIsRead) {
  Bytes wire = wire_of(keys_of(1), 0, {"hello"});
  wire[4 + kSealedHeader + 1] ^= 0x10;  // in the ciphertext
  EXPECT_EQ(target_reads(keys_of(1), wire, {1})[0].ec, kRefused);
  wire = wire_of(keys_of(1), 0, {"hello"});
  wire.back() ^= 1;  // in the tag
  EXPECT_EQ(target_reads(keys_of(1), wire, {1})[0].ec, kRefused);
}

// A receive into the pool (recv_nowait) never opens a frame where it
// writes: a frame that does not authenticate leaves it as it was. A receive
// into the caller's scratch opens whole frames straight into it, and clears
// what it wrote when the tag does not match.
TEST(SealedStream, AFrameThatDoesNotAuthenticateLeavesNoByteWhereItWasToGo) {
  const std::string msg(3000, 'p');
  for (const bool scratch : {false, true}) {
    Bytes wire = wire_of(keys_of(1), 0, {msg});
    wire[4 + kSealedHeader + 100] ^= 0x01;
    int fds[2];
    pair(fds);
    ASSERT_EQ(::send(fds[0], wire.data(), wire.size(), 0), static_cast<ssize_t>(wire.size()));
    auto t = SealedStream::target(fds[1], keys_of(1), 8);
    std::vector<uint8_t> buf(8192, 0xAA);
    size_t got = 1;
    const std::error_code ec = scratch ? t->recv_scratch_nowait(buf.data(), buf.size(), got)
                                       : t->recv_nowait(buf.data(), buf.size(), got);
    EXPECT_EQ(ec, kRefused) << "scratch " << scratch;
    EXPECT_EQ(got, 0u);
    const uint8_t expect = scratch ? 0 : 0xAA;
    EXPECT_EQ(std::count(buf.begin(), buf.begin() + msg.size(), expect),
              static_cast<ptrdiff_t>(msg.size()))
        << (scratch ? "what was opened into the scratch is cleared"
                    : "nothing is opened where a receive into the pool writes");
    EXPECT_EQ(std::count(buf.begin() + msg.size(), buf.end(), 0xAA),
              static_cast<ptrdiff_t>(buf.size() - msg.size()));
    ::close(fds[0]);
  }
}

// Frames opened straight into the caller's memory and frames opened in
// place (the caller's buffer ends inside them) give the same bytes.
TEST(SealedStream, ReadsThatSplitFramesOrTakeThemWholeGetTheSameBytes) {
  std::string big(2 * kMaxSealedFrame + 1000, '\0');
  std::mt19937 rng(7);
  for (auto &ch : big) ch = static_cast<char>(rng());
  const Bytes wire = wire_of(keys_of(3), 1, {big});
  for (const size_t piece : {size_t{1000}, kMaxSealedFrame, kMaxSealedFrame + 1, big.size()}) {
    int fds[2];
    pair(fds);
    ASSERT_EQ(::send(fds[0], wire.data(), wire.size(), 0), static_cast<ssize_t>(wire.size()));
    auto t = SealedStream::target(fds[1], keys_of(3), 8);
    std::string got(big.size(), '\0');
    for (size_t at = 0; at < big.size(); at += piece)
      ASSERT_FALSE(stream_recv_all(*t, got.data() + at, std::min(piece, big.size() - at), 1000));
    EXPECT_TRUE(got == big) << "pieces of " << piece;
    ::close(fds[0]);
  }
}

TEST(SealedStream, AnAlteredLengthIsRefused) {
  Bytes wire = wire_of(keys_of(1), 0, {"hello", "world"});
  wire[4] = 4;  // the first frame's length: 4, not 5
  EXPECT_EQ(target_reads(keys_of(1), wire, {1})[0].ec, kRefused);
  wire = wire_of(keys_of(1), 0, {"hello"});
  wire[4 + 2] = 0x7f;  // more than a frame can hold
  EXPECT_EQ(target_reads(keys_of(1), wire, {1})[0].ec, kRefused);
}

TEST(SealedStream, AReplayedFrameIsRefused) {
  const Bytes wire = wire_of(keys_of(1), 0, {"first", "second"});
  const auto f = frames_of(wire);
  ASSERT_EQ(f.size(), 2u);
  const auto reads = target_reads(keys_of(1), cat({prefix(0), f[0], f[0]}), {5, 5});
  EXPECT_FALSE(reads[0].ec);
  EXPECT_EQ(reads[0].got, "first");
  EXPECT_EQ(reads[1].ec, kRefused) << "the same frame again";
}

TEST(SealedStream, ReorderedFramesAreRefused) {
  const auto f = frames_of(wire_of(keys_of(1), 0, {"first", "second"}));
  ASSERT_EQ(f.size(), 2u);
  const auto reads = target_reads(keys_of(1), cat({prefix(0), f[1], f[0]}), {6});
  EXPECT_EQ(reads[0].ec, kRefused);
}

TEST(SealedStream, ADroppedFrameIsRefused) {
  const auto f = frames_of(wire_of(keys_of(1), 0, {"first", "second", "third"}));
  ASSERT_EQ(f.size(), 3u);
  const auto reads = target_reads(keys_of(1), cat({prefix(0), f[0], f[2]}), {5, 5});
  EXPECT_FALSE(reads[0].ec);
  EXPECT_EQ(reads[1].ec, kRefused);
}

TEST(SealedStream, ATruncatedFrameIsAResetNotData) {
  Bytes wire = wire_of(keys_of(1), 0, {"hello"});
  wire.pop_back();
  const auto reads = target_reads(keys_of(1), wire, {1});
  EXPECT_EQ(reads[0].ec, kReset);
  EXPECT_TRUE(reads[0].got.empty());
}

TEST(SealedStream, AFrameOfAnotherLaneIsRefused) {
  Bytes wire = wire_of(keys_of(1), 2, {"hello"});
  wire[0] = 1;  // claims lane 1: lane 1's key does not open it
  EXPECT_EQ(target_reads(keys_of(1), wire, {5})[0].ec, kRefused);
  wire[0] = 8;  // not a lane of the session (8 granted: 0..7)
  EXPECT_EQ(target_reads(keys_of(1), wire, {5})[0].ec, kRefused);
}

TEST(SealedStream, TheDirectionsHaveKeysOfTheirOwn) {
  // A client's frame sent back to it as if from the target.
  const Bytes wire = wire_of(keys_of(1), 0, {"hello"});
  int fds[2];
  pair(fds);
  auto c = SealedStream::client(fds[0], keys_of(1), 0);
  const Bytes frame(wire.begin() + 4, wire.end());
  ASSERT_EQ(::send(fds[1], frame.data(), frame.size(), 0), static_cast<ssize_t>(frame.size()));
  char b[5];
  EXPECT_EQ(stream_recv_all(*c, b, sizeof(b), 1000), kRefused);
  ::close(fds[1]);
}

TEST(SealedStream, AfterARefusalEveryCallFails) {
  int fds[2];
  pair(fds);
  Bytes wire = wire_of(keys_of(1), 0, {"hello"});
  wire.back() ^= 1;
  ASSERT_EQ(::send(fds[0], wire.data(), wire.size(), 0), static_cast<ssize_t>(wire.size()));
  auto t = SealedStream::target(fds[1], keys_of(1), 8);
  char b[5];
  size_t got = 0;
  EXPECT_EQ(t->recv_nowait(b, sizeof(b), got), kRefused);
  EXPECT_EQ(t->recv_nowait(b, sizeof(b), got), kRefused);
  EXPECT_EQ(send_msg(*t, "x"), kRefused);
  ::close(fds[0]);
}

TEST(SealedStream, KeysRotateInStepOnBothSidesAndDoChange) {
  SealKeys keys = keys_of(3);
  keys.rotate_frames = 2;
  std::vector<std::string> messages;
  for (int i = 0; i < 7; ++i) messages.push_back("message " + std::to_string(i));
  const Bytes wire = wire_of(keys, 0, messages);
  const std::vector<size_t> wants(messages.size(), messages[0].size());
  for (const auto &r : target_reads(keys, wire, wants)) EXPECT_FALSE(r.ec);
  // A side that rotates on another count fails at the first frame under
  // a new key: the keys do change.
  SealKeys late = keys;
  late.rotate_frames = 3;
  const auto reads = target_reads(late, wire, wants);
  EXPECT_FALSE(reads[0].ec);
  EXPECT_FALSE(reads[1].ec);
  EXPECT_EQ(reads[2].ec, kRefused);
  // And by bytes.
  keys.rotate_frames = kSealRotateFrames;
  keys.rotate_bytes = 20;
  const Bytes by_bytes = wire_of(keys, 0, messages);
  for (const auto &r : target_reads(keys, by_bytes, wants)) EXPECT_FALSE(r.ec);
  // 9 bytes a message: the key changes after the third.
  const auto unrotated = target_reads(keys_of(3), by_bytes, wants);
  EXPECT_FALSE(unrotated[2].ec);
  EXPECT_EQ(unrotated[3].ec, kRefused);
}

TEST(SealedFrames, AFullFrameFillsWholeSegments) {
  EXPECT_EQ(sealed_frame_for(65483), 65463u);  // loopback: one segment
  EXPECT_EQ(sealed_frame_for(32741), 65462u);  // loopback, a new connection: two
  EXPECT_EQ(sealed_frame_for(1448), 65140u);   // Ethernet with timestamps: 45
  constexpr size_t kWhole = kSealedHeader + kMaxSealedFrame + kSealedTag;
  for (int mss = kMinSegment; static_cast<size_t>(mss) < kWhole; ++mss) {
    const size_t wire = sealed_frame_for(mss) + kSealedHeader + kSealedTag;
    ASSERT_EQ(wire % static_cast<size_t>(mss), 0u) << mss;
    ASSERT_LE(wire, kWhole) << mss;
    ASSERT_GT(wire + static_cast<size_t>(mss), kWhole) << mss;
  }
  // Unknown, too small to be real, or no split needed: the largest frame.
  for (int mss : {-1, 0, 1, kMinSegment - 1, static_cast<int>(kWhole), 1 << 20})
    EXPECT_EQ(sealed_frame_for(mss), kMaxSealedFrame) << mss;
}

int segment_size(int fd) {
  int mss = 0;
  socklen_t len = sizeof(mss);
  EXPECT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &len), 0);
  return mss;
}

TEST(SealedStream, OverTcpTheFramesOfALargeMessageFillWholeSegments) {
  const int lst = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(lst, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof(addr);
  ASSERT_EQ(::bind(lst, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(lst, 1), 0);
  ASSERT_EQ(::getsockname(lst, reinterpret_cast<sockaddr *>(&addr), &alen), 0);
  const int cfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(cfd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)), 0);
  const int tfd = ::accept4(lst, nullptr, nullptr, SOCK_CLOEXEC);
  ::close(lst);
  ASSERT_GE(tfd, 0);
  set_nodelay(cfd);  // as connect_lanes() sets up a lane
  ASSERT_FALSE(set_nonblocking(cfd, true));
  // The segment size a full frame may be cut for: the one at the start,
  // or a larger one when the connection has warmed up.
  std::set<size_t> full = {sealed_frame_for(segment_size(cfd))};
  std::string big((4 << 20) + 1000, 'x');
  std::thread sender([&] {
    auto c = SealedStream::client(cfd, keys_of(6), 0);
    EXPECT_FALSE(send_msg(*c, big));
    full.insert(sealed_frame_for(segment_size(cfd)));
  });  // the stream closes cfd
  Bytes wire;
  uint8_t buf[1 << 16];
  for (ssize_t n; (n = ::recv(tfd, buf, sizeof(buf), 0)) > 0;)
    wire.insert(wire.end(), buf, buf + n);
  ::close(tfd);
  sender.join();
  ASSERT_FALSE(full.count(kMaxSealedFrame)) << "loopback has segments smaller than a frame";
  const auto frames = frames_of(wire);
  ASSERT_GT(frames.size(), 64u);  // past the next reading of the segment size
  size_t plain = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    const size_t n = frames[i].size() - kSealedHeader - kSealedTag;
    plain += n;
    if (i + 1 < frames.size()) {
      EXPECT_TRUE(full.count(n)) << "frame " << i << ": " << n << " bytes";
    }
  }
  EXPECT_EQ(plain, big.size());
}

// ---------------------------------------------------------------------------
// Keys of protocol minor 9: a nonce from each end of each connection.

SealKeys nonce_keys_of(uint8_t seed) {
  SealKeys k = keys_of(seed);
  k.nonces = true;
  return k;
}

// What a target answers to a recording of a client's first bytes: its own
// bytes on the wire (its nonce, then its frames) for `reply`.
Bytes target_answer(const SealKeys &keys, const Bytes &client_bytes, size_t hello,
                    const std::string &reply) {
  int fds[2];
  pair(fds);
  EXPECT_EQ(::send(fds[0], client_bytes.data(), client_bytes.size(), 0),
            static_cast<ssize_t>(client_bytes.size()));
  auto t = SealedStream::target(fds[1], keys, 8);
  std::string got(hello, '\0');
  EXPECT_FALSE(stream_recv_all(*t, got.data(), got.size(), 1000));
  EXPECT_FALSE(send_msg(*t, reply));
  Bytes out(4096);
  const ssize_t n = ::recv(fds[0], out.data(), out.size(), 0);
  ::close(fds[0]);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

TEST(SealedStream, WithNoncesMessagesGoBothWaysAfterTheHello) {
  const SealKeys keys = nonce_keys_of(4);
  auto [c, t] = connected(keys, 2, 8, 7);
  for (int round = 0; round < 3; ++round) {
    const std::string ask = "request " + std::to_string(round);
    ASSERT_FALSE(send_msg(*c, ask));
    std::string got(ask.size(), '\0');
    ASSERT_FALSE(stream_recv_all(*t, got.data(), got.size(), 1000)) << round;
    EXPECT_EQ(got, ask);
    const std::string answer = "answer " + std::to_string(round);
    ASSERT_FALSE(send_msg(*t, answer));
    std::string back(answer.size(), '\0');
    ASSERT_FALSE(stream_recv_all(*c, back.data(), back.size(), 1000)) << round;
    EXPECT_EQ(back, answer);
  }
  EXPECT_EQ(t->lane(), 2);
  EXPECT_EQ(t->epoch(), 7);
  EXPECT_EQ(t->client_nonce(), c->client_nonce());
}

// A recording of a client's connection played to the target again: the
// target answers under a key of its own nonce, so two answers -- an
// admission and a refusal, say -- never share a key and nonce; and
// nothing the client sealed after its hello opens on the replay's
// connection.
TEST(SealedStream, AReplayedConnectionIsAnsweredUnderKeysOfItsOwn) {
  const SealKeys keys = nonce_keys_of(5);
  int fds[2];
  pair(fds);
  auto c = SealedStream::client(fds[0], keys, 1, 3);
  auto t = SealedStream::target(fds[1], keys, 8);
  ASSERT_FALSE(send_msg(*c, "hello"));
  Bytes recorded(4096);
  // What the client sent, as a recorder on the path saw it.
  std::string got(5, '\0');
  ASSERT_FALSE(stream_recv_all(*t, got.data(), got.size(), 1000));
  ASSERT_FALSE(send_msg(*t, "yes"));
  std::string yes(3, '\0');
  ASSERT_FALSE(stream_recv_all(*c, yes.data(), yes.size(), 1000));
  ASSERT_FALSE(send_msg(*c, "a persist"));
  ::close(fds[1]);

  // The client's bytes again, made with the same nonce: what a replay sends.
  int rec[2];
  pair(rec);
  const SealNonce nc = c->client_nonce();
  auto twin = SealedStream::client(rec[0], keys, 1, 3, &nc);
  ASSERT_FALSE(send_msg(*twin, "hello"));
  const ssize_t n = ::recv(rec[1], recorded.data(), recorded.size(), 0);
  ASSERT_GT(n, 0);
  recorded.resize(static_cast<size_t>(n));
  const size_t hello_bytes = recorded.size();
  EXPECT_EQ(hello_bytes, kSealedLanePrefix + kSealNonceSize + kSealedHeader + 5 + kSealedTag);

  const Bytes first = target_answer(keys, recorded, 5, "yes");
  const Bytes second = target_answer(keys, recorded, 5, "no!");
  ASSERT_EQ(first.size(), kSealNonceSize + kSealedHeader + 3 + kSealedTag);
  ASSERT_EQ(second.size(), first.size());
  EXPECT_FALSE(std::equal(first.begin(), first.begin() + kSealNonceSize, second.begin()))
      << "two connections drew one nonce";
  // The frames: each under the key of its own target nonce, at frame 0.
  std::set<SealKey> keys_seen;
  for (const Bytes *answer : {&first, &second}) {
    SealNonce nt;
    std::copy_n(answer->begin(), nt.size(), nt.begin());
    SealKey k;
    ASSERT_TRUE(derive_lane_key(keys.master, 1, SealDirection::kToClient, k, 3, &nc, &nt));
    EXPECT_TRUE(keys_seen.insert(k).second) << "two answers under one key";
    FrameCipher open(k, false);
    Bytes frame(answer->begin() + kSealNonceSize, answer->end());
    EXPECT_TRUE(open.open(frame.data(), frame.size()));
  }
  // The hello's key (the client's nonce alone) seals nothing after it.
  SealKey hello_key, reply_key;
  ASSERT_TRUE(derive_lane_key(keys.master, 1, SealDirection::kToTarget, hello_key, 3, &nc));
  ASSERT_TRUE(derive_lane_key(keys.master, 1, SealDirection::kToClient, reply_key, 3, &nc));
  EXPECT_NE(hello_key, reply_key);
}

// The frames a client seals after its hello are keyed with the target's
// nonce: played on another connection (another target nonce), they do not
// open.
TEST(SealedStream, WithNoncesAClientsLaterFramesOpenOnlyOnTheirConnection) {
  const SealKeys keys = nonce_keys_of(6);
  int a[2];
  pair(a);
  auto c = SealedStream::client(a[0], keys, 0);
  auto t = SealedStream::target(a[1], keys, 8);
  ASSERT_FALSE(send_msg(*c, "hello"));
  std::string got(5, '\0');
  ASSERT_FALSE(stream_recv_all(*t, got.data(), got.size(), 1000));
  ASSERT_FALSE(send_msg(*t, "yes"));
  std::string yes(3, '\0');
  ASSERT_FALSE(stream_recv_all(*c, yes.data(), yes.size(), 1000));
  // The client's next frame as it goes on the wire (taken off the socket
  // before the target reads it).
  ASSERT_FALSE(send_msg(*c, "write this"));
  Bytes later(4096);
  const ssize_t n = ::recv(a[1], later.data(), later.size(), 0);
  ASSERT_GT(n, 0);
  later.resize(static_cast<size_t>(n));
  // Its hello as a recorder saw it (the same nonce makes the same bytes).
  int rec[2];
  pair(rec);
  const SealNonce nc = c->client_nonce();
  auto twin = SealedStream::client(rec[0], keys, 0, 0, &nc);
  ASSERT_FALSE(send_msg(*twin, "hello"));
  Bytes replay(4096);
  const ssize_t m = ::recv(rec[1], replay.data(), replay.size(), 0);
  ASSERT_GT(m, 0);
  replay.resize(static_cast<size_t>(m));
  // Both played to another target: the hello opens, the later frame does
  // not (its key holds the first target's nonce).
  const auto reads = target_reads(keys, cat({replay, later}), {5, 10});
  EXPECT_FALSE(reads[0].ec);
  EXPECT_EQ(reads[0].got, "hello");
  EXPECT_EQ(reads[1].ec, kRefused);
  EXPECT_EQ(reads[1].got, "");
}

TEST(SealedStream, WithNoncesAClientSealsNothingAfterItsHelloBeforeTheTargetsNonce) {
  int fds[2];
  pair(fds);
  auto c = SealedStream::client(fds[0], nonce_keys_of(7), 0);
  ASSERT_FALSE(send_msg(*c, "hello"));
  EXPECT_EQ(send_msg(*c, "too soon"), kRefused);
  ::close(fds[1]);
}

TEST(FrameCipher, CountsItsRotations) {
  SealKey key{};
  FrameCipher c(key, true, 2, kSealRotateBytes);
  uint8_t out[64];
  char p[] = "abc";
  iovec iov{p, 3};
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(c.seal(&iov, 1, 3, out));
  EXPECT_EQ(c.frames(), 5u);
  EXPECT_EQ(c.rotations(), 2u);
}

}  // namespace
}  // namespace rpmem::transport::tcp
