// SPDX-License-Identifier: BSD-3-Clause
// What a pool that runs ahead keeps: its out-of-sync map (one bit a 4 KiB
// page; ranges that straddle pages and words; runs found in order; a file
// that keeps its bits for the next process and is refused for a pool of
// another size) and its record (saved and found again, refused when
// malformed, one per target and pool set; its map trusted only when saved
// whole or written by this boot).
#include "librpmem/oos_map.h"
#include "librpmem/state_record.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace rpmem {
namespace {

constexpr uint64_t kPage = OosMap::kPage;

class StateDir : public ::testing::Test {
 protected:
  StateDir() {
    char tmpl[] = "/tmp/rpmem-oos-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  ~StateDir() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST(OosMap, MarksEveryPageARangeTouchesAndFindsRunsInOrder) {
  auto m = OosMap::open({}, 200 * kPage + 10, true);  // a partial last page
  ASSERT_TRUE(m);
  OosMap &map = *m.value();
  EXPECT_EQ(map.pages(), 201u);
  EXPECT_EQ(map.count(), 0u);
  map.mark(kPage - 1, 2);           // pages 0 and 1
  map.mark(63 * kPage, kPage + 1);  // 63, 64: across a word
  map.mark(200 * kPage + 9, 1);     // the last
  map.mark(5 * kPage, 0);           // nothing
  EXPECT_EQ(map.count(), 5u);
  uint64_t first = 0, count = 0;
  ASSERT_TRUE(map.next(0, 100, first, count));
  EXPECT_EQ(first, 0u);
  EXPECT_EQ(count, 2u);
  ASSERT_TRUE(map.next(2, 100, first, count));
  EXPECT_EQ(first, 63u);
  EXPECT_EQ(count, 2u);
  ASSERT_TRUE(map.next(63, 1, first, count));
  EXPECT_EQ(count, 1u) << "at most `most` pages";
  ASSERT_TRUE(map.next(65, 100, first, count));
  EXPECT_EQ(first, 200u);
  EXPECT_FALSE(map.next(201, 100, first, count));
  EXPECT_TRUE(map.any(60, 4));
  EXPECT_FALSE(map.any(2, 61));
  map.clear(63, 2);
  EXPECT_FALSE(map.any(60, 10));
  map.mark_all();
  EXPECT_EQ(map.count(), 201u);
  map.clear(0, 201);
  EXPECT_EQ(map.count(), 0u);
}

TEST_F(StateDir, AMapFileKeepsItsBitsForTheNextProcessAndFitsOnePoolSize) {
  const std::string path = dir_ + "/m.map";
  {
    auto m = OosMap::open(path, 64 << 20, true);
    ASSERT_TRUE(m);
    m.value()->mark(5 * kPage, 3 * kPage);
    ASSERT_FALSE(m.value()->sync());
  }
  auto again = OosMap::open(path, 64 << 20, false);
  ASSERT_TRUE(again);
  EXPECT_EQ(again.value()->count(), 3u);
  EXPECT_TRUE(again.value()->any(5, 1));
  EXPECT_FALSE(OosMap::open(path, 128 << 20, false)) << "a map of another pool size was taken";
  EXPECT_FALSE(OosMap::open(dir_ + "/none.map", 64 << 20, false));
  auto fresh = OosMap::open(path, 64 << 20, true);
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fresh.value()->count(), 0u) << "a created map is clear";
}

TEST_F(StateDir, ARecordIsSavedAndFoundAgainOnePerTargetAndPoolSet) {
  StateRecord rec(dir_ + "/sub/dir", "host", "p.set");
  EXPECT_FALSE(rec.load());
  PoolRecord r;
  r.target = "host";
  r.pool_set = "p.set";
  r.pool_size = 1 << 20;
  r.token.fill(0xab);
  r.boot_id = "boot";
  r.saved = true;
  r.behind_since_s = 1234;
  ASSERT_FALSE(rec.save(r));
  EXPECT_EQ(std::filesystem::status(dir_ + "/sub/dir").permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_all);
  auto back = rec.load();
  ASSERT_TRUE(back);
  EXPECT_EQ(back->pool_size, r.pool_size);
  EXPECT_EQ(back->token, r.token);
  EXPECT_EQ(back->boot_id, "boot");
  EXPECT_TRUE(back->saved);
  EXPECT_EQ(back->behind_since_s, 1234u);
  EXPECT_NE(StateRecord(dir_ + "/sub/dir", "host", "q.set").record_path(), rec.record_path());
  EXPECT_NE(StateRecord(dir_ + "/sub/dir", "other", "p.set").record_path(), rec.record_path());
  // Malformed: no token.
  std::ofstream(rec.record_path()) << "rpmem pool record 1\ntarget host\npool_set p.set\n";
  EXPECT_FALSE(rec.load());
  ASSERT_FALSE(rec.save(r));
  rec.drop_record();
  EXPECT_FALSE(rec.load());
}

TEST(StateRecordTrust, AMapIsTrustedSavedWholeOrWrittenByThisBoot) {
  PoolRecord r;
  r.boot_id = current_boot_id();
  ASSERT_FALSE(r.boot_id.empty());
  EXPECT_TRUE(map_trusted(r)) << "this boot's map";
  r.boot_id = "another boot";
  EXPECT_FALSE(map_trusted(r)) << "a map a power cut may have cut short";
  r.saved = true;
  EXPECT_TRUE(map_trusted(r));
}

}  // namespace
}  // namespace rpmem
