// SPDX-License-Identifier: BSD-3-Clause
// Hostile peers: a client that sends rpmemd truncated, oversized,
// out-of-order and garbage frames on the control channel and bad requests on
// a data lane; a stranger on the data port without the session secret; a
// daemon that answers librpmem with malformed replies. Neither side crashes
// or writes outside the pool, the session ends with a log line, and other
// sessions go on.
#include "tests/integration/raw_peer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>

#include "librpmem.h"

namespace rpmem_test {
namespace {

constexpr size_t kPool = 4 * kMiB;
const std::vector<Part> kOnePart{{kPool, "p.part0"}};

proto::Bytes frame(uint16_t type, uint16_t reserved, uint32_t size,
                   const proto::Bytes &payload = {}) {
  proto::Bytes b(8);
  std::memcpy(b.data(), &type, 2);
  std::memcpy(b.data() + 2, &reserved, 2);
  std::memcpy(b.data() + 4, &size, 4);
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

// ---------------------------------------------------------------------------
// A hostile client on rpmemd's control channel.

class HostileClient : public ::testing::Test {
 protected:
  Target target_;
  void SetUp() override { target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n"); }

  // Starts rpmemd, reads its hello, sends `bytes` (then closes our write
  // side if `close_after`), and checks that rpmemd exits by itself without
  // a crash, with a log line containing `log_text`, and that no file of the
  // target changed.
  void expect_clean_end(const proto::Bytes &bytes, bool close_after, const std::string &log_text,
                        const std::string &what) {
    SCOPED_TRACE(what);
    auto before = snapshot(target_.dir());
    RawDaemon d(target_);
    ASSERT_TRUE(d.read_hello());
    d.send(bytes);  // may fail once rpmemd has hung up
    if (close_after) d.shutdown_write();
    auto st = d.wait();
    ASSERT_TRUE(st) << "rpmemd did not end the session";
    EXPECT_TRUE(WIFEXITED(*st)) << describe_status(st);
    auto log = target_.log_text();
    EXPECT_NE(log.find(log_text), std::string::npos) << log;
    EXPECT_EQ(snapshot(target_.dir()), before) << "a file of the target changed";
    ++cases_;
  }
  int cases_ = 0;
};

TEST_F(HostileClient, GarbageFramesEndTheSessionWithALogLine) {
  std::mt19937 rng(1);
  for (int i = 0; i < 8; ++i) {
    proto::Bytes junk(8 + rng() % 200);
    for (auto &b : junk) b = static_cast<uint8_t>(rng());
    junk[2] = 1;  // a non-zero reserved field: never a valid header
    expect_clean_end(junk, false, "control channel: Protocol error",
                     "garbage " + std::to_string(i));
  }
  expect_clean_end(frame(0, 0, 0), false, "Protocol error", "type 0");
  expect_clean_end(frame(99, 0, 4, {1, 2, 3, 4}), false, "Protocol error", "type 99");
}

TEST_F(HostileClient, OversizedFramesAreRefusedBeforeAllocating) {
  expect_clean_end(frame(2, 0, proto::kMaxControlPayload + 1), false, "Protocol error",
                   "64 KiB + 1");
  expect_clean_end(frame(2, 0, 0xffffffffu), false, "Protocol error", "4 GiB - 1");
  expect_clean_end(frame(5, 0, 0x80000000u), false, "Protocol error", "2 GiB");
}

TEST_F(HostileClient, TruncatedFramesEndTheSessionAsADisconnect) {
  auto create = proto::encode(proto::MsgType::kCreate, pool_request("p.set", kPool, 2, false));
  expect_clean_end(proto::Bytes(create.begin(), create.begin() + 3), true, "client disconnected",
                   "header cut");
  expect_clean_end(proto::Bytes(create.begin(), create.begin() + 20), true, "client disconnected",
                   "payload cut");
  expect_clean_end({}, true, "client disconnected", "nothing at all");
}

TEST_F(HostileClient, MessagesOfTheWrongDirectionOrOrderAreRefused) {
  expect_clean_end(proto::encode(proto::Hello{}), false, "unexpected message type 1", "hello");
  proto::PoolResponse resp;
  expect_clean_end(proto::encode(resp), false, "unexpected message type 4", "pool response");
  expect_clean_end(proto::encode(proto::MsgType::kCloseResp, proto::StatusResponse{}), false,
                   "unexpected message type 8", "close response");
  // set_attr and close before create/open: a refusal, not a crash.
  auto before = snapshot(target_.dir());
  RawDaemon d(target_);
  ASSERT_TRUE(d.read_hello());
  ASSERT_TRUE(d.send(proto::encode(proto::SetAttrRequest{})));
  proto::Bytes p;
  auto h = d.read_frame(p);
  ASSERT_TRUE(h);
  ASSERT_EQ(h->type, proto::MsgType::kSetAttrResp);
  EXPECT_EQ(proto::decode_status_response(p)->status, proto::Status::kFatal);
  ASSERT_TRUE(d.send(proto::encode(proto::CloseRequest{proto::kCloseRemove})));
  h = d.read_frame(p);
  ASSERT_TRUE(h);
  ASSERT_EQ(h->type, proto::MsgType::kCloseResp);
  EXPECT_EQ(proto::decode_status_response(p)->status, proto::Status::kFatal);
  auto st = d.wait();
  EXPECT_TRUE(st && WIFEXITED(*st)) << describe_status(st);
  EXPECT_NE(target_.log_text().find("pool not opened"), std::string::npos);
  EXPECT_EQ(snapshot(target_.dir()), before);
}

TEST_F(HostileClient, MalformedPoolRequestsAreRefused) {
  auto req = pool_request("p.set", kPool, 2, false);
  auto good = proto::encode(proto::MsgType::kCreate, req);
  // Name length larger than the payload; reserved fields set; a NUL in the
  // name; a name length of zero; a payload shorter than the fixed part.
  const size_t name_len_at = 8 + 4 + 4 + 8 + 4 + 4 + proto::kPoolAttrWireSize;
  auto longer = good;
  longer[name_len_at] = 0xff;
  longer[name_len_at + 1] = 0x0f;
  expect_clean_end(longer, false, "malformed create request", "name past the payload");
  auto reserved = good;
  reserved[8 + 20] = 4;  // lane_flags (reserved before protocol 1.3): a bit nobody knows
  expect_clean_end(reserved, false, "malformed create request", "unknown lane flag");
  reserved = good;
  reserved[name_len_at + 3] = 1;
  expect_clean_end(reserved, false, "malformed create request", "reserved field");
  auto nul = proto::encode(proto::MsgType::kOpen,
                           pool_request(std::string("p.set\0x", 7), kPool, 2, false));
  expect_clean_end(nul, false, "malformed open request", "NUL in the name");
  auto empty = good;
  empty[name_len_at] = 0;
  empty[name_len_at + 1] = 0;
  expect_clean_end(empty, false, "malformed create request", "empty name");
  expect_clean_end(frame(2, 0, 10, proto::Bytes(10, 0)), false, "malformed create request",
                   "short payload");
  expect_clean_end(frame(5, 0, 3, {1, 2, 3}), false, "malformed set_attr request", "short attr");
  expect_clean_end(frame(7, 0, 4, {0xff, 0, 0, 0}), false, "malformed close request",
                   "close flags");
  EXPECT_EQ(cases_, 8);
}

TEST_F(HostileClient, RandomlyMutatedCreateRequestsNeverCrashTheDaemon) {
  auto good = proto::encode(proto::MsgType::kCreate, pool_request("p.set", kPool, 2, false));
  std::mt19937 rng(7);
  int rounds = 0;
  for (; rounds < 40; ++rounds) {
    auto m = good;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k)
      m[8 + rng() % (m.size() - 8)] = static_cast<uint8_t>(rng());
    RawDaemon d(target_);
    ASSERT_TRUE(d.read_hello());
    d.send(m);
    d.shutdown_write();
    auto st = d.wait();
    ASSERT_TRUE(st) << "round " << rounds;
    EXPECT_TRUE(WIFEXITED(*st)) << "round " << rounds << ": " << describe_status(st);
    // A mutated create may still name p.set and succeed; it must then have
    // made a pool of the configured size, nothing else.
    for (auto &[path, bytes] : snapshot(target_.dir())) {
      EXPECT_TRUE(path == target_.poolset_dir() + "/p.set" ||
                  path == target_.part_path("p.part0") || path == target_.dir() + "/rpmemd.conf")
          << "unexpected file " << path;
      if (path == target_.part_path("p.part0")) {
        EXPECT_EQ(bytes.size(), kPool);
      }
    }
    std::filesystem::remove(target_.part_path("p.part0"));
  }
  EXPECT_EQ(rounds, 40);
}

TEST_F(HostileClient, GarbageAfterCreateLeavesADurableUnlockedPool) {
  RawDaemon d(target_);
  ASSERT_TRUE(d.read_hello());
  auto resp = d.request(proto::MsgType::kCreate, pool_request("p.set", kPool, 1, false));
  ASSERT_TRUE(resp && resp->status == proto::Status::kSuccess);
  // A second create in the same session is refused, the session ends.
  auto again = d.request(proto::MsgType::kCreate, pool_request("p.set", kPool, 1, false));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, proto::Status::kFatal);
  auto st = d.wait();
  EXPECT_TRUE(st && WIFEXITED(*st)) << describe_status(st);
  // The pool is there, unlocked.
  LocalPool local(kPool);
  unsigned nl = 1;
  RPMEMpool *rpp = rpmem_open("127.0.0.1", "p.set", local.data(), kPool, &nl, nullptr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  EXPECT_EQ(rpmem_close(rpp), 0);

  RawDaemon d2(target_);
  ASSERT_TRUE(d2.read_hello());
  auto opened = d2.request(proto::MsgType::kOpen, pool_request("p.set", kPool, 1, false));
  ASSERT_TRUE(opened && opened->status == proto::Status::kSuccess);
  d2.send(frame(0xffff, 0xffff, 0xffffffff));
  st = d2.wait();
  EXPECT_TRUE(st && WIFEXITED(*st)) << describe_status(st);
  rpp = rpmem_open("127.0.0.1", "p.set", local.data(), kPool, &nl, nullptr);
  ASSERT_NE(rpp, nullptr) << "still locked: " << rpmem_errormsg();
  EXPECT_EQ(rpmem_close(rpp), 0);
}

// ---------------------------------------------------------------------------
// A hostile client on a data lane (it knows the secret: it is the client).

class HostileLane : public ::testing::Test {
 protected:
  Target target_;
  const std::vector<Part> parts_{{kPool, "h.part0"}};
  size_t net_ = kPool;

  // Creates pool h.set (with headers) through a raw rpmemd; the response.
  proto::PoolResponse create(RawDaemon &d, uint32_t nlanes) {
    proto::PoolResponse out;
    EXPECT_TRUE(d.read_hello());
    EXPECT_TRUE(
        d.send(proto::encode(proto::MsgType::kCreate, pool_request("h.set", kPool, nlanes, true))));
    proto::Bytes p;
    auto h = d.read_frame(p);
    EXPECT_TRUE(h && h->type == proto::MsgType::kPoolResp);
    if (!h) return out;
    auto r = proto::decode_pool_response(p);
    EXPECT_TRUE(r && r->status == proto::Status::kSuccess);
    return r ? *r : out;
  }

  // Connects lane `lane` of `nlanes`; -1 when refused.
  static int lane(const proto::PoolResponse &r, uint32_t lane, uint32_t nlanes,
                  const proto::Secret *secret = nullptr) {
    int fd = connect_port(r.port);
    if (fd < 0) return -1;
    const proto::Bytes h = lane_hello_bytes(secret ? *secret : r.secret, lane, nlanes);
    uint8_t reply[proto::kLaneHelloReplySize] = {0xff};
    if (!write_all_fd(fd, h.data(), h.size()) || !read_exact_fd(fd, reply, sizeof(reply)) ||
        reply[0] != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  static proto::Bytes request(uint8_t op, uint64_t offset, uint64_t length, size_t payload) {
    proto::Bytes b(proto::kDataRequestSize, 0);
    b[0] = op;
    std::memcpy(b.data() + 8, &offset, 8);
    std::memcpy(b.data() + 16, &length, 8);
    b.insert(b.end(), payload, 0xee);
    return b;
  }
};

TEST_F(HostileLane, BadRequestsEndTheSessionWithoutWritingOutsideThePool) {
  struct Case {
    const char *what;
    proto::Bytes bytes;
    const char *log;
  };
  const uint64_t size = kPool;
  std::vector<Case> cases{
      {"past the end", request(1, size - 8, 16, 16), "range outside the pool"},
      {"length overflow", request(1, 4096, UINT64_MAX, 64), "range outside the pool"},
      {"offset wraps", request(1, UINT64_MAX - 7, 16, 16), "range outside the pool"},
      {"offset = size", request(2, size, 1, 1), "range outside the pool"},
      {"flush past the end", request(3, size, 4096, 64), "range outside the pool"},
      {"read past the end", request(5, size - 4096, 8192, 0), "range outside the pool"},
      {"read overflow", request(5, 8, UINT64_MAX - 4, 0), "range outside the pool"},
      {"into the header", request(1, 0, 64, 64), "write into the pool header"},
      {"header tail", request(1, 4095, 2, 2), "write into the pool header"},
      {"unknown op", request(9, 4096, 8, 8), "malformed data request"},
      {"op zero", request(0, 4096, 8, 0), "malformed data request"},
  };
  // A garbage header: every byte random but a bad op code.
  proto::Bytes junk(proto::kDataRequestSize);
  std::mt19937 rng(3);
  for (auto &b : junk) b = static_cast<uint8_t>(rng());
  junk[0] = 0x77;
  cases.push_back({"garbage", junk, "malformed data request"});

  // Another session, through librpmem, on another pool: must not notice.
  target_.write_poolset("other.set", kOnePart, "OPTION NOHDRS\n");
  LocalPool local(kPool, 9);
  unsigned onl = 2;
  RPMEMpool *other = rpmem_create("127.0.0.1", "other.set", local.data(), kPool, &onl, nullptr);
  ASSERT_NE(other, nullptr) << rpmem_errormsg();

  int tried = 0;
  for (auto &c : cases) {
    SCOPED_TRACE(c.what);
    target_.write_poolset("h.set", parts_);
    {
      RawDaemon d(target_);
      auto r = create(d, 2);
      ASSERT_NE(r.port, 0);
      auto header = read_file(target_.part_path("h.part0"));
      header.resize(4096);
      int fd = lane(r, 0, 2);
      ASSERT_GE(fd, 0);
      int fd1 = lane(r, 1, 2);
      ASSERT_GE(fd1, 0);
      write_all_fd(fd, c.bytes);
      EXPECT_TRUE(peer_closes(fd)) << "the lane stayed open";
      EXPECT_TRUE(peer_closes(fd1)) << "the other lane of the session stayed open";
      auto st = d.wait();
      EXPECT_TRUE(st && WIFEXITED(*st)) << describe_status(st);
      ::close(fd);
      ::close(fd1);
      auto log = target_.log_text();
      EXPECT_NE(log.find(c.log), std::string::npos) << log;
      EXPECT_NE(log.find("a data lane failed"), std::string::npos) << log;
      auto part = read_file(target_.part_path("h.part0"));
      ASSERT_EQ(part.size(), kPool) << "the part file changed size";
      EXPECT_TRUE(std::equal(header.begin(), header.end(), part.begin())) << "header changed";
      // (The header holds random UUIDs; the rest of a new pool is zero.)
      EXPECT_EQ(std::count(part.begin() + 4096, part.end(), 0xee), 0) << "a refused payload landed";
    }
    std::filesystem::remove(target_.part_path("h.part0"));
    std::filesystem::remove(target_.poolset_dir() + "/h.set");
    // The other session goes on.
    local.fill(0, kPool, static_cast<uint8_t>(tried));
    ASSERT_EQ(rpmem_persist(other, 0, kPool, tried % 2, 0), 0) << rpmem_errormsg();
    ++tried;
  }
  EXPECT_EQ(tried, 12);
  auto remote = target_.remote_pool(kOnePart, false);
  EXPECT_TRUE(same_bytes(remote.data(), local.data(), 0, kPool));
  EXPECT_EQ(rpmem_close(other), 0);
}

TEST_F(HostileLane, TruncatedPayloadAndBadHellosDoNotHurtTheSession) {
  target_.write_poolset("h.set", parts_);
  RawDaemon d(target_);
  auto r = create(d, 2);
  ASSERT_NE(r.port, 0);
  int fd0 = lane(r, 0, 2);
  ASSERT_GE(fd0, 0);
  // Refused hellos: lane taken, more lanes than granted, another lane count.
  EXPECT_EQ(lane(r, 0, 2), -1);
  EXPECT_EQ(lane(r, 1, 1000), -1);
  EXPECT_EQ(lane(r, 0, 1), -1);
  // A hello cut short, then closed.
  int cut = connect_port(r.port);
  ASSERT_GE(cut, 0);
  write_all_fd(cut, lane_hello_bytes(r.secret, 1, 2).data(), 20);
  ::close(cut);
  // Lane 1 still connects; a payload cut short only closes that lane.
  int fd1 = lane(r, 1, 2);
  ASSERT_GE(fd1, 0);
  auto req = request(1, 8192, 4096, 100);
  write_all_fd(fd1, req);
  ::close(fd1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // Lane 0 works: a persist of 4 KiB of 0x5a is acknowledged.
  auto ok = request(1, 3 * 4096, 4096, 0);
  ok.insert(ok.end(), 4096, 0x5a);
  ASSERT_TRUE(write_all_fd(fd0, ok));
  uint8_t rep[proto::kDataReplySize];
  ASSERT_TRUE(read_exact_fd(fd0, rep, sizeof(rep)));
  auto dr = proto::decode_data_reply(rep);
  ASSERT_TRUE(dr);
  EXPECT_EQ(dr->status, 0u);
  ASSERT_TRUE(d.send(proto::encode(proto::CloseRequest{0})));
  proto::Bytes p;
  auto h = d.read_frame(p);
  EXPECT_TRUE(h && h->type == proto::MsgType::kCloseResp);
  auto st = d.wait();
  EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << describe_status(st);
  ::close(fd0);
  auto part = read_file(target_.part_path("h.part0"));
  ASSERT_EQ(part.size(), kPool);
  EXPECT_EQ(std::count(part.begin() + 3 * 4096, part.begin() + 4 * 4096, 0x5a), 4096);
  auto log = target_.log_text();
  EXPECT_NE(log.find("lane already connected"), std::string::npos) << log;
  EXPECT_NE(log.find("more lanes than granted"), std::string::npos) << log;
  EXPECT_NE(log.find("inconsistent lane count"), std::string::npos) << log;
}

// ---------------------------------------------------------------------------
// A stranger on the data port of a real session (no secret).

TEST(Stranger, CannotReadOrWriteThePoolNorDisturbTheSession) {
  Target target;
  target.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  LocalPool local(kPool, 4);
  unsigned nl = 2;
  RPMEMpool *rpp = rpmem_create("127.0.0.1", "p.set", local.data(), kPool, &nl, nullptr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg();
  ASSERT_EQ(rpmem_persist(rpp, 0, kPool, 0, 0), 0);
  uint16_t port = data_port_from_log(target.log_text());
  ASSERT_NE(port, 0) << target.log_text();

  std::mt19937 rng(11);
  int attempts = 0;
  std::vector<proto::Bytes> tries;
  tries.push_back({});  // connect and say nothing (closed after the hello timeout... or by us)
  proto::Secret zero{};
  tries.push_back(lane_hello_bytes(zero, 0, 2));
  for (int i = 0; i < 8; ++i) {
    proto::Secret s;
    for (auto &x : s) x = static_cast<uint8_t>(rng());
    auto b = lane_hello_bytes(s, i % 2, 2);
    // Follow the hello with a write of 0xee over the pool and a read.
    uint8_t req[proto::kDataRequestSize];
    proto::encode(proto::DataRequest{proto::DataOp::kPersist, 0, 0, 4096}, req);
    b.insert(b.end(), req, req + sizeof(req));
    b.insert(b.end(), 4096, 0xee);
    proto::encode(proto::DataRequest{proto::DataOp::kRead, 0, 0, kPool}, req);
    b.insert(b.end(), req, req + sizeof(req));
    tries.push_back(b);
  }
  proto::Bytes garbage(48);
  for (auto &x : garbage) x = static_cast<uint8_t>(rng());
  tries.push_back(garbage);
  tries.push_back(proto::Bytes(100000, 0xee));  // oversized
  uint8_t req[proto::kDataRequestSize];         // a request without any hello
  proto::encode(proto::DataRequest{proto::DataOp::kRead, 0, 0, 4096}, req);
  tries.push_back(proto::Bytes(req, req + sizeof(req)));

  for (auto &t : tries) {
    int fd = connect_port(port);
    ASSERT_GE(fd, 0);
    write_all_fd(fd, t);
    // Whatever comes back is at most the 8-byte refusal, never pool bytes.
    uint8_t buf[65536];
    size_t got = 0;
    auto end = Clock::now() + std::chrono::milliseconds(t.empty() ? 100 : 2000);
    while (Clock::now() < end) {
      pollfd pfd{fd, POLLIN, 0};
      if (::poll(&pfd, 1, 20) <= 0) continue;
      ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    EXPECT_LE(got, proto::kLaneHelloReplySize) << "attempt " << attempts;
    ::close(fd);
    ++attempts;
    // The session goes on, on both lanes.
    local.fill(4096 * attempts, 4096, static_cast<uint8_t>(attempts));
    ASSERT_EQ(rpmem_persist(rpp, 4096 * attempts, 4096, attempts % 2, 0), 0) << rpmem_errormsg();
  }
  // Many strangers at once, holding their connections open.
  std::vector<int> crowd;
  for (int i = 0; i < 100; ++i) {
    int fd = connect_port(port);
    if (fd >= 0) crowd.push_back(fd);
  }
  local.fill(0, kMiB, 77);
  ASSERT_EQ(rpmem_persist(rpp, 0, kMiB, 1, 0), 0) << rpmem_errormsg();
  for (int fd : crowd) ::close(fd);
  attempts += static_cast<int>(crowd.size());

  auto remote = target.remote_pool(kOnePart, false);
  EXPECT_TRUE(same_bytes(remote.data(), local.data(), 0, kPool));
  EXPECT_EQ(std::count(remote.begin(), remote.end(), 0xee),
            std::count(local.data(), local.data() + kPool, 0xee));
  EXPECT_EQ(rpmem_close(rpp), 0);
  auto log = target.log_text();
  const char *tls = std::getenv("RPMEM_DATA_TLS");
  const char *seal = std::getenv("RPMEM_DATA_SEAL");
  if (tls && std::string(tls) == "1" && !(seal && std::string(seal) == "0")) {
    // Sealed lanes (ctest -L sealed-lanes): a cleartext stranger's bytes
    // do not authenticate.
    EXPECT_NE(log.find("refused: sealed frame refused"), std::string::npos) << log;
  } else if (tls && std::string(tls) == "1") {
    // TLS lanes (ctest -L tls-lanes): a cleartext stranger fails the
    // handshake before any hello is read.
    EXPECT_NE(log.find("refused: TLS handshake failed"), std::string::npos) << log;
  } else {
    EXPECT_NE(log.find("wrong session secret"), std::string::npos) << log;
    EXPECT_NE(log.find("malformed lane hello"), std::string::npos) << log;
  }
  EXPECT_GE(attempts, 112);
}

// ---------------------------------------------------------------------------
// A hostile daemon: RPMEM_CMD prints malformed replies to librpmem.

class HostileDaemon : public ::testing::Test {
 protected:
  Target target_;
  LocalPool local_{kPool};
  int n_ = 0;

  proto::Bytes hello() {
    proto::Hello h;
    h.transports = proto::transport_bit(proto::TransportKind::kTcp);
    return proto::encode(h);
  }
  proto::PoolResponse good_response() {
    proto::PoolResponse r;
    r.nlanes = 1;
    r.port = 1;  // nobody listens there
    r.transport = proto::TransportKind::kTcp;
    r.remote_size = kPool;
    return r;
  }
  // rpmem_create against a "daemon" that prints `bytes` and then exits or
  // (`stay`) keeps the channel open; the errno, or 0 on success.
  int create_against(const proto::Bytes &bytes, bool stay, Clock::duration *took = nullptr) {
    std::string file = target_.dir() + "/reply" + std::to_string(n_++) + ".bin";
    FILE *f = std::fopen(file.c_str(), "wb");
    if (!bytes.empty()) std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
    // Not `stay`: stdout is closed after the reply, stdin is read to the end
    // (so that the client's request never meets a closed pipe).
    set_env("RPMEM_CMD", "cat " + file + (stay ? "; exec sleep 60" : "; exec cat >/dev/null"));
    unsigned nl = 1;
    auto start = Clock::now();
    RPMEMpool *rpp = rpmem_create("127.0.0.1", "p.set", local_.data(), kPool, &nl, nullptr);
    int err = rpp ? 0 : errno;
    if (took) *took = Clock::now() - start;
    if (rpp) rpmem_close(rpp);
    return err;
  }
  static proto::Bytes cat(proto::Bytes a, const proto::Bytes &b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
};

TEST_F(HostileDaemon, MalformedRepliesFailWithEprotoOrEconnreset) {
  const auto h = hello();
  struct Case {
    const char *what;
    proto::Bytes bytes;
    int err;
  };
  auto resp = proto::encode(good_response());
  auto bad_status = resp;
  bad_status[8] = 200;
  auto too_many_lanes = good_response();
  too_many_lanes.nlanes = 64;
  auto short_resp = resp;
  short_resp.resize(30);
  auto hello_bad_reserved = h;
  hello_bad_reserved[2] = 1;
  proto::Hello h_err;
  h_err.status = 1u << 31;
  proto::Hello h_major;
  h_major.major = 9;
  h_major.transports = proto::transport_bit(proto::TransportKind::kTcp);
  std::vector<Case> cases{
      {"garbage instead of hello", proto::Bytes(64, 0xab), EPROTO},
      {"hello with a bad header", hello_bad_reserved, EPROTO},
      {"hello too short", frame(1, 0, 4, {1, 0, 0, 0}), EPROTO},
      {"hello with a huge status", proto::encode(h_err), EPROTO},
      {"hello of another major", proto::encode(h_major), EPROTONOSUPPORT},
      {"nothing at all", {}, ECONNRESET},
      {"hello then EOF", h, ECONNRESET},
      {"hello then garbage", cat(h, proto::Bytes(64, 0x11)), EPROTO},
      {"hello then an oversized frame", cat(h, frame(4, 0, 0xfffffff0u)), EPROTO},
      {"hello then a cut response", cat(h, proto::Bytes(resp.begin(), resp.begin() + 20)),
       ECONNRESET},
      {"hello then the wrong type",
       cat(h, proto::encode(proto::MsgType::kCloseResp, proto::StatusResponse{})), EPROTO},
      {"hello then a second hello", cat(h, h), EPROTO},
      {"unknown status", cat(h, bad_status), EPROTO},
      {"more lanes than asked", cat(h, proto::encode(too_many_lanes)), EPROTO},
      {"short response",
       cat(h, frame(4, 0, 22, proto::Bytes(short_resp.begin() + 8, short_resp.end()))), EPROTO},
  };
  for (auto &c : cases) {
    SCOPED_TRACE(c.what);
    Clock::duration took{};
    EXPECT_EQ(create_against(c.bytes, false, &took), c.err) << rpmem_errormsg();
    EXPECT_LT(took, std::chrono::seconds(10));
  }
  // A success that names a port nobody listens on: the lanes fail, no hang.
  Clock::duration took{};
  int err = create_against(cat(h, resp), false, &took);
  EXPECT_NE(err, 0);
  EXPECT_GT(err, 0);
  EXPECT_LT(took, std::chrono::seconds(20));
  EXPECT_EQ(zombie_children(), 0);
}

TEST_F(HostileDaemon, SilentOrStuckDaemonTimesOut) {
  set_env("RPMEM_TIMEOUT", "0.2");  // control waits: 6 x 0.2 s
  for (auto bytes : {proto::Bytes{}, hello(), cat(hello(), proto::Bytes(5, 0))}) {
    Clock::duration took{};
    int err = create_against(bytes, true, &took);
    EXPECT_TRUE(err == ECONNRESET || err == ETIMEDOUT) << err << " " << rpmem_errormsg();
    EXPECT_LT(took, std::chrono::seconds(5));
  }
  EXPECT_EQ(zombie_children(), 0);
}

TEST_F(HostileDaemon, RandomlyMutatedResponsesNeverCrashTheClient) {
  auto h = hello();
  auto resp = proto::encode(good_response());
  std::mt19937 rng(5);
  int rounds = 0;
  for (; rounds < 40; ++rounds) {
    auto m = cat(h, resp);
    for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k)
      m[rng() % m.size()] = static_cast<uint8_t>(rng());
    Clock::duration took{};
    int err = create_against(m, false, &took);
    EXPECT_GT(err, 0) << "round " << rounds;  // port 1 never answers
    EXPECT_LT(took, std::chrono::seconds(20)) << "round " << rounds;
  }
  EXPECT_EQ(rounds, 40);
  EXPECT_EQ(zombie_children(), 0);
}

}  // namespace
}  // namespace rpmem_test
