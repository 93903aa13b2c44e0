// SPDX-License-Identifier: BSD-3-Clause
// Replication end to end: every kind of write lands in the part files, byte
// for byte; attributes, read, remove and lanes behave as documented.
#include "tests/integration/harness.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>

#include "librpmem.h"

namespace rpmem_test {
namespace {

constexpr size_t kPool = 4 * kMiB;

class Replication : public ::testing::Test {
 protected:
  Target target_;
  LocalPool local_{kPool};
  unsigned nlanes_ = 4;

  RPMEMpool *create(const std::string &set, const rpmem_pool_attr *attr, size_t size = kPool) {
    RPMEMpool *rpp = rpmem_create("127.0.0.1", set.c_str(), local_.data(), size, &nlanes_, attr);
    EXPECT_NE(rpp, nullptr) << rpmem_errormsg() << " (errno " << errno << ")\n"
                            << target_.log_text();
    return rpp;
  }
  RPMEMpool *open(const std::string &set, rpmem_pool_attr *attr, size_t size = kPool) {
    RPMEMpool *rpp = rpmem_open("127.0.0.1", set.c_str(), local_.data(), size, &nlanes_, attr);
    EXPECT_NE(rpp, nullptr) << rpmem_errormsg() << " (errno " << errno << ")\n"
                            << target_.log_text();
    return rpp;
  }
  std::vector<uint8_t> remote(const std::vector<Part> &parts, bool each_hdr = true) {
    return target_.remote_pool(parts, each_hdr);
  }
  void use_lanes_through(const std::string &rpmemd_cmd, unsigned nlanes,
                         const std::string &log_line);
};

const std::vector<Part> kOnePart{{kPool, "p.part0"}};

TEST_F(Replication, PersistLandsInPartFileByteForByteWithoutHeaders) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  RPMEMpool *rpp = create("p.set", nullptr);
  ASSERT_NE(rpp, nullptr);
  // Aligned, unaligned, tiny, large, offset 0 (no header to protect).
  const std::pair<size_t, size_t> ranges[] = {{0, 64},   {4096, 4096},     {13, 1},
                                              {8191, 3}, {100000, 777777}, {kPool - 5, 5}};
  for (auto [off, len] : ranges) {
    local_.fill(off, len, static_cast<uint8_t>(off));
    ASSERT_EQ(rpmem_persist(rpp, off, len, 0, 0), 0) << rpmem_errormsg();
  }
  local_.fill(2 * kMiB, kMiB, 9);
  ASSERT_EQ(rpmem_persist(rpp, 2 * kMiB, kMiB, 1, RPMEM_PERSIST_RELAXED), 0);
  auto r = remote(kOnePart);
  ASSERT_EQ(r.size(), kPool);
  for (auto [off, len] : ranges) EXPECT_TRUE(same_bytes(r.data(), local_.data(), off, len));
  EXPECT_TRUE(same_bytes(r.data(), local_.data(), 2 * kMiB, kMiB));
  // Bytes never persisted are still zero on the target.
  EXPECT_EQ(r[200], 0);
  EXPECT_EQ(rpmem_close(rpp), 0) << rpmem_errormsg();
}

TEST_F(Replication, PersistWithHeadersLandsAfterHeaderAndKeepsIt) {
  target_.write_poolset("p.set", kOnePart);
  rpmem_pool_attr attr = sample_attr(3);
  RPMEMpool *rpp = create("p.set", &attr);
  ASSERT_NE(rpp, nullptr);
  auto before = remote(kOnePart);
  ASSERT_EQ(std::memcmp(before.data(), "PMEMOBJ", 8), 0) << "pool header signature";
  ASSERT_EQ(rpmem_persist(rpp, 4096, kPool - 4096, 0, 0), 0) << rpmem_errormsg();
  auto after = remote(kOnePart);
  EXPECT_TRUE(same_bytes(after.data(), local_.data(), 4096, kPool - 4096));
  EXPECT_TRUE(same_bytes(after.data(), before.data(), 0, 4096)) << "header changed";
  EXPECT_EQ(rpmem_close(rpp), 0);
}

TEST_F(Replication, DeepPersistLandsAndIsAllowedBelow4096WithoutHeaders) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  RPMEMpool *rpp = create("p.set", nullptr);
  ASSERT_NE(rpp, nullptr);
  ASSERT_EQ(rpmem_deep_persist(rpp, 0, 3 * 4096 + 7, 2), 0) << rpmem_errormsg();
  ASSERT_EQ(rpmem_deep_persist(rpp, kMiB + 1, 65536, 3), 0) << rpmem_errormsg();
  auto r = remote(kOnePart);
  EXPECT_TRUE(same_bytes(r.data(), local_.data(), 0, 3 * 4096 + 7));
  EXPECT_TRUE(same_bytes(r.data(), local_.data(), kMiB + 1, 65536));
  EXPECT_EQ(rpmem_close(rpp), 0);
}

TEST_F(Replication, FlushesAreDurableAfterDrain) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  RPMEMpool *rpp = create("p.set", nullptr);
  ASSERT_NE(rpp, nullptr);
  for (unsigned i = 0; i < 16; ++i) {
    unsigned flags = (i % 2) ? RPMEM_FLUSH_RELAXED : 0;
    ASSERT_EQ(rpmem_flush(rpp, 8192 + i * 4096 * 3, 4096, 1, flags), 0) << rpmem_errormsg();
  }
  ASSERT_EQ(rpmem_drain(rpp, 1, 0), 0) << rpmem_errormsg();
  auto r = remote(kOnePart);
  for (unsigned i = 0; i < 16; ++i)
    EXPECT_TRUE(same_bytes(r.data(), local_.data(), 8192 + i * 4096 * 3, 4096)) << i;
  EXPECT_EQ(r[8192 + 4096], 0) << "a byte between flushed ranges was written";
  // A drain with nothing flushed is fine too.
  EXPECT_EQ(rpmem_drain(rpp, 0, 0), 0);
  EXPECT_EQ(rpmem_close(rpp), 0);
}

TEST_F(Replication, ReadReturnsTheRemoteBytesIncludingTheHeader) {
  target_.write_poolset("p.set", kOnePart);
  rpmem_pool_attr attr = sample_attr(5);
  RPMEMpool *rpp = create("p.set", &attr);
  ASSERT_NE(rpp, nullptr);
  ASSERT_EQ(rpmem_persist(rpp, 4096, 2 * kMiB, 0, 0), 0);
  std::vector<uint8_t> persisted(local_.data() + 4096, local_.data() + 4096 + 2 * kMiB);
  local_.fill(4096, 2 * kMiB, 77);  // the local copy moves on; the remote one must not
  std::vector<uint8_t> buf(2 * kMiB);
  ASSERT_EQ(rpmem_read(rpp, buf.data(), 4096, buf.size(), 1), 0) << rpmem_errormsg();
  EXPECT_EQ(buf, persisted);
  uint8_t hdr[4096];
  ASSERT_EQ(rpmem_read(rpp, hdr, 0, sizeof(hdr), 2), 0) << "reading the header is allowed";
  EXPECT_EQ(std::memcmp(hdr, "PMEMOBJ", 8), 0);
  EXPECT_EQ(rpmem_read(rpp, hdr, 0, 0, 2), 0);
  // The daemon rewrites the header on set_attr: a read returns the new one
  // (over verbs, RDMA READs of a page-cache pool come from its staging buffer).
  rpmem_pool_attr changed = sample_attr(6);
  ASSERT_EQ(rpmem_set_attr(rpp, &changed), 0) << rpmem_errormsg();
  ASSERT_EQ(rpmem_read(rpp, hdr, 0, sizeof(hdr), 2), 0) << rpmem_errormsg();
  auto part = read_file(target_.dir() + "/p.part0");
  ASSERT_GE(part.size(), sizeof(hdr));
  EXPECT_EQ(std::memcmp(hdr, part.data(), sizeof(hdr)), 0) << "a stale header was read";
  EXPECT_EQ(rpmem_close(rpp), 0);
}

TEST_F(Replication, OpenReturnsTheCreateAttributesAndKeepsTheData) {
  target_.write_poolset("p.set", kOnePart);
  rpmem_pool_attr attr = sample_attr(7);
  RPMEMpool *rpp = create("p.set", &attr);
  ASSERT_NE(rpp, nullptr);
  ASSERT_EQ(rpmem_persist(rpp, 4096, 65536, 0, 0), 0);
  ASSERT_EQ(rpmem_close(rpp), 0);

  rpmem_pool_attr got{};
  rpp = open("p.set", &got);
  ASSERT_NE(rpp, nullptr);
  EXPECT_EQ(std::memcmp(&got, &attr, sizeof(attr)), 0);
  std::vector<uint8_t> buf(65536);
  ASSERT_EQ(rpmem_read(rpp, buf.data(), 4096, buf.size(), 0), 0);
  EXPECT_TRUE(same_bytes(buf.data() - 4096, local_.data(), 4096, 65536));
  EXPECT_EQ(rpmem_close(rpp), 0);
}

TEST_F(Replication, OpenWithoutHeadersReturnsZeroAttributes) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  RPMEMpool *rpp = create("p.set", nullptr);
  ASSERT_NE(rpp, nullptr);
  ASSERT_EQ(rpmem_close(rpp), 0);
  rpmem_pool_attr got = sample_attr(1);
  rpp = open("p.set", &got);
  ASSERT_NE(rpp, nullptr);
  rpmem_pool_attr zero{};
  EXPECT_EQ(std::memcmp(&got, &zero, sizeof(got)), 0);
  EXPECT_EQ(rpmem_persist(rpp, 0, 100, 0, 0), 0) << "no header: offset 0 is the client's";
  EXPECT_EQ(rpmem_close(rpp), 0);
}

TEST_F(Replication, SetAttrIsWhatTheNextOpenReturns) {
  target_.write_poolset("p.set", kOnePart);
  rpmem_pool_attr attr = sample_attr(9);
  RPMEMpool *rpp = create("p.set", &attr);
  ASSERT_NE(rpp, nullptr);
  rpmem_pool_attr changed = sample_attr(40);
  ASSERT_EQ(rpmem_set_attr(rpp, &changed), 0) << rpmem_errormsg();
  ASSERT_EQ(rpmem_close(rpp), 0);
  rpmem_pool_attr got{};
  rpp = open("p.set", &got);
  ASSERT_NE(rpp, nullptr);
  EXPECT_EQ(std::memcmp(&got, &changed, sizeof(got)), 0);
  EXPECT_EQ(rpmem_close(rpp), 0);
}

TEST_F(Replication, SetAttrNullWritesZeroedAttributes) {
  target_.write_poolset("p.set", kOnePart);
  rpmem_pool_attr attr = sample_attr(11);
  RPMEMpool *rpp = create("p.set", &attr);
  ASSERT_NE(rpp, nullptr);
  ASSERT_EQ(rpmem_set_attr(rpp, nullptr), 0) << rpmem_errormsg();
  ASSERT_EQ(rpmem_close(rpp), 0);
  rpmem_pool_attr got = sample_attr(1);
  rpp = open("p.set", &got);
  ASSERT_NE(rpp, nullptr) << "a pool with zeroed attributes still opens";
  EXPECT_EQ(got.major, 0u);
  EXPECT_EQ(std::memcmp(got.signature, "\0\0\0\0\0\0\0\0", 8), 0);
  // It still has a header: offsets below 4096 stay protected.
  EXPECT_EQ(rpmem_persist(rpp, 0, 8, 0, 0), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rpmem_close(rpp), 0);
}

TEST_F(Replication, TwoPartsWithHeadersMapClientOffsetsAcrossParts) {
  const std::vector<Part> parts{{2 * kMiB, "a.part"}, {4 * kMiB, "b.part"}};
  target_.write_poolset("two.set", parts);
  rpmem_pool_attr attr = sample_attr(13);
  const size_t net = 6 * kMiB - 4096;  // the second part's header is not addressable
  LocalPool big(6 * kMiB);
  unsigned nl = 2;
  RPMEMpool *rpp = rpmem_create("127.0.0.1", "two.set", big.data(), net / 4096 * 4096, &nl, &attr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << target_.log_text();
  // One persist that crosses from part 0 into part 1.
  ASSERT_EQ(rpmem_persist(rpp, 2 * kMiB - 100, 300, 0, 0), 0) << rpmem_errormsg();
  ASSERT_EQ(rpmem_persist(rpp, 5 * kMiB, 4096, 1, 0), 0);
  auto r = remote(parts, true);
  ASSERT_EQ(r.size(), net);
  EXPECT_TRUE(same_bytes(r.data(), big.data(), 2 * kMiB - 100, 300));
  EXPECT_TRUE(same_bytes(r.data(), big.data(), 5 * kMiB, 4096));
  // Part 1's own header (file bytes 0..4095) was written by the target, not by us.
  auto b = read_file(target_.part_path("b.part"));
  EXPECT_EQ(std::memcmp(b.data(), "PMEMOBJ", 8), 0);
  EXPECT_EQ(rpmem_close(rpp), 0);
}

TEST_F(Replication, SingleHeaderPoolSetMapsLaterPartsWhole) {
  const std::vector<Part> parts{{2 * kMiB, "a.part"}, {2 * kMiB, "b.part"}};
  target_.write_poolset("one.set", parts, "OPTION SINGLEHDR\n");
  rpmem_pool_attr attr = sample_attr(15);
  attr.incompat_features |= 0x1;  // SINGLEHDR
  RPMEMpool *rpp = create("one.set", &attr);
  ASSERT_NE(rpp, nullptr);
  ASSERT_EQ(rpmem_persist(rpp, 4096, kPool - 4096, 0, 0), 0) << rpmem_errormsg();
  auto r = remote(parts, false);
  ASSERT_EQ(r.size(), kPool);
  EXPECT_TRUE(same_bytes(r.data(), local_.data(), 4096, kPool - 4096));
  EXPECT_EQ(rpmem_close(rpp), 0);
}

TEST_F(Replication, PoolSetInASubdirectory) {
  target_.write_poolset("sub/dir/p.set", kOnePart, "OPTION NOHDRS\n");
  RPMEMpool *rpp = create("sub/dir/p.set", nullptr);
  ASSERT_NE(rpp, nullptr);
  EXPECT_EQ(rpmem_close(rpp), 0);
}

TEST_F(Replication, SeveralThreadsEachOnItsOwnLane) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  nlanes_ = 4;
  RPMEMpool *rpp = create("p.set", nullptr);
  ASSERT_NE(rpp, nullptr);
  ASSERT_EQ(nlanes_, 4u);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  const size_t slice = kPool / nlanes_;
  for (unsigned lane = 0; lane < nlanes_; ++lane) {
    threads.emplace_back([&, lane] {
      for (size_t off = lane * slice; off < (lane + 1) * slice; off += 8192) {
        int rc = (off / 8192) % 3 == 0   ? rpmem_persist(rpp, off, 8192, lane, 0)
                 : (off / 8192) % 3 == 1 ? rpmem_flush(rpp, off, 8192, lane, 0)
                                         : rpmem_deep_persist(rpp, off, 8192, lane);
        if (rc) ++failures;
      }
      if (rpmem_drain(rpp, lane, 0)) ++failures;
    });
  }
  for (auto &t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  auto r = remote(kOnePart);
  EXPECT_TRUE(same_bytes(r.data(), local_.data(), 0, kPool));
  EXPECT_EQ(rpmem_close(rpp), 0);
}

// Lanes beyond the daemon's worker threads share them: every lane is still
// served, each request whole, whatever the others do at the same moment.
// Returns how many bytes from offset 0 it wrote.
size_t use_every_lane_at_once(RPMEMpool *rpp, unsigned nlanes, LocalPool &local) {
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  const size_t slice = kPool / nlanes / 8192 * 8192;
  for (unsigned lane = 0; lane < nlanes; ++lane) {
    threads.emplace_back([&, lane] {
      std::vector<uint8_t> back(8192);
      for (size_t off = lane * slice; off + 8192 <= (lane + 1) * slice; off += 8192) {
        local.fill(off, 8192, static_cast<uint8_t>(lane + off / 8192));
        int rc = (off / 8192) % 3 == 0   ? rpmem_persist(rpp, off, 8192, lane, 0)
                 : (off / 8192) % 3 == 1 ? rpmem_flush(rpp, off, 8192, lane, 0)
                                         : rpmem_deep_persist(rpp, off, 8192, lane);
        if (rc) ++failures;
        if ((off / 8192) % 7 == 0) {  // a read between writes, on the same lane
          if (rpmem_drain(rpp, lane, 0) || rpmem_read(rpp, back.data(), off, 8192, lane) ||
              std::memcmp(back.data(), local.data() + off, 8192) != 0)
            ++failures;
        }
      }
      if (rpmem_drain(rpp, lane, 0)) ++failures;
    });
  }
  for (auto &t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  return nlanes * slice;
}

// Creates a pool with `nlanes` lanes through `rpmemd_cmd`, writes it from
// every lane at once, checks the bytes and that rpmemd logged `log_line`
// (over tcp; verbs lanes need no thread of the daemon).
void Replication::use_lanes_through(const std::string &rpmemd_cmd, unsigned nlanes,
                                    const std::string &log_line) {
  set_env("RPMEM_CMD", rpmemd_cmd);
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  nlanes_ = nlanes;
  RPMEMpool *rpp = create("p.set", nullptr);
  ASSERT_NE(rpp, nullptr);
  ASSERT_EQ(nlanes_, nlanes);
  const size_t written = use_every_lane_at_once(rpp, nlanes_, local_);
  EXPECT_EQ(rpmem_close(rpp), 0);
  auto r = remote(kOnePart);
  EXPECT_TRUE(same_bytes(r.data(), local_.data(), 0, written));
  if (!verbs_only()) {
    auto log = target_.log_text();
    EXPECT_NE(log.find(log_line), std::string::npos) << log;
  }
}

TEST_F(Replication, OneWorkerThreadServesEveryLane) {
  use_lanes_through(target_.rpmemd_cmd("--nthreads 1"), 6, "6 lanes served by 1 worker thread\n");
}

// In RAM a persist computes: a thread per CPU. On a disk it waits for the
// device: a thread per lane (up to 16) keeps as many writes in flight.
TEST_F(Replication, WorkerThreadsAreCappedByTheDaemonsCpusUnlessPersistsWaitForADisk) {
  if (verbs_only()) GTEST_SKIP() << "worker threads serve tcp lanes";
  use_lanes_through("taskset -c 0 sh -c '" + target_.rpmemd_cmd() + "'", 3,
                    test_medium() != "disk" ? "3 lanes served by 1 worker thread\n"
                                            : "3 lanes served by 3 worker threads\n");
}

TEST_F(Replication, MoreWorkerThreadsThanLanesAreNotStarted) {
  if (verbs_only()) GTEST_SKIP() << "worker threads serve tcp lanes";
  use_lanes_through(target_.rpmemd_cmd("--nthreads 64"), 2, "2 lanes served by 2 worker threads\n");
}

TEST_F(Replication, NlanesIsCappedByRpmemMaxNlanes) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  set_env("RPMEM_MAX_NLANES", "3");
  nlanes_ = 100;
  RPMEMpool *rpp = create("p.set", nullptr);
  ASSERT_NE(rpp, nullptr);
  EXPECT_EQ(nlanes_, 3u);
  EXPECT_EQ(rpmem_persist(rpp, 0, 64, 2, 0), 0);
  EXPECT_EQ(rpmem_persist(rpp, 0, 64, 3, 0), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rpmem_close(rpp), 0);
}

TEST_F(Replication, RemoveDeletesThePartsAndKeepsThePoolSetFile) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  RPMEMpool *rpp = create("p.set", nullptr);
  ASSERT_NE(rpp, nullptr);
  ASSERT_EQ(rpmem_close(rpp), 0);
  ASSERT_TRUE(file_exists(target_.part_path("p.part0")));
  ASSERT_EQ(rpmem_remove("127.0.0.1", "p.set", 0), 0) << rpmem_errormsg();
  EXPECT_FALSE(file_exists(target_.part_path("p.part0")));
  EXPECT_TRUE(file_exists(target_.poolset_dir() + "/p.set"));
}

TEST_F(Replication, RemovePoolSetFlagDeletesThePoolSetFileToo) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  RPMEMpool *rpp = create("p.set", nullptr);
  ASSERT_NE(rpp, nullptr);
  ASSERT_EQ(rpmem_close(rpp), 0);
  ASSERT_EQ(rpmem_remove("127.0.0.1", "p.set", RPMEM_REMOVE_POOL_SET), 0) << rpmem_errormsg();
  EXPECT_FALSE(file_exists(target_.part_path("p.part0")));
  EXPECT_FALSE(file_exists(target_.poolset_dir() + "/p.set"));
}

TEST_F(Replication, RemoveOfMissingPartsFailsUnlessForced) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  EXPECT_EQ(rpmem_remove("127.0.0.1", "p.set", 0), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_NE(std::string(rpmem_errormsg()).find("remote command failed"), std::string::npos);
  EXPECT_EQ(rpmem_remove("127.0.0.1", "p.set", RPMEM_REMOVE_FORCE | RPMEM_REMOVE_POOL_SET), 0)
      << rpmem_errormsg();
  EXPECT_FALSE(file_exists(target_.poolset_dir() + "/p.set"));
}

TEST_F(Replication, RemoveArgumentsReachTheDaemonQuotedAndLiteral) {
  const std::string name = "we ird;$(touch pwned)'\".set";
  target_.write_poolset(name, kOnePart, "OPTION NOHDRS\n");
  set_env("FAKE_SSH_LOG", target_.dir() + "/ssh-args");
  EXPECT_EQ(rpmem_remove("127.0.0.1", name.c_str(), RPMEM_REMOVE_FORCE | RPMEM_REMOVE_POOL_SET), 0)
      << rpmem_errormsg();
  ::unsetenv("FAKE_SSH_LOG");
  EXPECT_FALSE(file_exists(target_.poolset_dir() + "/" + name));
  EXPECT_FALSE(file_exists("pwned"));
  EXPECT_FALSE(file_exists(target_.poolset_dir() + "/pwned"));
  auto args = read_file(target_.dir() + "/ssh-args");
  std::string text(args.begin(), args.end());
  EXPECT_NE(text.find("-T\n-oBatchMode=yes\n--\n127.0.0.1\n"), std::string::npos) << text;
}

TEST_F(Replication, RpmemCmdEntriesAreUsedRoundRobin) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  const std::string a = target_.dir() + "/a", b = target_.dir() + "/b";
  set_env("RPMEM_CMD",
          "touch " + a + "; " + target_.rpmemd_cmd() + "|touch " + b + "; " + target_.rpmemd_cmd());
  RPMEMpool *rpp = create("p.set", nullptr);
  ASSERT_NE(rpp, nullptr);
  ASSERT_EQ(rpmem_close(rpp), 0);
  RPMEMpool *rpp2 = open("p.set", nullptr);
  ASSERT_NE(rpp2, nullptr);
  ASSERT_EQ(rpmem_close(rpp2), 0);
  EXPECT_TRUE(file_exists(a));
  EXPECT_TRUE(file_exists(b));
}

TEST_F(Replication, CloseReapsSshAndLeavesNoZombie) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  RPMEMpool *rpp = create("p.set", nullptr);
  ASSERT_NE(rpp, nullptr);
  ASSERT_EQ(rpmem_close(rpp), 0);
  EXPECT_EQ(rpmem_remove("127.0.0.1", "p.set", 0), 0);
  EXPECT_EQ(zombie_children(), 0);
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1) << "a child is left";
  EXPECT_EQ(errno, ECHILD);
}

TEST_F(Replication, DaemonLogsThePersistencyPolicy) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  RPMEMpool *rpp = create("p.set", nullptr);
  ASSERT_NE(rpp, nullptr);
  ASSERT_EQ(rpmem_close(rpp), 0);
  auto log = target_.log_text();
  const std::string medium = test_medium();
  EXPECT_NE(log.find("persistency policy:"), std::string::npos) << log;
  EXPECT_NE(log.find("    persist method: General Purpose Server Persistency Method"),
            std::string::npos);
  EXPECT_NE(log.find(medium == "pmem" ? "    persist flush: pmem_persist"
                                      : "    persist flush: pmem_msync"),
            std::string::npos)
      << log;
  // The medium, from the file system that holds the part.
  EXPECT_NE(log.find(medium == "pmem"  ? "    medium: persistent memory"
                     : medium == "ram" ? "    medium: a file in RAM (tmpfs): durable as RAM is"
                                       : "    medium: a file in the page cache, written back to "
                                         "its disk on persist"),
            std::string::npos)
      << log;
  // Over verbs, where the NIC writes and why.
  if (verbs_only()) {
    EXPECT_NE(log.find(medium == "ram" ? "    RDMA writes: into the pool itself (a file in RAM)"
                       : medium == "pmem"
                           ? "KiB (verbs-window), copied into the pool by rpmemd: the pool is "
                             "persistent memory that cannot be registered"
                           : "KiB (verbs-window), copied into the pool by rpmemd: the pool is a "
                             "file in the page cache"),
              std::string::npos)
        << log;
  }
}

// Flushes of 48 times rpmemd's smallest verbs window (32 KiB) before one
// drain, in pieces of every size and with rewrites: over verbs the client
// waits for room in its window as the daemon copies, over tcp the daemon's
// table of posted flushes overflows; either way every byte is in the part.
TEST_F(Replication, FlushStreamMuchLargerThanTheDaemonsWindowLosesNothing) {
  set_env("RPMEM_CMD", target_.rpmemd_cmd("--verbs-window 32K"));
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  nlanes_ = 1;
  RPMEMpool *rpp = create("p.set", nullptr);
  ASSERT_NE(rpp, nullptr);
  std::vector<uint8_t> expect(kPool, 0);
  uint32_t x = 99;
  for (size_t sent = 0; sent < 48 * 32 * 1024;) {
    x = x * 1103515245u + 12345u;
    const size_t len = 1 + (x >> 8) % 50000;
    const size_t off = (x >> 3) % (kPool - len);
    local_.fill(off, len, static_cast<uint8_t>(x >> 24));
    ASSERT_EQ(rpmem_flush(rpp, off, len, 0, (x & 1) ? RPMEM_FLUSH_RELAXED : 0), 0)
        << rpmem_errormsg();
    std::memcpy(expect.data() + off, local_.data() + off, len);
    sent += len;
  }
  ASSERT_EQ(rpmem_drain(rpp, 0, 0), 0) << rpmem_errormsg();
  auto r = remote(kOnePart, false);
  ASSERT_EQ(r.size(), kPool);
  EXPECT_TRUE(same_bytes(r.data(), expect.data(), 0, kPool));
  EXPECT_EQ(rpmem_close(rpp), 0) << rpmem_errormsg();
}

TEST_F(Replication, RpmemCmdMayCarryAssignmentsAndOptions) {
  target_.write_poolset("p.set", kOnePart, "OPTION NOHDRS\n");
  // The remote shell runs RPMEM_CMD as it is: an assignment, then options
  // that override the config file (notice level: no info lines).
  set_env("RPMEM_CMD",
          "LC_ALL=C " RPMEMD_PATH " -c " + target_.dir() + "/rpmemd.conf --log-level notice");
  RPMEMpool *rpp = create("p.set", nullptr);
  ASSERT_NE(rpp, nullptr);
  ASSERT_EQ(rpmem_persist(rpp, 0, 4096, 0, 0), 0);
  ASSERT_EQ(rpmem_close(rpp), 0);
  auto log = target_.log_text();
  EXPECT_NE(log.find("\ncreate request response: (status = 0)\n"), std::string::npos) << log;
  // Info lines: the version, the attributes, the wait for lanes.
  EXPECT_EQ(log.find("rpmemd version"), std::string::npos) << log;
  EXPECT_EQ(log.find("    NULL\n"), std::string::npos) << log;
  EXPECT_EQ(log.find("waiting for in-band connection"), std::string::npos) << log;
}

TEST_F(Replication, SeveralThreadsCreateUseAndClosePoolsAtOnce) {
  constexpr int kThreads = 4;
  std::vector<std::unique_ptr<LocalPool>> locals;
  for (int i = 0; i < kThreads; ++i) {
    target_.write_poolset("t" + std::to_string(i) + ".set",
                          {{2 * kMiB, "t" + std::to_string(i) + ".part"}}, "OPTION NOHDRS\n");
    locals.push_back(std::make_unique<LocalPool>(2 * kMiB, static_cast<uint8_t>(i + 1)));
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      const std::string set = "t" + std::to_string(i) + ".set";
      for (int round = 0; round < 3; ++round) {
        unsigned nl = 2;
        RPMEMpool *rpp =
            round == 0
                ? rpmem_create("127.0.0.1", set.c_str(), locals[i]->data(), 2 * kMiB, &nl, nullptr)
                : rpmem_open("127.0.0.1", set.c_str(), locals[i]->data(), 2 * kMiB, &nl, nullptr);
        if (!rpp) {
          ++failures;
          return;
        }
        if (rpmem_persist(rpp, round * 65536, 65536, round % 2, 0)) ++failures;
        if (rpmem_close(rpp)) ++failures;
      }
    });
  }
  for (auto &t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  for (int i = 0; i < kThreads; ++i) {
    auto r = target_.remote_pool({{2 * kMiB, "t" + std::to_string(i) + ".part"}}, false);
    EXPECT_TRUE(same_bytes(r.data(), locals[i]->data(), 0, 3 * 65536)) << "pool " << i;
  }
  EXPECT_EQ(zombie_children(), 0);
}

}  // namespace
}  // namespace rpmem_test

namespace rpmem_test {
namespace {

TEST(DaemonLogging, LogFileDashLogsToStderr) {
  Target target;
  LocalPool local(4 * kMiB);
  // No pool set: the daemon logs the failure to its stderr.
  set_env("RPMEM_CMD", RPMEMD_PATH " -c " + target.dir() + "/rpmemd.conf --log-file - 2>" +
                           target.dir() + "/stderr.txt");
  unsigned nl = 1;
  EXPECT_EQ(rpmem_create("127.0.0.1", "none.set", local.data(), local.size(), &nl, nullptr),
            nullptr);
  EXPECT_EQ(errno, ENOENT);
  auto b = read_file(target.dir() + "/stderr.txt");
  std::string err(b.begin(), b.end());
  // stderr keeps the "rpmemd[pid]: <level>" prefix (see README).
  EXPECT_NE(err.find("]: <err> cannot create pool set -- '" + target.poolset_dir() + "/none.set'"),
            std::string::npos)
      << err;
}

}  // namespace
}  // namespace rpmem_test
