// SPDX-License-Identifier: BSD-3-Clause
// Tests of PoolStore and its MappedPool on real files in a temporary directory.
#include "rpmemd/pool_store.h"

#include "rpmemd/pool_hdr.h"
#include "tests/unit/store/store_test_util.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>

namespace rpmemd {
namespace {

using test::exists;
using test::file_size;
using test::fill_ids;
using test::full_attr;
using test::kMiB;
using test::obj_like_attr;
using test::read_bytes;
using test::TempDir;
using test::write_file;

std::error_code E(int e) { return {e, std::generic_category()}; }

PoolHdr read_hdr(const std::string &path) {
  auto bytes = read_bytes(path, 0, sizeof(PoolHdr));
  PoolHdr h;
  std::memcpy(&h, bytes.data(), sizeof(h));
  return h;
}

void write_at(const std::string &path, size_t off, const void *data, size_t len) {
  int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, data, len, static_cast<off_t>(off)), static_cast<ssize_t>(len));
  ::close(fd);
}

class PoolStoreTest : public ::testing::Test {
 protected:
  PoolStoreTest() : store_(dir_.path()) {}

  // A pool set file `name` with `nparts` 2 MiB parts p0..pN and options.
  std::string make_set(const std::string &name, int nparts, const std::string &options = {},
                       const std::string &part_prefix = "p") {
    std::string text = "PMEMPOOLSET\n" + options;
    for (int i = 0; i < nparts; ++i) text += "2M " + part(part_prefix + std::to_string(i)) + "\n";
    write_file(dir_ / name, text);
    return name;
  }
  std::string part(const std::string &name) const { return dir_ / name; }

  TempDir dir_;
  PoolStore store_;
};

TEST_F(PoolStoreTest, CreateMapsPartsContiguouslyBehindTheirHeaders) {
  make_set("pool.set", 2);
  std::unique_ptr<MappedPool> pool;
  rpmem::PoolAttr attr = obj_like_attr();
  ASSERT_EQ(store_.create("pool.set", &attr, pool), std::error_code{});
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->size(), 4 * kMiB - 4096);
  EXPECT_TRUE(pool->has_headers());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(pool->base()) % 4096, 0u);
  EXPECT_EQ(file_size(part("p0")), 2 * kMiB);
  EXPECT_EQ(file_size(part("p1")), 2 * kMiB);

  // The mapping starts with part 0's header.
  PoolHdr mapped;
  std::memcpy(&mapped, pool->base(), sizeof(mapped));
  EXPECT_EQ(std::memcmp(mapped.signature, "PMEMOBJ", 8), 0);

  // Client offset X is pool offset X: part 0 [4096, 2M), then part 1 from
  // its file offset 4096.
  uint8_t *b = pool->base();
  std::memcpy(b + 4096, "first", 5);
  std::memcpy(b + 2 * kMiB - 5, "edge!", 5);
  std::memcpy(b + 2 * kMiB, "second", 6);
  std::memcpy(b + pool->size() - 4, "last", 4);
  ASSERT_EQ(pool->persist(4096, pool->size() - 4096, false), std::error_code{});
  pool.reset();

  auto at = [&](const std::string &p, size_t off, size_t n) {
    auto v = read_bytes(part(p), off, n);
    return std::string(v.begin(), v.end());
  };
  EXPECT_EQ(at("p0", 4096, 5), "first");
  EXPECT_EQ(at("p0", 2 * kMiB - 5, 5), "edge!");
  EXPECT_EQ(at("p1", 4096, 6), "second");
  EXPECT_EQ(at("p1", 2 * kMiB - 4, 4), "last");
}

// Whether `dir` is on tmpfs.
bool on_tmpfs(const std::string &dir) {
  struct statfs fs {};
  return ::statfs(dir.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

TEST_F(PoolStoreTest, APoolIsInRamOnlyWhenEveryPartIs) {
  if (on_tmpfs(dir_.path()) || !on_tmpfs("/dev/shm"))
    GTEST_SKIP() << "needs a temporary directory on a disk and /dev/shm on tmpfs";
  char tmpl[] = "/dev/shm/rpmem-store-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string ram = tmpl;
  rpmem::PoolAttr attr = obj_like_attr();
  auto in_ram_of = [&](const std::string &name, const std::string &p0, const std::string &p1) {
    write_file(dir_ / name, "PMEMPOOLSET\n2M " + p0 + "\n2M " + p1 + "\n");
    std::unique_ptr<MappedPool> pool;
    EXPECT_EQ(store_.create(name, &attr, pool), std::error_code{});
    const bool r = pool && pool->persister().traits().name == std::string("ram");
    // Whatever the medium, a persist makes the bytes reach the file.
    if (pool) {
      std::memcpy(pool->base() + pool->size() - 8, "lastword", 8);
      EXPECT_EQ(pool->persist(pool->size() - 8, 8, false), std::error_code{});
    }
    pool.reset();
    auto v = read_bytes(p1, 2 * kMiB - 8, 8);
    EXPECT_EQ(std::string(v.begin(), v.end()), "lastword") << name;
    return r;
  };
  EXPECT_TRUE(in_ram_of("ram.set", ram + "/a0", ram + "/a1"));
  EXPECT_FALSE(in_ram_of("disk.set", part("b0"), part("b1")));
  EXPECT_FALSE(in_ram_of("mixed.set", ram + "/c0", part("c1"))) << "a part on a disk";
  EXPECT_FALSE(in_ram_of("mixed2.set", part("d0"), ram + "/d1")) << "a part on a disk";
  std::error_code ec;
  std::filesystem::remove_all(ram, ec);
}

TEST_F(PoolStoreTest, CreateWritesPmdkHeaders) {
  make_set("pool.set", 3);
  std::unique_ptr<MappedPool> pool;
  rpmem::PoolAttr attr = obj_like_attr();
  time_t before = ::time(nullptr);
  ASSERT_EQ(store_.create("pool.set", &attr, pool), std::error_code{});
  pool.reset();

  PoolHdr h[3] = {read_hdr(part("p0")), read_hdr(part("p1")), read_hdr(part("p2"))};
  for (int p = 0; p < 3; ++p) {
    SCOPED_TRACE(p);
    EXPECT_TRUE(checksum_valid(h[p]));
    EXPECT_EQ(std::memcmp(h[p].signature, "PMEMOBJ", 8), 0);
    EXPECT_EQ(h[p].major, 6u);
    EXPECT_EQ(h[p].compat_features, 0x1u);
    EXPECT_EQ(h[p].incompat_features, 0x6u);
    EXPECT_EQ(h[p].ro_compat_features, 0u);
    EXPECT_NE(h[p].poolset_uuid, Uuid{});  // generated
    EXPECT_EQ(h[p].poolset_uuid, h[0].poolset_uuid);
    EXPECT_NE(h[p].uuid, Uuid{});
    EXPECT_EQ((h[p].uuid[7] & 0xF0), 0x40);  // version 4, as pmempool prints it
    EXPECT_EQ(h[p].prev_part_uuid, h[(p + 2) % 3].uuid);
    EXPECT_EQ(h[p].next_part_uuid, h[(p + 1) % 3].uuid);
    EXPECT_EQ(h[p].prev_repl_uuid, h[0].uuid);
    EXPECT_EQ(h[p].next_repl_uuid, h[0].uuid);
    EXPECT_GE(h[p].crtime + 1, static_cast<uint64_t>(before));
    EXPECT_LE(h[p].crtime, static_cast<uint64_t>(::time(nullptr)));
    ArchFlags native = native_arch_flags();
    EXPECT_EQ(std::memcmp(&h[p].arch_flags, &native, sizeof(native)), 0);
    auto rest = read_bytes(part("p" + std::to_string(p)), 144, 4088 - 144);
    for (uint8_t byte : rest) ASSERT_EQ(byte, 0);
  }
  EXPECT_NE(h[0].uuid, h[1].uuid);
  EXPECT_NE(h[1].uuid, h[2].uuid);

  struct stat st {};
  ASSERT_EQ(::stat(part("p0").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u);
}

TEST_F(PoolStoreTest, CreateKeepsGivenUuidsAndUserFlags) {
  make_set("pool.set", 2);
  rpmem::PoolAttr attr = obj_like_attr();
  fill_ids(attr, 0xA0, 0x10);
  std::unique_ptr<MappedPool> pool;
  ASSERT_EQ(store_.create("pool.set", &attr, pool), std::error_code{});
  pool.reset();
  PoolHdr h0 = read_hdr(part("p0"));
  PoolHdr h1 = read_hdr(part("p1"));
  EXPECT_EQ(h0.poolset_uuid, attr.poolset_uuid);
  EXPECT_EQ(h0.uuid, attr.uuid);
  EXPECT_NE(h1.uuid, attr.uuid);
  EXPECT_EQ(h1.prev_part_uuid, attr.uuid);
  EXPECT_EQ(h1.next_repl_uuid, attr.next_uuid);
  EXPECT_EQ(h1.prev_repl_uuid, attr.prev_uuid);
  EXPECT_EQ(std::memcmp(&h1.arch_flags, attr.user_flags.data(), 16), 0);

  rpmem::PoolAttr got;
  ASSERT_EQ(store_.open("pool.set", pool, got), std::error_code{});
  EXPECT_EQ(got, attr);
}

TEST_F(PoolStoreTest, OpenReturnsTheAttributesOfPart0) {
  make_set("pool.set", 2);
  std::unique_ptr<MappedPool> pool;
  rpmem::PoolAttr attr = obj_like_attr();
  ASSERT_EQ(store_.create("pool.set", &attr, pool), std::error_code{});
  std::memcpy(pool->base() + 3 * kMiB, "persisted", 9);
  ASSERT_EQ(pool->persist(3 * kMiB, 9, true), std::error_code{});
  pool.reset();

  rpmem::PoolAttr got;
  ASSERT_EQ(store_.open("pool.set", pool, got), std::error_code{});
  PoolHdr h0 = read_hdr(part("p0"));
  rpmem::PoolAttr expect = attr;
  expect.poolset_uuid = h0.poolset_uuid;
  expect.uuid = h0.uuid;
  expect.next_uuid = h0.uuid;
  expect.prev_uuid = h0.uuid;
  ArchFlags native = native_arch_flags();
  std::memcpy(expect.user_flags.data(), &native, 16);
  EXPECT_EQ(got, expect);
  EXPECT_EQ(pool->size(), 4 * kMiB - 4096);
  EXPECT_EQ(std::memcmp(pool->base() + 3 * kMiB, "persisted", 9), 0);
}

TEST_F(PoolStoreTest, SingleHdr) {
  make_set("pool.set", 2, "OPTION SINGLEHDR\n");
  rpmem::PoolAttr attr = obj_like_attr();
  std::unique_ptr<MappedPool> pool;
  EXPECT_EQ(store_.create("pool.set", &attr, pool), E(EINVAL));  // incompat 0x1 missing
  EXPECT_FALSE(exists(part("p0")));
  attr.incompat_features |= kFeatSingleHdr;
  ASSERT_EQ(store_.create("pool.set", &attr, pool), std::error_code{});
  EXPECT_EQ(pool->size(), 4 * kMiB);
  std::memcpy(pool->base() + 2 * kMiB, "part1@0", 7);
  pool.reset();

  PoolHdr h0 = read_hdr(part("p0"));
  EXPECT_TRUE(checksum_valid(h0));
  EXPECT_EQ(h0.incompat_features, 0x7u);
  EXPECT_EQ(h0.prev_part_uuid, h0.uuid);
  EXPECT_EQ(h0.next_part_uuid, h0.uuid);
  auto p1 = read_bytes(part("p1"), 0, 7);
  EXPECT_EQ(std::string(p1.begin(), p1.end()), "part1@0");

  rpmem::PoolAttr got;
  ASSERT_EQ(store_.open("pool.set", pool, got), std::error_code{});
  EXPECT_EQ(got.incompat_features, 0x7u);
  EXPECT_EQ(pool->size(), 4 * kMiB);
}

TEST_F(PoolStoreTest, SingleHdrFlagWithoutTheOptionIsRefused) {
  make_set("pool.set", 1);
  rpmem::PoolAttr attr = obj_like_attr();
  attr.incompat_features |= kFeatSingleHdr;
  std::unique_ptr<MappedPool> pool;
  EXPECT_EQ(store_.create("pool.set", &attr, pool), E(EINVAL));
  EXPECT_FALSE(exists(part("p0")));
}

TEST_F(PoolStoreTest, NoHdrs) {
  make_set("pool.set", 2, "OPTION NOHDRS\n");
  std::unique_ptr<MappedPool> pool;
  rpmem::PoolAttr attr = obj_like_attr();
  EXPECT_EQ(store_.create("pool.set", &attr, pool), E(EINVAL));
  EXPECT_FALSE(exists(part("p0")));
  ASSERT_EQ(store_.create("pool.set", nullptr, pool), std::error_code{});
  EXPECT_FALSE(pool->has_headers());
  EXPECT_EQ(pool->size(), 4 * kMiB);
  std::memcpy(pool->base(), "offset0", 7);
  std::memcpy(pool->base() + 2 * kMiB, "part1", 5);
  EXPECT_EQ(pool->set_attr(&attr), E(EINVAL));
  EXPECT_EQ(pool->set_attr(nullptr), std::error_code{});
  rpmem::PoolAttr zero;
  EXPECT_EQ(pool->set_attr(&zero), std::error_code{});
  pool.reset();
  auto p0 = read_bytes(part("p0"), 0, 7);
  EXPECT_EQ(std::string(p0.begin(), p0.end()), "offset0");
  auto p1 = read_bytes(part("p1"), 0, 5);
  EXPECT_EQ(std::string(p1.begin(), p1.end()), "part1");

  rpmem::PoolAttr got = obj_like_attr();
  ASSERT_EQ(store_.open("pool.set", pool, got), std::error_code{});
  EXPECT_TRUE(got.is_zero());
  EXPECT_FALSE(pool->has_headers());
}

TEST_F(PoolStoreTest, ZeroAttributesNeedNoHdrs) {
  make_set("pool.set", 1);
  std::unique_ptr<MappedPool> pool;
  EXPECT_EQ(store_.create("pool.set", nullptr, pool), E(EINVAL));
  rpmem::PoolAttr zero;
  EXPECT_EQ(store_.create("pool.set", &zero, pool), E(EINVAL));
  EXPECT_FALSE(exists(part("p0")));
}

TEST_F(PoolStoreTest, CreateOverAnExistingPoolIsEexistAndLeavesItAlone) {
  make_set("pool.set", 2);
  std::unique_ptr<MappedPool> pool;
  rpmem::PoolAttr attr = obj_like_attr();
  ASSERT_EQ(store_.create("pool.set", &attr, pool), std::error_code{});
  pool.reset();
  auto before = read_bytes(part("p0"), 0, 4096);
  EXPECT_EQ(store_.create("pool.set", &attr, pool), E(EEXIST));
  EXPECT_EQ(pool, nullptr);
  EXPECT_TRUE(exists(part("p0")));
  EXPECT_TRUE(exists(part("p1")));
  EXPECT_EQ(read_bytes(part("p0"), 0, 4096), before);
  rpmem::PoolAttr got;
  EXPECT_EQ(store_.open("pool.set", pool, got), std::error_code{});
}

TEST_F(PoolStoreTest, CreateReusesAZeroedPartOfTheRightSize) {
  make_set("pool.set", 2);
  write_file(part("p1"), std::string(2 * kMiB, '\0'));
  write_at(part("p1"), 8192, "keep", 4);  // only the header area must be zero
  std::unique_ptr<MappedPool> pool;
  rpmem::PoolAttr attr = obj_like_attr();
  ASSERT_EQ(store_.create("pool.set", &attr, pool), std::error_code{});
  // File offset 8192 of part 1 is pool offset 2M + 4096.
  EXPECT_EQ(std::memcmp(pool->base() + 2 * kMiB + 4096, "keep", 4), 0);
  pool.reset();
  EXPECT_TRUE(checksum_valid(read_hdr(part("p1"))));
}

TEST_F(PoolStoreTest, ExistingPartOfAnotherSizeIsEinval) {
  make_set("pool.set", 2);
  write_file(part("p1"), std::string(3 * kMiB, '\0'));
  std::unique_ptr<MappedPool> pool;
  rpmem::PoolAttr attr = obj_like_attr();
  EXPECT_EQ(store_.create("pool.set", &attr, pool), E(EINVAL));
  EXPECT_FALSE(exists(part("p0")));            // created by this call: removed
  EXPECT_EQ(file_size(part("p1")), 3 * kMiB);  // pre-existing: kept
}

TEST_F(PoolStoreTest, FailedCreateRemovesOnlyWhatItCreated) {
  make_set("pool.set", 3);
  write_file(part("p1"), std::string(2 * kMiB, '\0'));
  write_at(part("p1"), 100, "x", 1);  // header area not zero
  std::unique_ptr<MappedPool> pool;
  rpmem::PoolAttr attr = obj_like_attr();
  EXPECT_EQ(store_.create("pool.set", &attr, pool), E(EEXIST));
  EXPECT_FALSE(exists(part("p0")));
  EXPECT_TRUE(exists(part("p1")));
  EXPECT_EQ(read_bytes(part("p1"), 100, 1)[0], 'x');
  EXPECT_FALSE(exists(part("p2")));
  // Nothing is left locked either.
  ::unlink(part("p1").c_str());
  EXPECT_EQ(store_.create("pool.set", &attr, pool), std::error_code{});
}

TEST_F(PoolStoreTest, PartInAMissingDirectoryIsEnoentAndCleansUp) {
  write_file(dir_ / "pool.set",
             "PMEMPOOLSET\n2M " + part("p0") + "\n2M " + part("nodir/p1") + "\n");
  std::unique_ptr<MappedPool> pool;
  rpmem::PoolAttr attr = obj_like_attr();
  EXPECT_EQ(store_.create("pool.set", &attr, pool), E(ENOENT));
  EXPECT_FALSE(exists(part("p0")));
}

TEST_F(PoolStoreTest, FullFileSystemFailsAndLeavesNothingBehind) {
  // RLIMIT_FSIZE stands in for a full disk: allocation of part 1 fails.
  write_file(dir_ / "big.set", "PMEMPOOLSET\n2M " + part("b0") + "\n8M " + part("b1") + "\n");
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {4 * kMiB, 4 * kMiB};
    ::setrlimit(RLIMIT_FSIZE, &rl);
    std::unique_ptr<MappedPool> pool;
    rpmem::PoolAttr attr = obj_like_attr();
    std::error_code ec = store_.create("big.set", &attr, pool);
    ::_exit(ec.value() & 0xFF);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), EFBIG);
  EXPECT_FALSE(exists(part("b0")));
  EXPECT_FALSE(exists(part("b1")));
}

TEST_F(PoolStoreTest, LockedPoolIsEwouldblock) {
  make_set("pool.set", 2);
  std::unique_ptr<MappedPool> pool;
  rpmem::PoolAttr attr = obj_like_attr();
  ASSERT_EQ(store_.create("pool.set", &attr, pool), std::error_code{});

  PoolStore other(dir_.path());
  std::unique_ptr<MappedPool> second;
  rpmem::PoolAttr got;
  EXPECT_EQ(other.open("pool.set", second, got), E(EWOULDBLOCK));
  EXPECT_EQ(second, nullptr);
  EXPECT_EQ(other.create("pool.set", &attr, second), E(EWOULDBLOCK));
  EXPECT_TRUE(exists(part("p0")));  // a failed create never removes others' parts
  EXPECT_EQ(other.remove("pool.set", false, false), E(EWOULDBLOCK));
  EXPECT_TRUE(exists(part("p0")));

  pool.reset();
  EXPECT_EQ(other.open("pool.set", second, got), std::error_code{});
}

TEST_F(PoolStoreTest, OpenErrors) {
  std::unique_ptr<MappedPool> pool;
  rpmem::PoolAttr got;
  EXPECT_EQ(store_.open("missing.set", pool, got), E(ENOENT));
  make_set("pool.set", 2);
  EXPECT_EQ(store_.open("pool.set", pool, got), E(ENOENT));  // parts missing
  write_file(dir_ / "bad.set", "PMEMPOOLSET\nREPLICA\n");
  EXPECT_EQ(store_.open("bad.set", pool, got), E(EINVAL));
  write_file(dir_ / "small.set", "PMEMPOOLSET\n1M " + part("s0") + "\n");
  EXPECT_EQ(store_.open("small.set", pool, got), E(EINVAL));
}

class PoolStoreOpenCheck : public PoolStoreTest {
 protected:
  void SetUp() override {
    make_set("pool.set", 2);
    std::unique_ptr<MappedPool> pool;
    rpmem::PoolAttr attr = obj_like_attr();
    ASSERT_EQ(store_.create("pool.set", &attr, pool), std::error_code{});
  }
  std::error_code open() {
    std::unique_ptr<MappedPool> pool;
    rpmem::PoolAttr got;
    return store_.open("pool.set", pool, got);
  }
  void rewrite_hdr(const std::string &p, void (*change)(PoolHdr &), bool fix_checksum) {
    PoolHdr h = read_hdr(part(p));
    change(h);
    if (fix_checksum) update_checksum(h);
    write_at(part(p), 0, &h, sizeof(h));
  }
};

TEST_F(PoolStoreOpenCheck, ValidPoolOpens) { EXPECT_EQ(open(), std::error_code{}); }

TEST_F(PoolStoreOpenCheck, BadChecksumIsEinval) {
  rewrite_hdr(
      "p1", [](PoolHdr &h) { h.major = 7; }, false);
  EXPECT_EQ(open(), E(EINVAL));
}

TEST_F(PoolStoreOpenCheck, ZeroedHeaderIsEinval) {
  rewrite_hdr(
      "p1", [](PoolHdr &h) { h = PoolHdr{}; }, false);
  EXPECT_EQ(open(), E(EINVAL));
}

TEST_F(PoolStoreOpenCheck, FieldDifferentFromPart0IsEinval) {
  rewrite_hdr(
      "p1", [](PoolHdr &h) { h.signature[0] = 'X'; }, true);
  EXPECT_EQ(open(), E(EINVAL));
}

TEST_F(PoolStoreOpenCheck, ArchFlagsDifferentFromPart0IsEinval) {
  rewrite_hdr(
      "p1", [](PoolHdr &h) { h.arch_flags.reserved[0] = 1; }, true);
  EXPECT_EQ(open(), E(EINVAL));
}

TEST_F(PoolStoreOpenCheck, BrokenPartLinkIsEinval) {
  rewrite_hdr(
      "p1", [](PoolHdr &h) { h.next_part_uuid[0] ^= 1; }, true);
  EXPECT_EQ(open(), E(EINVAL));
}

TEST_F(PoolStoreOpenCheck, SignatureValueItselfIsNotChecked) {
  // As rpmemd: a consistent but unexpected signature is the client's business.
  rewrite_hdr(
      "p0", [](PoolHdr &h) { h.signature[0] = 'X'; }, true);
  rewrite_hdr(
      "p1", [](PoolHdr &h) { h.signature[0] = 'X'; }, true);
  EXPECT_EQ(open(), std::error_code{});
}

TEST_F(PoolStoreOpenCheck, ReorderedPartsAreEinval) {
  write_file(dir_ / "pool.set", "PMEMPOOLSET\n2M " + part("p1") + "\n2M " + part("p0") + "\n");
  // Two parts link to each other both ways, so the ring is still consistent;
  // three parts in another order are not.
  EXPECT_EQ(open(), std::error_code{});
  make_set("three.set", 3, {}, "t");
  std::unique_ptr<MappedPool> pool;
  rpmem::PoolAttr attr = obj_like_attr();
  ASSERT_EQ(store_.create("three.set", &attr, pool), std::error_code{});
  pool.reset();
  write_file(dir_ / "three.set",
             "PMEMPOOLSET\n2M " + part("t0") + "\n2M " + part("t2") + "\n2M " + part("t1") + "\n");
  rpmem::PoolAttr got;
  EXPECT_EQ(store_.open("three.set", pool, got), E(EINVAL));
}

TEST_F(PoolStoreOpenCheck, PartSizeMismatchIsEinval) {
  ASSERT_EQ(::truncate(part("p1").c_str(), 3 * kMiB), 0);
  EXPECT_EQ(open(), E(EINVAL));
}

TEST_F(PoolStoreTest, SetAttrRewritesHeadersAndRelinksPart0) {
  make_set("pool.set", 3);
  std::unique_ptr<MappedPool> pool;
  rpmem::PoolAttr attr = obj_like_attr();
  ASSERT_EQ(store_.create("pool.set", &attr, pool), std::error_code{});
  PoolHdr old1 = read_hdr(part("p1"));

  rpmem::PoolAttr next = full_attr("NEWSIG\0", 9, {0x10, 0x2, 0x20}, 1, 1);
  ArchFlags native = native_arch_flags();
  std::memcpy(next.user_flags.data(), &native, 16);
  ASSERT_EQ(pool->set_attr(&next), std::error_code{});
  pool.reset();

  PoolHdr h[3] = {read_hdr(part("p0")), read_hdr(part("p1")), read_hdr(part("p2"))};
  for (auto &hp : h) EXPECT_TRUE(checksum_valid(hp));
  EXPECT_EQ(h[0].uuid, next.uuid);
  EXPECT_EQ(h[1].prev_part_uuid, next.uuid);
  EXPECT_EQ(h[2].next_part_uuid, next.uuid);
  EXPECT_EQ(h[1].uuid, old1.uuid);
  EXPECT_EQ(h[1].next_part_uuid, old1.next_part_uuid);
  EXPECT_EQ(h[1].crtime, old1.crtime);

  rpmem::PoolAttr got;
  ASSERT_EQ(store_.open("pool.set", pool, got), std::error_code{});
  EXPECT_EQ(got, next);
}

TEST_F(PoolStoreTest, SetAttrNullWritesZerosAndKeepsPartLinks) {
  make_set("pool.set", 2);
  std::unique_ptr<MappedPool> pool;
  rpmem::PoolAttr attr = obj_like_attr();
  ASSERT_EQ(store_.create("pool.set", &attr, pool), std::error_code{});
  PoolHdr old0 = read_hdr(part("p0"));
  PoolHdr old1 = read_hdr(part("p1"));
  ASSERT_EQ(pool->set_attr(nullptr), std::error_code{});
  pool.reset();

  PoolHdr h0 = read_hdr(part("p0"));
  EXPECT_TRUE(checksum_valid(h0));
  EXPECT_EQ(h0.major, 0u);
  EXPECT_EQ(h0.signature[0], 0);
  EXPECT_EQ(h0.incompat_features, 0u);
  EXPECT_EQ(h0.poolset_uuid, Uuid{});
  EXPECT_EQ(h0.next_repl_uuid, Uuid{});
  EXPECT_EQ(h0.uuid, old0.uuid);
  EXPECT_EQ(h0.next_part_uuid, old1.uuid);

  rpmem::PoolAttr got;
  ASSERT_EQ(store_.open("pool.set", pool, got), std::error_code{});
  rpmem::PoolAttr expect;
  expect.uuid = old0.uuid;
  EXPECT_EQ(got, expect);
}

TEST_F(PoolStoreTest, PersistChecksTheRange) {
  make_set("pool.set", 1);
  std::unique_ptr<MappedPool> pool;
  rpmem::PoolAttr attr = obj_like_attr();
  ASSERT_EQ(store_.create("pool.set", &attr, pool), std::error_code{});
  size_t size = pool->size();
  EXPECT_EQ(pool->persist(0, size, false), std::error_code{});
  EXPECT_EQ(pool->persist(size, 0, true), std::error_code{});
  EXPECT_EQ(pool->persist(4097, 3, false), std::error_code{});  // unaligned
  EXPECT_EQ(pool->persist(size, 1, false), E(EINVAL));
  EXPECT_EQ(pool->persist(1, size, false), E(EINVAL));
  EXPECT_EQ(pool->persist(4096, SIZE_MAX, false), E(EINVAL));
  EXPECT_EQ(pool->persist(SIZE_MAX, 2, true), E(EINVAL));
}

TEST_F(PoolStoreTest, RemovePartsUnlinksPartsNotTheSet) {
  make_set("pool.set", 2);
  std::unique_ptr<MappedPool> pool;
  rpmem::PoolAttr attr = obj_like_attr();
  ASSERT_EQ(store_.create("pool.set", &attr, pool), std::error_code{});
  EXPECT_EQ(pool->remove_parts(), std::error_code{});
  EXPECT_FALSE(exists(part("p0")));
  EXPECT_FALSE(exists(part("p1")));
  EXPECT_TRUE(exists(dir_ / "pool.set"));
  pool.reset();  // nothing left to do
  EXPECT_EQ(store_.create("pool.set", &attr, pool), std::error_code{});
}

TEST_F(PoolStoreTest, RemoveUnlinksPartsAndOptionallyTheSet) {
  make_set("pool.set", 2);
  std::unique_ptr<MappedPool> pool;
  rpmem::PoolAttr attr = obj_like_attr();
  ASSERT_EQ(store_.create("pool.set", &attr, pool), std::error_code{});
  pool.reset();
  EXPECT_EQ(store_.remove("pool.set", false, false), std::error_code{});
  EXPECT_FALSE(exists(part("p0")));
  EXPECT_FALSE(exists(part("p1")));
  EXPECT_TRUE(exists(dir_ / "pool.set"));
  EXPECT_EQ(store_.remove("pool.set", false, false), E(ENOENT));
  EXPECT_EQ(store_.remove("pool.set", true, false), std::error_code{});
  EXPECT_TRUE(exists(dir_ / "pool.set"));
  EXPECT_EQ(store_.remove("pool.set", true, true), std::error_code{});
  EXPECT_FALSE(exists(dir_ / "pool.set"));
  EXPECT_EQ(store_.remove("pool.set", false, true), E(ENOENT));
  EXPECT_EQ(store_.remove("pool.set", true, true), std::error_code{});
}

TEST_F(PoolStoreTest, RemoveGoesOnAfterAMissingPartAndStillUnlinksTheSet) {
  make_set("pool.set", 3);
  write_file(part("p0"), "x");
  write_file(part("p2"), "y");
  EXPECT_EQ(store_.remove("pool.set", false, true), E(ENOENT));
  EXPECT_FALSE(exists(part("p0")));
  EXPECT_FALSE(exists(part("p2")));
  EXPECT_FALSE(exists(dir_ / "pool.set"));  // PMDK quirk, kept
}

TEST_F(PoolStoreTest, RemoveOfAnUnparsableSet) {
  write_file(dir_ / "bad.set", "not a pool set\n");
  EXPECT_EQ(store_.remove("bad.set", false, true), E(EINVAL));
  EXPECT_TRUE(exists(dir_ / "bad.set"));
  EXPECT_EQ(store_.remove("bad.set", true, false), std::error_code{});
  EXPECT_TRUE(exists(dir_ / "bad.set"));
  EXPECT_EQ(store_.remove("bad.set", true, true), std::error_code{});
  EXPECT_FALSE(exists(dir_ / "bad.set"));
}

TEST_F(PoolStoreTest, NamesAreConfinedToTheDirectory) {
  TempDir outside;
  write_file(outside / "evil.set", "PMEMPOOLSET\n2M " + (outside / "e0") + "\n");
  ASSERT_EQ(::mkdir((dir_ / "sub").c_str(), 0755), 0);
  ASSERT_EQ(::symlink((outside / "evil.set").c_str(), (dir_ / "link.set").c_str()), 0);
  ASSERT_EQ(::symlink(outside.path().c_str(), (dir_ / "outdir").c_str()), 0);
  ASSERT_EQ(::symlink("../outdir/evil.set", (dir_ / "sub/rel.set").c_str()), 0);
  // Out through a symlinked directory and back in through another symlink.
  make_set("inside.set", 1);
  ASSERT_EQ(::symlink((dir_ / "inside.set").c_str(), (outside / "back.set").c_str()), 0);

  std::unique_ptr<MappedPool> pool;
  rpmem::PoolAttr attr = obj_like_attr();
  rpmem::PoolAttr got;
  const std::error_code bad = E(kBadName);
  for (const std::string &name :
       {std::string(""), outside / "evil.set", std::string("../") + "x.set", std::string(".."),
        std::string("sub/../../x.set"), std::string("./../x.set"), std::string("link.set"),
        std::string("outdir/evil.set"), std::string("sub/rel.set"),
        std::string("outdir/back.set")}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(store_.create(name, &attr, pool), bad);
    EXPECT_EQ(store_.open(name, pool, got), bad);
    EXPECT_EQ(store_.remove(name, true, true), bad);
  }
  EXPECT_FALSE(exists(outside / "e0"));
  EXPECT_TRUE(exists(outside / "evil.set"));
  EXPECT_TRUE(exists(outside / "back.set"));
  EXPECT_TRUE(exists(dir_ / "inside.set"));
}

TEST_F(PoolStoreTest, SubdirectoriesAndInnerSymlinksAreFine) {
  ASSERT_EQ(::mkdir((dir_ / "sub").c_str(), 0755), 0);
  make_set("sub/pool.set", 1);
  ASSERT_EQ(::symlink("sub/pool.set", (dir_ / "alias.set").c_str()), 0);
  std::unique_ptr<MappedPool> pool;
  rpmem::PoolAttr attr = obj_like_attr();
  ASSERT_EQ(store_.create("sub/pool.set", &attr, pool), std::error_code{});
  pool.reset();
  rpmem::PoolAttr got;
  EXPECT_EQ(store_.open("sub/../sub/./pool.set", pool, got), std::error_code{});
  pool.reset();
  EXPECT_EQ(store_.open("alias.set", pool, got), std::error_code{});
  pool.reset();
  // Removing through the alias unlinks the alias itself, as PMDK would.
  EXPECT_EQ(store_.remove("alias.set", false, true), std::error_code{});
  EXPECT_FALSE(exists(dir_ / "alias.set"));
  EXPECT_FALSE(exists(part("p0")));
  EXPECT_TRUE(exists(dir_ / "sub/pool.set"));
  EXPECT_EQ(store_.remove("sub/pool.set", true, true), std::error_code{});
  EXPECT_FALSE(exists(dir_ / "sub/pool.set"));
}

TEST_F(PoolStoreTest, ADirectoryIsNotAPoolSet) {
  ASSERT_EQ(::mkdir((dir_ / "sub").c_str(), 0755), 0);
  std::unique_ptr<MappedPool> pool;
  rpmem::PoolAttr got;
  EXPECT_EQ(store_.open("sub", pool, got), E(EINVAL));
}

}  // namespace
}  // namespace rpmemd
