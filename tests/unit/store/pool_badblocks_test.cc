// SPDX-License-Identifier: BSD-3-Clause
// Tests of count_bad_blocks: ordinary files have none; a part on a pmem
// namespace (a fake sysfs tree pointing the file's device at "pmem0")
// counts the listed bad sectors that overlap the file's extents.
#include "rpmemd/pool_badblocks.h"

#include "tests/unit/store/store_test_util.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace rpmemd {
namespace {

namespace fs = std::filesystem;
using test::TempDir;
using test::write_file;

class PoolBadBlocks : public ::testing::Test {
 protected:
  void SetUp() override {
    part_ = dir_ / "part";
    write_file(part_, std::string(256 * 1024, 'x'));
    fd_ = ::open(part_.c_str(), O_RDWR);
    ASSERT_GE(fd_, 0);
    ASSERT_EQ(::fsync(fd_), 0);
    struct stat st {};
    ASSERT_EQ(::fstat(fd_, &st), 0);
    devno_ = std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev));
    sysfs_ = dir_ / "sys";
    fs::create_directories(sysfs_ + "/dev/block");
  }
  void TearDown() override {
    if (fd_ >= 0) ::close(fd_);
  }
  // Points the part's device at <sysfs>/devices/<disk>[/<partition>].
  void fake_device(const std::string &disk, const std::string &badblocks,
                   const std::string &partition = "", const std::string &start = "0") {
    std::string dev = sysfs_ + "/devices/" + disk;
    fs::create_directories(dev);
    if (!badblocks.empty()) write_file(dev + "/badblocks", badblocks);
    if (!partition.empty()) {
      dev += "/" + partition;
      fs::create_directories(dev);
      write_file(dev + "/partition", "1\n");
      write_file(dev + "/start", start + "\n");
    }
    fs::create_directory_symlink(dev, sysfs_ + "/dev/block/" + devno_);
  }
  // count_bad_blocks with the fake tree; skips when the file system has no
  // FIEMAP (tmpfs).
  size_t count() {
    size_t n = 99;
    auto ec = count_bad_blocks(fd_, n, sysfs_);
    if (ec == std::errc::operation_not_supported) {
      skipped_ = true;
      return 0;
    }
    EXPECT_FALSE(ec) << ec.message();
    return n;
  }

  TempDir dir_;
  std::string part_, devno_, sysfs_;
  int fd_ = -1;
  bool skipped_ = false;
};

TEST_F(PoolBadBlocks, OrdinaryFileHasNone) {
  size_t n = 99;
  EXPECT_FALSE(count_bad_blocks(fd_, n));
  EXPECT_EQ(n, 0u);
}

TEST_F(PoolBadBlocks, NoSysfsEntryMeansNone) {
  size_t n = 99;
  EXPECT_FALSE(count_bad_blocks(fd_, n, sysfs_));
  EXPECT_EQ(n, 0u);
}

TEST_F(PoolBadBlocks, NonPmemDeviceIsNotChecked) {
  fake_device("vdz", "0 4294967296\n");
  EXPECT_EQ(count(), 0u);
}

TEST_F(PoolBadBlocks, CountsBadSectorsUnderTheFile) {
  fake_device("pmem0", "0 4294967296\n");  // the first 2 TiB of the namespace
  size_t n = count();
  if (skipped_) GTEST_SKIP() << "no FIEMAP on this file system";
  EXPECT_EQ(n, 1u);
}

TEST_F(PoolBadBlocks, IgnoresBadSectorsOutsideTheFile) {
  fake_device("pmem0", "1125899906842624 8\n");  // at 512 PiB
  EXPECT_EQ(count(), 0u);
}

TEST_F(PoolBadBlocks, EmptyListMeansNone) {
  fake_device("pmem0", "\n");
  EXPECT_EQ(count(), 0u);
}

TEST_F(PoolBadBlocks, PartitionUsesTheDiskListShiftedByItsStart) {
  // The partition starts at 512 PiB; the disk's bad sectors begin there.
  fake_device("pmem1", "1125899906842624 4294967296\n", "pmem1p1", "1125899906842624");
  size_t n = count();
  if (skipped_) GTEST_SKIP() << "no FIEMAP on this file system";
  EXPECT_EQ(n, 1u);
}

TEST_F(PoolBadBlocks, UnreadableListIsAnError) {
  fake_device("pmem2", "");  // no badblocks attribute
  size_t n = 0;
  EXPECT_EQ(count_bad_blocks(fd_, n, sysfs_), std::errc::io_error);
}

}  // namespace
}  // namespace rpmemd
