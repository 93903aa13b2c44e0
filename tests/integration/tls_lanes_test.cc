// SPDX-License-Identifier: BSD-3-Clause
// TLS data lanes in ssh mode: the daemon's data-tls modes, the key handed
// over the control channel, and what a TLS data port does with strangers --
// cleartext lanes, a wrong key, a wrong secret, records cut short or
// altered -- checked in the pool's part file, not only in return codes.
#include "tests/integration/harness.h"
#include "tests/integration/raw_peer.h"
#include "tests/integration/tls_peer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "librpmem.h"

namespace rpmem_test {
namespace {

constexpr size_t kPool = 4 * kMiB;

// Sets (or unsets: nullopt) an environment variable for one test and
// restores it.
class EnvVar {
 public:
  EnvVar(const char *name, std::optional<std::string> value) : name_(name) {
    if (const char *v = std::getenv(name)) saved_ = v;
    if (value)
      set_env(name, *value);
    else
      ::unsetenv(name);
  }
  ~EnvVar() {
    if (saved_)
      set_env(name_, *saved_);
    else
      ::unsetenv(name_);
  }

 private:
  const char *name_;
  std::optional<std::string> saved_;
};

struct DataTlsEnv : EnvVar {
  explicit DataTlsEnv(std::optional<std::string> value) : EnvVar("RPMEM_DATA_TLS", value) {}
};

proto::Bytes pattern(size_t n, uint8_t seed) {
  proto::Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7);
  return b;
}

bool part_has(const std::vector<uint8_t> &part, uint64_t offset, const proto::Bytes &b) {
  return part.size() >= offset + b.size() &&
         std::equal(b.begin(), b.end(), part.begin() + static_cast<long>(offset));
}

class TlsLanes : public ::testing::Test {
 protected:
  void SetUp() override { target_.write_poolset("t.set", parts_, "OPTION NOHDRS\n"); }
  // These are TLS lanes' tests: librpmem does not offer to seal.
  EnvVar no_seal_{"RPMEM_DATA_SEAL", "0"};

  // A create of t.set through a raw rpmemd, as a client of protocol
  // 1.`minor` asking for `lane_flags`; the response (status checked by the
  // caller).
  std::optional<proto::PoolResponse> create(RawDaemon &d, uint16_t minor, uint32_t lane_flags) {
    if (!d.read_hello()) return std::nullopt;
    proto::PoolRequest req = pool_request("t.set", kPool, 2, false);
    req.minor = minor;
    req.lane_flags = lane_flags;
    return d.request(proto::MsgType::kCreate, req);
  }

  std::vector<uint8_t> part() const { return read_file(target_.part_path("t.part")); }

  // A raw lane `peer` (TlsPeer or SealedPeer) says hello as lane `lane` of
  // 2 with the session's `secret`: it is admitted, and its persist of 5000
  // bytes at 8192 lands in the part.
  template <class Peer>
  void admitted_and_persists(Peer &peer, const proto::Secret &secret, uint32_t lane) {
    uint32_t reply = 1;
    ASSERT_TRUE(peer.hello(secret, lane, 2, reply));
    EXPECT_EQ(reply, 0u);
    const proto::Bytes bytes = pattern(5000, 11);
    EXPECT_EQ(peer.persist(8192, bytes), 0);
    EXPECT_TRUE(part_has(part(), 8192, bytes));
  }

  // Through librpmem and a daemon that encrypts the lanes (data-tls =
  // require): persists of `sizes` on every lane, a flush and drain, a read
  // across them all (the gaps too); the bytes read and those in the part
  // must be the pool's.
  void write_flush_read(std::initializer_list<size_t> sizes) {
    DataTlsEnv env(std::nullopt);
    set_env("RPMEM_CMD", target_.rpmemd_cmd("--data-tls require"));
    LocalPool local(kPool, 3);
    unsigned nlanes = 4;
    RPMEMpool *rpp =
        rpmem_create("127.0.0.1", "t.set", local.data(), local.size(), &nlanes, nullptr);
    ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
    std::vector<std::pair<size_t, size_t>> ranges;
    size_t off = 0;
    for (size_t len : sizes) {
      ASSERT_EQ(rpmem_persist(rpp, off, len, static_cast<unsigned>(ranges.size()) % nlanes, 0), 0)
          << len;
      ranges.emplace_back(off, len);
      off += len + 8;
    }
    local.fill(3 * kMiB, 4096, 0x77);
    ASSERT_EQ(rpmem_flush(rpp, 3 * kMiB, 4096, 1, 0), 0);
    ASSERT_EQ(rpmem_drain(rpp, 1, 0), 0);
    std::vector<uint8_t> back(off);  // reads of more than a record, gaps included
    ASSERT_EQ(rpmem_read(rpp, back.data(), 0, back.size(), 2), 0);
    for (auto [o, len] : ranges) EXPECT_TRUE(same_bytes(back.data(), local.data(), o, len));
    EXPECT_EQ(back[1], 0);  // a gap: never written
    ASSERT_EQ(rpmem_close(rpp), 0);
    const auto file = part();
    ASSERT_EQ(file.size(), kPool);
    for (auto [o, len] : ranges) EXPECT_TRUE(same_bytes(file.data(), local.data(), o, len));
    EXPECT_TRUE(same_bytes(file.data(), local.data(), 3 * kMiB, 4096));
  }

  Target target_;
  const std::vector<Part> parts_{{kPool, "t.part"}};
};

TEST_F(TlsLanes, AllowGivesTlsOnlyToAClientThatAsks) {
  {
    RawDaemon d(target_);
    auto r = create(d, proto::kMinor, 0);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, proto::Status::kSuccess);
    EXPECT_TRUE(r->extended);  // a client of minor 3 reads the extension
    EXPECT_EQ(r->lane_flags, 0u);
    EXPECT_TRUE(r->lane_psk.empty());
  }
  for (uint16_t older : {uint16_t{1}, proto::kMinorStaged}) {
    RawDaemon d(target_);
    auto r = create(d, older, 0);  // an older client: no extension at all
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, proto::Status::kSuccess);
    EXPECT_FALSE(r->extended) << older;
  }
  RawDaemon d(target_);
  auto r = create(d, proto::kMinor, proto::kLaneTls);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, proto::Status::kSuccess);
  EXPECT_EQ(r->lane_flags, proto::kLaneTls);
  EXPECT_EQ(r->lane_psk.size(), 32u);
  EXPECT_NE(r->lane_psk, proto::Bytes(32, 0));
  EXPECT_NE(target_.log_text().find("data lanes: TLS (a pre-shared key of the session)"),
            std::string::npos);
}

TEST_F(TlsLanes, RequireRefusesAClientThatCannotAndYesLeavesItCleartext) {
  for (uint16_t older : {uint16_t{1}, proto::kMinorStaged}) {
    RawDaemon d(target_, {"--data-tls", "require"});
    auto r = create(d, older, 0);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, proto::Status::kProvNoSup);
    EXPECT_FALSE(r->extended);  // what an older client can decode
    const std::string line =
        "data-tls = require: the client (protocol 1." + std::to_string(older) + ") cannot run";
    EXPECT_NE(target_.log_text().find(line), std::string::npos) << target_.log_text();
  }
  {
    RawDaemon d(target_, {"--data-tls", "require"});
    auto r = create(d, proto::kMinor, 0);  // did not ask, can: gets TLS
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, proto::Status::kSuccess);
    EXPECT_EQ(r->lane_flags, proto::kLaneTls);
    EXPECT_EQ(r->lane_psk.size(), 32u);
  }
  RawDaemon d(target_, {"--data-tls", "yes"});
  auto r = create(d, 1, 0);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, proto::Status::kSuccess);
  EXPECT_FALSE(r->extended);
}

TEST_F(TlsLanes, NoRefusesAClientThatAsks) {
  RawDaemon d(target_, {"--data-tls", "no"});
  auto r = create(d, proto::kMinor, proto::kLaneTls);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, proto::Status::kProvNoSup);
  EXPECT_TRUE(r->lane_psk.empty());
  // And through librpmem: RPMEM_DATA_TLS=1 is never served cleartext.
  DataTlsEnv env("1");
  set_env("RPMEM_CMD", target_.rpmemd_cmd("--data-tls no"));
  LocalPool local(kPool);
  unsigned nlanes = 2;
  errno = 0;
  RPMEMpool *rpp = rpmem_create("127.0.0.1", "t.set", local.data(), local.size(), &nlanes, nullptr);
  EXPECT_EQ(rpp, nullptr);
  EXPECT_EQ(errno, EMEDIUMTYPE);
  if (rpp) rpmem_close(rpp);
}

TEST_F(TlsLanes, LibrpmemWritesFlushesAndReadsThroughTlsLanes) {
  if (verbs_only()) GTEST_SKIP() << "TLS lanes are tcp lanes, and tcp is disabled";
  write_flush_read({1, 8, 64, 16383, 16384, 16385, 100000, 1 << 20});  // around a record
  const std::string log = target_.log_text();
  EXPECT_NE(log.find("data lanes: TLS (a pre-shared key of the session)"), std::string::npos);
  EXPECT_NE(log.find("of 4 connected from 127.0.0.1"), std::string::npos);
  EXPECT_NE(log.find("(TLS)"), std::string::npos);
}

TEST_F(TlsLanes, CleartextLanesWrongKeysAndWrongSecretsAreRefused) {
  RawDaemon d(target_);
  auto r = create(d, proto::kMinor, proto::kLaneTls);
  ASSERT_TRUE(r && r->status == proto::Status::kSuccess);
  // A cleartext lane hello with the right secret: no TLS, no lane.
  int clear = connect_port(r->port);
  ASSERT_GE(clear, 0);
  proto::LaneHello hello;
  hello.proof = r->secret;
  hello.lane = 0;
  hello.nlanes = 2;
  uint8_t hb[proto::kLaneHelloSize];
  proto::encode(hello, hb);
  ASSERT_TRUE(write_all_fd(clear, hb, sizeof(hb)));
  uint8_t answer[proto::kLaneHelloReplySize] = {1};
  // Whatever comes back (a TLS alert) is not an admission, and the
  // connection ends.
  if (read_exact_fd(clear, answer, sizeof(answer), 3000)) {
    EXPECT_NE(proto::Bytes(answer, answer + 8), proto::Bytes(8, 0));
  }
  EXPECT_TRUE(peer_closes(clear));
  ::close(clear);
  // TLS with another key: the handshake fails.
  proto::Bytes wrong = r->lane_psk;
  wrong[0] ^= 1;
  {
    TlsPeer peer(r->port, psk_client_context(wrong));
    EXPECT_FALSE(peer.handshaken());
  }
  // The right key with a wrong secret: refused inside TLS.
  {
    TlsPeer peer(r->port, psk_client_context(r->lane_psk));
    ASSERT_TRUE(peer.handshaken()) << peer.why();
    proto::Secret bad = r->secret;
    bad[31] ^= 0x80;
    uint32_t reply = 0;
    ASSERT_TRUE(peer.hello(bad, 0, 2, reply));
    EXPECT_EQ(reply, static_cast<uint32_t>(EACCES));
  }
  // The right key and secret: admitted, and its persist lands.
  TlsPeer peer(r->port, psk_client_context(r->lane_psk));
  ASSERT_TRUE(peer.handshaken()) << peer.why();
  ASSERT_NO_FATAL_FAILURE(admitted_and_persists(peer, r->secret, 0));
  const std::string log = target_.log_text();
  EXPECT_TRUE(target_.log_shows("refused: TLS handshake failed")) << log;
  EXPECT_NE(log.find("lane 0 of 2 connected from 127.0.0.1"), std::string::npos) << log;
}

TEST_F(TlsLanes, AlteredRecordsAreRefusedAndWriteNothing) {
  RawDaemon d(target_);
  auto r = create(d, proto::kMinor, proto::kLaneTls);
  ASSERT_TRUE(r && r->status == proto::Status::kSuccess);
  TlsPeer peer(r->port, psk_client_context(r->lane_psk));
  ASSERT_TRUE(peer.handshaken()) << peer.why();
  uint32_t reply = 1;
  ASSERT_TRUE(peer.hello(r->secret, 0, 2, reply));
  ASSERT_EQ(reply, 0u);
  // A persist of 0xee, sealed, one ciphertext byte flipped on the way: what
  // an attacker on the path can do to a record. It must not land.
  const proto::Bytes request = persist_request_bytes(65536, proto::Bytes(4096, 0xee));
  proto::Bytes sealed = peer.seal(request);
  ASSERT_GT(sealed.size(), request.size());
  sealed[sealed.size() / 2] ^= 0x01;
  ASSERT_TRUE(write_all_fd(peer.fd(), sealed.data(), sealed.size()));
  EXPECT_TRUE(peer_closes(peer.fd()));
  const auto file = part();
  ASSERT_EQ(file.size(), kPool);
  EXPECT_FALSE(part_has(file, 65536, proto::Bytes(16, 0xee)));
  EXPECT_TRUE(part_has(file, 65536, proto::Bytes(4096, 0)));
  // The session goes on: lane 1 still connects and writes.
  TlsPeer other(r->port, psk_client_context(r->lane_psk));
  ASSERT_TRUE(other.handshaken()) << other.why();
  ASSERT_TRUE(other.hello(r->secret, 1, 2, reply));
  EXPECT_EQ(reply, 0u);
  EXPECT_EQ(other.persist(4096, pattern(64, 5)), 0);
  EXPECT_TRUE(part_has(part(), 4096, pattern(64, 5)));
}

TEST_F(TlsLanes, ARecordCutShortWritesNothingAndGarbageInsideEndsTheSession) {
  RawDaemon d(target_);
  auto r = create(d, proto::kMinor, proto::kLaneTls);
  ASSERT_TRUE(r && r->status == proto::Status::kSuccess);
  {
    TlsPeer peer(r->port, psk_client_context(r->lane_psk));
    ASSERT_TRUE(peer.handshaken()) << peer.why();
    uint32_t reply = 1;
    ASSERT_TRUE(peer.hello(r->secret, 0, 2, reply));
    ASSERT_EQ(reply, 0u);
    proto::Bytes sealed = peer.seal(persist_request_bytes(131072, proto::Bytes(8000, 0xcd)));
    // All of the record but its last 20 bytes (the tag and some payload),
    // then the connection ends.
    ASSERT_TRUE(write_all_fd(peer.fd(), sealed.data(), sealed.size() - 20));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(part_has(part(), 131072, proto::Bytes(8, 0xcd)));
  // Lane 1, admitted: a well-sealed request that is garbage ends the
  // session, as on a cleartext lane.
  TlsPeer peer(r->port, psk_client_context(r->lane_psk));
  ASSERT_TRUE(peer.handshaken()) << peer.why();
  uint32_t reply = 1;
  ASSERT_TRUE(peer.hello(r->secret, 1, 2, reply));
  ASSERT_EQ(reply, 0u);
  uint8_t junk[proto::kDataRequestSize];
  std::memset(junk, 0x77, sizeof(junk));
  ASSERT_TRUE(peer.send(junk, sizeof(junk)));
  EXPECT_TRUE(peer_closes(peer.fd()));
  auto st = d.wait();
  ASSERT_TRUE(st);
  EXPECT_EQ(describe_status(st), "exit 255");
  EXPECT_NE(target_.log_text().find("malformed data request"), std::string::npos);
}

TEST_F(TlsLanes, StrangersInTheirHandshakeAreBoundedByTheHelloDeadline) {
  RawDaemon d(target_);
  auto r = create(d, proto::kMinor, proto::kLaneTls);
  ASSERT_TRUE(r && r->status == proto::Status::kSuccess);
  // A connection that sends half a ClientHello and waits: closed by the
  // hello deadline; the lanes that follow are admitted.
  int slow = connect_port(r->port);
  ASSERT_GE(slow, 0);
  const uint8_t partial[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00};
  ASSERT_TRUE(write_all_fd(slow, partial, sizeof(partial)));
  TlsPeer peer(r->port, psk_client_context(r->lane_psk));
  ASSERT_TRUE(peer.handshaken()) << peer.why();
  uint32_t reply = 1;
  ASSERT_TRUE(peer.hello(r->secret, 0, 2, reply));
  EXPECT_EQ(reply, 0u);
  EXPECT_TRUE(peer_closes(slow, 15000));
  ::close(slow);
  EXPECT_TRUE(target_.log_shows("no lane hello in time")) << target_.log_text();
}

// Sealed lanes: the same daemon, a client that offers to seal.
class SealedLanes : public TlsLanes {
 protected:
  EnvVar seal_{"RPMEM_DATA_SEAL", std::nullopt};  // librpmem's default: it offers
};

TEST_F(SealedLanes, AClientThatCanSealGetsSealedLanesUnlessTheDaemonSaysNo) {
  {
    RawDaemon d(target_);
    auto r = create(d, proto::kMinor, proto::kLaneTls | proto::kLaneSealed);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, proto::Status::kSuccess);
    EXPECT_EQ(r->lane_flags, proto::kLaneTls | proto::kLaneSealed);
    EXPECT_EQ(r->lane_psk.size(), 32u);  // ssh mode: the master key, over ssh
  }
  {
    RawDaemon d(target_);  // offers to seal, asks for no encryption: cleartext
    auto r = create(d, proto::kMinor, proto::kLaneSealed);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->lane_flags, 0u);
    EXPECT_TRUE(r->lane_psk.empty());
  }
  {
    RawDaemon d(target_, {"--data-seal", "no"});
    auto r = create(d, proto::kMinor, proto::kLaneTls | proto::kLaneSealed);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->lane_flags, proto::kLaneTls);
  }
  RawDaemon d(target_);  // a client of 1.4 cannot seal: the bit is unknown to it
  auto r = create(d, proto::kMinorBounded, proto::kLaneTls | proto::kLaneSealed);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->lane_flags, proto::kLaneTls);
}

TEST_F(SealedLanes, LibrpmemWritesFlushesAndReadsThroughSealedLanes) {
  if (verbs_only()) GTEST_SKIP() << "sealed lanes are tcp lanes, and tcp is disabled";
  write_flush_read({1, 8, 64, 65535, 65536, 65537, 100000, 1 << 20});  // around a frame
  const std::string log = target_.log_text();
  EXPECT_NE(log.find("lane 3 of 4 connected from 127.0.0.1:"), std::string::npos) << log;
  EXPECT_NE(log.find("data lanes: sealed, AES-128-GCM"), std::string::npos) << log;
  int sealed_lanes = 0;
  for (size_t at = log.find(" (sealed)\n"); at != std::string::npos;
       at = log.find(" (sealed)\n", at + 1))
    ++sealed_lanes;
  EXPECT_EQ(sealed_lanes, 4) << log;
  EXPECT_EQ(log.find("(TLS)"), std::string::npos) << log;
}

TEST_F(SealedLanes, WrongKeysCleartextAndAlteredFramesAreRefusedAndWriteNothing) {
  RawDaemon d(target_);
  auto r = create(d, proto::kMinor, proto::kLaneTls | proto::kLaneSealed);
  ASSERT_TRUE(r && r->status == proto::Status::kSuccess);
  ASSERT_EQ(r->lane_psk.size(), 32u);
  // A cleartext lane hello with the right secret: not a lane.
  {
    int clear = connect_port(r->port);
    ASSERT_GE(clear, 0);
    const proto::Bytes h = lane_hello_bytes(r->secret, 0, 2);
    ASSERT_TRUE(write_all_fd(clear, h.data(), h.size()));
    EXPECT_TRUE(peer_closes(clear));
    ::close(clear);
  }
  // Another key, the right secret: refused.
  {
    proto::Bytes wrong = r->lane_psk;
    wrong[0] ^= 1;
    SealedPeer peer(r->port, wrong, 0);
    uint32_t reply = 1;
    EXPECT_FALSE(peer.hello(r->secret, 0, 2, reply));
    EXPECT_TRUE(peer_closes(peer.fd()));
  }
  // Lane 1's key with a hello for lane 0: refused.
  {
    SealedPeer peer(r->port, r->lane_psk, 1);
    uint32_t reply = 0;
    if (peer.hello(r->secret, 0, 2, reply)) {
      EXPECT_NE(reply, 0u);
    }
  }
  // The right key and secret: admitted; a persist with one ciphertext
  // byte flipped on the way does not land and ends the lane.
  {
    SealedPeer peer(r->port, r->lane_psk, 0);
    uint32_t reply = 1;
    ASSERT_TRUE(peer.hello(r->secret, 0, 2, reply));
    ASSERT_EQ(reply, 0u);
    proto::Bytes sealed = peer.seal(persist_request_bytes(65536, proto::Bytes(4096, 0xee)));
    ASSERT_GT(sealed.size(), 4096u);
    sealed[sealed.size() / 2] ^= 0x01;
    ASSERT_TRUE(write_all_fd(peer.fd(), sealed.data(), sealed.size()));
    EXPECT_TRUE(peer_closes(peer.fd()));
  }
  auto file = part();
  EXPECT_FALSE(part_has(file, 65536, proto::Bytes(16, 0xee)));
  EXPECT_TRUE(part_has(file, 65536, proto::Bytes(4096, 0)));
  // The session goes on: lane 1 connects, and its persist lands.
  SealedPeer peer(r->port, r->lane_psk, 1);
  ASSERT_NO_FATAL_FAILURE(admitted_and_persists(peer, r->secret, 1));
  // Lane 1's connection replayed on a new one (the same key and nonces
  // make the same bytes): the lane is taken, nothing of it is served.
  {
    SealedPeer replay(r->port, r->lane_psk, 1);
    uint32_t reply = 0;
    if (replay.hello(r->secret, 1, 2, reply)) {
      EXPECT_NE(reply, 0u);
    }
  }
  const std::string log = target_.log_text();
  EXPECT_TRUE(target_.log_shows("refused: sealed frame refused")) << log;
  EXPECT_TRUE(target_.log_shows("a frame did not authenticate")) << log;
  EXPECT_NE(log.find("lane 1 of 2 connected from 127.0.0.1:"), std::string::npos) << log;
  EXPECT_NE(log.find(" (sealed)\n"), std::string::npos) << log;
  EXPECT_TRUE(target_.log_shows("lane hello sealed with another lane's key")) << log;
  EXPECT_TRUE(target_.log_shows("lane already connected")) << log;
}

// A lane comes back at a higher epoch under keys of its own: it is served on
// its new connection, the old one is closed, and a recording of either
// connection played again on a new one (the same key and nonces make the
// same bytes) is refused, as is an epoch the lane has had.
TEST_F(SealedLanes, ALaneThatComesBackIsServedAndNoRecordingOfItIsAdmitted) {
  RawDaemon d(target_);
  auto r = create(d, proto::kMinor, proto::kLaneTls | proto::kLaneSealed);
  ASSERT_TRUE(r && r->status == proto::Status::kSuccess);
  SealedPeer first(r->port, r->lane_psk, 1);
  ASSERT_NO_FATAL_FAILURE(admitted_and_persists(first, r->secret, 1));
  SealedPeer back(r->port, r->lane_psk, 1, 3);
  uint32_t reply = 1;
  ASSERT_TRUE(back.hello(r->secret, 1, 2, reply));
  ASSERT_EQ(reply, 0u);
  const proto::Bytes bytes = pattern(3000, 5);
  EXPECT_EQ(back.persist(20000, bytes), 0);
  EXPECT_TRUE(part_has(part(), 20000, bytes));
  EXPECT_TRUE(peer_closes(first.fd())) << "the old connection of a lane that came back is served";
  for (uint16_t epoch : {uint16_t{0}, uint16_t{2}, uint16_t{3}}) {
    SealedPeer replay(r->port, r->lane_psk, 1, epoch);
    reply = 0;
    if (replay.hello(r->secret, 1, 2, reply)) {
      EXPECT_NE(reply, 0u) << "epoch " << epoch;
    }
  }
  // The lane still serves on its newest connection.
  EXPECT_EQ(back.persist(30000, bytes), 0);
  EXPECT_TRUE(part_has(part(), 30000, bytes));
  const std::string log = target_.log_text();
  EXPECT_TRUE(target_.log_shows("lane 1 of 2 came back from 127.0.0.1:")) << log;
  EXPECT_NE(log.find(" (sealed), epoch 3"), std::string::npos) << log;
  EXPECT_TRUE(target_.log_shows("lane connection of a past epoch (replayed or late)")) << log;
  EXPECT_TRUE(target_.log_shows("lane already connected")) << log;
}

// A recorded sealed connection played again, twice, while its lane is
// served: each answer of the target is checked under the key it was
// sealed with (the test derives the keys as both ends do, from the master
// and the nonces on the wire) and its frame number. No two frames share a
// key and nonce, and each replay's answer opens as a refusal: nothing
// links it to the first connection's "yes" (had they shared a key and
// nonce, their ciphertexts would differ by exactly 0 ^ EACCES).
TEST_F(SealedLanes, AReplayedHelloIsAnsweredUnderAKeyAndNonceNoOtherFrameHad) {
  RawDaemon d(target_);
  auto r = create(d, proto::kMinor, proto::kLaneTls | proto::kLaneSealed);
  ASSERT_TRUE(r && r->status == proto::Status::kSuccess);
  SealedPeer lane(r->port, r->lane_psk, 0);
  ASSERT_NO_FATAL_FAILURE(admitted_and_persists(lane, r->secret, 0));  // frames 0 and 1
  const proto::Bytes recorded = lane.recorded_hello();
  ASSERT_EQ(recorded.size(), tcp::kSealedLanePrefix + tcp::kSealNonceSize + tcp::kSealedHeader +
                                 proto::kLaneHelloSize + tcp::kSealedTag);
  const tcp::SealNonce nc = lane.client_nonce();
  auto key_of = [&](const tcp::SealNonce &nt) {
    tcp::SealKey k{};
    EXPECT_TRUE(
        tcp::derive_lane_key(lane.keys().master, 0, tcp::SealDirection::kToClient, k, 0, &nc, &nt));
    return k;
  };
  std::set<std::pair<tcp::SealKey, uint64_t>> seen = {{key_of(lane.target_nonce()), 0},
                                                      {key_of(lane.target_nonce()), 1}};
  for (int replay = 0; replay < 2; ++replay) {
    const int fd = connect_port(r->port);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(write_all_fd(fd, recorded));
    proto::Bytes answer(tcp::kSealNonceSize + tcp::kSealedHeader + proto::kLaneHelloReplySize +
                        tcp::kSealedTag);
    ASSERT_TRUE(read_exact_fd(fd, answer.data(), answer.size())) << "replay " << replay;
    EXPECT_TRUE(peer_closes(fd));
    ::close(fd);
    tcp::SealNonce nt;
    std::copy_n(answer.begin(), nt.size(), nt.begin());
    const tcp::SealKey k = key_of(nt);
    EXPECT_TRUE(seen.insert({k, 0}).second)
        << "replay " << replay << ": its answer under a key and nonce another frame had";
    tcp::FrameCipher open(k, false);
    proto::Bytes frame(answer.begin() + tcp::kSealNonceSize, answer.end());
    ASSERT_TRUE(open.open(frame.data(), frame.size())) << "replay " << replay;
    uint8_t reply[proto::kLaneHelloReplySize];
    std::copy_n(frame.begin() + tcp::kSealedHeader, sizeof(reply), reply);
    EXPECT_EQ(proto::decode_lane_hello_reply(reply), static_cast<uint32_t>(EACCES));
  }
  // The lane itself goes on.
  const proto::Bytes bytes = pattern(2000, 21);
  EXPECT_EQ(lane.persist(40000, bytes), 0);
  EXPECT_TRUE(part_has(part(), 40000, bytes));
  EXPECT_TRUE(target_.log_shows("lane already connected")) << target_.log_text();
}

// A client of protocol 1.8 keys its sealed lanes without nonces: a replay
// of its connection reproduces the keys that sealed the target's first
// answer, so the target closes it without a word rather than seal a
// refusal under them.
TEST_F(SealedLanes, AReplayedHelloOfAnOldClientIsClosedUnanswered) {
  RawDaemon d(target_);
  auto r = create(d, proto::kMinorVerbsResume, proto::kLaneTls | proto::kLaneSealed);
  ASSERT_TRUE(r && r->status == proto::Status::kSuccess);
  SealedPeer lane(r->port, r->lane_psk, 1, 0, false);
  const proto::Bytes h = lane_hello_bytes(r->secret, 1, 2, 0, false);
  uint8_t ok[proto::kLaneHelloReplySize];
  ASSERT_TRUE(lane.send(h.data(), h.size()) && lane.recv(ok, sizeof(ok)));
  ASSERT_EQ(proto::decode_lane_hello_reply(ok), 0u);
  const proto::Bytes recorded = lane.recorded_hello();
  const int fd = connect_port(r->port);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(write_all_fd(fd, recorded));
  uint8_t any = 0;
  EXPECT_FALSE(read_exact_fd(fd, &any, 1, 3000)) << "the target answered a replay";
  ::close(fd);
  EXPECT_TRUE(target_.log_shows("lane already connected")) << target_.log_text();
  const proto::Bytes bytes = pattern(1000, 3);
  EXPECT_EQ(lane.persist(50000, bytes), 0);
  EXPECT_TRUE(part_has(part(), 50000, bytes));
}

// The same over TLS lanes: a fresh handshake each time, and the epoch in
// the hello decides.
TEST_F(TlsLanes, ALaneThatComesBackIsServedAndAnEarlierEpochIsRefused) {
  RawDaemon d(target_);
  auto r = create(d, proto::kMinor, proto::kLaneTls);
  ASSERT_TRUE(r && r->status == proto::Status::kSuccess);
  TlsPeer first(r->port, psk_client_context(r->lane_psk));
  ASSERT_TRUE(first.handshaken()) << first.why();
  ASSERT_NO_FATAL_FAILURE(admitted_and_persists(first, r->secret, 0));
  TlsPeer back(r->port, psk_client_context(r->lane_psk));
  ASSERT_TRUE(back.handshaken()) << back.why();
  uint32_t reply = 1;
  ASSERT_TRUE(back.hello(r->secret, 0, 2, reply, 1));
  ASSERT_EQ(reply, 0u);
  const proto::Bytes bytes = pattern(3000, 9);
  EXPECT_EQ(back.persist(20000, bytes), 0);
  EXPECT_TRUE(part_has(part(), 20000, bytes));
  EXPECT_TRUE(peer_closes(first.fd()));
  for (uint16_t epoch : {uint16_t{0}, uint16_t{1}}) {
    TlsPeer late(r->port, psk_client_context(r->lane_psk));
    ASSERT_TRUE(late.handshaken()) << late.why();
    reply = 0;
    if (late.hello(r->secret, 0, 2, reply, epoch)) {
      EXPECT_NE(reply, 0u) << "epoch " << epoch;
    }
  }
  EXPECT_EQ(back.persist(30000, bytes), 0);
  EXPECT_TRUE(part_has(part(), 30000, bytes));
  EXPECT_TRUE(target_.log_shows("lane 0 of 2 came back from 127.0.0.1:")) << target_.log_text();
}

}  // namespace
}  // namespace rpmem_test
