// SPDX-License-Identifier: BSD-3-Clause
// Device DAX parts as sysfs describes them: a fake sysfs tree in which
// /dev/null (char 1:3) stands for a device DAX.
#include "rpmemd/pool_device_dax.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace rpmemd {
namespace {

namespace fs = std::filesystem;

class DeviceDaxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rpmem-devdax-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    struct stat st {};
    ASSERT_EQ(::stat("/dev/null", &st), 0);
    dev_ = root_ + "/dev/char/" + std::to_string(major(st.st_rdev)) + ":" +
           std::to_string(minor(st.st_rdev));
    fs::create_directories(dev_);
    fs::create_directories(root_ + "/bus/dax");
    fs::create_directories(root_ + "/class/mem");
    file_ = root_ + "/plain.part";
    std::ofstream(file_) << "x";
  }
  void TearDown() override { fs::remove_all(root_); }
  // /dev/null is a device DAX of `size` bytes and alignment `align`.
  void as_dax(uint64_t size, uint64_t align, const char *subsystem = "bus/dax") {
    fs::remove(dev_ + "/subsystem");
    fs::create_directory_symlink(root_ + "/" + subsystem, dev_ + "/subsystem");
    std::ofstream(dev_ + "/size") << size << "\n";
    std::ofstream(dev_ + "/align") << align << "\n";
  }
  PoolSet set(const std::vector<std::pair<uint64_t, std::string>> &parts, bool single_hdr = false) {
    PoolSet s;
    for (const auto &[size, path] : parts) s.parts.push_back({size, path, std::nullopt});
    s.single_hdr = single_hdr;
    return s;
  }

  std::string root_, dev_, file_;
};

constexpr uint64_t k2M = 2 << 20;

TEST_F(DeviceDaxTest, SysfsGivesTheDevicesSizeAndAlignment) {
  as_dax(64 * k2M, k2M);
  auto d = device_dax("/dev/null", root_);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->size, 64 * k2M);
  EXPECT_EQ(d->align, k2M);
  EXPECT_FALSE(device_dax(file_, root_)) << "a regular file";
  EXPECT_FALSE(device_dax(root_ + "/missing", root_));
  as_dax(64 * k2M, k2M, "class/mem");
  EXPECT_FALSE(device_dax("/dev/null", root_)) << "a character device of another kind";
}

TEST_F(DeviceDaxTest, ItsRegionsDeepFlushIsFoundAndWrittenWhenTheRegionNeedsIt) {
  // The device's directory lies below its region, as in sysfs.
  const std::string region = root_ + "/devices/ndbus0/region0";
  fs::create_directories(region + "/dax0.0/dax0.0");
  fs::remove_all(dev_);
  fs::create_directory_symlink(region + "/dax0.0/dax0.0", dev_);
  as_dax(64 * k2M, k2M);
  ASSERT_TRUE(device_dax("/dev/null", root_));
  EXPECT_EQ(device_dax("/dev/null", root_)->deep_flush, "") << "a region without deep_flush";
  std::ofstream(region + "/deep_flush") << "2\n";
  auto d = device_dax("/dev/null", root_);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->deep_flush, region + "/deep_flush");
  auto content = [&] {
    std::ifstream in(region + "/deep_flush");
    return std::string((std::istreambuf_iterator<char>(in)), {});
  };
  EXPECT_EQ(deep_flush_region(d->deep_flush), std::error_code{});
  EXPECT_EQ(content(), "1\n") << "written";
  std::ofstream(region + "/deep_flush") << "0\n";
  EXPECT_EQ(deep_flush_region(d->deep_flush), std::error_code{});
  EXPECT_EQ(content(), "0\n") << "a region that needs none is left alone";
  // CXL's region (Linux 6.1): "0", read-only; whatever the newline.
  std::ofstream(region + "/deep_flush") << "0";
  fs::permissions(region + "/deep_flush",
                  fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  EXPECT_EQ(deep_flush_region(d->deep_flush), std::error_code{});
  EXPECT_EQ(content(), "0") << "never written";
  EXPECT_EQ(deep_flush_region(region + "/missing"), std::make_error_code(std::errc::io_error));
}

TEST_F(DeviceDaxTest, AutoTakesTheDevicesSizeAndOnlyThere) {
  as_dax(64 * k2M, k2M);
  PoolSet s = set({{0, "/dev/null"}});
  EXPECT_EQ(resolve_device_dax(s, root_), std::error_code{});
  EXPECT_EQ(s.parts[0].size, 64 * k2M);
  PoolSet f = set({{0, file_}});
  EXPECT_EQ(resolve_device_dax(f, root_), std::make_error_code(std::errc::invalid_argument));
}

TEST_F(DeviceDaxTest, PmdksRulesForTheParts) {
  as_dax(64 * k2M, k2M);
  const auto einval = std::make_error_code(std::errc::invalid_argument);
  PoolSet wrong = set({{32 * k2M, "/dev/null"}});
  EXPECT_EQ(resolve_device_dax(wrong, root_), einval) << "size other than the device's";
  PoolSet mixed = set({{0, "/dev/null"}, {k2M, file_}});
  EXPECT_EQ(resolve_device_dax(mixed, root_), einval) << "DAX and a file";
  PoolSet two = set({{0, "/dev/null"}, {0, "/dev/null"}});
  EXPECT_EQ(resolve_device_dax(two, root_), einval) << "two 2 MiB-aligned devices with headers";
  PoolSet single = set({{0, "/dev/null"}, {0, "/dev/null"}}, true);
  EXPECT_EQ(resolve_device_dax(single, root_), std::error_code{}) << "SINGLEHDR";
  as_dax(64 * k2M, 4096);
  PoolSet small_align = set({{0, "/dev/null"}, {0, "/dev/null"}});
  EXPECT_EQ(resolve_device_dax(small_align, root_), std::error_code{}) << "4 KiB alignment";
  as_dax(1 << 20, 4096);
  PoolSet tiny = set({{0, "/dev/null"}});
  EXPECT_EQ(resolve_device_dax(tiny, root_), einval) << "below the smallest part";
}

}  // namespace
}  // namespace rpmemd
