// SPDX-License-Identifier: BSD-3-Clause
// The nvdimm bus of a part's memory (rpmemd/pool_cxl.h): a fake sysfs tree
// shaped as Linux 6.1's for an NVDIMM and for CXL (docs/cxl.md), and, in
// the VM (scripts/test-pmem.sh), the real devices.
#include "rpmemd/pool_cxl.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace rpmemd {
namespace {

namespace fs = std::filesystem;

class CxlSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rpmem-cxl-sysfs-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    nfit_ = root_ + "/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0012:00/ndbus0";
    cxl_ = root_ + "/devices/platform/ACPI0017:00/root0/nvdimm-bridge0/ndbus1";
    fs::create_directories(nfit_ + "/region0/dax0.0/dax0.0");
    fs::create_directories(cxl_ + "/region1/pfn1.0/block/pmem1/pmem1p1");
    fs::create_directories(cxl_ + "/region1/dax1.0/dax1.0");
    fs::create_directories(root_ + "/devices/pci0000:00/0000:00:04.0/virtio1/block/vda");
    fs::create_directories(root_ + "/dev/block");
    fs::create_directories(root_ + "/dev/char");
    std::ofstream(nfit_ + "/provider") << "ACPI.NFIT\n";
    std::ofstream(cxl_ + "/provider") << "CXL\n";
  }
  void TearDown() override { fs::remove_all(root_); }
  // /sys/dev/{block,char}/MAJ:MIN of `dev` links to `target`.
  void link(dev_t dev, bool block, const std::string &target) {
    const std::string l = root_ + (block ? "/dev/block/" : "/dev/char/") +
                          std::to_string(major(dev)) + ":" + std::to_string(minor(dev));
    fs::remove(l);
    fs::create_directory_symlink(target, l);
  }

  std::string root_, nfit_, cxl_;
};

TEST_F(CxlSysfs, TheBusProviderTellsCxlFromAnNvdimm) {
  link(makedev(259, 1), true, cxl_ + "/region1/pfn1.0/block/pmem1");
  link(makedev(259, 2), true, cxl_ + "/region1/pfn1.0/block/pmem1/pmem1p1");
  link(makedev(252, 1), false, cxl_ + "/region1/dax1.0/dax1.0");
  link(makedev(252, 0), false, nfit_ + "/region0/dax0.0/dax0.0");
  link(makedev(254, 0), true, root_ + "/devices/pci0000:00/0000:00:04.0/virtio1/block/vda");
  EXPECT_EQ(nd_bus_provider(makedev(259, 1), true, root_), "CXL") << "fsdax on CXL";
  EXPECT_EQ(nd_bus_provider(makedev(259, 2), true, root_), "CXL") << "a partition of it";
  EXPECT_EQ(nd_bus_provider(makedev(252, 1), false, root_), "CXL") << "devdax on CXL";
  EXPECT_EQ(nd_bus_provider(makedev(252, 0), false, root_), "ACPI.NFIT") << "an NVDIMM";
  EXPECT_EQ(nd_bus_provider(makedev(254, 0), true, root_), "") << "a disk";
  EXPECT_EQ(nd_bus_provider(makedev(259, 1), false, root_), "") << "char, not block";
  EXPECT_EQ(nd_bus_provider(makedev(0, 42), true, root_), "") << "tmpfs: no such device";
  fs::remove(cxl_ + "/provider");
  EXPECT_EQ(nd_bus_provider(makedev(259, 1), true, root_), "") << "a bus that does not say";
}

TEST_F(CxlSysfs, AnOpenPartIsLookedUpByItsDeviceOrItsFileSystemsDevice) {
  const std::string file = root_ + "/part";
  std::ofstream(file) << "x";
  struct stat st {
  }, null{};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  ASSERT_EQ(::stat("/dev/null", &null), 0);
  const int f = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
  const int c = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  const int d = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_TRUE(f >= 0 && c >= 0 && d >= 0);
  EXPECT_EQ(nd_bus_provider_of(f, root_), "");
  // The file's file system on CXL fsdax (st_dev), /dev/null a CXL devdax
  // (st_rdev).
  link(st.st_dev, true, cxl_ + "/region1/pfn1.0/block/pmem1");
  link(null.st_rdev, false, nfit_ + "/region0/dax0.0/dax0.0");
  EXPECT_EQ(nd_bus_provider_of(f, root_), "CXL");
  EXPECT_EQ(nd_bus_provider_of(c, root_), "ACPI.NFIT");
  EXPECT_EQ(nd_bus_provider_of(d, root_), "") << "a directory is no part";
  EXPECT_EQ(nd_bus_provider_of(-1, root_), "");
  ::close(f);
  ::close(c);
  ::close(d);
}

// In the VM (scripts/test-pmem.sh): the devices' own sysfs. A file in
// RPMEM_TEST_CXL_DIR (fsdax on CXL) or RPMEM_TEST_CXL_DEVDAX is on CXL, and
// one in RPMEM_TEST_PMEM_DIR or RPMEM_TEST_DEVDAX (an NVDIMM) beside it is not.
std::string provider_in_vm(const char *var, bool dir) {
  const char *p = std::getenv(var);
  if (!p || !*p) return "unset";
  const std::string path = dir ? std::string(p) + "/cxl-sysfs-" + std::to_string(::getpid()) : p;
  const int fd = ::open(path.c_str(), O_RDWR | (dir ? O_CREAT : 0) | O_CLOEXEC, 0600);
  if (fd < 0) return "cannot open " + path;
  std::string r = nd_bus_provider_of(fd);
  ::close(fd);
  if (dir) ::unlink(path.c_str());
  return r;
}

TEST(CxlSysfsInTheVm, TheDevicesAreOnTheirBuses) {
  const std::string cxl_dir = provider_in_vm("RPMEM_TEST_CXL_DIR", true);
  const std::string cxl_dax = provider_in_vm("RPMEM_TEST_CXL_DEVDAX", false);
  if (cxl_dir == "unset" && cxl_dax == "unset")
    GTEST_SKIP() << "no CXL memory (RPMEM_TEST_CXL_DIR, RPMEM_TEST_CXL_DEVDAX)";
  if (cxl_dir != "unset") {
    EXPECT_EQ(cxl_dir, "CXL") << "a file on fsdax on CXL";
  }
  if (cxl_dax != "unset") {
    EXPECT_EQ(cxl_dax, "CXL") << "a device DAX on CXL";
  }
  const std::string pmem_dir = provider_in_vm("RPMEM_TEST_PMEM_DIR", true);
  const std::string pmem_dax = provider_in_vm("RPMEM_TEST_DEVDAX", false);
  if (pmem_dir != "unset") {
    EXPECT_EQ(pmem_dir, "ACPI.NFIT") << "a file on an NVDIMM";
  }
  if (pmem_dax != "unset") {
    EXPECT_EQ(pmem_dax, "ACPI.NFIT") << "a device DAX on an NVDIMM";
  }
}

}  // namespace
}  // namespace rpmemd
