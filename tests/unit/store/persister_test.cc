// SPDX-License-Identifier: BSD-3-Clause
// The persisters on the host's media: which one choose_persister() takes for
// which parts, and what the RAM and page-cache persisters do with real
// mapped files (fsdax and Device DAX run in the VM suites).
#include "rpmemd/persister.h"

#include "rpmemd/pool_device_dax.h"
#include "tests/unit/store/store_test_util.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

namespace rpmemd {
namespace {

using test::TempDir;

constexpr size_t kLen = 64 * 1024;

// One file of kLen bytes mapped shared, as one part of a pool.
class MappedFile {
 public:
  explicit MappedFile(const std::string &path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd_ < 0 || ::ftruncate(fd_, kLen) != 0) return;
    void *p = ::mmap(nullptr, kLen, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p != MAP_FAILED) base_ = static_cast<uint8_t *>(p);
    part_.path = path;
    part_.size = kLen;
    part_.fd = fd_;
    part_.map_len = kLen;
  }
  ~MappedFile() {
    if (base_) ::munmap(base_, kLen);
    if (fd_ >= 0) ::close(fd_);
  }
  uint8_t *base() const { return base_; }
  std::vector<MappedPart> parts() const { return {part_}; }
  std::vector<uint8_t> read_file(size_t off, size_t n) const {
    std::vector<uint8_t> b(n);
    if (::pread(fd_, b.data(), n, static_cast<off_t>(off)) != static_cast<ssize_t>(n)) b.clear();
    return b;
  }

 private:
  int fd_ = -1;
  uint8_t *base_ = nullptr;
  MappedPart part_;
};

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7);
  return b;
}

// choose_persister()'s persister, or null when it refuses the parts.
std::unique_ptr<Persister> chosen(uint8_t *base, size_t len, const std::vector<MappedPart> &parts) {
  auto p = choose_persister(base, len, parts);
  return p ? std::move(p.value()) : nullptr;
}

// The persister choose_persister() takes for `parts` of `f` (which must
// outlive it), when it is `name`'s; null otherwise.
std::unique_ptr<Persister> persister_of(const MappedFile &f, const std::vector<MappedPart> &parts,
                                        const char *name) {
  auto p = chosen(f.base(), kLen, parts);
  if (!p || std::string(p->traits().name) != name) return nullptr;
  return p;
}

std::string medium_of(std::vector<MappedPart> parts) {
  std::vector<uint8_t> mem(kLen);
  auto p = chosen(mem.data(), mem.size(), parts);
  return p ? p->traits().name : "none";
}

TEST(ChoosePersister, TakesTheMediumEveryPartIsOn) {
  MappedPart ram, disk, sync, dax;
  ram.in_ram = true;
  sync.map_sync = true;
  dax.device = DeviceDax{.size = kLen, .align = 2 << 20, .deep_flush = {}};
  EXPECT_EQ(medium_of({ram, ram}), "ram");
  EXPECT_EQ(medium_of({disk}), "disk");
  EXPECT_EQ(medium_of({ram, disk}), "disk") << "a part on a disk makes a pool on a disk";
  EXPECT_EQ(medium_of({sync, sync}), "pmem");
  EXPECT_EQ(medium_of({sync, ram}), "disk") << "MAP_SYNC on some parts only";
  EXPECT_EQ(medium_of({dax, dax}), "pmem");
  EXPECT_EQ(medium_of({dax, disk}), "none") << "Device DAX and files mixed";
}

// CXL: every part on an nvdimm bus whose provider is CXL (pool_cxl.h).
TEST(ChoosePersister, CxlWhenEveryPartIsOnCxl) {
  MappedPart sync, dax, cxl_sync, cxl_dax, cxl_file;
  sync.map_sync = cxl_sync.map_sync = true;
  dax.device = cxl_dax.device = DeviceDax{.size = kLen, .align = 2 << 20, .deep_flush = {}};
  sync.nd_provider = dax.nd_provider = "ACPI.NFIT";
  cxl_sync.nd_provider = cxl_dax.nd_provider = cxl_file.nd_provider = "CXL";
  EXPECT_EQ(medium_of({cxl_sync, cxl_sync}), "cxl");
  EXPECT_EQ(medium_of({cxl_dax}), "cxl");
  EXPECT_EQ(medium_of({cxl_sync, sync}), "pmem") << "CXL and an NVDIMM";
  EXPECT_EQ(medium_of({cxl_dax, dax}), "pmem") << "CXL and an NVDIMM";
  EXPECT_EQ(medium_of({cxl_file}), "disk") << "on CXL but not mapped with MAP_SYNC";
  EXPECT_EQ(medium_of({cxl_dax, cxl_sync}), "none") << "Device DAX and files mixed";
}

// Persistent memory's behaviour, CXL's names.
TEST(ChoosePersister, CxlBehavesAsPersistentMemory) {
  MappedPart sync, cxl_sync, cxl_dax;
  sync.map_sync = cxl_sync.map_sync = true;
  cxl_dax.device = DeviceDax{.size = kLen, .align = 2 << 20, .deep_flush = {}};
  cxl_sync.nd_provider = cxl_dax.nd_provider = "CXL";
  std::vector<uint8_t> mem(kLen);
  auto p = chosen(mem.data(), kLen, {sync});
  auto f = chosen(mem.data(), kLen, {cxl_sync});
  auto d = chosen(mem.data(), kLen, {cxl_dax});
  ASSERT_TRUE(p && f && d);
  for (const MediumTraits *t : {&f->traits(), &d->traits()}) {
    EXPECT_STREQ(t->name, "cxl");
    EXPECT_STREQ(t->flush, p->traits().flush);
    EXPECT_EQ(t->nic_writes, p->traits().nic_writes);
    EXPECT_EQ(t->waits_for_device, p->traits().waits_for_device);
    EXPECT_EQ(t->apm_sound, p->traits().apm_sound);
    EXPECT_EQ(t->visible_cheaper, p->traits().visible_cheaper);
  }
  EXPECT_STREQ(f->traits().description, "CXL persistent memory (fsdax)");
  EXPECT_STREQ(d->traits().description, "CXL persistent memory (devdax)");
  EXPECT_STREQ(d->traits().noun, "CXL persistent memory (devdax)");
}

// A deep persist on CXL is the persist: the region's deep_flush is never
// written (it reads 0 and is read-only on CXL), so it cannot fail there.
TEST(CxlPersister, ADeepPersistIsThePersistAndWritesNoDeepFlush) {
  TempDir dir;
  MappedFile f(dir.path() + "/part");
  ASSERT_NE(f.base(), nullptr);
  const std::string deep_flush = dir.path() + "/deep_flush";
  std::ofstream(deep_flush) << "1\n";  // what a region that wants a flush says
  auto parts = f.parts();
  parts[0].device = DeviceDax{.size = kLen, .align = 4096, .deep_flush = deep_flush};
  parts[0].nd_provider = "CXL";
  auto d = persister_of(f, parts, "cxl");
  ASSERT_TRUE(d);
  const auto a = pattern(5000, 9);
  EXPECT_EQ(d->write_durable(4096, a.data(), a.size(), true), std::error_code{});
  EXPECT_EQ(d->persist(0, kLen, true), std::error_code{});
  EXPECT_EQ(d->sync_all(), std::error_code{}) << "a device is not msync'ed";
  std::ifstream in(deep_flush);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "1\n") << "never written";
  parts[0].device.reset();  // the same file as one on fsdax
  parts[0].map_sync = true;
  auto s = persister_of(f, parts, "cxl");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->write_durable(8192, a.data(), a.size(), true), std::error_code{});
  EXPECT_EQ(s->persist(0, kLen, true), std::error_code{});
  EXPECT_EQ(s->sync_all(), std::error_code{}) << "msync, as fsdax";
  EXPECT_EQ(f.read_file(8192, a.size()), a);
}

TEST(ChoosePersister, EachMediumStatesItsTraits) {
  MappedPart ram, disk, sync;
  ram.in_ram = true;
  sync.map_sync = true;
  std::vector<uint8_t> mem(kLen);
  auto r = chosen(mem.data(), kLen, {ram});
  auto d = chosen(mem.data(), kLen, {disk});
  auto p = chosen(mem.data(), kLen, {sync});
  ASSERT_TRUE(r && d && p);
  EXPECT_TRUE(r->traits().nic_writes && !r->traits().waits_for_device && !r->traits().apm_sound);
  EXPECT_TRUE(!d->traits().nic_writes && d->traits().waits_for_device && !d->traits().apm_sound);
  EXPECT_TRUE(p->traits().nic_writes && !p->traits().waits_for_device && p->traits().apm_sound);
}

TEST(RamPersister, WritesLandInTheMappingAndPersistWaitsForNothing) {
  MappedFile f("/dev/shm/rpmem-persister-" + std::to_string(::getpid()));
  ASSERT_NE(f.base(), nullptr);
  auto parts = f.parts();
  parts[0].in_ram = true;
  auto p = persister_of(f, parts, "ram");
  ASSERT_TRUE(p);
  const auto a = pattern(1000, 3), b = pattern(77, 9);
  EXPECT_EQ(p->write_durable(4096, a.data(), a.size(), false), std::error_code{});
  EXPECT_EQ(p->write_posted(8195, b.data(), b.size()), std::error_code{});
  EXPECT_EQ(std::memcmp(f.base() + 4096, a.data(), a.size()), 0);
  EXPECT_EQ(std::memcmp(f.base() + 8195, b.data(), b.size()), 0);
  EXPECT_EQ(f.read_file(4096, a.size()), a) << "one page cache: the file holds the bytes";
  EXPECT_EQ(p->persist(0, kLen, true), std::error_code{});
  EXPECT_EQ(p->sync_all(), std::error_code{});
  ::unlink(("/dev/shm/rpmem-persister-" + std::to_string(::getpid())).c_str());
}

TEST(PageCachePersister, WritesGoThroughTheFileAndPersistWritesBack) {
  TempDir dir;
  MappedFile f(dir.path() + "/part");
  ASSERT_NE(f.base(), nullptr);
  const auto parts = f.parts();
  auto p = persister_of(f, parts, "disk");
  ASSERT_TRUE(p);
  const auto a = pattern(5000, 1), b = pattern(300, 2);
  EXPECT_EQ(p->write_durable(4000, a.data(), a.size(), false), std::error_code{});
  EXPECT_EQ(p->write_posted(20000, b.data(), b.size()), std::error_code{});
  EXPECT_EQ(f.read_file(4000, a.size()), a);
  EXPECT_EQ(f.read_file(20000, b.size()), b);
  EXPECT_EQ(std::memcmp(f.base() + 4000, a.data(), a.size()), 0) << "the mapping sees the write";
  std::memset(f.base() + 30000, 0x5a, 100);  // a store through the mapping
  EXPECT_EQ(p->persist(30000, 100, false), std::error_code{});
  EXPECT_EQ(p->persist(30000, 100, true), std::error_code{});
  EXPECT_EQ(p->persist_mapped(f.base(), 4096), std::error_code{});
  EXPECT_EQ(p->sync_all(), std::error_code{});
}

TEST(PageCachePersister, FailuresAreEio) {
  TempDir dir;
  MappedFile f(dir.path() + "/part");
  ASSERT_NE(f.base(), nullptr);
  auto parts = f.parts();
  const int ro = ::open((dir.path() + "/part").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(ro, 0);
  parts[0].fd = ro;  // the file, not writable through this descriptor
  auto p = chosen(f.base(), kLen, parts);
  ASSERT_TRUE(p);
  const auto a = pattern(100, 4);
  EXPECT_EQ(p->write_durable(8192, a.data(), a.size(), false),
            std::make_error_code(std::errc::io_error));
  EXPECT_EQ(p->write_posted(8192, a.data(), a.size()), std::make_error_code(std::errc::io_error));
  // A range beyond the mapping: msync fails (ENOMEM), the persist is EIO.
  void *hole = ::mmap(nullptr, 2 * kLen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(hole, MAP_FAILED);
  ::munmap(hole, 2 * kLen);
  auto q = chosen(static_cast<uint8_t *>(hole), kLen, parts);
  ASSERT_TRUE(q);
  EXPECT_EQ(q->persist(0, kLen, false), std::make_error_code(std::errc::io_error));
  ::close(ro);
}

// Persistent memory, where the VM has it (scripts/test-pmem.sh): a file on
// fsdax mapped with MAP_SYNC (RPMEM_TEST_PMEM_DIR), a device DAX
// (RPMEM_TEST_DEVDAX).
TEST(FsdaxPersister, OnPmemStoresAreDurableByAFlushAndApmIsSound) {
  const char *dir = std::getenv("RPMEM_TEST_PMEM_DIR");
  if (!dir || !*dir) GTEST_SKIP() << "no fsdax directory (RPMEM_TEST_PMEM_DIR)";
  const std::string path = std::string(dir) + "/persister-" + std::to_string(::getpid());
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, kLen), 0);
  void *m = ::mmap(nullptr, kLen, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE | MAP_SYNC, fd, 0);
  ASSERT_NE(m, MAP_FAILED) << "MAP_SYNC refused: " << path << " is not on fsdax";
  auto *base = static_cast<uint8_t *>(m);
  std::vector<MappedPart> parts(1);
  parts[0].path = path;
  parts[0].fd = fd;
  parts[0].map_sync = true;
  parts[0].map_len = kLen;
  auto p = chosen(base, kLen, parts);
  ASSERT_TRUE(p);
  EXPECT_STREQ(p->traits().name, "pmem");
  EXPECT_TRUE(p->traits().apm_sound && p->traits().nic_writes);
  const auto a = pattern(3000, 5);
  EXPECT_EQ(p->write_durable(8192, a.data(), a.size(), true), std::error_code{});
  std::memset(base + 20000, 0x3c, 64);
  EXPECT_EQ(p->persist(20000, 64, false), std::error_code{});
  EXPECT_EQ(p->persist(20000, 64, true), std::error_code{});
  EXPECT_EQ(p->sync_all(), std::error_code{});
  std::vector<uint8_t> back(a.size());
  ASSERT_EQ(::pread(fd, back.data(), back.size(), 8192), static_cast<ssize_t>(back.size()));
  EXPECT_EQ(back, a);
  ::munmap(m, kLen);
  ::close(fd);
  ::unlink(path.c_str());
}

TEST(DevdaxPersister, OnADeviceDeepPersistsFlushTheRegion) {
  const char *dev = std::getenv("RPMEM_TEST_DEVDAX");
  if (!dev || !*dev) GTEST_SKIP() << "no device DAX (RPMEM_TEST_DEVDAX)";
  auto dax = device_dax(dev);
  ASSERT_TRUE(dax) << dev << " is not a device DAX";
  const int fd = ::open(dev, O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const size_t len = dax->align;
  void *m = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(m, MAP_FAILED);
  auto *base = static_cast<uint8_t *>(m);
  std::vector<MappedPart> parts(1);
  parts[0] = {.path = dev,
              .size = dax->size,
              .fd = fd,
              .map_len = len,
              .device = dax,
              .nd_provider = {}};  // named as an NVDIMM's, whatever it is
  auto p = chosen(base, len, parts);
  ASSERT_TRUE(p);
  EXPECT_STREQ(p->traits().name, "pmem");
  EXPECT_TRUE(p->traits().apm_sound);
  const auto a = pattern(4096, 7);
  EXPECT_EQ(p->write_durable(4096, a.data(), a.size(), true), std::error_code{})
      << "the region's deep flush (" << dax->deep_flush << ")";
  EXPECT_EQ(std::memcmp(base + 4096, a.data(), a.size()), 0);
  EXPECT_EQ(p->persist(0, len, true), std::error_code{});
  EXPECT_EQ(p->sync_all(), std::error_code{}) << "a device is not msync'ed";
  ::munmap(m, len);
  ::close(fd);
}

}  // namespace
}  // namespace rpmemd
