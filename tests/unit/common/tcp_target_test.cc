// SPDX-License-Identifier: BSD-3-Clause
// Tests of the TCP data plane: a real TcpTarget on 127.0.0.1 serving an
// in-memory pool, driven by real initiator lanes and by raw sockets that
// speak (or break) the lane protocol; and copy_words, which carries the
// 8-byte atomicity promise of non-relaxed persists.
#include "common/transport/tcp/tcp_target.h"

#include "common/transport/lane_proof.h"
#include "common/transport/tcp/socket_io.h"
#include "common/transport/transport.h"
#include "tests/recording_persister.h"
#include "tests/sanitizers.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rpmem::transport {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using proto::DataOp;

constexpr size_t kPoolSize = 1 << 20;
constexpr size_t kGuard = 4096;
constexpr uint8_t kGuardByte = 0xcd;
constexpr int kIoMs = 3000;

std::error_code errc_of(int e) { return {e, std::generic_category()}; }

using PersistCall = rpmem_test::RecordingPersister::Call;

// A 1 MiB pool between two guard areas, with a recording persister.
class MemPool {
 public:
  explicit MemPool(size_t writable_from)
      : storage_(kPoolSize + 2 * kGuard, kGuardByte),
        persister(base()),
        target(base(), kPoolSize, writable_from, persister) {
    std::fill(base(), base() + kPoolSize, uint8_t{0});
  }
  uint8_t *base() const noexcept { return storage_.data() + kGuard; }
  bool guards_intact() const {
    auto pre = std::span(storage_).first(kGuard);
    auto post = std::span(storage_).last(kGuard);
    auto is_guard = [](uint8_t b) { return b == kGuardByte; };
    return std::all_of(pre.begin(), pre.end(), is_guard) &&
           std::all_of(post.begin(), post.end(), is_guard);
  }

 private:
  mutable std::vector<uint8_t> storage_;

 public:
  rpmem_test::RecordingPersister persister;
  TargetPool target;
};

proto::Secret make_secret(uint8_t seed) {
  proto::Secret s;
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(seed + 13 * i);
  return s;
}

void fill_pattern(uint8_t *p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>((i * 2654435761u + seed) >> 7);
}

using Lanes = std::vector<std::unique_ptr<InitiatorLane>>;

class TcpTargetTest : public ::testing::Test {
 protected:
  void TearDown() override {
    lanes_.clear();
    if (target_) target_->stop();
    if (pool_) {
      EXPECT_TRUE(pool_->guards_intact()) << "bytes written outside the pool";
    }
  }

  void start(size_t writable_from = 4096, unsigned max_lanes = 4,
             std::chrono::milliseconds hello_timeout = 3s, unsigned nthreads = 0) {
    pool_ = std::make_unique<MemPool>(writable_from);
    TargetParams p;
    p.listen_address = "127.0.0.1";
    p.secret = secret_;
    p.client_minor = proto::kMinor;
    p.max_lanes = max_lanes;
    p.hello_timeout = hello_timeout;
    p.nthreads = nthreads;
    p.counters = counters_;
    p.on_fatal = [this](const std::string &why) {
      std::lock_guard lock(fatal_mu_);
      fatal_.push_back(why);
      fatal_cv_.notify_all();
    };
    target_ = make_target(TransportKind::kTcp, pool_->target, p);
    target_->start();
  }

  Result<Lanes> connect(unsigned nlanes, const proto::Secret &secret,
                        std::chrono::milliseconds timeout = 5s) {
    InitiatorParams p;
    p.host = "127.0.0.1";
    p.port = target_->port();
    p.secret = secret;
    p.proofs = true;
    p.nlanes = nlanes;
    p.local_base = local_.data();
    p.pool_size = kPoolSize;
    p.timeout = timeout;
    return connect_lanes(TransportKind::kTcp, p);
  }
  void connect_ok(unsigned nlanes, std::chrono::milliseconds timeout = 5s) {
    auto r = connect(nlanes, secret_, timeout);
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_EQ(r.value().size(), nlanes);
    lanes_ = std::move(r.value());
  }

  bool wait_fatal(std::chrono::milliseconds timeout = 3s) {
    std::unique_lock lock(fatal_mu_);
    return fatal_cv_.wait_for(lock, timeout, [&] { return !fatal_.empty(); });
  }
  size_t fatal_count() {
    std::lock_guard lock(fatal_mu_);
    return fatal_.size();
  }

  // A plain socket connected to the target (non-blocking, TCP_NODELAY).
  int raw_connect() {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_GE(fd, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(target_->port());
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)), 0) << strerror(errno);
    tcp::set_nodelay(fd);
    EXPECT_FALSE(tcp::set_nonblocking(fd, true));
    raw_fds_.push_back(fd);
    return fd;
  }
  // Sends a lane hello; true when the target accepted it.
  bool raw_hello(int fd, unsigned lane, unsigned nlanes, const proto::Secret &secret) {
    proto::LaneHello h;
    h.lane = lane;
    h.nlanes = nlanes;
    EXPECT_FALSE(prove(secret, {lane, 0, nlanes}, true, h.proof));
    uint8_t buf[proto::kLaneHelloSize];
    proto::encode(h, buf);
    if (tcp::send_all(fd, buf, sizeof(buf), kIoMs)) return false;
    uint8_t reply[proto::kLaneHelloReplySize];
    if (tcp::recv_all(fd, reply, sizeof(reply), kIoMs)) return false;
    return std::all_of(std::begin(reply), std::end(reply), [](uint8_t b) { return b == 0; });
  }
  static std::error_code raw_request(int fd, proto::DataRequest req) {
    uint8_t hdr[proto::kDataRequestSize];
    proto::encode(req, hdr);
    return tcp::send_all(fd, hdr, sizeof(hdr), kIoMs);
  }
  static std::optional<proto::DataReply> raw_reply(int fd) {
    uint8_t raw[proto::kDataReplySize];
    if (tcp::recv_all(fd, raw, sizeof(raw), kIoMs)) return std::nullopt;
    return proto::decode_data_reply(raw);
  }
  // True when the target closes the connection within 3 s (after at most
  // a refusal's worth of bytes).
  static bool closed_by_target(int fd) {
    uint8_t b[64];
    size_t got = 0;
    for (int i = 0; i < 4; ++i)
      if (auto ec = tcp::recv_some(fd, b, sizeof(b), got, kIoMs)) return ec == errc_of(ECONNRESET);
    return false;
  }

  // Closes every socket raw_connect() opened.
  void close_raw() {
    for (int fd : raw_fds_) ::close(fd);
    raw_fds_.clear();
  }

  ~TcpTargetTest() override { close_raw(); }

  const proto::Secret secret_ = make_secret(1);
  std::mutex fatal_mu_;
  std::condition_variable fatal_cv_;
  std::vector<std::string> fatal_;
  std::vector<uint8_t> local_ = std::vector<uint8_t>(kPoolSize);
  std::unique_ptr<MemPool> pool_;
  std::shared_ptr<TargetCounters> counters_ = std::make_shared<TargetCounters>(4);
  std::unique_ptr<Target> target_;
  Lanes lanes_;
  std::vector<int> raw_fds_;
};

// --- through real initiator lanes ------------------------------------------------------

TEST_F(TcpTargetTest, PersistLandsBytesAndRecordsRange) {
  start();
  connect_ok(1);
  fill_pattern(local_.data() + 8192, 1000, 1);
  ASSERT_FALSE(lanes_[0]->write(DataOp::kPersist, 8192, 1000, false));
  EXPECT_EQ(0, std::memcmp(pool_->base() + 8192, local_.data() + 8192, 1000));
  EXPECT_EQ(pool_->base()[8191], 0);
  EXPECT_EQ(pool_->base()[9192], 0);
  EXPECT_EQ(pool_->persister.calls(), (std::vector<PersistCall>{{8192, 1000, false}}));
}

TEST_F(TcpTargetTest, RelaxedPersistLandsBytes) {
  start();
  connect_ok(1);
  fill_pattern(local_.data() + 4097, 77777, 2);
  ASSERT_FALSE(lanes_[0]->write(DataOp::kPersist, 4097, 77777, true));
  EXPECT_EQ(0, std::memcmp(pool_->base() + 4097, local_.data() + 4097, 77777));
  EXPECT_EQ(pool_->persister.calls(), (std::vector<PersistCall>{{4097, 77777, false}}));
}

TEST_F(TcpTargetTest, DeepPersistIsRecordedAsDeep) {
  start();
  connect_ok(1);
  fill_pattern(local_.data() + 12288, 4096, 3);
  ASSERT_FALSE(lanes_[0]->write(DataOp::kDeepPersist, 12288, 4096, true));
  EXPECT_EQ(0, std::memcmp(pool_->base() + 12288, local_.data() + 12288, 4096));
  EXPECT_EQ(pool_->persister.calls(), (std::vector<PersistCall>{{12288, 4096, true}}));
}

TEST_F(TcpTargetTest, WholePoolPersistAndReadRoundTrip) {
  start(0);
  connect_ok(1);
  fill_pattern(local_.data(), kPoolSize, 4);
  ASSERT_FALSE(lanes_[0]->write(DataOp::kPersist, 0, kPoolSize, false));
  EXPECT_EQ(0, std::memcmp(pool_->base(), local_.data(), kPoolSize));
  std::vector<uint8_t> back(kPoolSize);
  ASSERT_FALSE(lanes_[0]->read(back.data(), 0, kPoolSize));
  EXPECT_EQ(back, local_);
}

TEST_F(TcpTargetTest, FlushesThenDrainLandEveryRange) {
  start();
  connect_ok(1);
  fill_pattern(local_.data(), kPoolSize, 5);
  const PersistCall ranges[] = {{4096, 100, false}, {9000, 3, false}, {500000, 65536, false}};
  for (const auto &r : ranges)
    ASSERT_FALSE(lanes_[0]->write(DataOp::kFlush, r.offset, r.length, r.offset == 9000));
  ASSERT_FALSE(lanes_[0]->drain());
  for (const auto &r : ranges)
    EXPECT_EQ(0, std::memcmp(pool_->base() + r.offset, local_.data() + r.offset, r.length))
        << r.offset;
  EXPECT_EQ(pool_->persister.calls(),
            std::vector<PersistCall>(std::begin(ranges), std::end(ranges)));
}

TEST_F(TcpTargetTest, ReadReturnsPoolBytesIncludingHeader) {
  start();
  connect_ok(1);
  fill_pattern(pool_->base(), kPoolSize, 6);
  std::vector<uint8_t> got(10000);
  ASSERT_FALSE(lanes_[0]->read(got.data(), 0, got.size()));
  EXPECT_EQ(0, std::memcmp(got.data(), pool_->base(), got.size()));
  ASSERT_FALSE(lanes_[0]->read(got.data(), kPoolSize - 7, 7));
  EXPECT_EQ(0, std::memcmp(got.data(), pool_->base() + kPoolSize - 7, 7));
  EXPECT_TRUE(pool_->persister.calls().empty());
}

TEST_F(TcpTargetTest, ZeroLengthOperationsSucceed) {
  start();
  connect_ok(1);
  EXPECT_FALSE(lanes_[0]->write(DataOp::kPersist, 8192, 0, false));
  EXPECT_FALSE(lanes_[0]->write(DataOp::kFlush, 8192, 0, false));
  EXPECT_FALSE(lanes_[0]->drain());
  uint8_t none = 0;
  EXPECT_FALSE(lanes_[0]->read(&none, 8192, 0));
}

TEST_F(TcpTargetTest, PersistFailureIsEioAndLaneStaysUsable) {
  start();
  connect_ok(1);
  pool_->persister.fail_with(EIO);
  EXPECT_EQ(lanes_[0]->write(DataOp::kPersist, 8192, 64, false), errc_of(EIO));
  EXPECT_EQ(lanes_[0]->write(DataOp::kPersist, 8192, 64, true), errc_of(EIO));
  EXPECT_EQ(lanes_[0]->write(DataOp::kDeepPersist, 8192, 64, true), errc_of(EIO));
  pool_->persister.fail_with(0);
  fill_pattern(local_.data() + 8192, 64, 7);
  EXPECT_FALSE(lanes_[0]->write(DataOp::kPersist, 8192, 64, false));
  EXPECT_EQ(0, std::memcmp(pool_->base() + 8192, local_.data() + 8192, 64));
  EXPECT_EQ(fatal_count(), 0u);
}

// A pool on a disk: a persist is one durable write of the payload, a flush
// a posted write that the drain persists; an error reaches that request
// only, not a later one.
TEST_F(TcpTargetTest, DiskPoolTakesPersistsAsDurableWritesAndFlushesAsPostedOnes) {
  start();
  pool_->persister.medium = rpmem_test::kRecordedDisk;
  connect_ok(1);
  fill_pattern(local_.data() + 8192, 4096, 3);
  EXPECT_FALSE(lanes_[0]->write(DataOp::kPersist, 8192, 4096, false));
  EXPECT_EQ(pool_->persister.durable_writes.load(), 1u);
  EXPECT_TRUE(pool_->persister.calls().empty()) << "persist() as well as the durable write";
  EXPECT_EQ(0, std::memcmp(pool_->base() + 8192, local_.data() + 8192, 4096));
  pool_->persister.fail_with(EIO);
  EXPECT_EQ(lanes_[0]->write(DataOp::kDeepPersist, 8192, 64, false), errc_of(EIO));
  pool_->persister.fail_with(0);
  EXPECT_FALSE(lanes_[0]->write(DataOp::kPersist, 8192, 0, false)) << "an old error came back";
  fill_pattern(local_.data() + 20000, 3000, 4);
  EXPECT_FALSE(lanes_[0]->write(DataOp::kFlush, 20000, 3000, true));
  EXPECT_FALSE(lanes_[0]->drain());
  EXPECT_EQ(pool_->persister.posted_writes.load(), 1u);
  auto calls = pool_->persister.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].offset, 20000u);
  EXPECT_EQ(calls[0].length, 3000u);
  EXPECT_EQ(0, std::memcmp(pool_->base() + 20000, local_.data() + 20000, 3000));
  EXPECT_EQ(fatal_count(), 0u);
}

// The visible level: where the session was granted it, a request that asks
// for it is acknowledged once visible (the persister's visible calls, no
// persist); a deep persist stays persistent. A visible drain makes the
// flushes visible; a persistent drain makes the pool's visible bytes
// durable too.
TEST_F(TcpTargetTest, VisibleRequestsAreAcknowledgedOnceVisibleWhereGranted) {
  start();
  pool_->persister.medium = rpmem_test::kRecordedFile;  // payloads straight into the pool
  pool_->target.grant_visible(true);
  connect_ok(1);
  fill_pattern(local_.data() + 8192, 4096, 5);
  EXPECT_FALSE(lanes_[0]->write(DataOp::kPersist, 8192, 4096, kWriteVisible));
  EXPECT_EQ(0, std::memcmp(pool_->base() + 8192, local_.data() + 8192, 4096));
  EXPECT_TRUE(pool_->persister.calls().empty()) << "no persist for a visible request";
  EXPECT_EQ(pool_->persister.visible(), (std::vector<PersistCall>{{8192, 4096, false}}));
  EXPECT_FALSE(lanes_[0]->write(DataOp::kDeepPersist, 16384, 64, kWriteVisible));
  EXPECT_EQ(pool_->persister.calls(), (std::vector<PersistCall>{{16384, 64, true}}));
  fill_pattern(local_.data() + 20000, 100, 6);
  EXPECT_FALSE(lanes_[0]->write(DataOp::kFlush, 20000, 100, kWriteVisible));
  EXPECT_FALSE(lanes_[0]->drain(kWriteVisible));
  EXPECT_EQ(0, std::memcmp(pool_->base() + 20000, local_.data() + 20000, 100));
  EXPECT_EQ(pool_->persister.visible().size(), 2u);
  EXPECT_EQ(pool_->persister.visible().back(), (PersistCall{20000, 100, false}));
  EXPECT_EQ(pool_->persister.calls().size(), 1u) << "the deep persist only";
  EXPECT_EQ(pool_->persister.visible_persisted.load(), 0u);
  EXPECT_FALSE(lanes_[0]->drain());  // persistent
  EXPECT_EQ(pool_->persister.visible_persisted.load(), 1u);
  // A persistent flush drained visible is made persistent all the same.
  EXPECT_FALSE(lanes_[0]->write(DataOp::kFlush, 30000, 10, 0));
  EXPECT_FALSE(lanes_[0]->drain(kWriteVisible));
  EXPECT_EQ(pool_->persister.calls().back(), (PersistCall{30000, 10, false}));
  EXPECT_EQ(fatal_count(), 0u);
}

TEST_F(TcpTargetTest, VisibleRequestsArePersistentWithoutTheGrant) {
  start();
  pool_->persister.medium = rpmem_test::kRecordedFile;
  connect_ok(1);
  fill_pattern(local_.data() + 8192, 4096, 7);
  EXPECT_FALSE(lanes_[0]->write(DataOp::kPersist, 8192, 4096, kWriteVisible));
  EXPECT_EQ(pool_->persister.calls(), (std::vector<PersistCall>{{8192, 4096, false}}));
  EXPECT_TRUE(pool_->persister.visible().empty());
  EXPECT_FALSE(lanes_[0]->write(DataOp::kFlush, 20000, 100, kWriteVisible));
  EXPECT_FALSE(lanes_[0]->drain(kWriteVisible));
  EXPECT_EQ(pool_->persister.calls().back(), (PersistCall{20000, 100, false}));
  EXPECT_TRUE(pool_->persister.visible().empty());
}

// On a disk a visible persist or flush goes straight into the pool, as
// into RAM, and made_visible() counts it: no whole write of the persister,
// durable, posted or visible. A persistent one is still a durable write.
TEST_F(TcpTargetTest, AVisibleWriteOnADiskIsStoredIntoThePoolNotWrittenWhole) {
  start();
  pool_->persister.medium = rpmem_test::kRecordedDisk;
  pool_->target.grant_visible(true);
  connect_ok(1);
  fill_pattern(local_.data() + 8192, 4096, 8);
  EXPECT_FALSE(lanes_[0]->write(DataOp::kPersist, 8192, 4096, kWriteVisible));
  fill_pattern(local_.data() + 20000, 3000, 9);
  EXPECT_FALSE(lanes_[0]->write(DataOp::kFlush, 20000, 3000, kWriteVisible));
  EXPECT_FALSE(lanes_[0]->drain(kWriteVisible));
  EXPECT_EQ(pool_->persister.durable_writes.load(), 0u);
  EXPECT_EQ(pool_->persister.posted_writes.load(), 0u);
  EXPECT_EQ(pool_->persister.visible_writes.load(), 0u);
  EXPECT_EQ(pool_->persister.visible(),
            (std::vector<PersistCall>{{8192, 4096, false}, {20000, 3000, false}}));
  EXPECT_EQ(0, std::memcmp(pool_->base() + 8192, local_.data() + 8192, 4096));
  EXPECT_EQ(0, std::memcmp(pool_->base() + 20000, local_.data() + 20000, 3000));
  EXPECT_TRUE(pool_->persister.calls().empty());
  EXPECT_FALSE(lanes_[0]->write(DataOp::kPersist, 8192, 4096, 0));
  EXPECT_EQ(pool_->persister.durable_writes.load(), 1u);
  EXPECT_EQ(fatal_count(), 0u);
}

TEST_F(TcpTargetTest, DrainAfterFailedFlushIsEioOnceAndLaneStaysUsable) {
  start();
  connect_ok(1);
  pool_->persister.fail_with(EIO);
  EXPECT_FALSE(lanes_[0]->write(DataOp::kFlush, 8192, 64, false));  // no reply to carry it
  EXPECT_FALSE(lanes_[0]->write(DataOp::kFlush, 16384, 64, false));
  EXPECT_EQ(lanes_[0]->drain(), errc_of(EIO));
  pool_->persister.fail_with(0);
  EXPECT_FALSE(lanes_[0]->drain()) << "the flush error must be reported once";
  EXPECT_FALSE(lanes_[0]->write(DataOp::kPersist, 8192, 64, false));
  EXPECT_EQ(fatal_count(), 0u);
}

TEST_F(TcpTargetTest, FlushErrorIsPerLane) {
  start();
  connect_ok(2);
  pool_->persister.fail_with(EIO);
  EXPECT_FALSE(lanes_[0]->write(DataOp::kFlush, 8192, 64, false));
  EXPECT_FALSE(lanes_[1]->drain()) << "lane 1 flushed nothing";
  EXPECT_EQ(lanes_[0]->drain(), errc_of(EIO));
}

TEST_F(TcpTargetTest, PostedFlushesAreSentWhenTheWorkQueueIsFull) {
  start();
  connect_ok(1);
  // The default queue holds 50 flushes: the 51st sends the first 50 without
  // waiting for a drain.
  fill_pattern(local_.data(), kPoolSize, 9);
  for (size_t i = 0; i < 51; ++i)
    ASSERT_FALSE(lanes_[0]->write(DataOp::kFlush, 8192 + i * 64, 64, false));
  ASSERT_TRUE(pool_->persister.wait_entered(1, 3s)) << "a full queue must go out by itself";
  EXPECT_EQ(0, std::memcmp(pool_->base() + 8192, local_.data() + 8192, 50 * 64));
  ASSERT_FALSE(lanes_[0]->drain());
  EXPECT_EQ(0, std::memcmp(pool_->base() + 8192, local_.data() + 8192, 51 * 64));
}

TEST_F(TcpTargetTest, PersistAfterFlushesKeepsTheirOrder) {
  start();
  connect_ok(1);
  fill_pattern(local_.data(), kPoolSize, 10);
  ASSERT_FALSE(lanes_[0]->write(DataOp::kFlush, 8192, 4096, false));
  std::memset(local_.data() + 8192, 0x5a, 64);  // the persist's bytes win
  ASSERT_FALSE(lanes_[0]->write(DataOp::kPersist, 8192, 64, false));
  ASSERT_FALSE(lanes_[0]->drain());
  EXPECT_EQ(0, std::memcmp(pool_->base() + 8192, local_.data() + 8192, 4096));
  std::vector<uint8_t> got(4096);
  ASSERT_FALSE(lanes_[0]->write(DataOp::kFlush, 16384, 4096, false));
  ASSERT_FALSE(lanes_[0]->read(got.data(), 16384, got.size())) << "a read sees earlier flushes";
  EXPECT_EQ(0, std::memcmp(got.data(), local_.data() + 16384, 4096));
}

TEST_F(TcpTargetTest, SeveralLanesInParallelThreads) {
  start(4096, 4);
  connect_ok(4);
  fill_pattern(local_.data(), kPoolSize, 8);
  constexpr size_t kSlice = 200000;
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (unsigned l = 0; l < 4; ++l) {
    threads.emplace_back([&, l] {
      const size_t base = 4096 + l * kSlice;
      std::vector<uint8_t> back(kSlice);
      for (size_t step = 0; step < 40; ++step) {
        const size_t off = base + step * 4999, len = 4999;
        if (lanes_[l]->write(step % 3 ? DataOp::kPersist : DataOp::kFlush, off, len, step % 2))
          ++failures[l];
      }
      if (lanes_[l]->drain()) ++failures[l];
      if (lanes_[l]->read(back.data(), base, 40 * 4999)) ++failures[l];
      if (std::memcmp(back.data(), local_.data() + base, 40 * 4999) != 0) ++failures[l];
    });
  }
  for (auto &t : threads) t.join();
  EXPECT_EQ(failures, std::vector<int>(4, 0));
  EXPECT_EQ(pool_->persister.calls().size(), 160u);
}

TEST_F(TcpTargetTest, ConnectFailsWithWrongSecretWithoutEndingSession) {
  start(4096, 4);
  connect_ok(2);
  auto bad = connect(2, make_secret(2));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, errc_of(ECONNRESET));
  EXPECT_FALSE(bad.error().message.empty());
  fill_pattern(local_.data() + 8192, 128, 9);
  EXPECT_FALSE(lanes_[0]->write(DataOp::kPersist, 8192, 64, false));
  EXPECT_FALSE(lanes_[1]->write(DataOp::kPersist, 8192 + 64, 64, false));
  EXPECT_EQ(0, std::memcmp(pool_->base() + 8192, local_.data() + 8192, 128));
  EXPECT_EQ(fatal_count(), 0u);
}

TEST_F(TcpTargetTest, ConnectFailsForLaneAlreadyConnected) {
  start(4096, 4);
  connect_ok(1);
  auto again = connect(1, secret_);
  EXPECT_FALSE(again.ok());
  EXPECT_FALSE(lanes_[0]->drain());
  EXPECT_EQ(fatal_count(), 0u);
}

TEST_F(TcpTargetTest, ConnectFailsForMoreLanesThanGranted) {
  start(4096, 2);
  auto r = connect(3, secret_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, errc_of(ECONNRESET));
  EXPECT_EQ(fatal_count(), 0u);
}

TEST_F(TcpTargetTest, StrangerWithoutHelloIsDroppedAfterHelloTimeout) {
  start(4096, 4, 200ms);
  int fd = raw_connect();
  const uint8_t junk[5] = {1, 2, 3, 4, 5};
  ASSERT_FALSE(tcp::send_all(fd, junk, sizeof(junk), kIoMs));
  // After the hello timeout the target answers with a refusal and closes.
  uint8_t reply[proto::kLaneHelloReplySize];
  auto ec = tcp::recv_all(fd, reply, sizeof(reply), kIoMs);
  if (!ec) {
    EXPECT_NE(reply[0], 0);
  }
  connect_ok(1);
  EXPECT_FALSE(lanes_[0]->drain());
  EXPECT_EQ(fatal_count(), 0u);
}

TEST_F(TcpTargetTest, StopWhileClientWaitsFailsClientWithEconnresetQuickly) {
  start();
  connect_ok(1, 20s);  // the lane's own timeout is far away
  pool_->persister.hold(true);
  std::error_code result;
  Clock::time_point returned;
  std::atomic<bool> has_returned{false};
  std::thread client([&] {
    result = lanes_[0]->write(DataOp::kPersist, 8192, 64, false);
    returned = Clock::now();
    has_returned.store(true);
  });
  ASSERT_TRUE(pool_->persister.wait_entered(1, 3s));
  const auto t0 = Clock::now();
  std::thread stopper([&] { target_->stop(); });
  // The client must not wait for the held persist: stop() closes the lane.
  for (int i = 0; i < 300 && !has_returned.load(); ++i) std::this_thread::sleep_for(10ms);
  pool_->persister.hold(false);
  client.join();
  stopper.join();
  EXPECT_EQ(result, errc_of(ECONNRESET));
  EXPECT_LT(returned - t0, 3s);
  EXPECT_EQ(lanes_[0]->drain(), errc_of(ECONNRESET)) << "a dead lane stays dead";
}

TEST_F(TcpTargetTest, IdleLaneFailsWithEconnresetAfterStop) {
  start();
  connect_ok(2);
  target_->stop();
  const auto t0 = Clock::now();
  EXPECT_EQ(lanes_[0]->write(DataOp::kPersist, 8192, 64, false), errc_of(ECONNRESET));
  uint8_t b[8];
  EXPECT_EQ(lanes_[1]->read(b, 8192, 8), errc_of(ECONNRESET));
  EXPECT_LT(Clock::now() - t0, 3s);
}

TEST_F(TcpTargetTest, ClientTimesOutWithEconnresetWhenTargetNeverAnswers) {
  start();
  connect_ok(1, 200ms);
  pool_->persister.hold(true);
  const auto t0 = Clock::now();
  EXPECT_EQ(lanes_[0]->write(DataOp::kPersist, 8192, 64, false), errc_of(ECONNRESET));
  EXPECT_LT(Clock::now() - t0, 3s);
  pool_->persister.hold(false);
}

TEST_F(TcpTargetTest, StopIsIdempotent) {
  start();
  connect_ok(1);
  target_->stop();
  target_->stop();
}

// --- lanes sharing one worker thread ---------------------------------------------------------

// Two lanes on one worker: lane 0 stalls in the middle of a payload, then
// leaves a large read unread; lane 1 is answered all the same, each time.
TEST_F(TcpTargetTest, LanesSharingAWorkerDoNotWaitForEachOther) {
  start(4096, 2, 3s, 1);
  int slow = raw_connect();
  int quick = raw_connect();
  ASSERT_TRUE(raw_hello(slow, 0, 2, secret_));
  ASSERT_TRUE(raw_hello(quick, 1, 2, secret_));
  std::vector<uint8_t> payload(4096);
  fill_pattern(payload.data(), payload.size(), 21);
  auto quick_persist = [&](uint64_t offset, uint8_t seed) {
    std::vector<uint8_t> bytes(64, seed);
    ASSERT_FALSE(raw_request(quick, {DataOp::kPersist, 0, offset, bytes.size()}));
    ASSERT_FALSE(tcp::send_all(quick, bytes.data(), bytes.size(), kIoMs));
    auto reply = raw_reply(quick);
    ASSERT_TRUE(reply) << "lane 1 waited for lane 0";
    EXPECT_EQ(reply->status, 0u);
    EXPECT_EQ(0, std::memcmp(pool_->base() + offset, bytes.data(), bytes.size()));
  };

  ASSERT_FALSE(raw_request(slow, {DataOp::kPersist, 0, 8192, payload.size()}));
  ASSERT_FALSE(tcp::send_all(slow, payload.data(), 100, kIoMs));
  quick_persist(65536, 0x11);
  ASSERT_FALSE(tcp::send_all(slow, payload.data() + 100, payload.size() - 100, kIoMs));
  auto reply = raw_reply(slow);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 0u);
  EXPECT_EQ(0, std::memcmp(pool_->base() + 8192, payload.data(), payload.size()));

  // A read of the whole pool that nobody reads: the worker cannot send it
  // all, and must not wait for it.
  ASSERT_FALSE(raw_request(slow, {DataOp::kRead, 0, 0, kPoolSize}));
  quick_persist(65536 + 64, 0x22);
  std::vector<uint8_t> got(kPoolSize);
  reply = raw_reply(slow);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->length, kPoolSize);
  ASSERT_FALSE(tcp::recv_all(slow, got.data(), got.size(), kIoMs));
  // The 64 bytes lane 1 wrote meanwhile may be old or new in the read.
  EXPECT_EQ(0, std::memcmp(got.data(), pool_->base(), 65536 + 64));
  EXPECT_EQ(0, std::memcmp(got.data() + 65536 + 128, pool_->base() + 65536 + 128,
                           kPoolSize - 65536 - 128));
  EXPECT_EQ(fatal_count(), 0u);
}

// The client closes its lanes as soon as they are connected, and stop()
// follows at once: the last lanes may still be on their way to their worker.
// stop() must return every time (it once could lose its wake-up to that
// hand-over, and then waited for the worker for good).
TEST_F(TcpTargetTest, StopRightAfterTheLanesConnectReturns) {
  const int rounds = rpmem_test::kUnderTsan ? 40 : 200;
  for (int round = 0; round < rounds; ++round) {
    start(4096, 4);
    for (unsigned lane = 0; lane < 4; ++lane)
      ASSERT_TRUE(raw_hello(raw_connect(), lane, 4, secret_));
    close_raw();
    auto stopped = std::async(std::launch::async, [this] { target_->stop(); });
    if (stopped.wait_for(10s) != std::future_status::ready) {
      std::fprintf(stderr, "stop() did not return within 10 s in round %d\n", round);
      std::abort();
    }
    target_.reset();
  }
}

TEST_F(TcpTargetTest, OneWorkerServesManyLanesInParallelThreads) {
  start(4096, 8, 3s, 1);
  connect_ok(8);
  fill_pattern(local_.data(), kPoolSize, 22);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  const size_t slice = (kPoolSize - 4096) / 8;
  for (unsigned lane = 0; lane < 8; ++lane) {
    threads.emplace_back([&, lane] {
      const size_t base = 4096 + lane * slice;
      for (size_t off = 0; off + 512 <= slice; off += 512) {
        const auto op = off % 1024 ? DataOp::kFlush : DataOp::kPersist;
        if (lanes_[lane]->write(op, base + off, 512, lane % 2 == 1)) ++failures;
      }
      if (lanes_[lane]->drain()) ++failures;
    });
  }
  for (auto &t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(0, std::memcmp(pool_->base() + 4096, local_.data() + 4096, 8 * slice));
}

// --- raw sockets: protocol violations -------------------------------------------------------

TEST_F(TcpTargetTest, GarbageRequestAfterValidHelloIsFatal) {
  start();
  int fd = raw_connect();
  ASSERT_TRUE(raw_hello(fd, 0, 1, secret_));
  uint8_t garbage[proto::kDataRequestSize];
  std::memset(garbage, 0x77, sizeof(garbage));
  ASSERT_FALSE(tcp::send_all(fd, garbage, sizeof(garbage), kIoMs));
  ASSERT_TRUE(wait_fatal());
  EXPECT_EQ(fatal_count(), 1u);
  EXPECT_TRUE(closed_by_target(fd));
}

// A probe (protocol 1.11) behind a persist is answered in its turn, after
// the persist's reply, and counted as a probe, not as a request; a probe
// with a range is malformed.
TEST_F(TcpTargetTest, AProbeIsAnsweredInItsTurnAndCountedApart) {
  start();
  int fd = raw_connect();
  ASSERT_TRUE(raw_hello(fd, 0, 1, secret_));
  uint8_t persist[proto::kDataRequestSize], probe[proto::kDataRequestSize], payload[64];
  proto::encode(proto::DataRequest{DataOp::kPersist, 0, 4096, sizeof(payload)}, persist);
  std::memset(payload, 0x5a, sizeof(payload));
  proto::encode(proto::DataRequest{DataOp::kProbe, 0, 0, 0}, probe);
  iovec iov[3] = {{persist, sizeof(persist)}, {payload, sizeof(payload)}, {probe, sizeof(probe)}};
  ASSERT_FALSE(tcp::send_all(fd, iov, 3, kIoMs));
  auto first = raw_reply(fd), second = raw_reply(fd);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->op, DataOp::kPersist);
  EXPECT_EQ(first->status, 0u);
  EXPECT_EQ(second->op, DataOp::kProbe);
  EXPECT_EQ(second->status, 0u);
  EXPECT_EQ(second->length, 0u);
  EXPECT_EQ(pool_->base()[4096 + 63], 0x5a);
  const LaneTotals t = counters_->sum();
  EXPECT_EQ(t.probes, 1u);
  EXPECT_EQ(t.persists, 1u);
  EXPECT_EQ(t.calls(), 1u) << "a probe counted as a request";
  EXPECT_EQ(t.timed(), 1u);
  EXPECT_EQ(fatal_count(), 0u);
  ASSERT_FALSE(raw_request(fd, {DataOp::kProbe, 0, 4096, 8}));
  ASSERT_TRUE(wait_fatal());
  EXPECT_TRUE(closed_by_target(fd));
}

TEST_F(TcpTargetTest, WrongSecretOverRawSocketIsRefusedWithoutFatal) {
  start();
  int fd = raw_connect();
  EXPECT_FALSE(raw_hello(fd, 0, 1, make_secret(2)));
  EXPECT_TRUE(closed_by_target(fd));
  int bad_magic = raw_connect();
  uint8_t junk[proto::kLaneHelloSize] = {};
  ASSERT_FALSE(tcp::send_all(bad_magic, junk, sizeof(junk), kIoMs));
  EXPECT_TRUE(closed_by_target(bad_magic));
  connect_ok(1);
  EXPECT_FALSE(lanes_[0]->drain());
  EXPECT_EQ(fatal_count(), 0u);
}

class TcpTargetRangeTest : public TcpTargetTest {
 protected:
  // A write whose range is refused: the target must end the session without
  // touching a byte, even though the payload follows the header.
  void expect_fatal_write(DataOp op, uint64_t offset, uint64_t length) {
    start(4096);
    std::vector<uint8_t> before(pool_->base(), pool_->base() + kPoolSize);
    int fd = raw_connect();
    ASSERT_TRUE(raw_hello(fd, 0, 1, secret_));
    ASSERT_FALSE(raw_request(fd, {op, 0, offset, length}));
    std::vector<uint8_t> payload(4096, 0xaa);
    tcp::send_all(fd, payload.data(), payload.size(), kIoMs);  // may fail: the target hangs up
    ASSERT_TRUE(wait_fatal());
    EXPECT_TRUE(closed_by_target(fd));
    EXPECT_EQ(0, std::memcmp(before.data(), pool_->base(), kPoolSize)) << "pool modified";
    EXPECT_TRUE(pool_->persister.calls().empty());
  }
};

TEST_F(TcpTargetRangeTest, PersistPastEndIsFatal) {
  expect_fatal_write(DataOp::kPersist, kPoolSize - 8, 16);
}
TEST_F(TcpTargetRangeTest, RelaxedFlushPastEndIsFatal) {
  expect_fatal_write(DataOp::kFlush, kPoolSize, 1);
}
TEST_F(TcpTargetRangeTest, DeepPersistLongerThanPoolIsFatal) {
  expect_fatal_write(DataOp::kDeepPersist, 4096, kPoolSize + 1);
}
TEST_F(TcpTargetRangeTest, PersistWhoseEndOverflowsIsFatal) {
  expect_fatal_write(DataOp::kPersist, UINT64_MAX - 7, 16);
}
TEST_F(TcpTargetRangeTest, PersistIntoHeaderIsFatal) { expect_fatal_write(DataOp::kPersist, 0, 8); }
TEST_F(TcpTargetRangeTest, FlushStraddlingHeaderIsFatal) {
  expect_fatal_write(DataOp::kFlush, 4095, 2);
}

TEST_F(TcpTargetRangeTest, ReadPastEndIsFatal) {
  start();
  int fd = raw_connect();
  ASSERT_TRUE(raw_hello(fd, 0, 1, secret_));
  ASSERT_FALSE(raw_request(fd, {DataOp::kRead, 0, kPoolSize - 4, 8}));
  ASSERT_TRUE(wait_fatal());
  EXPECT_TRUE(closed_by_target(fd));
}

TEST_F(TcpTargetRangeTest, RawReadInsidePoolIsAnswered) {
  start();
  fill_pattern(pool_->base(), kPoolSize, 10);
  int fd = raw_connect();
  ASSERT_TRUE(raw_hello(fd, 0, 1, secret_));
  ASSERT_FALSE(raw_request(fd, {DataOp::kRead, 0, kPoolSize - 4, 4}));
  auto reply = raw_reply(fd);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 0u);
  EXPECT_EQ(reply->op, DataOp::kRead);
  ASSERT_EQ(reply->length, 4u);
  uint8_t got[4];
  ASSERT_FALSE(tcp::recv_all(fd, got, 4, kIoMs));
  EXPECT_EQ(0, std::memcmp(got, pool_->base() + kPoolSize - 4, 4));
  EXPECT_EQ(fatal_count(), 0u);
}

// --- 8-byte atomicity of non-relaxed persists -------------------------------------------------

constexpr size_t kAtomOff = 65536;
constexpr size_t kAtomLen = 64 * 1024;
constexpr size_t kAtomWords = kAtomLen / 8;

uint64_t old_word(size_t i) {
  uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull;
  return x ^ (x >> 29);
}
uint64_t new_word(size_t i) { return ~old_word(i); }  // differs in every byte

// The atomicity tests read pool words while the target writes them with
// plain stores: that is the property under test, and a report for TSan.
using rpmem_test::kUnderTsan;
#define RPMEM_SKIP_UNDER_TSAN() \
  if (kUnderTsan) GTEST_SKIP() << "races on purpose with the target's stores"

uint64_t load_word(const uint8_t *p) {
  return std::atomic_ref<const uint64_t>(*reinterpret_cast<const uint64_t *>(p))
      .load(std::memory_order_relaxed);
}

class TcpTargetAtomicityTest : public TcpTargetTest {
 protected:
  void SetUp() override {
    RPMEM_SKIP_UNDER_TSAN();
    start(4096, 1);
    before_hello();
    for (size_t i = 0; i < kAtomWords; ++i) {
      uint64_t o = old_word(i), n = new_word(i);
      std::memcpy(pool_->base() + kAtomOff + 8 * i, &o, 8);
      std::memcpy(payload_.data() + 8 * i, &n, 8);
    }
    fd_ = raw_connect();
    ASSERT_TRUE(raw_hello(fd_, 0, 1, secret_));
  }
  virtual void before_hello() {}  // the medium and level, before a lane server exists
  uint64_t pool_word(size_t i) const { return load_word(pool_->base() + kAtomOff + 8 * i); }
  void expect_all_new() {
    for (size_t i = 0; i < kAtomWords; ++i) ASSERT_EQ(pool_word(i), new_word(i)) << "word " << i;
  }
  // Five bytes of a word have arrived, three have not: the word is still
  // old; then the rest, and the reply (a flush's through a drain of flags
  // `flags`).
  void expect_partial_word_held_back(DataOp op, uint8_t flags) {
    for (size_t i = 0; i < kAtomWords; ++i) {
      uint64_t o = old_word(i);
      std::memcpy(pool_->base() + kAtomOff + 8 * i, &o, 8);
    }
    ASSERT_FALSE(raw_request(fd_, {op, flags, kAtomOff, kAtomLen}));
    ASSERT_FALSE(tcp::send_all(fd_, payload_.data(), 8 * 3 + 5, kIoMs));
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(pool_word(3), old_word(3)) << "a word was written from 5 of its 8 bytes";
    ASSERT_FALSE(tcp::send_all(fd_, payload_.data() + 8 * 3 + 5, kAtomLen - (8 * 3 + 5), kIoMs));
    if (op == DataOp::kFlush) {
      ASSERT_FALSE(raw_request(fd_, {DataOp::kDrain, flags, 0, 0}));
    }
    auto reply = raw_reply(fd_);
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, 0u);
    EXPECT_EQ(reply->op, op == DataOp::kFlush ? DataOp::kDrain : op);
    expect_all_new();
  }
  void expect_persist_reply() {
    auto reply = raw_reply(fd_);
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, 0u);
    EXPECT_EQ(reply->op, DataOp::kPersist);
    EXPECT_EQ(fatal_count(), 0u);
  }

  std::vector<uint8_t> payload_ = std::vector<uint8_t>(kAtomLen);
  int fd_ = -1;
};

TEST_F(TcpTargetAtomicityTest, PersistPayloadInOddPiecesNeverExposesMixedWord) {
  static_assert(kAtomOff % 8 == 0);
  ASSERT_EQ(reinterpret_cast<uintptr_t>(pool_->base() + kAtomOff) % 8, 0u);
  std::atomic<bool> done{false};
  std::atomic<size_t> torn{0}, passes{0};
  size_t first_torn = 0;
  uint64_t first_value = 0;
  std::thread watcher([&] {
    while (!done.load(std::memory_order_acquire)) {
      for (size_t i = 0; i < kAtomWords; ++i) {
        uint64_t v = pool_word(i);
        if (v != old_word(i) && v != new_word(i) && torn.fetch_add(1) == 0) {
          first_torn = i;
          first_value = v;
        }
      }
      passes.fetch_add(1, std::memory_order_relaxed);
    }
  });

  ASSERT_FALSE(raw_request(fd_, {DataOp::kPersist, 0, kAtomOff, kAtomLen}));
  static constexpr size_t kPieces[] = {1, 3, 5, 7, 13, 29, 61, 127, 11, 9};
  size_t at = 0;
  for (size_t k = 0; at < kAtomLen; ++k) {
    size_t n = std::min(kPieces[k % std::size(kPieces)], kAtomLen - at);
    ASSERT_FALSE(tcp::send_all(fd_, payload_.data() + at, n, kIoMs));
    at += n;
    std::this_thread::sleep_for(10us);  // let each piece travel as a segment of its own
  }
  expect_persist_reply();
  done.store(true, std::memory_order_release);
  watcher.join();
  EXPECT_EQ(torn.load(), 0u) << "word " << first_torn << " seen as 0x" << std::hex << first_value
                             << " (old 0x" << old_word(first_torn) << ", new 0x"
                             << new_word(first_torn) << ")";
  EXPECT_GT(passes.load(), 0u);
  expect_all_new();
}

// Deterministic half of the property: five bytes of a word have arrived,
// three have not; the target cannot have written the word yet.
TEST_F(TcpTargetAtomicityTest, PersistHoldsBackPartlyReceivedWord) {
  ASSERT_FALSE(raw_request(fd_, {DataOp::kPersist, 0, kAtomOff, kAtomLen}));
  ASSERT_FALSE(tcp::send_all(fd_, payload_.data(), 8 * 3 + 5, kIoMs));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(pool_word(3), old_word(3)) << "a word was written from 5 of its 8 bytes";
  ASSERT_FALSE(tcp::send_all(fd_, payload_.data() + 8 * 3 + 5, kAtomLen - (8 * 3 + 5), kIoMs));
  expect_persist_reply();
  expect_all_new();
}

// The same promise for the other flags-0 writes: a deep persist, and a
// flush (made durable by the drain).
TEST_F(TcpTargetAtomicityTest, DeepPersistAndFlushHoldBackPartlyReceivedWord) {
  for (DataOp op : {DataOp::kDeepPersist, DataOp::kFlush}) {
    SCOPED_TRACE(op == DataOp::kFlush ? "flush" : "deep persist");
    expect_partial_word_held_back(op, 0);
  }
}

// Visible writes to a pool on a disk go into the pool as they come, as into
// RAM (not whole through the persister): the same promise.
class TcpTargetVisibleDiskAtomicityTest : public TcpTargetAtomicityTest {
 protected:
  void before_hello() override {
    pool_->persister.medium = rpmem_test::kRecordedDisk;
    pool_->target.grant_visible(true);
  }
};

TEST_F(TcpTargetVisibleDiskAtomicityTest, VisiblePersistAndFlushHoldBackPartlyReceivedWord) {
  for (DataOp op : {DataOp::kPersist, DataOp::kFlush}) {
    SCOPED_TRACE(op == DataOp::kFlush ? "flush" : "persist");
    expect_partial_word_held_back(op, proto::kDataVisible);
  }
  EXPECT_EQ(pool_->persister.visible_writes.load(), 0u) << "taken whole, not as it came";
  EXPECT_EQ(pool_->persister.visible().size(), 2u);
  EXPECT_TRUE(pool_->persister.calls().empty());
}

// The detector's own check: a relaxed persist promises no atomicity, and
// the TCP target writes its bytes as they arrive, so the same partial send
// shows a mixed word. (If relaxed persists ever become word-atomic too, this
// test has served its purpose and should go.)
TEST_F(TcpTargetAtomicityTest, RelaxedPersistExposesPartlyReceivedWord) {
  ASSERT_FALSE(raw_request(fd_, {DataOp::kPersist, proto::kDataRelaxed, kAtomOff, kAtomLen}));
  ASSERT_FALSE(tcp::send_all(fd_, payload_.data(), 8 * 3 + 5, kIoMs));
  uint64_t seen = old_word(3);
  for (auto deadline = Clock::now() + 3s; seen == old_word(3) && Clock::now() < deadline;)
    seen = pool_word(3);
  EXPECT_NE(seen, old_word(3)) << "the first 5 bytes never arrived";
  EXPECT_NE(seen, new_word(3));
  ASSERT_FALSE(tcp::send_all(fd_, payload_.data() + 8 * 3 + 5, kAtomLen - (8 * 3 + 5), kIoMs));
  expect_persist_reply();
  expect_all_new();
}

// --- copy_words ----------------------------------------------------------------------------------

TEST(CopyWords, CopiesExactlyTheRangeForEveryAlignmentAndLength) {
  alignas(8) uint8_t src[64];
  alignas(8) uint8_t dst[64];
  for (size_t i = 0; i < sizeof(src); ++i) src[i] = static_cast<uint8_t>(i + 1);
  for (size_t so = 0; so < 8; ++so) {
    for (size_t dof = 0; dof < 8; ++dof) {
      for (size_t n = 0; n <= 40; ++n) {
        std::memset(dst, 0xee, sizeof(dst));
        rpmem::transport::copy_words(dst + dof, src + so, n);
        for (size_t i = 0; i < sizeof(dst); ++i) {
          const uint8_t want = (i >= dof && i < dof + n) ? src[so + i - dof] : 0xee;
          ASSERT_EQ(dst[i], want) << "src+" << so << " dst+" << dof << " n=" << n << " at " << i;
        }
      }
    }
  }
}

// Large copies stream (non-temporal stores) from 2 KiB on: the same bytes,
// on either side of that size and for every alignment.
TEST(CopyWords, CopiesExactlyTheRangeOfLargeCopies) {
  constexpr size_t kMax = 65536 + 64;
  std::vector<uint8_t> src(kMax + 16), dst(kMax + 32);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + i / 251);
  for (size_t n : {size_t{2040}, size_t{2047}, size_t{2048}, size_t{2049}, size_t{4109}, kMax}) {
    for (size_t so = 0; so < 8; so += 3) {
      for (size_t dof = 0; dof < 16; ++dof) {
        std::fill(dst.begin(), dst.end(), uint8_t{0xee});
        rpmem::transport::copy_words(dst.data() + dof, src.data() + so, n);
        for (size_t i = 0; i < dst.size(); ++i) {
          const uint8_t want = (i >= dof && i < dof + n) ? src[so + i - dof] : 0xee;
          ASSERT_EQ(dst[i], want) << "src+" << so << " dst+" << dof << " n=" << n << " at " << i;
        }
      }
    }
  }
}

TEST(CopyWords, WritesEachAlignedWordWithOneStore) {
  RPMEM_SKIP_UNDER_TSAN();
  // Another thread watches every aligned word of the destination while
  // copy_words rewrites it again and again, alternating two patterns that
  // differ in every byte.
  constexpr size_t kWords = 512;
  alignas(64) static uint64_t dst[kWords];
  std::vector<uint64_t> a(kWords), b(kWords);
  for (size_t i = 0; i < kWords; ++i) {
    a[i] = old_word(i);
    b[i] = new_word(i);
    dst[i] = a[i];
  }
  // Sources one byte off alignment, so the copy cannot simply move words.
  std::vector<uint8_t> sa(kWords * 8 + 1), sb(kWords * 8 + 1);
  std::memcpy(sa.data() + 1, a.data(), kWords * 8);
  std::memcpy(sb.data() + 1, b.data(), kWords * 8);
  std::atomic<bool> done{false};
  std::atomic<size_t> torn{0};
  std::thread watcher([&] {
    while (!done.load(std::memory_order_acquire))
      for (size_t i = 0; i < kWords; ++i) {
        uint64_t v = std::atomic_ref<uint64_t>(dst[i]).load(std::memory_order_relaxed);
        if (v != a[i] && v != b[i]) torn.fetch_add(1, std::memory_order_relaxed);
      }
  });
  for (int round = 0; round < 2000; ++round)
    rpmem::transport::copy_words(reinterpret_cast<uint8_t *>(dst), (round % 2 ? sa : sb).data() + 1,
                                 kWords * 8);
  done.store(true, std::memory_order_release);
  watcher.join();
  EXPECT_EQ(torn.load(), 0u);
}

}  // namespace
}  // namespace rpmem::transport
