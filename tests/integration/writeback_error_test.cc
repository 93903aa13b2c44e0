// SPDX-License-Identifier: BSD-3-Clause
// A disk that fails the writeback of a visible pool's pages: the pages were
// dirtied by stores into rpmemd's mapping, the failure is the kernel's
// (a device-mapper error target under the part's blocks), and what sees it
// first (the next persistent call, rpmemd's write-back thread, or an msync
// after the kernel's own writeback) fails; so does every later write and
// persist of the pool, and its close, even after the disk works again,
// since msync reports a file's writeback error only once. Root, a loop
// device and device-mapper: the VM's (RPMEM_TEST_DM=1,
// scripts/test-powercut.sh).
#include "tests/integration/harness.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "librpmem.h"

namespace rpmem_test {
namespace {

constexpr size_t kPool = 4 * kMiB;
const std::vector<Part> kParts{{kPool, "disk/p.part0"}};

// Runs `cmd`; its output, and whether it exited with 0.
bool run(const std::string &cmd, std::string *out = nullptr) {
  int status = -1;
  std::string o = command_output(cmd + " 2>&1", &status);
  if (out) *out = o;
  if (status != 0) ADD_FAILURE() << cmd << ": " << o;
  return status == 0;
}

// The physical extents of `path` on its device, in 512-byte sectors
// (start, count), sorted; empty when FIEMAP fails.
std::vector<std::pair<uint64_t, uint64_t>> extents_of(const std::string &path) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  constexpr unsigned kMax = 256;
  std::vector<uint8_t> buf(sizeof(fiemap) + kMax * sizeof(fiemap_extent));
  auto *fm = reinterpret_cast<fiemap *>(buf.data());
  fm->fm_length = FIEMAP_MAX_OFFSET;
  fm->fm_flags = FIEMAP_FLAG_SYNC;
  fm->fm_extent_count = kMax;
  if (::ioctl(fd, FS_IOC_FIEMAP, fm) == 0) {
    for (unsigned i = 0; i < fm->fm_mapped_extents; ++i)
      out.emplace_back(fm->fm_extents[i].fe_physical / 512, fm->fm_extents[i].fe_length / 512);
  }
  ::close(fd);
  std::sort(out.begin(), out.end());
  return out;
}

// ext4 on a device-mapper device over a loop device over a file in `dir`
// (tmpfs in the VM), mounted at `mnt`; the blocks of a file can be made to
// fail every write and read (an error target) and be healed.
class FailingDisk {
 public:
  FailingDisk(const std::string &dir, const std::string &mnt)
      : img_(dir + "/disk.img"), mnt_(mnt), name_("rpmem-wbe-" + std::to_string(::getpid())) {
    std::string loop;
    ok_ = run("modprobe -a loop dm_mod") && run("truncate -s 64M " + img_) &&
          run("losetup -f --show " + img_, &loop);
    loop_ = ok_ ? loop.substr(0, loop.find('\n')) : "";
    std::string sectors;
    ok_ = ok_ && run("blockdev --getsz " + loop_, &sectors);
    sectors_ = ok_ ? std::strtoull(sectors.c_str(), nullptr, 10) : 0;
    ok_ = ok_ && run("dmsetup create " + name_ + " --table '" + linear(0, sectors_) + "'");
    made_ = ok_;
    ok_ = ok_ && run("dmsetup mknodes " + name_);  // no udev in the VM
    ok_ = ok_ && run("mkfs.ext4 -q -F /dev/mapper/" + name_) && run("mkdir -p " + mnt_) &&
          run("mount /dev/mapper/" + name_ + " " + mnt_);
    mounted_ = ok_;
  }
  ~FailingDisk() {
    if (mounted_) run("umount " + mnt_);
    if (made_) run("dmsetup remove " + name_);
    if (!loop_.empty()) run("losetup -d " + loop_);
  }
  bool ok() const { return ok_; }
  // Every write of `path`'s blocks fails from now on.
  bool fail(const std::string &path) {
    const auto ext = extents_of(path);
    if (ext.empty()) return false;
    std::string table;
    uint64_t at = 0;
    for (auto [start, n] : ext) {
      if (start > at) table += linear(at, start - at) + "\n";
      table += std::to_string(start) + " " + std::to_string(n) + " error\n";
      at = start + n;
    }
    if (at < sectors_) table += linear(at, sectors_ - at) + "\n";
    return load(table);
  }
  bool heal() { return load(linear(0, sectors_) + "\n"); }

 private:
  std::string linear(uint64_t from, uint64_t n) const {
    return std::to_string(from) + " " + std::to_string(n) + " linear " + loop_ + " " +
           std::to_string(from);
  }
  bool load(const std::string &table) {
    return run("printf '" + table + "' | dmsetup reload " + name_) &&
           run("dmsetup resume " + name_);
  }

  std::string img_, mnt_, name_, loop_;
  uint64_t sectors_ = 0;
  bool ok_ = false, made_ = false, mounted_ = false;
};

class WriteBackError : public ::testing::Test {
 protected:
  void SetUp() override {
    const char *dm = std::getenv("RPMEM_TEST_DM");
    if (!dm || std::string(dm) != "1")
      GTEST_SKIP() << "needs root, a loop device and device-mapper: RPMEM_TEST_DM=1 "
                      "(scripts/test-powercut.sh runs it in the VM)";
    disk_ = std::make_unique<FailingDisk>(target_.dir(), target_.dir() + "/disk");
    ASSERT_TRUE(disk_->ok());
    set_env("RPMEM_DURABILITY", "visible");
    target_.write_poolset("p.set", kParts, "OPTION NOHDRS\n");
  }
  void TearDown() override {
    ::unsetenv("RPMEM_DURABILITY");
    if (rpp_) rpmem_close(rpp_);
    rpp_ = nullptr;
  }
  // A visible pool whose every block is on the disk (written persistent)
  // and in the page cache, with rpmemd's write-back bound `writeback_ms`.
  void create(unsigned writeback_ms) {
    set_env("RPMEM_CMD", target_.rpmemd_cmd("--visible-writeback " + std::to_string(writeback_ms)));
    unsigned n = 1;
    rpp_ = rpmem_create("127.0.0.1", "p.set", local_.data(), kPool, &n, nullptr);
    ASSERT_NE(rpp_, nullptr) << rpmem_errormsg();
    ASSERT_EQ(rpmem_persist(rpp_, 0, kPool, 0, RPMEM_PERSIST_PERSISTENT), 0) << rpmem_errormsg();
  }
  int persist(size_t off, unsigned flags, uint8_t seed) {
    local_.fill(off, 4096, seed);
    errno = 0;
    return rpmem_persist(rpp_, off, 4096, 0, flags) == 0 ? 0 : errno;
  }
  // Visible persists of blocks the disk now fails.
  void visible_writes_into_a_failing_disk() {
    ASSERT_TRUE(disk_->fail(target_.part_path("disk/p.part0")));
    for (size_t off = 0; off < kPool; off += 256 * 1024)
      ASSERT_EQ(persist(off, RPMEM_PERSIST_VISIBLE, 3), 0) << rpmem_errormsg();
  }
  // The disk works again, and the pool still fails: its visible bytes may
  // be lost, and the close says so.
  void every_later_call_fails() {
    ASSERT_TRUE(disk_->heal());
    EXPECT_EQ(persist(8192, RPMEM_PERSIST_PERSISTENT, 4), EIO) << rpmem_errormsg();
    EXPECT_EQ(persist(8192, RPMEM_PERSIST_VISIBLE, 5), EIO) << rpmem_errormsg();
    EXPECT_TRUE(target_.log_shows("visible bytes may be lost")) << target_.log_text();
    errno = 0;
    EXPECT_NE(rpmem_close(rpp_), 0);
    EXPECT_EQ(errno, EREMOTEIO) << rpmem_errormsg();
    rpp_ = nullptr;
    EXPECT_TRUE(target_.log_shows("is not durable at its close")) << target_.log_text();
  }

  Target target_;
  std::unique_ptr<FailingDisk> disk_;
  LocalPool local_{kPool};
  RPMEMpool *rpp_ = nullptr;
};

TEST_F(WriteBackError, TheNextPersistentCallFailsAndEveryLaterCallAndTheClose) {
  create(600000);
  visible_writes_into_a_failing_disk();
  EXPECT_EQ(persist(4096, RPMEM_PERSIST_PERSISTENT, 6), EIO) << rpmem_errormsg();
  every_later_call_fails();
}

TEST_F(WriteBackError, AFailedWriteBackOfTheDaemonFailsTheNextPersistentCall) {
  create(200);
  visible_writes_into_a_failing_disk();
  ASSERT_TRUE(target_.log_shows("msync of the whole pool failed")) << target_.log_text();
  every_later_call_fails();
}

// The kernel writes the pages back first (sync), and fails: the next msync
// reports it all the same.
TEST_F(WriteBackError, AFailedWriteBackOfTheKernelFailsTheNextPersistentCall) {
  create(600000);
  visible_writes_into_a_failing_disk();
  ASSERT_TRUE(run("sync"));
  every_later_call_fails();
}

}  // namespace
}  // namespace rpmem_test
