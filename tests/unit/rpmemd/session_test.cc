// SPDX-License-Identifier: BSD-3-Clause
// Session against a scripted control stream: the test plays the client by
// handing the session whole frames and reads what it answers. The pool
// store and the tcp target are the real ones, on a temporary directory and
// the loopback address.
#include "rpmemd/session.h"

#include "common/log.h"
#include "common/proto.h"

#include <gtest/gtest.h>

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace rpmemd {
namespace {

namespace fs = std::filesystem;
using proto::MsgType;
using proto::Status;

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
    params_.listen_address = "127.0.0.1";
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

}  // namespace
}  // namespace rpmemd
