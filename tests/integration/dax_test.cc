// SPDX-License-Identifier: BSD-3-Clause
// Pools on persistent memory mapped as a device or a DAX file system, their
// every byte checked on the medium itself: a Device DAX part (/dev/daxX.Y,
// size AUTO) of an NVDIMM, where the whole device is the pool, RDMA writes
// go straight into it, APM with --persist-apm, and removing the pool zeroes
// its header and leaves the device; and CXL persistent memory
// (docs/cxl.md), devdax and fsdax, where rpmemd names the medium CXL in its
// log and a deep persist, which is the persist there, succeeds. One fixture
// (DaxDevice) serves every device. Needs the VM's devices
// (scripts/test-pmem.sh): RPMEM_TEST_DEVDAX (an NVDIMM's /dev/daxN.M),
// RPMEM_TEST_CXL_DEVDAX (one on CXL), RPMEM_TEST_CXL_DIR (a directory on
// ext4 -o dax on CXL); each test skips without its own.
#include "tests/integration/harness.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "librpmem.h"

namespace rpmem_test {
namespace {

constexpr size_t kDaxPool = 16 * kMiB;  // a multiple of a device's 2 MiB alignment

// The first `len` bytes of the device, as they are there.
std::vector<uint8_t> device_bytes(const std::string &dev, size_t len) {
  std::vector<uint8_t> out;
  int fd = ::open(dev.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return out;
  void *p = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
  if (p != MAP_FAILED) {
    out.assign(static_cast<uint8_t *>(p), static_cast<uint8_t *>(p) + len);
    ::munmap(p, len);
  }
  ::close(fd);
  return out;
}

// Writes of every kind into the pool, a deep persist among them, and a
// read back; check_ranges() finds them on the medium.
void write_every_way(RPMEMpool *rpp, LocalPool &local) {
  local.fill(4096, kDaxPool - 4096, 43);
  ASSERT_EQ(rpmem_persist(rpp, 4096, 100000, 0, 0), 0) << rpmem_errormsg();
  ASSERT_EQ(rpmem_persist(rpp, 2 * kMiB, 2 * kMiB, 1, RPMEM_PERSIST_RELAXED), 0)
      << rpmem_errormsg();
  for (unsigned i = 0; i < 20; ++i)
    ASSERT_EQ(rpmem_flush(rpp, 6 * kMiB + i * 10000, 9000, 2, i % 2 ? RPMEM_FLUSH_RELAXED : 0), 0)
        << rpmem_errormsg();
  ASSERT_EQ(rpmem_drain(rpp, 2, 0), 0) << rpmem_errormsg();
  ASSERT_EQ(rpmem_deep_persist(rpp, 10 * kMiB, 65536, 3), 0) << rpmem_errormsg();
  ASSERT_EQ(rpmem_deep_persist(rpp, 12 * kMiB, 8, 0), 0) << rpmem_errormsg();
  std::vector<uint8_t> back(65536);
  ASSERT_EQ(rpmem_read(rpp, back.data(), 10 * kMiB, back.size(), 1), 0) << rpmem_errormsg();
  EXPECT_TRUE(same_bytes(back.data() - 10 * kMiB, local.data(), 10 * kMiB, back.size()));
}

void check_ranges(const std::vector<uint8_t> &medium, const LocalPool &local) {
  ASSERT_GE(medium.size(), kDaxPool);
  EXPECT_EQ(std::memcmp(medium.data(), "PMEMOBJ", 8), 0) << "the pool header";
  EXPECT_TRUE(same_bytes(medium.data(), local.data(), 4096, 100000));
  EXPECT_TRUE(same_bytes(medium.data(), local.data(), 2 * kMiB, 2 * kMiB));
  for (unsigned i = 0; i < 20; ++i)
    EXPECT_TRUE(same_bytes(medium.data(), local.data(), 6 * kMiB + i * 10000, 9000)) << i;
  EXPECT_TRUE(same_bytes(medium.data(), local.data(), 10 * kMiB, 65536));
  EXPECT_TRUE(same_bytes(medium.data(), local.data(), 12 * kMiB, 8));
}

// The log's lines for `noun`, the medium: the policy block names it, and
// over verbs where the NIC writes.
void expect_named(const std::string &log, const std::string &noun, bool apm, bool registered) {
  EXPECT_NE(log.find(apm ? "    persist flush: none\n" : "    persist flush: pmem_persist\n"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("    medium: " + noun + "\n"), std::string::npos) << log;
  EXPECT_NE(log.find(apm ? "    persist method: Appliance Persistency Method\n"
                         : "    persist method: General Purpose Server Persistency Method\n"),
            std::string::npos)
      << log;
  if (!verbs_only()) return;
  EXPECT_NE(log.find(registered ? "    RDMA writes: into the pool itself (" + noun + ")"
                                : "the pool is " + noun + " that cannot be registered"),
            std::string::npos)
      << log;
}

// A pool set `set` of one device DAX, the whole device (size AUTO), named
// by the environment variable `env`; the parameter: --persist-apm. The
// pool is removed at the end (its header zeroed; the device stays).
class DaxDevice : public ::testing::TestWithParam<bool> {
 protected:
  DaxDevice(const char *env, const char *set) : env_(env), set_(set) {}
  void SetUp() override {
    const char *d = std::getenv(env_);
    if (!d || !*d) GTEST_SKIP() << "no device DAX (" << env_ << ")";
    dev_ = d;
    set_env("RPMEM_CMD", target_.rpmemd_cmd(GetParam() ? "--persist-apm" : ""));
    target_.write_poolset(set_, {}, "AUTO " + dev_ + "\n");
  }
  void TearDown() override {
    if (!dev_.empty()) rpmem_remove(test_ip().c_str(), set_, 0);  // zeroes the header
  }
  RPMEMpool *create(const rpmem_pool_attr &attr) {
    unsigned nlanes = 4;
    return rpmem_create(test_ip().c_str(), set_, local_.data(), kDaxPool, &nlanes, &attr);
  }
  // The pool created with `attr`, the log naming the medium `noun`, writes
  // of every kind, every byte on the device, and the attributes back at an
  // open.
  void write_check_and_open(const rpmem_pool_attr &attr, const std::string &noun) {
    RPMEMpool *rpp = create(attr);
    ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << "\n" << target_.log_text();
    expect_named(target_.log_text(), noun, GetParam(), true);
    write_every_way(rpp, local_);
    ASSERT_EQ(rpmem_close(rpp), 0) << rpmem_errormsg();
    check_ranges(device_bytes(dev_, kDaxPool), local_);
    expect_attributes(attr);
  }
  // Opens the pool again: its attributes are `attr`.
  void expect_attributes(const rpmem_pool_attr &attr) {
    unsigned nlanes = 4;
    rpmem_pool_attr got{};
    RPMEMpool *rpp = rpmem_open(test_ip().c_str(), set_, local_.data(), kDaxPool, &nlanes, &got);
    ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << "\n" << target_.log_text();
    EXPECT_EQ(std::memcmp(&got, &attr, sizeof(attr)), 0) << "the attributes as created";
    ASSERT_EQ(rpmem_close(rpp), 0) << rpmem_errormsg();
  }

  const char *env_;
  const char *set_;
  std::string dev_;
  Target target_;
  LocalPool local_{kDaxPool};
};

// ---------------------------------------------------------------------------
// An NVDIMM's device DAX.

class DevDax : public DaxDevice {  // --persist-apm
 protected:
  DevDax() : DaxDevice("RPMEM_TEST_DEVDAX", "dax.set") {}
};

TEST_P(DevDax, WholeDeviceIsThePoolAndEveryByteLandsOnIt) {
  ASSERT_NO_FATAL_FAILURE(write_check_and_open(sample_attr(31), "persistent memory"));
  // Removing the pool zeroes the header; the device stays.
  ASSERT_EQ(rpmem_remove(test_ip().c_str(), set_, 0), 0) << rpmem_errormsg();
  EXPECT_EQ(::access(dev_.c_str(), F_OK), 0);
  auto hdr = device_bytes(dev_, 2 * kMiB);
  ASSERT_EQ(hdr.size(), 2 * kMiB);
  EXPECT_EQ(std::count(hdr.begin(), hdr.begin() + 4096, 0), 4096);
}

INSTANTIATE_TEST_SUITE_P(GpspmAndApm, DevDax, ::testing::Bool(),
                         [](const auto &p) { return p.param ? "Apm" : "Gpspm"; });

// ---------------------------------------------------------------------------
// CXL persistent memory.

class CxlDevdax : public DaxDevice {  // --persist-apm
 protected:
  CxlDevdax() : DaxDevice("RPMEM_TEST_CXL_DEVDAX", "cxl.set") {}
};

TEST_P(CxlDevdax, IsNamedCxlAndEveryByteLandsOnTheDevice) {
  write_check_and_open(sample_attr(37), "CXL persistent memory (devdax)");
}

INSTANTIATE_TEST_SUITE_P(GpspmAndApm, CxlDevdax, ::testing::Bool(),
                         [](const auto &p) { return p.param ? "Apm" : "Gpspm"; });

// A pool set of two parts in a directory on fsdax on CXL. Over verbs the
// NIC writes into the lane windows, and the method is GPSPM.
class CxlFsdax : public ::testing::TestWithParam<bool> {};  // --persist-apm

TEST_P(CxlFsdax, IsNamedCxlAndEveryByteLandsInTheParts) {
  const bool apm = GetParam();
  const char *d = std::getenv("RPMEM_TEST_CXL_DIR");
  if (!d || !*d) GTEST_SKIP() << "no fsdax on CXL (RPMEM_TEST_CXL_DIR)";
  const char *was = std::getenv("RPMEM_TEST_DIR");
  const std::string before = was ? was : "";
  set_env("RPMEM_TEST_DIR", d);  // the Target's directory, on CXL
  auto target = std::make_unique<Target>();
  set_env("RPMEM_TEST_DIR", before);
  const std::vector<Part> parts = {{8 * kMiB, "cxl.0"}, {10 * kMiB, "cxl.1"}};
  set_env("RPMEM_CMD", target->rpmemd_cmd(apm ? "--persist-apm" : ""));
  target->write_poolset("cxl.set", parts);
  LocalPool local(kDaxPool);
  rpmem_pool_attr attr = sample_attr(38);
  unsigned nlanes = 4;
  RPMEMpool *rpp =
      rpmem_create(test_ip().c_str(), "cxl.set", local.data(), kDaxPool, &nlanes, &attr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << "\n" << target->log_text();
  expect_named(target->log_text(), "CXL persistent memory (fsdax)", apm && !verbs_only(), false);
  write_every_way(rpp, local);
  ASSERT_EQ(rpmem_close(rpp), 0) << rpmem_errormsg();
  check_ranges(target->remote_pool(parts, true), local);
  ASSERT_EQ(rpmem_remove(test_ip().c_str(), "cxl.set", 0), 0) << rpmem_errormsg();
}

INSTANTIATE_TEST_SUITE_P(GpspmAndApm, CxlFsdax, ::testing::Bool(),
                         [](const auto &p) { return p.param ? "Apm" : "Gpspm"; });

}  // namespace
}  // namespace rpmem_test
