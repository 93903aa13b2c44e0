// SPDX-License-Identifier: BSD-3-Clause
// The verbs provider end to end on a real device: a VerbsTarget serving an
// in-memory pool that records every persist, and initiator lanes, over RC
// queue pairs. Needs an RDMA device and its address in RPMEM_VM_IP (the
// soft-RoCE VM sets both); skips otherwise.
#include "common/transport/transport.h"
#include "common/transport/verbs/verbs_rdma.h"
#include "common/transport/verbs/verbs_wire.h"
#include "tests/recording_persister.h"
#include "tests/sanitizers.h"

#include <gtest/gtest.h>

#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace rpmem::transport {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using rpmem_test::kUnderTsan;

constexpr size_t kPoolSize = 4 << 20;
constexpr size_t kHeader = 4096;

using Persisted = rpmem_test::RecordingPersister::Call;

// A target pool in anonymous memory with a recording persister. It stands
// for a file in the page cache (the bounded path) unless the persister's
// medium is set to RAM or pmem before start() (the direct path).
class MemPool {
 public:
  MemPool()
      : base_(static_cast<uint8_t *>(::mmap(nullptr, kPoolSize, PROT_READ | PROT_WRITE,
                                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))),
        persister(base_),
        target(base_, kPoolSize, kHeader, persister) {}
  ~MemPool() { ::munmap(base_, kPoolSize); }
  MemPool(const MemPool &) = delete;
  MemPool &operator=(const MemPool &) = delete;
  uint8_t *base() const noexcept { return base_; }

 private:
  uint8_t *base_;

 public:
  rpmem_test::RecordingPersister persister;
  TargetPool target;
};

class VerbsLoop : public ::testing::Test {
 protected:
  void SetUp() override {
    // The target thread's stores and the test's reads of the pool are
    // ordered by the NIC (reply SEND, completion poll): invisible to TSan.
    if (kUnderTsan) GTEST_SKIP() << "TSan cannot see ordering through the RDMA device";
    if (!verbs::device_present()) GTEST_SKIP() << "no RDMA device";
    const char *ip = std::getenv("RPMEM_VM_IP");
    if (!ip || !*ip) GTEST_SKIP() << "RPMEM_VM_IP (the device's address) is not set";
    ip_ = ip;
    local_ = static_cast<uint8_t *>(
        ::mmap(nullptr, kPoolSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    fill(0, kPoolSize, 7);
    for (size_t i = 0; i < secret_.size(); ++i) secret_[i] = static_cast<uint8_t>(i * 7 + 1);
  }
  void TearDown() override {
    lanes_.clear();
    if (target_) target_->stop();
    target_.reset();
    if (local_) ::munmap(local_, kPoolSize);
  }

  void start(proto::PersistMethod method, unsigned max_lanes = 4, size_t window = 1 << 20) {
    TargetParams tp;
    tp.verbs_window = window;
    tp.listen_address = ip_;
    tp.secret = secret_;
    tp.max_lanes = max_lanes;
    tp.persist_method = method;
    tp.client_minor = proto::kMinor;
    tp.on_fatal = [this](const std::string &) { fatal_ = true; };
    target_ = make_target(proto::TransportKind::kVerbs, pool_.target, tp);
    target_->start();
  }
  InitiatorParams params(unsigned nlanes, unsigned wq = 50) {
    InitiatorParams p;
    p.host = ip_;
    p.port = target_->port();
    p.secret = secret_;
    p.nlanes = nlanes;
    p.local_base = local_;
    p.pool_size = kPoolSize;
    p.timeout = 2000ms;
    p.provider_data = target_->provider_data();
    p.work_queue_size = wq;
    return p;
  }
  void connect(unsigned nlanes, unsigned wq = 50) {
    auto r = connect_lanes(proto::TransportKind::kVerbs, params(nlanes, wq));
    ASSERT_TRUE(r.ok()) << r.error().message;
    lanes_ = std::move(r.value());
  }
  void fill(size_t off, size_t len, uint8_t seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < len; ++i) {
      x = x * 1103515245u + 12345u;
      local_[off + i] = static_cast<uint8_t>(x >> 16);
    }
  }
  bool same(size_t off, size_t len) {
    return std::memcmp(local_ + off, pool_.base() + off, len) == 0;
  }

  std::string ip_;
  proto::Secret secret_{};
  MemPool pool_;
  uint8_t *local_ = nullptr;
  std::unique_ptr<Target> target_;
  std::vector<std::unique_ptr<InitiatorLane>> lanes_;
  std::atomic<bool> fatal_{false};
};

TEST_F(VerbsLoop, PersistLandsInlineInChunksAndIsReportedDurable) {
  start(proto::PersistMethod::kGpspm);
  connect(1);
  ASSERT_EQ(lanes_[0]->write(proto::DataOp::kPersist, kHeader, 8, false), std::error_code{});
  ASSERT_EQ(lanes_[0]->write(proto::DataOp::kPersist, 65536, 200000, false), std::error_code{});
  EXPECT_TRUE(same(kHeader, 8));
  EXPECT_TRUE(same(65536, 200000));
  EXPECT_TRUE(pool_.persister.covered(65536, 200000));
  EXPECT_FALSE(same(0, kHeader)) << "nothing wrote the header";
}

TEST_F(VerbsLoop, RelaxedPersistWritesThenTheTargetFlushesTheRange) {
  start(proto::PersistMethod::kGpspm);
  connect(1);
  ASSERT_EQ(lanes_[0]->write(proto::DataOp::kPersist, 1 << 20, 1 << 20, true), std::error_code{});
  EXPECT_TRUE(same(1 << 20, 1 << 20));
  auto log = pool_.persister.calls();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].offset, 1u << 20);
  EXPECT_EQ(log[0].length, 1u << 20);
}

TEST_F(VerbsLoop, DeepPersistGoesThroughTheTarget) {
  pool_.persister.medium = rpmem_test::kRecordedPmem;
  start(proto::PersistMethod::kApm);
  connect(1);
  ASSERT_EQ(lanes_[0]->write(proto::DataOp::kDeepPersist, 8192, 5000, false), std::error_code{});
  EXPECT_TRUE(same(8192, 5000));
  auto log = pool_.persister.calls();
  ASSERT_FALSE(log.empty());
  EXPECT_TRUE(log[0].deep);
}

// RPMEM_WORK_QUEUE_SIZE = 8 and WQ-2, WQ-1, WQ, 3*WQ flushes, as PMDK's TEST22.
TEST_F(VerbsLoop, FlushesAreDurableAfterOneDrainAcrossWorkQueueBoundaries) {
  start(proto::PersistMethod::kGpspm);
  connect(1, 8);
  size_t off = kHeader;
  for (unsigned n : {6u, 7u, 8u, 24u}) {
    pool_.persister.clear_calls();
    const size_t first = off;
    for (unsigned i = 0; i < n; ++i) {
      fill(off, 3000, static_cast<uint8_t>(n + i));
      // With or without RPMEM_FLUSH_RELAXED: a posted WRITE, durable at drain.
      ASSERT_EQ(lanes_[0]->write(proto::DataOp::kFlush, off, 3000, i % 2 == 0), std::error_code{});
      off += 4096;  // not adjacent: one range each
    }
    EXPECT_TRUE(pool_.persister.calls().empty()) << "flush alone reached the target CPU";
    ASSERT_EQ(lanes_[0]->drain(), std::error_code{});
    for (size_t o = first; o < off; o += 4096) {
      EXPECT_TRUE(same(o, 3000)) << n << " flushes, offset " << o;
      EXPECT_TRUE(pool_.persister.covered(o, 3000)) << n << " flushes, offset " << o;
    }
  }
}

TEST_F(VerbsLoop, ApmRelaxedPersistAndDrainNeverReachTheTargetCpu) {
  pool_.persister.medium = rpmem_test::kRecordedPmem;
  start(proto::PersistMethod::kApm);
  connect(1);
  ASSERT_EQ(lanes_[0]->write(proto::DataOp::kPersist, 8192, 100000, true), std::error_code{});
  for (int i = 0; i < 20; ++i)
    ASSERT_EQ(lanes_[0]->write(proto::DataOp::kFlush, 200000 + i * 1000, 1000, true),
              std::error_code{});
  ASSERT_EQ(lanes_[0]->drain(), std::error_code{});
  EXPECT_TRUE(same(8192, 100000));
  EXPECT_TRUE(same(200000, 20000));
  EXPECT_TRUE(pool_.persister.calls().empty());
  // flags 0 keeps 8-byte atomicity: through the target.
  ASSERT_EQ(lanes_[0]->write(proto::DataOp::kPersist, 300000, 64, false), std::error_code{});
  EXPECT_EQ(pool_.persister.calls().size(), 1u);
}

TEST_F(VerbsLoop, ReadReturnsTheRemoteBytesAcrossChunks) {
  for (size_t i = 0; i < kPoolSize; ++i) pool_.base()[i] = static_cast<uint8_t>(i * 31 + 5);
  for (bool ram : {false, true}) {  // through the lane's window, then RDMA READs of the pool
    pool_.persister.medium = ram ? rpmem_test::kRecordedRam : rpmem_test::kRecordedFile;
    start(proto::PersistMethod::kGpspm);
    connect(1);
    std::vector<uint8_t> buf(700000);
    ASSERT_EQ(lanes_[0]->read(buf.data(), 12345, buf.size()), std::error_code{});
    EXPECT_EQ(std::memcmp(buf.data(), pool_.base() + 12345, buf.size()), 0) << "ram " << ram;
    ASSERT_EQ(lanes_[0]->read(buf.data(), 0, 8), std::error_code{});  // the header too
    EXPECT_EQ(std::memcmp(buf.data(), pool_.base(), 8), 0) << "ram " << ram;
    lanes_.clear();
    target_->stop();
  }
}

// A pool in the page cache: a NIC's writes would never be marked dirty
// there, so they land in the lane's window, and only the target's CPU
// copies them into the pool, when they are drained.
TEST_F(VerbsLoop, PageCachePoolGetsRdmaWritesOnlyThroughTheTargetCpu) {
  start(proto::PersistMethod::kApm);  // not for a page-cache pool: GPSPM
  auto info = verbs::decode_provider_info(target_->provider_data());
  ASSERT_TRUE(info);
  EXPECT_EQ(info->method, proto::PersistMethod::kGpspm);
  EXPECT_EQ(info->flags, verbs::kInfoStaged | verbs::kInfoBounded);
  EXPECT_EQ(info->window, 1u << 20);
  EXPECT_NE(info->raddr, reinterpret_cast<uintptr_t>(pool_.base()));
  connect(1);
  const size_t off = 3 * 4096 + 5, len = 10000;  // unaligned, over pages
  fill(off, len, 41);
  for (bool relaxed : {false, true}) {
    ASSERT_EQ(lanes_[0]->write(proto::DataOp::kFlush, off, len, relaxed), std::error_code{});
    EXPECT_FALSE(same(off, len)) << "the NIC wrote into the pool, relaxed " << relaxed;
    EXPECT_TRUE(pool_.persister.calls().empty())
        << "a flush reached the target CPU, relaxed " << relaxed;
    ASSERT_EQ(lanes_[0]->drain(), std::error_code{});
    EXPECT_TRUE(same(off, len)) << "relaxed " << relaxed;
    EXPECT_TRUE(pool_.persister.covered(off, len));
    std::vector<uint8_t> back(len);
    ASSERT_EQ(lanes_[0]->read(back.data(), off, len), std::error_code{});
    EXPECT_EQ(std::memcmp(back.data(), local_ + off, len), 0) << "relaxed " << relaxed;
    fill(off, len, 42);
    pool_.persister.clear_calls();
  }
  fill(1 << 20, 70000, 43);
  ASSERT_EQ(lanes_[0]->write(proto::DataOp::kPersist, 1 << 20, 70000, true), std::error_code{});
  EXPECT_TRUE(same(1 << 20, 70000));
  EXPECT_TRUE(pool_.persister.covered(1 << 20, 70000));
  // A read sees what was flushed and not drained yet: the window goes first.
  fill(2 << 20, 5000, 44);
  ASSERT_EQ(lanes_[0]->write(proto::DataOp::kFlush, 2 << 20, 5000, false), std::error_code{});
  std::vector<uint8_t> back(5000);
  ASSERT_EQ(lanes_[0]->read(back.data(), 2 << 20, 5000), std::error_code{});
  EXPECT_EQ(std::memcmp(back.data(), local_ + (2 << 20), 5000), 0);
  EXPECT_FALSE(fatal_.load());
}

// A flush stream of 64 times the window, with rewrites of the same bytes
// and an inline persist between flushes: the client waits for room, and
// every byte that reaches the pool is the last one written there.
TEST_F(VerbsLoop, FlushStreamMuchLargerThanTheWindowLosesNothing) {
  constexpr size_t kWindow = 32 << 10;  // the smallest window
  start(proto::PersistMethod::kGpspm, 1, kWindow);
  ASSERT_EQ(verbs::decode_provider_info(target_->provider_data())->window, kWindow);
  connect(1);
  // What the pool must hold: every byte as the last call that sent it left it.
  std::vector<uint8_t> expect(pool_.base(), pool_.base() + kPoolSize);
  uint32_t x = 12345;
  size_t bytes = 0;
  for (unsigned call = 0; bytes < 64 * kWindow; ++call) {
    x = x * 1103515245u + 12345u;
    size_t len = 1 + (x >> 8) % (3 * kWindow / 2);  // some longer than the window
    const size_t off = kHeader + (x >> 4) % (kPoolSize - kHeader - len);
    fill(off, len, static_cast<uint8_t>(x >> 24));
    if (call % 7 == 6) {  // flags 0, through the target at once
      len = std::min<size_t>(len, 4096);
      ASSERT_EQ(lanes_[0]->write(proto::DataOp::kPersist, off, len, false), std::error_code{});
    } else {
      ASSERT_EQ(lanes_[0]->write(proto::DataOp::kFlush, off, len, call % 2 == 0),
                std::error_code{});
    }
    std::memcpy(expect.data() + off, local_ + off, len);
    bytes += len;
  }
  ASSERT_EQ(lanes_[0]->drain(), std::error_code{});
  EXPECT_EQ(std::memcmp(expect.data(), pool_.base(), kPoolSize), 0);
  EXPECT_GT(pool_.persister.calls().size(), 64u) << "the window was drained as it filled";
  EXPECT_FALSE(fatal_.load());
}

// The direct path for a file in RAM: the NIC writes into the pool itself,
// and a flags-0 flush goes inline (a NIC's write is not word-atomic).
TEST_F(VerbsLoop, PoolInRamTakesRdmaWritesDirectly) {
  pool_.persister.medium = rpmem_test::kRecordedRam;
  start(proto::PersistMethod::kGpspm);
  auto info = verbs::decode_provider_info(target_->provider_data());
  ASSERT_TRUE(info);
  EXPECT_EQ(info->flags, 0);
  EXPECT_EQ(info->raddr, reinterpret_cast<uintptr_t>(pool_.base()));
  connect(1);
  fill(40000, 3000, 47);
  ASSERT_EQ(lanes_[0]->write(proto::DataOp::kFlush, 40000, 3000, true), std::error_code{});
  EXPECT_TRUE(same(40000, 3000)) << "the NIC wrote into the pool";
  ASSERT_EQ(lanes_[0]->drain(), std::error_code{});
  EXPECT_TRUE(pool_.persister.covered(40000, 3000));
}

// A client of protocol 1.3 knows no landing window: a page-cache pool is
// refused to it over verbs, with the reason (rpmemd falls back to tcp).
TEST_F(VerbsLoop, ClientThatPredatesTheBoundedPathIsRefusedItClearly) {
  TargetParams tp;
  tp.listen_address = ip_;
  tp.max_lanes = 1;
  tp.client_minor = proto::kMinorBounded - 1;
  try {
    make_target(proto::TransportKind::kVerbs, pool_.target, tp);
    ADD_FAILURE() << "served";
  } catch (const std::system_error &e) {
    EXPECT_EQ(e.code().value(), EPROTONOSUPPORT);
    EXPECT_NE(std::string(e.what()).find("page cache"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("protocol 1.3"), std::string::npos) << e.what();
  }
  pool_.persister.medium = rpmem_test::kRecordedRam;  // the direct path needs nothing new
  EXPECT_NO_THROW(make_target(proto::TransportKind::kVerbs, pool_.target, tp));
}

// Persistent memory: the NIC writes into the pool mapping itself, and a
// flags-0 flush, which a NIC's write would not keep word-atomic, goes
// inline through the target's CPU at once.
TEST_F(VerbsLoop, PmemPoolTakesRdmaWritesDirectlyAndFlagsZeroFlushInline) {
  pool_.persister.medium = rpmem_test::kRecordedPmem;
  start(proto::PersistMethod::kGpspm);
  auto info = verbs::decode_provider_info(target_->provider_data());
  ASSERT_TRUE(info);
  EXPECT_EQ(info->flags, 0);
  EXPECT_EQ(info->raddr, reinterpret_cast<uintptr_t>(pool_.base()));
  connect(1);
  fill(8192, 3000, 45);
  ASSERT_EQ(lanes_[0]->write(proto::DataOp::kFlush, 8192, 3000, false), std::error_code{});
  EXPECT_TRUE(same(8192, 3000));
  EXPECT_TRUE(pool_.persister.covered(8192, 3000)) << "a flags-0 flush is a persist here";
  pool_.persister.clear_calls();
  fill(20000, 3000, 46);
  ASSERT_EQ(lanes_[0]->write(proto::DataOp::kFlush, 20000, 3000, true), std::error_code{});
  EXPECT_TRUE(pool_.persister.calls().empty()) << "a relaxed flush is only posted";
  ASSERT_EQ(lanes_[0]->drain(), std::error_code{});
  EXPECT_TRUE(same(20000, 3000));
  EXPECT_TRUE(pool_.persister.covered(20000, 3000));
}

TEST_F(VerbsLoop, TargetFailureIsEioAndTheLaneStaysUsable) {
  start(proto::PersistMethod::kGpspm);
  connect(1);
  pool_.persister.fail_with(EIO);
  EXPECT_EQ(lanes_[0]->write(proto::DataOp::kPersist, 8192, 100, false), errc(EIO));
  ASSERT_EQ(lanes_[0]->write(proto::DataOp::kFlush, 16384, 100, true), std::error_code{});
  EXPECT_EQ(lanes_[0]->drain(), errc(EIO));
  pool_.persister.fail_with(0);
  EXPECT_EQ(lanes_[0]->write(proto::DataOp::kPersist, 8192, 100, true), std::error_code{});
}

TEST_F(VerbsLoop, WrongSecretIsRejectedAndTheSessionGoesOn) {
  start(proto::PersistMethod::kGpspm);
  auto p = params(1);
  p.secret[0] ^= 1;
  auto bad = connect_lanes(proto::TransportKind::kVerbs, p);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, errc(ECONNRESET));
  EXPECT_NE(bad.error().message.find("refused"), std::string::npos) << bad.error().message;
  connect(1);
  EXPECT_EQ(lanes_[0]->write(proto::DataOp::kPersist, 8192, 100, false), std::error_code{});
  EXPECT_FALSE(fatal_.load());
}

TEST_F(VerbsLoop, MoreLanesThanGrantedAreRejected) {
  start(proto::PersistMethod::kGpspm, 2);
  auto r = connect_lanes(proto::TransportKind::kVerbs, params(3));
  EXPECT_FALSE(r.ok());
}

TEST_F(VerbsLoop, StoppedTargetGivesEconnresetWithinTheTimeout) {
  start(proto::PersistMethod::kGpspm);
  connect(2);
  ASSERT_EQ(lanes_[0]->write(proto::DataOp::kPersist, 8192, 100, true), std::error_code{});
  target_->stop();
  auto t0 = Clock::now();
  EXPECT_EQ(lanes_[0]->write(proto::DataOp::kPersist, 8192, 100, true), errc(ECONNRESET));
  EXPECT_EQ(lanes_[1]->write(proto::DataOp::kPersist, 8192, 100, false), errc(ECONNRESET));
  EXPECT_LT(Clock::now() - t0, 5s);
  EXPECT_EQ(lanes_[0]->read(local_, 0, 8), errc(ECONNRESET)) << "dead lanes stay dead";
}

TEST_F(VerbsLoop, SeveralLanesInParallelShareNothing) {
  start(proto::PersistMethod::kGpspm, 4);
  connect(4);
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (unsigned l = 0; l < 4; ++l)
    threads.emplace_back([&, l] {
      const size_t base = kHeader + l * (1 << 20);
      for (int i = 0; i < 50; ++i) {
        const size_t off = base + static_cast<size_t>(i) * 4096;
        auto op = i % 3 == 0 ? proto::DataOp::kFlush : proto::DataOp::kPersist;
        if (lanes_[l]->write(op, off, 4000, i % 2 == 0)) ++errors;
      }
      if (lanes_[l]->drain()) ++errors;
    });
  for (auto &t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  for (unsigned l = 0; l < 4; ++l)
    for (int i = 0; i < 50; ++i)
      EXPECT_TRUE(same(kHeader + l * (1 << 20) + static_cast<size_t>(i) * 4096, 4000))
          << "lane " << l << " write " << i;
}

// Without CAP_IPC_LOCK, a memlock limit below the pool fails both sides up
// front with a message that names the limit.
TEST_F(VerbsLoop, MemlockLimitBelowThePoolIsAClearErrorOnBothSides) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    rlimit rl{64 * 1024, 64 * 1024};
    __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct d[2]{};
    if (::setrlimit(RLIMIT_MEMLOCK, &rl) != 0 || ::syscall(SYS_capget, &h, d) != 0) ::_exit(2);
    d[0].effective &= ~(1u << CAP_IPC_LOCK);
    if (::syscall(SYS_capset, &h, d) != 0) ::_exit(3);
    InitiatorParams p;
    p.host = ip_;
    p.port = 1;
    p.nlanes = 1;
    p.local_base = local_;
    p.pool_size = kPoolSize;
    p.provider_data = verbs::encode(verbs::ProviderInfo{});
    auto r = connect_lanes(proto::TransportKind::kVerbs, p);
    if (r.ok() || r.error().code != errc(ENOMEM) ||
        r.error().message.find("RLIMIT_MEMLOCK") == std::string::npos) {
      std::fprintf(stderr, "initiator: %s\n", r.ok() ? "connected" : r.error().message.c_str());
      ::_exit(4);
    }
    std::fprintf(stderr, "initiator says: %s\n", r.error().message.c_str());
    TargetParams tp;
    tp.listen_address = ip_;
    tp.max_lanes = 1;
    tp.client_minor = proto::kMinor;
    try {
      make_target(proto::TransportKind::kVerbs, pool_.target, tp);  // its windows: 1 MiB
      ::_exit(5);
    } catch (const std::system_error &e) {
      std::fprintf(stderr, "target says: %s\n", e.what());
      ::_exit(e.code().value() == ENOMEM &&
                      std::string(e.what()).find("RLIMIT_MEMLOCK") != std::string::npos
                  ? 0
                  : 6);
    }
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace rpmem::transport
