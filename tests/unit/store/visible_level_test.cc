// SPDX-License-Identifier: BSD-3-Clause
// The visible level on the host's media: a page-cache pool's visible writes
// are stores into its mapping, without waiting for its disk, counted until a
// persistent call, a write-back they are old enough for, or the close
// writes the pool back; RAM's are persistent at once. WriteBack's thread
// writes them back within its bound.
#include "rpmemd/persister.h"
#include "rpmemd/write_back.h"
#include "tests/unit/store/store_test_util.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace rpmemd {
namespace {

using namespace std::chrono_literals;
using test::TempDir;

constexpr size_t kLen = 64 * 1024;

// A file of kLen bytes mapped shared, as the one part of a pool, and the
// persister choose_persister() takes for it.
struct Pool {
  explicit Pool(const std::string &path, bool in_ram = false) {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ::ftruncate(fd, kLen) != 0) return;
    void *p = ::mmap(nullptr, kLen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return;
    base = static_cast<uint8_t *>(p);
    MappedPart part;
    part.path = path;
    part.size = kLen;
    part.fd = fd;
    part.map_len = kLen;
    part.in_ram = in_ram;
    parts.push_back(part);
    persister = std::move(choose_persister(base, kLen, parts).value());
  }
  ~Pool() {
    persister.reset();
    if (base) ::munmap(base, kLen);
    if (fd >= 0) ::close(fd);
  }
  std::vector<uint8_t> file(size_t off, size_t n) const {
    std::vector<uint8_t> b(n);
    if (::pread(fd, b.data(), n, static_cast<off_t>(off)) != static_cast<ssize_t>(n)) b.clear();
    return b;
  }
  int fd = -1;
  uint8_t *base = nullptr;
  std::vector<MappedPart> parts;
  std::unique_ptr<Persister> persister;
};

std::vector<uint8_t> bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 3);
  return b;
}

TEST(VisibleLevel, OnADiskVisibleBytesWaitForAPersistentCallAWriteBackOrTheClose) {
  TempDir dir;
  Pool pool(dir.path() + "/part");
  ASSERT_TRUE(pool.persister);
  Persister &p = *pool.persister;
  ASSERT_TRUE(p.traits().visible_cheaper);
  EXPECT_EQ(p.unpersisted_age(), 0ns);
  const auto a = bytes(5000, 1);
  ASSERT_EQ(p.write_visible(4000, a.data(), a.size()), std::error_code{});
  EXPECT_EQ(pool.file(4000, a.size()), a) << "the file's readers see it";
  EXPECT_EQ(std::memcmp(pool.base + 4000, a.data(), a.size()), 0) << "and the pool's mapping";
  EXPECT_GT(p.unpersisted_age(), 0ns);
  EXPECT_EQ(p.write_back(1h), std::error_code{});
  EXPECT_GT(p.unpersisted_age(), 0ns) << "not old enough to be written back";
  EXPECT_EQ(p.write_back(0ns), std::error_code{});
  EXPECT_EQ(p.unpersisted_age(), 0ns);
  // Bytes stored into the mapping and noted; a persistent call of another
  // range writes them back too.
  std::memset(pool.base + 30000, 0x5a, 100);
  ASSERT_EQ(p.made_visible(30000, 100), std::error_code{});
  EXPECT_EQ(p.made_visible(30000, 0), std::error_code{});
  EXPECT_GT(p.unpersisted_age(), 0ns);
  EXPECT_EQ(p.persist(50000, 10, false), std::error_code{});
  EXPECT_EQ(p.unpersisted_age(), 0ns);
  for (auto persistent : {0, 1, 2}) {
    ASSERT_EQ(p.write_visible(100, a.data(), 10), std::error_code{});
    EXPECT_GT(p.unpersisted_age(), 0ns);
    const std::error_code ec = persistent == 0   ? p.write_durable(200, a.data(), 10, false)
                               : persistent == 1 ? p.persist_visible()
                                                 : p.sync_all();
    EXPECT_EQ(ec, std::error_code{});
    EXPECT_EQ(p.unpersisted_age(), 0ns) << persistent;
  }
}

// A visible write into the page cache is stores into the mapping, as a
// transport's are: it needs no write of the part file (whose descriptor
// here is read-only, so that a pwritev2 would fail), and the file's readers
// and a write-back see it all the same.
TEST(VisibleLevel, OnADiskAVisibleWriteIsStoresIntoTheMappingNotAWriteOfTheFile) {
  TempDir dir;
  Pool pool(dir.path() + "/part");
  ASSERT_TRUE(pool.persister);
  auto parts = pool.parts;
  const int ro = ::open((dir.path() + "/part").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(ro, 0);
  parts[0].fd = ro;
  auto chosen = choose_persister(pool.base, kLen, parts);
  ASSERT_TRUE(chosen) << chosen.error().message;
  auto &p = chosen.value();
  ASSERT_TRUE(p->traits().visible_cheaper);
  const auto a = bytes(5000, 4);
  EXPECT_EQ(p->write_visible(4000, a.data(), a.size()), std::error_code{});
  EXPECT_EQ(std::memcmp(pool.base + 4000, a.data(), a.size()), 0);
  EXPECT_EQ(pool.file(4000, a.size()), a);
  EXPECT_GT(p->unpersisted_age(), 0ns) << "counted as visible";
  EXPECT_EQ(p->persist_visible(), std::error_code{});
  EXPECT_EQ(p->unpersisted_age(), 0ns);
  EXPECT_EQ(p->write_durable(4000, a.data(), 8, false), std::make_error_code(std::errc::io_error))
      << "durable writes still go through the file";
  ::close(ro);
}

const std::error_code kOk{};
const std::error_code kEio = std::make_error_code(std::errc::io_error);

// A pool on a disk with 4 KiB written visible at 8192, and a page of its
// mapping that can be taken away (an msync of the whole pool then fails, as
// a writeback error fails it on a disk) and put back.
struct PoolWithAHole {
  static constexpr size_t kAt = 32768;
  explicit PoolWithAHole(uint8_t seed) : pool(dir.path() + "/part"), a(bytes(4096, seed)) {}
  bool ready() const {
    return pool.persister && pool.persister->write_visible(8192, a.data(), a.size()) == kOk;
  }
  Persister &p() const { return *pool.persister; }
  bool dig() { return ::munmap(pool.base + kAt, 4096) == 0; }
  bool fill() {
    void *m = ::mmap(pool.base + kAt, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, pool.fd,
                     static_cast<off_t>(kAt));
    return m == pool.base + kAt;
  }
  TempDir dir;
  Pool pool;
  const std::vector<uint8_t> a;
};

// A write-back that fails while visible bytes wait may have lost them, and
// msync reports a file's writeback error once only: every later write and
// persist of the pool fails with EIO, even once msync works again
// (WriteBackError.* shows the kernel's side in the VM).
TEST(VisibleLevel, AFailedWriteBackOfVisibleBytesFailsEveryLaterWriteAndPersist) {
  for (bool by_thread : {true, false}) {
    SCOPED_TRACE(by_thread ? "seen by a write-back" : "seen by a persistent call");
    PoolWithAHole pool(5);
    ASSERT_TRUE(pool.ready());
    Persister &p = pool.p();
    ASSERT_TRUE(pool.dig());
    EXPECT_EQ(by_thread ? p.write_back(0ns) : p.persist(100, 10, false), kEio);
    ASSERT_TRUE(pool.fill());
    EXPECT_GT(p.unpersisted_age(), 0ns) << "never persistent now";
    EXPECT_EQ(p.persist(100, 10, false), kEio);
    EXPECT_EQ(p.persist_visible(), kEio);
    EXPECT_EQ(p.write_back(0ns), kEio);
    EXPECT_EQ(p.write_durable(8192, pool.a.data(), 8, false), kEio);
    EXPECT_EQ(p.write_posted(8192, pool.a.data(), 8), kEio);
    EXPECT_EQ(p.write_visible(8192, pool.a.data(), 8), kEio);
    EXPECT_EQ(p.made_visible(8192, 8), kEio);
    EXPECT_EQ(p.sync_all(), kEio);
  }
}

// With no visible byte waiting, a failed persist or write-back fails that
// call only, as on the persistent level.
TEST(VisibleLevel, AFailedPersistWithNoVisibleByteWaitingFailsThatCallOnly) {
  PoolWithAHole pool(6);
  ASSERT_TRUE(pool.ready());
  Persister &p = pool.p();
  ASSERT_EQ(p.persist_visible(), kOk);
  ASSERT_TRUE(pool.dig());
  EXPECT_EQ(p.persist(0, kLen, false), kEio);
  EXPECT_EQ(p.sync_all(), kEio);
  ASSERT_TRUE(pool.fill());
  EXPECT_EQ(p.persist(0, kLen, false), kOk);
  EXPECT_EQ(p.write_visible(8192, pool.a.data(), pool.a.size()), kOk);
  EXPECT_EQ(p.persist_visible(), kOk);
  EXPECT_EQ(p.unpersisted_age(), 0ns);
}

TEST(VisibleLevel, InRamVisibleIsPersistentAtOnce) {
  const std::string path = "/dev/shm/rpmem-visible-" + std::to_string(::getpid());
  {
    Pool pool(path, true);
    ASSERT_TRUE(pool.persister);
    Persister &p = *pool.persister;
    EXPECT_FALSE(p.traits().visible_cheaper);
    const auto a = bytes(1000, 2);
    ASSERT_EQ(p.write_visible(4096, a.data(), a.size()), std::error_code{});
    EXPECT_EQ(std::memcmp(pool.base + 4096, a.data(), a.size()), 0);
    EXPECT_EQ(p.made_visible(4096, 10), std::error_code{});
    EXPECT_EQ(p.unpersisted_age(), 0ns);
  }
  ::unlink(path.c_str());
}

TEST(VisibleLevel, TheWriteBackThreadWritesThemBackWithinItsBound) {
  TempDir dir;
  Pool pool(dir.path() + "/part");
  ASSERT_TRUE(pool.persister);
  Persister &p = *pool.persister;
  WriteBack wb(p, 200ms);
  const auto a = bytes(4096, 3);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(p.write_visible(8192, a.data(), a.size()), std::error_code{});
  while (p.unpersisted_age() > 0ns && std::chrono::steady_clock::now() - t0 < 10s)
    std::this_thread::sleep_for(5ms);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(p.unpersisted_age(), 0ns);
  EXPECT_GE(took, 100ms) << "written back before half the bound";
  EXPECT_EQ(pool.file(8192, a.size()), a);
}

}  // namespace
}  // namespace rpmemd
