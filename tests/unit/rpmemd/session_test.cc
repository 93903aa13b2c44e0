// SPDX-License-Identifier: BSD-3-Clause
// Session against a scripted control stream: the test plays the client by
// handing the session whole frames and reads what it answers. The pool
// store is the real one, on a temporary directory; the target is the real
// tcp one on the loopback address, or a fake transport that records what
// the session asks of it.
#include "rpmemd/session.h"

#include "common/log.h"
#include "common/proto.h"

#include <gtest/gtest.h>

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

namespace rpmemd {
namespace {

namespace fs = std::filesystem;
using proto::MsgType;
using proto::Status;
using proto::TransportKind;
using rpmem::transport::Target;
using rpmem::transport::TargetParams;
using rpmem::transport::TargetPool;

constexpr uint64_t kPoolSize = 8 << 20;

// Frames in, frames out. Past the last scripted frame the client has gone
// (ECONNRESET); a readable wake-up descriptor interrupts first (EINTR).
class ScriptedControl final : public ControlStream {
 public:
  void send(proto::Bytes frame) { in_.push_back(std::move(frame)); }
  std::error_code read_frame(proto::FrameHeader &hdr, proto::Bytes &payload, int &woken) override {
    for (int fd : wake_) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 0) == 1) {
        woken = fd;
        return std::make_error_code(std::errc::interrupted);
      }
    }
    if (in_.empty()) return std::make_error_code(std::errc::connection_reset);
    proto::Bytes f = std::move(in_.front());
    in_.pop_front();
    auto h = proto::decode_frame_header({f.data(), proto::kFrameHeaderSize});
    if (!h) return std::make_error_code(std::errc::protocol_error);
    hdr = *h;
    payload.assign(f.begin() + proto::kFrameHeaderSize, f.end());
    return {};
  }
  std::error_code write_all(const proto::Bytes &bytes) override {
    out_.push_back(bytes);
    return {};
  }
  void add_wake_fd(int fd) override { wake_.push_back(fd); }

  // The answers, as (type, payload).
  std::vector<std::pair<MsgType, proto::Bytes>> answers() const {
    std::vector<std::pair<MsgType, proto::Bytes>> a;
    for (const auto &f : out_) {
      auto h = proto::decode_frame_header({f.data(), proto::kFrameHeaderSize});
      EXPECT_TRUE(h);
      if (h) a.emplace_back(h->type, proto::Bytes(f.begin() + proto::kFrameHeaderSize, f.end()));
    }
    return a;
  }

 private:
  std::deque<proto::Bytes> in_;
  std::vector<proto::Bytes> out_;
  std::vector<int> wake_;
};

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The daemon's lines on stderr, for a failure's story.
    rpmem::log::configure(rpmem::log::Level::kNotice, rpmem::log::Sink::kStderr, {}, "rpmemd");
    char tmpl[] = "/tmp/rpmem-session-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/p.set") << "PMEMPOOLSET\nOPTION NOHDRS\n"
                                   << kPoolSize << " " << dir_ << "/p.part\n";
    params_.transports = proto::transport_bit(proto::TransportKind::kTcp);
    params_.target.listen_address = "127.0.0.1";
    params_.max_lanes = 4;
  }
  void TearDown() override { fs::remove_all(dir_); }

  static proto::Bytes create(unsigned nlanes, uint16_t major = proto::kMajor) {
    proto::PoolRequest r;
    r.major = major;
    r.nlanes = nlanes;
    r.pool_size = kPoolSize;
    r.transports = proto::transport_bit(proto::TransportKind::kTcp);
    r.pool_set = "p.set";
    return proto::encode(MsgType::kCreate, r);
  }
  static proto::Bytes close() { return proto::encode(proto::CloseRequest{0}); }

  SessionEnd run(int signal_fd = -1) {
    PoolStore store(dir_);
    Session session(store, io_, params_, signal_fd);
    return session.run();
  }
  proto::PoolResponse pool_response(size_t i = 0) {
    auto a = io_.answers();
    EXPECT_GT(a.size(), i);
    if (a.size() <= i) return {};
    EXPECT_EQ(a[i].first, MsgType::kPoolResp);
    auto r = proto::decode_pool_response(a[i].second);
    EXPECT_TRUE(r);
    return r ? *r : proto::PoolResponse{};
  }
  bool part_exists() const { return fs::exists(dir_ + "/p.part"); }

  std::string dir_;
  SessionParams params_;
  ScriptedControl io_;
};

TEST_F(SessionTest, CreateGrantsAtMostMaxLanesAndCloseAnswers) {
  io_.send(create(10));
  io_.send(close());
  EXPECT_EQ(run(), SessionEnd::kClosed);
  auto r = pool_response();
  EXPECT_EQ(r.status, Status::kSuccess);
  EXPECT_EQ(r.nlanes, 4u) << "max_lanes caps what the client asks";
  EXPECT_NE(r.port, 0);
  EXPECT_EQ(r.transport, proto::TransportKind::kTcp);
  EXPECT_EQ(r.remote_size, kPoolSize);
  auto a = io_.answers();
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[1].first, MsgType::kCloseResp);
  auto s = proto::decode_status_response(a[1].second);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->status, Status::kSuccess);
  EXPECT_TRUE(part_exists());
  EXPECT_EQ(fs::file_size(dir_ + "/p.part"), kPoolSize);
}

TEST_F(SessionTest, ZeroLanesAndAnotherMajorAreRefusedWithTheirStatus) {
  io_.send(create(0));
  EXPECT_EQ(run(), SessionEnd::kRequestFailed);
  EXPECT_EQ(pool_response().status, Status::kBadNlanes);
  io_ = ScriptedControl();
  io_.send(create(2, proto::kMajor + 1));
  EXPECT_EQ(run(), SessionEnd::kRequestFailed);
  EXPECT_EQ(pool_response().status, Status::kBadProto);
  EXPECT_FALSE(part_exists());
}

TEST_F(SessionTest, ACertificatesSessionsShareTheirLanes) {
  params_.client_lanes = std::make_shared<std::atomic<long>>(9);  // its other sessions hold 9
  params_.max_client_lanes = 10;
  io_.send(create(4));
  io_.send(close());
  EXPECT_EQ(run(), SessionEnd::kClosed);
  EXPECT_EQ(pool_response().nlanes, 1u) << "the one lane the certificate has left";
  EXPECT_EQ(params_.client_lanes->load(), 9) << "the ended session gave its lane back";

  params_.client_lanes->store(10);  // none left
  io_ = ScriptedControl();
  io_.send(create(4));
  EXPECT_EQ(run(), SessionEnd::kRequestFailed);
  EXPECT_EQ(pool_response().status, Status::kBadNlanes);
  EXPECT_EQ(params_.client_lanes->load(), 10);
}

TEST_F(SessionTest, ASecondPoolInOneSessionIsFatal) {
  io_.send(create(2));
  io_.send(create(2));
  EXPECT_EQ(run(), SessionEnd::kRequestFailed);
  EXPECT_EQ(pool_response(0).status, Status::kSuccess);
  EXPECT_NE(pool_response(1).status, Status::kSuccess);
}

TEST_F(SessionTest, UnknownMessageEndsTheSessionAsFatal) {
  io_.send(create(2));
  proto::Bytes bogus = close();
  bogus[0] = static_cast<uint8_t>(MsgType::kPoolResp);  // a type only the daemon sends
  io_.send(bogus);
  EXPECT_EQ(run(), SessionEnd::kFatal);
  EXPECT_TRUE(part_exists()) << "the pool created before stays";
}

TEST_F(SessionTest, ClientGoneEndsTheSessionAndASignalToo) {
  io_.send(create(2));
  EXPECT_EQ(run(), SessionEnd::kDisconnected);  // no close: the client's end went away
  io_ = ScriptedControl();
  const int sig = ::eventfd(1, EFD_CLOEXEC);  // readable at once
  ASSERT_GE(sig, 0);
  EXPECT_EQ(run(sig), SessionEnd::kSignal);
  ::close(sig);
}

// A transport that serves nothing: it records what the session asks of
// its targets, and fails where a test says.
struct FakeTransport {
  static constexpr uint16_t kPort = 4242;

  struct Made {
    TransportKind kind;
    TargetParams params;
    size_t pool_size, writable_from;
  };
  std::vector<Made> made;           // every make_target() call, in order
  std::vector<std::string> events;  // "start", "stop", "pool_changed OFFSET LENGTH"
  int make_fails_verbs = 0;         // errno make_target() throws for verbs (0: none)
  int make_fails_tcp = 0;           // and for tcp
  bool start_fails = false;         // start() throws, as when no thread can start
  bool fatal_at_start = false;      // a lane reports malformed input at once
  proto::Bytes provider_data{0xfa, 0x4e};

  class FakeTarget final : public Target {
   public:
    FakeTarget(FakeTransport &t, TargetParams p) : t_(t), p_(std::move(p)) {}
    uint16_t port() const noexcept override { return kPort; }
    proto::Bytes provider_data() const override { return t_.provider_data; }
    proto::PersistMethod persist_method() const noexcept override { return p_.persist_method; }
    void start() override {
      t_.events.push_back("start");
      if (t_.start_fails)
        throw std::system_error(EAGAIN, std::generic_category(), "fake: cannot start a thread");
      if (t_.fatal_at_start) p_.on_fatal("fake: malformed lane input");
    }
    void stop() noexcept override { t_.events.push_back("stop"); }
    void pool_changed(size_t offset, size_t length) noexcept override {
      t_.events.push_back("pool_changed " + std::to_string(offset) + " " + std::to_string(length));
    }

   private:
    FakeTransport &t_;
    TargetParams p_;
  };

  std::unique_ptr<Target> make(TransportKind kind, TargetPool &pool, const TargetParams &p) {
    made.push_back({kind, p, pool.size(), pool.writable_from()});
    const int fails = kind == TransportKind::kVerbs ? make_fails_verbs : make_fails_tcp;
    if (fails) throw rpmem::SetupError(fails, "fake: cannot listen");
    return std::make_unique<FakeTarget>(*this, p);
  }
};

class SessionFakeTransportTest : public SessionTest {
 protected:
  void SetUp() override {
    SessionTest::SetUp();
    params_.make_target = [this](TransportKind kind, TargetPool &pool, const TargetParams &p) {
      return transport_.make(kind, pool, p);
    };
    params_.target.peer_address = "10.1.2.3";
  }
  static proto::Bytes open(unsigned nlanes) {
    proto::PoolRequest r;
    r.nlanes = nlanes;
    r.pool_size = kPoolSize;
    r.transports = proto::transport_bit(TransportKind::kTcp);
    r.pool_set = "p.set";
    return proto::encode(MsgType::kOpen, r);
  }
  // True when nothing holds the pool's lock: the store can open it.
  bool pool_unlocked() {
    PoolStore store(dir_);
    std::unique_ptr<MappedPool> pool;
    rpmem::PoolAttr attr;
    return !store.open("p.set", pool, attr);
  }

  FakeTransport transport_;
};

TEST_F(SessionFakeTransportTest, CreateHandsTheTargetTheGrantAndCloseStopsIt) {
  io_.send(create(3));
  io_.send(close());
  EXPECT_EQ(run(), SessionEnd::kClosed);
  const proto::PoolResponse r = pool_response();
  EXPECT_EQ(r.status, Status::kSuccess);
  ASSERT_EQ(transport_.made.size(), 1u);
  const FakeTransport::Made &m = transport_.made[0];
  EXPECT_EQ(m.kind, TransportKind::kTcp);
  EXPECT_EQ(m.params.max_lanes, 3u);
  EXPECT_EQ(m.params.listen_address, "127.0.0.1");
  EXPECT_EQ(m.params.peer_address, "10.1.2.3") << "lanes only from the client's address";
  EXPECT_EQ(m.params.secret, r.secret) << "the lanes must prove the secret the client got";
  EXPECT_EQ(m.pool_size, kPoolSize);
  EXPECT_EQ(m.writable_from, 0u) << "no headers";
  EXPECT_EQ(r.nlanes, 3u);
  EXPECT_EQ(r.port, FakeTransport::kPort);
  EXPECT_EQ(r.transport, TransportKind::kTcp);
  EXPECT_EQ(r.provider_data, transport_.provider_data);
  EXPECT_EQ(transport_.events, (std::vector<std::string>{"start", "stop"}));
  EXPECT_TRUE(part_exists());
  EXPECT_TRUE(pool_unlocked());
}

TEST_F(SessionFakeTransportTest, ClientGoneStopsTheTargetAndUnlocksThePool) {
  io_.send(create(2));
  EXPECT_EQ(run(), SessionEnd::kDisconnected);
  EXPECT_EQ(transport_.events, (std::vector<std::string>{"start", "stop"}));
  EXPECT_TRUE(part_exists()) << "a created pool stays when the client goes";
  EXPECT_TRUE(pool_unlocked());
}

TEST_F(SessionFakeTransportTest, CreateWhereTheTargetCannotListenIsFatalConnAndRemovesThePool) {
  transport_.make_fails_tcp = EADDRINUSE;
  io_.send(create(2));
  EXPECT_EQ(run(), SessionEnd::kRequestFailed);
  EXPECT_EQ(pool_response().status, Status::kFatalConn);
  EXPECT_EQ(transport_.made.size(), 1u);
  EXPECT_TRUE(transport_.events.empty());
  EXPECT_FALSE(part_exists()) << "a failed create leaves no pool behind";
}

TEST_F(SessionFakeTransportTest, OpenWhereTheTargetCannotListenIsFatalConnAndUnlocksThePool) {
  io_.send(create(2));
  io_.send(close());
  ASSERT_EQ(run(), SessionEnd::kClosed);
  transport_ = FakeTransport();
  transport_.make_fails_tcp = EADDRINUSE;
  io_ = ScriptedControl();
  io_.send(open(2));
  EXPECT_EQ(run(), SessionEnd::kRequestFailed);
  EXPECT_EQ(pool_response().status, Status::kFatalConn);
  EXPECT_TRUE(part_exists()) << "an opened pool is not removed";
  EXPECT_TRUE(pool_unlocked());
}

TEST_F(SessionFakeTransportTest, CreateWhoseTargetFailsToStartIsFatalConnAndRemovesThePool) {
  transport_.start_fails = true;
  io_.send(create(2));
  EXPECT_EQ(run(), SessionEnd::kRequestFailed);
  EXPECT_EQ(pool_response().status, Status::kFatalConn) << "the client is not told its lanes wait";
  EXPECT_EQ(io_.answers().size(), 1u);
  EXPECT_EQ(transport_.events, (std::vector<std::string>{"start", "stop"}));
  EXPECT_FALSE(part_exists()) << "a failed create leaves no pool behind";
}

TEST_F(SessionFakeTransportTest, VerbsThatCannotServeHereFallBackToTcp) {
  const uint32_t both =
      proto::transport_bit(TransportKind::kVerbs) | proto::transport_bit(TransportKind::kTcp);
  params_.transports = both;
  transport_.make_fails_verbs = ENODEV;  // no RDMA device for this address
  proto::PoolRequest req;
  req.nlanes = 2;
  req.pool_size = kPoolSize;
  req.transports = both;
  req.pool_set = "p.set";
  io_.send(proto::encode(MsgType::kCreate, req));
  io_.send(close());
  EXPECT_EQ(run(), SessionEnd::kClosed);
  ASSERT_EQ(transport_.made.size(), 2u);
  EXPECT_EQ(transport_.made[0].kind, TransportKind::kVerbs);
  EXPECT_EQ(transport_.made[1].kind, TransportKind::kTcp);
  EXPECT_EQ(transport_.made[1].params.persist_method, proto::PersistMethod::kGpspm);
  EXPECT_EQ(pool_response().status, Status::kSuccess);
  EXPECT_EQ(pool_response().transport, TransportKind::kTcp);

  // Any other failure of verbs is the request's, not a reason for tcp.
  fs::remove(dir_ + "/p.part");
  transport_ = FakeTransport();
  transport_.make_fails_verbs = EIO;
  io_ = ScriptedControl();
  io_.send(proto::encode(MsgType::kCreate, req));
  EXPECT_EQ(run(), SessionEnd::kRequestFailed);
  EXPECT_EQ(transport_.made.size(), 1u);
  EXPECT_EQ(pool_response().status, Status::kFatalConn);
  EXPECT_FALSE(part_exists());
}

TEST_F(SessionFakeTransportTest, ALanesFatalReportEndsTheSessionAndStopsTheTarget) {
  transport_.fatal_at_start = true;
  io_.send(create(2));
  io_.send(close());  // not read: the lane's report comes first
  EXPECT_EQ(run(), SessionEnd::kFatal);
  EXPECT_EQ(pool_response().status, Status::kSuccess);
  EXPECT_EQ(io_.answers().size(), 1u);
  EXPECT_EQ(transport_.events, (std::vector<std::string>{"start", "stop"}));
  EXPECT_TRUE(pool_unlocked());
}

TEST_F(SessionFakeTransportTest, SetAttrTellsTheTargetThePoolHeaderChanged) {
  std::ofstream(dir_ + "/h.set") << "PMEMPOOLSET\n" << kPoolSize << " " << dir_ << "/h.part\n";
  proto::PoolRequest req;
  req.nlanes = 1;
  req.pool_size = kPoolSize;
  req.transports = proto::transport_bit(TransportKind::kTcp);
  req.pool_set = "h.set";
  std::memcpy(req.attr.signature.data(), "PMEMOBJ", 8);
  req.attr.major = 6;
  io_.send(proto::encode(MsgType::kCreate, req));
  io_.send(proto::encode(proto::SetAttrRequest{}));  // zeroed attributes
  io_.send(close());
  EXPECT_EQ(run(), SessionEnd::kClosed);
  ASSERT_EQ(pool_response().status, Status::kSuccess);
  ASSERT_EQ(transport_.made.size(), 1u);
  EXPECT_EQ(transport_.made[0].writable_from, rpmem::kPoolHdrSize);
  auto a = io_.answers();
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[1].first, MsgType::kSetAttrResp);
  auto st = proto::decode_status_response(a[1].second);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->status, Status::kSuccess);
  EXPECT_EQ(transport_.events, (std::vector<std::string>{"start", "pool_changed 0 4096", "stop"}));
}

}  // namespace
}  // namespace rpmemd
