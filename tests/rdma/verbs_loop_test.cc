// SPDX-License-Identifier: BSD-3-Clause
// The verbs provider end to end on a real device: a VerbsTarget serving an
// in-memory pool that records every persist, and initiator lanes, over RC
// queue pairs. Needs an RDMA device and its address in RPMEM_VM_IP (the
// soft-RoCE VM sets both); skips otherwise.
#include "common/log.h"
#include "common/transport/lane_proof.h"
#include "common/transport/transport.h"
#include "common/transport/verbs/verbs_rdma.h"
#include "common/transport/verbs/verbs_wire.h"
#include "tests/rdma/roce_wire.h"
#include "tests/recording_persister.h"
#include "tests/sanitizers.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
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
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rpmem::transport {
namespace {

using namespace std::chrono_literals;
using rpmem_test::RoceCut;
using rpmem_test::WirePair;
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

  // A target's parameters: on `address`, the session's secret, a fatal
  // report noted in fatal_.
  TargetParams target_params(const std::string &address, unsigned max_lanes) {
    TargetParams tp;
    tp.listen_address = address;
    tp.secret = secret_;
    tp.max_lanes = max_lanes;
    tp.client_minor = proto::kMinor;
    tp.on_fatal = [this](const std::string &) { fatal_ = true; };
    return tp;
  }
  void start(proto::PersistMethod method, unsigned max_lanes = 4, size_t window = 1 << 20) {
    TargetParams tp = target_params(ip_, max_lanes);
    tp.verbs_window = window;
    tp.persist_method = method;
    target_ = make_target(proto::TransportKind::kVerbs, pool_.target, tp);
    target_->start();
  }
  // Lanes of the local pool to `target` at `host`.
  InitiatorParams params_for(const Target &target, const std::string &host, unsigned nlanes,
                             unsigned wq = 50) {
    InitiatorParams p;
    p.host = host;
    p.port = target.port();
    p.secret = secret_;
    p.proofs = true;
    p.nlanes = nlanes;
    p.local_base = local_;
    p.pool_size = kPoolSize;
    p.timeout = 2000ms;
    p.provider_data = target.provider_data();
    p.work_queue_size = wq;
    return p;
  }
  InitiatorParams params(unsigned nlanes, unsigned wq = 50) {
    return params_for(*target_, ip_, nlanes, wq);
  }
  void connect(unsigned nlanes, unsigned wq = 50) {
    auto r = connect_lanes(proto::TransportKind::kVerbs, params(nlanes, wq));
    ASSERT_TRUE(r.ok()) << r.error().message;
    lanes_ = std::move(r.value());
  }
  // A GPSPM target on `medium` that the NIC writes into directly: it
  // advertises no window but the pool's own address; one lane to it.
  void start_direct(const MediumTraits &medium) {
    pool_.persister.medium = medium;
    start(proto::PersistMethod::kGpspm);
    auto info = verbs::decode_provider_info(target_->provider_data());
    ASSERT_TRUE(info);
    EXPECT_EQ(info->flags, 0);
    EXPECT_EQ(info->raddr, reinterpret_cast<uintptr_t>(pool_.base()));
    connect(1);
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
  ASSERT_NO_FATAL_FAILURE(start_direct(rpmem_test::kRecordedRam));
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
  ASSERT_NO_FATAL_FAILURE(start_direct(rpmem_test::kRecordedPmem));
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

// A connection of the test's own with private data as given: what a
// client or a stranger replaying its connect request sends.
struct RawConnect {
  verbs::EventChannelPtr channel;
  verbs::PdPtr pd;
  verbs::CompChannelPtr comp;
  verbs::CqPtr cq;
  verbs::CmIdPtr id;  // last: its queue pair goes before the queue and domain

  // 0 once established; ECONNREFUSED when the target rejected it.
  std::error_code dial(const std::string &ip, uint16_t port, const uint8_t *pdata, size_t len) {
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(port);
    if (::inet_pton(AF_INET, ip.c_str(), &dst.sin_addr) != 1) return errc(EINVAL);
    auto ch = verbs::create_event_channel();
    if (!ch) return ch.error().code;
    channel = std::move(ch.value());
    auto cm = verbs::create_id(channel.get());
    if (!cm) return cm.error().code;
    id = std::move(cm.value());
    if (auto ec = verbs::resolve(id.get(), reinterpret_cast<sockaddr *>(&dst), 2000)) return ec;
    auto d = verbs::alloc_pd(id->verbs);
    if (!d) return d.error().code;
    pd = std::move(d.value());
    auto c = verbs::create_comp_channel(id->verbs);
    if (!c) return c.error().code;
    comp = std::move(c.value());
    auto q = verbs::create_cq(id->verbs, 4, comp.get());
    if (!q) return q.error().code;
    cq = std::move(q.value());
    if (auto ec = verbs::create_qp(id.get(), pd.get(), cq.get(), 2, 1)) return ec;
    if (auto ec = verbs::connect(id.get(), pdata, static_cast<uint8_t>(len))) return ec;
    return verbs::expect_event(channel.get(), RDMA_CM_EVENT_ESTABLISHED, 3000, "connect", true);
  }
  // Whether the target ended this connection within `ms`.
  bool disconnected(int ms) {
    verbs::CmEvent ev;
    return !verbs::next_event(channel.get(), ms, ev) && ev.type == RDMA_CM_EVENT_DISCONNECTED;
  }
};

// Lane 0's connect request, recorded off the wire and played by a stranger
// as it was, at the next epoch and at 65535: each is rejected, the lane's
// queue pair stays connected and no lane comes back; the client's own
// claim for epoch 1 then comes back (the stranger burnt no epoch).
TEST_F(VerbsLoop, ARecordedConnectRequestCannotTakeTheLaneOver) {
  TargetParams tp = target_params(ip_, 1);
  tp.counters = std::make_shared<TargetCounters>(1);
  target_ = make_target(proto::TransportKind::kVerbs, pool_.target, tp);
  target_->start();
  auto request = [&](uint16_t epoch) {
    verbs::ConnectData cd{{}, 0, epoch, 1};
    EXPECT_FALSE(prove(secret_, {0, epoch, 1}, true, cd.proof));
    uint8_t raw[verbs::kConnectDataSize];
    verbs::encode(cd, raw);
    return std::vector<uint8_t>(raw, raw + sizeof(raw));
  };
  RawConnect lane;
  const std::vector<uint8_t> recorded = request(0);
  ASSERT_EQ(lane.dial(ip_, target_->port(), recorded.data(), recorded.size()), std::error_code{});
  for (uint16_t epoch : {uint16_t{0}, uint16_t{1}, uint16_t{65535}}) {
    std::vector<uint8_t> b = recorded;
    rpmem::wire::store_le(b.data() + 4 + proto::kSecretSize + 2, epoch, 2);
    RawConnect stranger;
    EXPECT_NE(stranger.dial(ip_, target_->port(), b.data(), b.size()), std::error_code{})
        << "a recorded connect request admitted at epoch " << epoch;
  }
  EXPECT_FALSE(lane.disconnected(500)) << "the stranger took the lane";
  EXPECT_EQ(tp.counters->lanes_returned(), 0u);
  const std::vector<uint8_t> mine = request(1);
  RawConnect back;
  ASSERT_EQ(back.dial(ip_, target_->port(), mine.data(), mine.size()), std::error_code{});
  EXPECT_TRUE(lane.disconnected(3000)) << "the lane's old queue pair was not retired";
  EXPECT_EQ(tp.counters->lanes_returned(), 1u);
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

// A target of its own and its client's lanes across the wire, for the
// tests that cut it (two of them: the direct path and the bounded one).
struct Side {
  MemPool pool;
  std::shared_ptr<TargetCounters> counters = std::make_shared<TargetCounters>(2);
  std::unique_ptr<Target> target;
  std::vector<std::unique_ptr<InitiatorLane>> lanes;
};

class VerbsCut : public VerbsLoop {
 protected:
  void SetUp() override {
    VerbsLoop::SetUp();
    if (IsSkipped()) return;
    // The lanes' and the targets' notices (a lane connecting again, coming
    // back) in the test's output.
    log::configure(log::Level::kNotice, log::Sink::kStderr, {}, "verbs-cut");
    ASSERT_TRUE(WirePair::up()) << "no wire pair of soft-RoCE devices (wire-pair.sh up)";
  }
  void TearDown() override {
    for (Side &side : sides_) {
      side.lanes.clear();
      if (side.target) side.target->stop();
    }
    VerbsLoop::TearDown();
  }
  // Side `i`'s target (direct: the pool in RAM) and `nlanes` lanes that
  // come back, bounded by `timeout`.
  void start_side(unsigned i, bool direct, std::chrono::milliseconds timeout, unsigned nlanes = 2) {
    Side &side = sides_[i];
    if (direct) side.pool.persister.medium = rpmem_test::kRecordedRam;
    TargetParams tp = target_params(WirePair::kTarget, 2);
    tp.counters = side.counters;
    side.target = make_target(proto::TransportKind::kVerbs, side.pool.target, tp);
    side.target->start();
    auto r = connect_lanes(proto::TransportKind::kVerbs, side_params(i, nlanes, timeout));
    ASSERT_TRUE(r.ok()) << r.error().message;
    side.lanes = std::move(r.value());
  }
  InitiatorParams side_params(unsigned i, unsigned nlanes, std::chrono::milliseconds timeout) {
    InitiatorParams p = params_for(*sides_[i].target, WirePair::kTarget, nlanes);
    p.timeout = timeout;
    p.comeback = true;
    return p;
  }
  struct Call {
    Clock::time_point start, end;
  };
  // Four workers (a lane each, two per side: the direct path and the
  // landing windows) write while `fault` runs (it returns once the link is
  // whole again) and 3 s after: every call succeeds, and every byte
  // acknowledged is in the target's pool. The calls' times; `healed`: when
  // `fault` returned.
  std::vector<Call> write_through(const std::function<void()> &fault, Clock::time_point &healed);
  // The same through a cut of `seconds` (RoceCut(cut_dev)): the stalled
  // calls return soon after the heal, and the lanes came back.
  void ride_out(const std::string &cut_dev, std::chrono::seconds seconds);

  Side sides_[2];
};

std::vector<VerbsCut::Call> VerbsCut::write_through(const std::function<void()> &fault,
                                                    Clock::time_point &healed) {
  start_side(0, true, 20s);  // 20 s: librpmem's default bound
  start_side(1, false, 20s);
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<std::string> errors;
  std::vector<Call> calls;
  unsigned slots[4] = {};
  constexpr size_t kSlot = 8192, kBytes = 8000;
  auto region = [](unsigned w) { return kHeader + w * (512 << 10); };
  const auto begun = Clock::now();
  auto worker = [&](unsigned w) {
    InitiatorLane &lane = *sides_[w / 2].lanes[w % 2];
    std::vector<Call> mine;
    unsigned i = 0;
    for (; !stop.load(); ++i) {
      const size_t off = region(w) + (i % 48) * kSlot;
      fill(off, kBytes, static_cast<uint8_t>(w * 61 + i));
      const auto t0 = Clock::now();
      std::error_code ec;
      switch (i % 4) {
        case 0:  // inline, through the target
          ec = lane.write(proto::DataOp::kPersist, off, kBytes, 0);
          break;
        case 1:  // RDMA WRITE, then the target makes it durable
          ec = lane.write(proto::DataOp::kPersist, off, kBytes, kWriteRelaxed);
          break;
        case 2:  // two flushes, one drain
          ec = lane.write(proto::DataOp::kFlush, off, kBytes / 2, kWriteRelaxed);
          if (!ec) ec = lane.write(proto::DataOp::kFlush, off + kBytes / 2, kBytes / 2, 0);
          if (!ec) ec = lane.drain();
          break;
        default:
          ec = lane.write(proto::DataOp::kFlush, off, kBytes, 0);
          if (!ec) ec = lane.drain();
      }
      mine.push_back({t0, Clock::now()});
      if (mine.back().end - t0 > 1s)
        std::printf("worker %u call %u took %.2f s, ended %.2f s after the start\n", w, i,
                    std::chrono::duration<double>(mine.back().end - t0).count(),
                    std::chrono::duration<double>(mine.back().end - begun).count());
      if (ec) {
        std::lock_guard lock(mu);
        errors.push_back("worker " + std::to_string(w) + " call " + std::to_string(i) + ": " +
                         ec.message() + " (" + lane.failure() + ")");
        break;
      }
      // Acknowledged: the bytes are in the target's pool now (later calls
      // write the slot again, so only now can a loss be seen).
      if (std::memcmp(local_ + off, sides_[w / 2].pool.base() + off, kBytes) != 0) {
        std::lock_guard lock(mu);
        errors.push_back("worker " + std::to_string(w) + " call " + std::to_string(i) +
                         ": acknowledged, but its bytes are not in the target's pool");
        break;
      }
    }
    std::lock_guard lock(mu);
    slots[w] = std::min(i, 48u);
    calls.insert(calls.end(), mine.begin(), mine.end());
  };
  std::vector<std::thread> workers;
  for (unsigned w = 0; w < 4; ++w) workers.emplace_back(worker, w);
  std::this_thread::sleep_for(1s);
  std::printf("fault at %.2f s\n", std::chrono::duration<double>(Clock::now() - begun).count());
  fault();
  healed = Clock::now();
  std::this_thread::sleep_for(3s);
  stop = true;
  for (auto &t : workers) t.join();
  for (const auto &e : errors) ADD_FAILURE() << e;
  EXPECT_TRUE(errors.empty());
  // Every region holds the last bytes written into each of its slots.
  for (unsigned w = 0; w < 4; ++w)
    for (unsigned k = 0; k < slots[w]; ++k) {
      const size_t off = region(w) + k * kSlot;
      EXPECT_EQ(std::memcmp(local_ + off, sides_[w / 2].pool.base() + off, kBytes), 0)
          << "worker " << w << " (" << (w < 2 ? "direct path" : "landing windows") << "), slot "
          << k;
    }
  EXPECT_FALSE(fatal_.load());
  return calls;
}

void VerbsCut::ride_out(const std::string &cut_dev, std::chrono::seconds seconds) {
  Clock::time_point healed;
  const auto calls = write_through(
      [&] {
        RoceCut cut(cut_dev);
        EXPECT_TRUE(cut.on()) << "iptables cannot drop RoCE's packets here";
        std::this_thread::sleep_for(seconds);
      },
      healed);
  if (HasFailure()) return;
  // The calls the cut stalled came back soon after the heal.
  Clock::duration after_heal{};
  unsigned stalled = 0;
  for (const Call &c : calls)
    if (c.start < healed && c.end > healed && c.end - c.start > seconds / 2) {
      ++stalled;
      after_heal = std::max(after_heal, c.end - healed);
    }
  std::printf("%u stalled calls; the last returned %.2f s after the heal\n", stalled,
              std::chrono::duration<double>(after_heal).count());
  EXPECT_EQ(stalled, 4u);
  EXPECT_LT(after_heal, 3s);
  for (Side &side : sides_) EXPECT_GE(side.counters->lanes_returned(), 1u);
}

// Lanes of protocol minor 8 come back after their queue pairs failed: ten
// seconds without a RoCE packet (past the queue pairs' retries, so they
// fail) are latency.
TEST_F(VerbsCut, TenSecondsWithoutALinkAreLatencyForLanesThatComeBack) {
  ride_out("", 10s);
  // A recorded connect request replayed: lane 0 at epoch 0 again.
  auto replayed = connect_lanes(proto::TransportKind::kVerbs, side_params(1, 2, 3s));
  EXPECT_FALSE(replayed.ok()) << "a lane connection of a past epoch was admitted";
  fill(kHeader, 4096, 99);
  EXPECT_EQ(sides_[1].lanes[0]->write(proto::DataOp::kPersist, kHeader, 4096, 0), std::error_code{})
      << "the session goes on";
  EXPECT_EQ(std::memcmp(local_ + kHeader, sides_[1].pool.base() + kHeader, 4096), 0);
}

// One way only: the target's packets to the client are lost (its replies,
// its acknowledgements), the client's get through.
TEST_F(VerbsCut, TenSecondsOfOneWayLossAreLatencyForLanesThatComeBack) { ride_out("rpmwA", 10s); }

// A lossy link for 6 s (netem on both ends of the wire: 2 % lost, 5 %
// reordered, 1 % duplicated, 1 ms +- 0.5 ms, the link of issue 43's
// findings): slower, and no call fails, nothing is lost.
TEST_F(VerbsCut, ALossyLinkIsSlowerAndLosesNothing) {
  Clock::time_point healed;
  write_through(
      [] {
        for (const char *dev : {"rpmwA", "rpmwB"}) {
          const std::string cmd = std::string("tc qdisc add dev ") + dev +
                                  " root netem delay 1ms 0.5ms loss 2% reorder 5% duplicate 1%";
          EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
        }
        std::this_thread::sleep_for(6s);
        for (const char *dev : {"rpmwA", "rpmwB"})
          [[maybe_unused]] int rc =
              std::system((std::string("tc qdisc del dev ") + dev + " root").c_str());
      },
      healed);
}

// Past the bound the stalled call fails, within the bound of the stall's
// start, says why, and the lane stays dead after the link is back.
TEST_F(VerbsCut, ALinkCutPastTheBoundFailsTheCallInTimeAndSaysWhy) {
  start_side(1, false, 4s, 1);
  InitiatorLane &lane = *sides_[1].lanes[0];
  fill(8192, 4096, 3);
  ASSERT_EQ(lane.write(proto::DataOp::kPersist, 8192, 4096, 0), std::error_code{});
  RoceCut cut;
  ASSERT_TRUE(cut.on()) << "iptables cannot drop RoCE's packets here";
  const auto t0 = Clock::now();
  EXPECT_EQ(lane.write(proto::DataOp::kPersist, 8192, 4096, 0), errc(ECONNRESET));
  const auto took = Clock::now() - t0;
  EXPECT_GE(took, 3900ms);
  EXPECT_LT(took, 6s);
  EXPECT_NE(lane.failure().find("no answer from the target for 4 s"), std::string::npos)
      << lane.failure();
  cut.heal();
  EXPECT_EQ(lane.write(proto::DataOp::kPersist, 8192, 4096, 0), errc(ECONNRESET))
      << "a lane given up on stays dead";
  const auto c0 = Clock::now();
  sides_[1].lanes.clear();
  EXPECT_LT(Clock::now() - c0, 1s) << "closing a dead lane waits for nothing";
  EXPECT_FALSE(fatal_.load());
}

// A restarted service in small: the session moves (LaneRoute: another
// port, secret and registration of the pool) and a lane whose queue pair
// failed comes back on the new one, writes what was not made durable and
// goes on; a session that lands RDMA writes another way (another window)
// cannot take the place, and the lane fails within its bound saying why.
TEST_F(VerbsLoop, ALaneFollowsItsSessionToARestartedTargetOfTheSameLandingPath) {
  start(proto::PersistMethod::kGpspm);  // lane windows of 1 MiB
  auto p = params(1);
  p.timeout = 4s;
  p.comeback = true;
  p.route =
      std::make_shared<LaneRoute>(LaneRoute::Where{p.port, p.secret, {}, target_->provider_data()});
  auto r = connect_lanes(proto::TransportKind::kVerbs, p);
  ASSERT_TRUE(r.ok()) << r.error().message;
  lanes_ = std::move(r.value());
  fill(8192, 4096, 5);
  ASSERT_EQ(lanes_[0]->write(proto::DataOp::kFlush, 8192, 4096, 0), std::error_code{});

  // The same pool served again by a new target of a new session.
  TargetParams tp = target_params(ip_, 4);
  tp.secret[0] ^= 0x5a;
  const proto::Secret next = tp.secret;
  auto again = make_target(proto::TransportKind::kVerbs, pool_.target, tp);
  again->start();
  p.route->set(LaneRoute::Where{again->port(), next, {}, again->provider_data()});
  target_->stop();  // the old session ends: the lane's queue pair fails
  EXPECT_EQ(lanes_[0]->drain(), std::error_code{}) << lanes_[0]->failure();
  EXPECT_TRUE(same(8192, 4096)) << "the flush was written again to the new session";
  fill(16384, 4096, 6);
  EXPECT_EQ(lanes_[0]->write(proto::DataOp::kPersist, 16384, 4096, 0), std::error_code{});
  EXPECT_TRUE(same(16384, 4096));

  // And a session whose windows are another size: not taken.
  tp.verbs_window = 256 << 10;
  tp.secret[1] ^= 0x33;
  auto other = make_target(proto::TransportKind::kVerbs, pool_.target, tp);
  other->start();
  p.route->set(LaneRoute::Where{other->port(), tp.secret, {}, other->provider_data()});
  again->stop();
  EXPECT_EQ(lanes_[0]->write(proto::DataOp::kPersist, 16384, 4096, 0), errc(ECONNRESET));
  EXPECT_NE(lanes_[0]->failure().find("lands RDMA writes another way"), std::string::npos)
      << lanes_[0]->failure();
  lanes_.clear();
  other->stop();
  EXPECT_FALSE(fatal_.load());
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
