// SPDX-License-Identifier: BSD-3-Clause
// A Device DAX part (/dev/daxX.Y, size AUTO): the whole device is the pool,
// RDMA writes go straight into it, APM with --persist-apm; every byte is
// checked on the device itself. Needs the device in RPMEM_TEST_DEVDAX
// (scripts/test-pmem.sh boots a VM with an emulated NVDIMM in devdax mode);
// skips without it.
#include "tests/integration/harness.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "librpmem.h"

namespace rpmem_test {
namespace {

constexpr size_t kPool = 64 * kMiB;  // a multiple of the device's 2 MiB alignment

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

class DevDax : public ::testing::TestWithParam<bool> {  // --persist-apm
 protected:
  void SetUp() override {
    const char *d = std::getenv("RPMEM_TEST_DEVDAX");
    if (!d || !*d) GTEST_SKIP() << "no device DAX (RPMEM_TEST_DEVDAX)";
    dev_ = d;
  }
  void TearDown() override {
    if (!dev_.empty()) rpmem_remove("127.0.0.1", "dax.set", 0);  // zeroes the header
  }

  std::string dev_;
  Target target_;
  LocalPool local_{kPool};
};

TEST_P(DevDax, WholeDeviceIsThePoolAndEveryByteLandsOnIt) {
  const bool apm = GetParam();
  set_env("RPMEM_CMD", target_.rpmemd_cmd(apm ? "--persist-apm" : ""));
  target_.write_poolset("dax.set", {}, "AUTO " + dev_ + "\n");
  rpmem_pool_attr attr = sample_attr(31);
  unsigned nlanes = 4;
  RPMEMpool *rpp = rpmem_create("127.0.0.1", "dax.set", local_.data(), kPool, &nlanes, &attr);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << "\n" << target_.log_text();
  const std::string log = target_.log_text();
  EXPECT_NE(log.find("    medium: persistent memory\n"), std::string::npos) << log;
  EXPECT_NE(log.find(apm ? "    persist method: Appliance Persistency Method\n"
                         : "    persist method: General Purpose Server Persistency Method\n"),
            std::string::npos)
      << log;
  if (verbs_only()) {
    EXPECT_NE(log.find("    RDMA writes: into the pool itself (persistent memory)"),
              std::string::npos)
        << log;
  }

  local_.fill(4096, kPool - 4096, 41);
  ASSERT_EQ(rpmem_persist(rpp, 4096, 100000, 0, 0), 0) << rpmem_errormsg();
  ASSERT_EQ(rpmem_persist(rpp, 2 * kMiB, 8 * kMiB, 1, RPMEM_PERSIST_RELAXED), 0)
      << rpmem_errormsg();
  for (unsigned i = 0; i < 40; ++i)
    ASSERT_EQ(rpmem_flush(rpp, 12 * kMiB + i * 10000, 9000, 2, i % 2 ? RPMEM_FLUSH_RELAXED : 0), 0)
        << rpmem_errormsg();
  ASSERT_EQ(rpmem_drain(rpp, 2, 0), 0) << rpmem_errormsg();
  ASSERT_EQ(rpmem_deep_persist(rpp, 20 * kMiB, 65536, 3), 0) << rpmem_errormsg();
  std::vector<uint8_t> back(65536);
  ASSERT_EQ(rpmem_read(rpp, back.data(), 20 * kMiB, back.size(), 1), 0) << rpmem_errormsg();
  EXPECT_TRUE(same_bytes(back.data() - 20 * kMiB, local_.data(), 20 * kMiB, back.size()));
  ASSERT_EQ(rpmem_close(rpp), 0) << rpmem_errormsg();

  auto on_dev = device_bytes(dev_, kPool);
  ASSERT_EQ(on_dev.size(), kPool);
  EXPECT_EQ(std::memcmp(on_dev.data(), "PMEMOBJ", 8), 0) << "the pool header";
  EXPECT_TRUE(same_bytes(on_dev.data(), local_.data(), 4096, 100000));
  EXPECT_TRUE(same_bytes(on_dev.data(), local_.data(), 2 * kMiB, 8 * kMiB));
  for (unsigned i = 0; i < 40; ++i)
    EXPECT_TRUE(same_bytes(on_dev.data(), local_.data(), 12 * kMiB + i * 10000, 9000)) << i;
  EXPECT_TRUE(same_bytes(on_dev.data(), local_.data(), 20 * kMiB, 65536));

  rpmem_pool_attr got{};
  rpp = rpmem_open("127.0.0.1", "dax.set", local_.data(), kPool, &nlanes, &got);
  ASSERT_NE(rpp, nullptr) << rpmem_errormsg() << "\n" << target_.log_text();
  EXPECT_EQ(std::memcmp(&got, &attr, sizeof(attr)), 0) << "the attributes as created";
  ASSERT_EQ(rpmem_close(rpp), 0) << rpmem_errormsg();

  // Removing the pool zeroes the header; the device stays.
  ASSERT_EQ(rpmem_remove("127.0.0.1", "dax.set", 0), 0) << rpmem_errormsg();
  EXPECT_EQ(::access(dev_.c_str(), F_OK), 0);
  auto hdr = device_bytes(dev_, 2 * kMiB);
  ASSERT_EQ(hdr.size(), 2 * kMiB);
  EXPECT_EQ(std::count(hdr.begin(), hdr.begin() + 4096, 0), 4096);
}

INSTANTIATE_TEST_SUITE_P(GpspmAndApm, DevDax, ::testing::Bool(),
                         [](const auto &p) { return p.param ? "Apm" : "Gpspm"; });

}  // namespace
}  // namespace rpmem_test
