// SPDX-License-Identifier: BSD-3-Clause
// Our replicas against Debian's `pmempool info`/`pmempool check` (PMDK 1.12).
//
// A pool made by `pmempool create obj` is copied, body only, into a pool set
// that our store created with the same attributes: our headers must then be
// accepted exactly as PMDK's own. Skipped when pmempool is not installed.
#include "rpmemd/pool_hdr.h"
#include "rpmemd/pool_store.h"
#include "tests/unit/store/store_test_util.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

namespace rpmemd {
namespace {

using test::kMiB;
using test::read_bytes;
using test::TempDir;
using test::write_file;

constexpr size_t kPart = 8 * kMiB;  // libpmemobj needs an 8 MiB pool

struct Output {
  int status = -1;
  std::string text;
};

Output run(const std::string &cmd) {
  Output out;
  FILE *f = ::popen((cmd + " 2>&1").c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.text.append(buf, n);
  int st = ::pclose(f);
  out.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

bool have_pmempool() { return run("command -v pmempool").status == 0; }

std::string set_text(const TempDir &dir, const std::string &options) {
  return "PMEMPOOLSET\n" + options + std::to_string(kPart) + " " + (dir / "part0") + "\n" +
         std::to_string(kPart) + " " + (dir / "part1") + "\n";
}

class PmempoolCompat : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_pmempool()) GTEST_SKIP() << "pmempool is not installed";
  }

  // Makes a PMDK obj pool in ref_, then our pool set in ours_ with the
  // attributes of the PMDK pool (changed by `tweak`), and the PMDK pool's
  // body copied in. Returns our pool set file.
  std::string make_copy(const std::string &options, void (*tweak)(rpmem::PoolAttr &)) {
    write_file(ref_ / "ref.set", set_text(ref_, options));
    Output c = run("pmempool create obj " + (ref_ / "ref.set"));
    EXPECT_EQ(c.status, 0) << c.text;

    PoolHdr h0;
    auto bytes = read_bytes(ref_ / "part0", 0, sizeof(h0));
    std::memcpy(&h0, bytes.data(), sizeof(h0));
    rpmem::PoolAttr attr = attr_from_hdr(h0);
    if (tweak != nullptr) tweak(attr);

    write_file(ours_ / "pool.set", set_text(ours_, options));
    PoolStore store(ours_.path());
    std::unique_ptr<MappedPool> pool;
    EXPECT_EQ(store.create("pool.set", &attr, pool), std::error_code{});
    if (pool == nullptr) return {};
    const bool single = options.find("SINGLEHDR") != std::string::npos;
    EXPECT_EQ(pool->size(), single ? 2 * kPart : 2 * kPart - 4096);
    auto body0 = read_bytes(ref_ / "part0", 4096, kPart - 4096);
    std::memcpy(pool->base() + 4096, body0.data(), body0.size());
    size_t off1 = single ? 0 : 4096;
    auto body1 = read_bytes(ref_ / "part1", off1, kPart - off1);
    std::memcpy(pool->base() + kPart, body1.data(), body1.size());
    EXPECT_EQ(pool->persist(0, pool->size(), false), std::error_code{});
    return ours_ / "pool.set";
  }

  static void expect_accepted(const std::string &set) {
    Output info = run("pmempool info " + set);
    EXPECT_EQ(info.status, 0) << info.text;
    EXPECT_NE(info.text.find("Checksum"), std::string::npos) << info.text;
    EXPECT_EQ(info.text.find("wrong"), std::string::npos) << info.text;
    EXPECT_EQ(info.text.find("invalid"), std::string::npos) << info.text;
    Output check = run("pmempool check -v " + set);
    EXPECT_EQ(check.status, 0) << check.text;
    EXPECT_NE(check.text.find(": consistent"), std::string::npos) << check.text;
  }

  TempDir ref_;
  TempDir ours_;
};

TEST_F(PmempoolCompat, ObjPoolWithHeadersInEveryPart) {
  std::string set = make_copy("", nullptr);
  ASSERT_FALSE(set.empty());
  expect_accepted(set);
}

TEST_F(PmempoolCompat, ObjPoolWithSingleHdr) {
  std::string set = make_copy("OPTION SINGLEHDR\n", nullptr);
  ASSERT_FALSE(set.empty());
  expect_accepted(set);
}

TEST_F(PmempoolCompat, ChecksumOverTheFull4K) {
  std::string set = make_copy("", [](rpmem::PoolAttr &a) { a.incompat_features &= ~kFeatCksum2K; });
  ASSERT_FALSE(set.empty());
  expect_accepted(set);
}

TEST_F(PmempoolCompat, GeneratedUuidsAndArchFlags) {
  // Only what libpmemobj sends for a new pool; the target fills the rest.
  std::string set = make_copy("", [](rpmem::PoolAttr &a) {
    rpmem::PoolAttr fresh = test::obj_like_attr();
    fresh.poolset_uuid = a.poolset_uuid;  // the obj layer keys objects on it
    a = fresh;
  });
  ASSERT_FALSE(set.empty());
  expect_accepted(set);
}

TEST_F(PmempoolCompat, HeaderOnlyPoolPassesTheHeaderChecks) {
  // An empty body is no valid obj pool, but every pool header must be.
  write_file(ours_ / "pool.set", set_text(ours_, ""));
  PoolStore store(ours_.path());
  std::unique_ptr<MappedPool> pool;
  rpmem::PoolAttr attr = test::obj_like_attr();
  ASSERT_EQ(store.create("pool.set", &attr, pool), std::error_code{});
  pool.reset();
  Output check = run("pmempool check -v " + (ours_ / "pool.set"));
  EXPECT_NE(check.text.find("replica 0 part 0: pool header correct"), std::string::npos)
      << check.text;
  EXPECT_NE(check.text.find("replica 0 part 1: pool header correct"), std::string::npos)
      << check.text;
  Output info = run("pmempool info " + (ours_ / "pool.set"));
  EXPECT_NE(info.text.find("Signature                : PMEMOBJ"), std::string::npos) << info.text;
#if defined(__x86_64__)
  EXPECT_NE(info.text.find("Machine                  : AMD X86-64"), std::string::npos)
      << info.text;
#endif
  EXPECT_EQ(info.text.find("wrong"), std::string::npos) << info.text;
}

}  // namespace
}  // namespace rpmemd
