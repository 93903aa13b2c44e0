// SPDX-License-Identifier: BSD-3-Clause
// Tests of the poolset(5) parser and of the net pool size.
#include "rpmemd/poolset.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace rpmemd {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

PoolSet parse_ok(const std::string &text) {
  auto r = parse_poolset(text);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message) << "\n--- text:\n" << text;
  return r.ok() ? r.value() : PoolSet{};
}

void expect_einval(const std::string &text, const std::string &msg_part = {}) {
  auto r = parse_poolset(text);
  ASSERT_FALSE(r.ok()) << "accepted:\n" << text;
  EXPECT_EQ(r.error().code, std::error_code(EINVAL, std::generic_category()));
  EXPECT_FALSE(r.error().message.empty());
  if (!msg_part.empty()) {
    EXPECT_NE(r.error().message.find(msg_part), std::string::npos) << r.error().message;
  }
}

TEST(PoolSetParse, ReadsPartsInOrder) {
  PoolSet s = parse_ok("PMEMPOOLSET\n2M /tmp/a\n4194304 /tmp/b\n1GiB /mnt/pmem/c\n");
  ASSERT_EQ(s.parts.size(), 3u);
  EXPECT_EQ(s.parts[0].size, 2 * kMiB);
  EXPECT_EQ(s.parts[0].path, "/tmp/a");
  EXPECT_EQ(s.parts[1].size, 4 * kMiB);
  EXPECT_EQ(s.parts[1].path, "/tmp/b");
  EXPECT_EQ(s.parts[2].size, 1024 * kMiB);
  EXPECT_EQ(s.parts[2].path, "/mnt/pmem/c");
  EXPECT_FALSE(s.single_hdr);
  EXPECT_FALSE(s.no_hdrs);
}

TEST(PoolSetParse, SizeSuffixesFollowPmdkUtilParseSize) {
  struct Case {
    const char *token;
    uint64_t value;
  } cases[] = {
      {"4096", 4096},
      {"4096B", 4096},
      {"3K", 3ULL << 10},
      {"3M", 3ULL << 20},
      {"3G", 3ULL << 30},
      {"3T", 3ULL << 40},
      {"3P", 3ULL << 50},
      {"3KiB", 3ULL << 10},
      {"3MiB", 3ULL << 20},
      {"3GiB", 3ULL << 30},
      {"3TiB", 3ULL << 40},
      {"3PiB", 3ULL << 50},
      {"3kB", 3000ULL},
      {"3MB", 3000000ULL},
      {"3GB", 3000000000ULL},
      {"3TB", 3000000000000ULL},
      {"3PB", 3000000000000000ULL},
  };
  for (const auto &c : cases) {
    auto r = parse_poolset_size(c.token);
    ASSERT_TRUE(r.ok()) << c.token;
    EXPECT_EQ(r.value(), c.value) << c.token;
  }
}

TEST(PoolSetParse, SizeRejectsMalformedTokens) {
  // PMDK's table has "kB" (SI, lower-case k) and no "KB".
  for (const char *bad : {"", "M", "12X", "3KB", "3mb", "3 M", "-1", "+1", "1.5M", "0", "0M",
                          "99999999999999999999", "20000000P", "3MiBs"}) {
    auto r = parse_poolset_size(bad);
    EXPECT_FALSE(r.ok()) << "accepted '" << bad << "'";
    if (!r.ok()) {
      EXPECT_EQ(r.error().code.value(), EINVAL);
    }
  }
}

TEST(PoolSetParse, Options) {
  PoolSet s = parse_ok("PMEMPOOLSET\nOPTION SINGLEHDR\n2M /a\n2M /b\n");
  EXPECT_TRUE(s.single_hdr);
  EXPECT_FALSE(s.no_hdrs);
  s = parse_ok("PMEMPOOLSET\n2M /a\nOPTION NOHDRS\n");
  EXPECT_TRUE(s.no_hdrs);
  EXPECT_FALSE(s.single_hdr);
  s = parse_ok("PMEMPOOLSET\n  OPTION\tSINGLEHDR  # one header\n2M /a\n");
  EXPECT_TRUE(s.single_hdr);
}

TEST(PoolSetParse, OptionsAreMutuallyExclusive) {
  expect_einval("PMEMPOOLSET\nOPTION SINGLEHDR\nOPTION NOHDRS\n2M /a\n", "mutually exclusive");
  expect_einval("PMEMPOOLSET\nOPTION NOHDRS SINGLEHDR\n2M /a\n", "mutually exclusive");
}

TEST(PoolSetParse, RefusesUnknownOrEmptyOption) {
  expect_einval("PMEMPOOLSET\nOPTION FOO\n2M /a\n", "unknown option");
  expect_einval("PMEMPOOLSET\nOPTION\n2M /a\n");
  expect_einval("PMEMPOOLSET\nOPTION singlehdr\n2M /a\n");
}

TEST(PoolSetParse, CommentsBlankLinesAndCrlf) {
  PoolSet s = parse_ok(
      "PMEMPOOLSET # signature\r\n"
      "# a whole-line comment\r\n"
      "\r\n"
      "   \t \n"
      "2M /tmp/a # trailing comment\n"
      "\t4M\t/tmp/b\t\n"
      "#3M /tmp/c\n"
      "2M /tmp/d");  // no final newline
  ASSERT_EQ(s.parts.size(), 3u);
  EXPECT_EQ(s.parts[0].path, "/tmp/a");
  EXPECT_EQ(s.parts[1].path, "/tmp/b");
  EXPECT_EQ(s.parts[1].size, 4 * kMiB);
  EXPECT_EQ(s.parts[2].path, "/tmp/d");
}

TEST(PoolSetParse, FirstLineMustBeTheSignature) {
  expect_einval("", "PMEMPOOLSET");
  expect_einval("2M /a\n", "PMEMPOOLSET");
  expect_einval("PMEMPOOLSETX\n2M /a\n", "PMEMPOOLSET");
  expect_einval(" PMEMPOOLSET\n2M /a\n", "PMEMPOOLSET");
  expect_einval("pmempoolset\n2M /a\n", "PMEMPOOLSET");
  expect_einval("# comment first\nPMEMPOOLSET\n2M /a\n", "PMEMPOOLSET");
}

TEST(PoolSetParse, RefusesReplicas) {
  expect_einval("PMEMPOOLSET\n2M /a\nREPLICA\n2M /b\n", "REPLICA");
  expect_einval("PMEMPOOLSET\n2M /a\nREPLICA node1 remote.set\n", "REPLICA");
}

TEST(PoolSetParse, RefusesMalformedPartLines) {
  expect_einval("PMEMPOOLSET\n2M\n", "size and path");
  expect_einval("PMEMPOOLSET\n2M /a /b\n", "size and path");
  expect_einval("PMEMPOOLSET\n2M relative/path\n", "absolute");
  expect_einval("PMEMPOOLSET\n2X /a\n", "suffix");
  expect_einval("PMEMPOOLSET\nAUTO dax0.0\n", "absolute");
  constexpr char kWithNul[] = "PMEMPOOLSET\n2M /a\0b\n";
  expect_einval(std::string(kWithNul, sizeof(kWithNul) - 1), "NUL");
}

// AUTO: a device DAX's own size, resolved when the set is loaded.
TEST(PoolSetParse, AutoSizeIsLeftToTheDevice) {
  auto r = parse_poolset("PMEMPOOLSET\nAUTO /dev/dax0.0\nOPTION SINGLEHDR\n");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r.value().parts.size(), 1u);
  EXPECT_EQ(r.value().parts[0].size, 0u);
  EXPECT_EQ(r.value().parts[0].path, "/dev/dax0.0");
}

TEST(PoolSetParse, ErrorNamesTheLine) { expect_einval("PMEMPOOLSET\n2M /a\n\n5Q /b\n", "line 4"); }

TEST(PoolSetParse, EveryPartIsAtLeastTwoMebibytes) {
  parse_ok("PMEMPOOLSET\n2097152 /a\n");
  expect_einval("PMEMPOOLSET\n2097151 /a\n", "smaller");
  expect_einval("PMEMPOOLSET\n2M /a\n1M /b\n", "smaller");
}

TEST(PoolSetParse, NeedsAtLeastOnePart) {
  expect_einval("PMEMPOOLSET\n", "no pool set parts");
  expect_einval("PMEMPOOLSET\nOPTION NOHDRS\n# nothing\n", "no pool set parts");
}

TEST(PoolSetParse, RefusesATotalBeyondInt64) {
  expect_einval("PMEMPOOLSET\n8000P /a\n8000P /b\n", "too large");
}

TEST(PoolSetNetSize, DefaultSubtractsOneHeaderPerLaterPart) {
  PoolSet s = parse_ok("PMEMPOOLSET\n2M /a\n2M /b\n4M /c\n");
  EXPECT_EQ(s.header_count(), 3u);
  EXPECT_EQ(s.later_part_map_offset(), 4096u);
  EXPECT_EQ(poolset_net_size(s), 8 * kMiB - 2 * 4096);
}

TEST(PoolSetNetSize, RoundsEachPartDownToThePage) {
  PoolSet s = parse_ok("PMEMPOOLSET\n2097253 /a\n2101247 /b\n");  // 2M+101, 2M+4095
  EXPECT_EQ(poolset_net_size(s), 4 * kMiB - 4096);
}

TEST(PoolSetNetSize, SingleHdrCountsOneHeader) {
  PoolSet s = parse_ok("PMEMPOOLSET\nOPTION SINGLEHDR\n2M /a\n2M /b\n4M /c\n");
  EXPECT_EQ(s.header_count(), 1u);
  EXPECT_EQ(s.later_part_map_offset(), 0u);
  EXPECT_EQ(poolset_net_size(s), 8 * kMiB);
}

TEST(PoolSetNetSize, NoHdrsIsTheSum) {
  PoolSet s = parse_ok("PMEMPOOLSET\nOPTION NOHDRS\n2M /a\n2M /b\n");
  EXPECT_EQ(s.header_count(), 0u);
  EXPECT_EQ(s.later_part_map_offset(), 0u);
  EXPECT_EQ(poolset_net_size(s), 4 * kMiB);
}

TEST(PoolSetNetSize, SinglePart) {
  PoolSet s = parse_ok("PMEMPOOLSET\n2M /a\n");
  EXPECT_EQ(poolset_net_size(s), 2 * kMiB);
}

}  // namespace
}  // namespace rpmemd
