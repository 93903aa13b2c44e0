// SPDX-License-Identifier: BSD-3-Clause
// Tests of the PMDK pool_hdr layout, checksum, arch flags and attr mapping.
#include "rpmemd/pool_hdr.h"

#include "tests/unit/store/store_test_util.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>

namespace rpmemd {
namespace {

// The first 144 bytes of both headers of a pool set that Debian's
// `pmempool create obj` (PMDK 1.12.1) made with two 8 MiB parts; the rest of
// each header is zero. The checksums (at 4088) were read from the files.
constexpr uint8_t kPmdkPart0[144] = {
    0x50, 0x4d, 0x45, 0x4d, 0x4f, 0x42, 0x4a, 0x00, 0x06, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
    0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xda, 0x20, 0xbe, 0x78, 0x21, 0xe0, 0xbd, 0x47,
    0x97, 0x93, 0x0f, 0x04, 0x08, 0xa0, 0x65, 0x85, 0xd1, 0x4d, 0x1a, 0x2c, 0x8b, 0x86, 0x98, 0x40,
    0xb8, 0x40, 0xcc, 0xda, 0x96, 0x3e, 0x4b, 0x65, 0xcd, 0x1f, 0x2c, 0x07, 0xe4, 0xb5, 0x77, 0x46,
    0xbc, 0x68, 0x69, 0x55, 0xbd, 0x33, 0xcb, 0x7e, 0xcd, 0x1f, 0x2c, 0x07, 0xe4, 0xb5, 0x77, 0x46,
    0xbc, 0x68, 0x69, 0x55, 0xbd, 0x33, 0xcb, 0x7e, 0xd1, 0x4d, 0x1a, 0x2c, 0x8b, 0x86, 0x98, 0x40,
    0xb8, 0x40, 0xcc, 0xda, 0x96, 0x3e, 0x4b, 0x65, 0xd1, 0x4d, 0x1a, 0x2c, 0x8b, 0x86, 0x98, 0x40,
    0xb8, 0x40, 0xcc, 0xda, 0x96, 0x3e, 0x4b, 0x65, 0xd9, 0xe3, 0x0d, 0x6b, 0x00, 0x00, 0x00, 0x00,
    0x10, 0x73, 0x77, 0x37, 0xf7, 0x07, 0x00, 0x00, 0x02, 0x01, 0x00, 0x00, 0x00, 0x00, 0x3e, 0x00};
constexpr uint64_t kPmdkPart0Checksum = 0x828e79dd8454037aULL;

constexpr uint8_t kPmdkPart1[144] = {
    0x50, 0x4d, 0x45, 0x4d, 0x4f, 0x42, 0x4a, 0x00, 0x06, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
    0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xda, 0x20, 0xbe, 0x78, 0x21, 0xe0, 0xbd, 0x47,
    0x97, 0x93, 0x0f, 0x04, 0x08, 0xa0, 0x65, 0x85, 0xcd, 0x1f, 0x2c, 0x07, 0xe4, 0xb5, 0x77, 0x46,
    0xbc, 0x68, 0x69, 0x55, 0xbd, 0x33, 0xcb, 0x7e, 0xd1, 0x4d, 0x1a, 0x2c, 0x8b, 0x86, 0x98, 0x40,
    0xb8, 0x40, 0xcc, 0xda, 0x96, 0x3e, 0x4b, 0x65, 0xd1, 0x4d, 0x1a, 0x2c, 0x8b, 0x86, 0x98, 0x40,
    0xb8, 0x40, 0xcc, 0xda, 0x96, 0x3e, 0x4b, 0x65, 0xd1, 0x4d, 0x1a, 0x2c, 0x8b, 0x86, 0x98, 0x40,
    0xb8, 0x40, 0xcc, 0xda, 0x96, 0x3e, 0x4b, 0x65, 0xd1, 0x4d, 0x1a, 0x2c, 0x8b, 0x86, 0x98, 0x40,
    0xb8, 0x40, 0xcc, 0xda, 0x96, 0x3e, 0x4b, 0x65, 0xd9, 0xe3, 0x0d, 0x6b, 0x00, 0x00, 0x00, 0x00,
    0x10, 0x73, 0x77, 0x37, 0xf7, 0x07, 0x00, 0x00, 0x02, 0x01, 0x00, 0x00, 0x00, 0x00, 0x3e, 0x00};
constexpr uint64_t kPmdkPart1Checksum = 0xa0e477b30f45e4faULL;

PoolHdr header_from(const uint8_t (&prefix)[144], uint64_t checksum) {
  PoolHdr h{};
  std::memcpy(&h, prefix, sizeof(prefix));
  h.checksum = checksum;
  return h;
}

TEST(PoolHdr, LayoutMatchesPmdk) {
  EXPECT_EQ(sizeof(PoolHdr), 4096u);
  EXPECT_EQ(offsetof(PoolHdr, poolset_uuid), 24u);
  EXPECT_EQ(offsetof(PoolHdr, next_repl_uuid), 104u);
  EXPECT_EQ(offsetof(PoolHdr, crtime), 120u);
  EXPECT_EQ(offsetof(PoolHdr, arch_flags), 128u);
  EXPECT_EQ(offsetof(PoolHdr, arch_flags) + offsetof(ArchFlags, machine_class), 136u);
  EXPECT_EQ(offsetof(PoolHdr, arch_flags) + offsetof(ArchFlags, machine), 142u);
  EXPECT_EQ(offsetof(PoolHdr, unused2), 2048u);
  EXPECT_EQ(offsetof(PoolHdr, sds), 4024u);
  EXPECT_EQ(offsetof(PoolHdr, checksum), 4088u);
}

TEST(PoolHdr, GoldenPmdkHeadersDecode) {
  PoolHdr h = header_from(kPmdkPart0, kPmdkPart0Checksum);
  EXPECT_EQ(std::memcmp(h.signature, "PMEMOBJ", 8), 0);
  EXPECT_EQ(h.major, 6u);
  EXPECT_EQ(h.compat_features, kFeatCheckBadBlocks);
  EXPECT_EQ(h.incompat_features, kFeatCksum2K | kFeatSds);
  EXPECT_EQ(h.crtime, 0x6b0de3d9u);
  // Part links: part 0 <-> part 1, replica links to part 0 itself.
  PoolHdr h1 = header_from(kPmdkPart1, kPmdkPart1Checksum);
  EXPECT_EQ(h.next_part_uuid, h1.uuid);
  EXPECT_EQ(h.prev_part_uuid, h1.uuid);
  EXPECT_EQ(h1.next_part_uuid, h.uuid);
  EXPECT_EQ(h1.prev_part_uuid, h.uuid);
  EXPECT_EQ(h.prev_repl_uuid, h.uuid);
  EXPECT_EQ(h1.next_repl_uuid, h.uuid);
}

TEST(PoolHdr, ArchFlagsMatchPmdkOnThisMachine) {
  ArchFlags f = native_arch_flags();
  // char 0, short 1, int 3, long 7, long long 7, size_t 7, off_t 7, float 3,
  // double 7, long double 15, void* 7 -- the value pmempool wrote above.
  EXPECT_EQ(native_alignment_desc(), 0x000007f737777310ULL);
  EXPECT_EQ(f.alignment_desc, 0x000007f737777310ULL);
  EXPECT_EQ(f.machine_class, 2);
  EXPECT_EQ(f.data, 1);
  for (uint8_t r : f.reserved) EXPECT_EQ(r, 0);
#if defined(__x86_64__)
  EXPECT_EQ(f.machine, 62);
  PoolHdr golden = header_from(kPmdkPart0, kPmdkPart0Checksum);
  EXPECT_EQ(std::memcmp(&golden.arch_flags, &f, sizeof(f)), 0);
#elif defined(__aarch64__)
  EXPECT_EQ(f.machine, 183);
#endif
}

TEST(PoolHdr, ChecksumMatchesPmdkGoldenValues) {
  PoolHdr h0 = header_from(kPmdkPart0, 0);
  EXPECT_EQ(compute_checksum(h0), kPmdkPart0Checksum);
  PoolHdr h1 = header_from(kPmdkPart1, 0);
  EXPECT_EQ(compute_checksum(h1), kPmdkPart1Checksum);
  // The stored checksum itself counts as zero.
  h0.checksum = 0x1234;
  EXPECT_EQ(compute_checksum(h0), kPmdkPart0Checksum);
  update_checksum(h0);
  EXPECT_EQ(h0.checksum, kPmdkPart0Checksum);
  EXPECT_TRUE(checksum_valid(h0));
}

TEST(PoolHdr, Cksum2KIgnoresTheSecondHalf) {
  PoolHdr h = header_from(kPmdkPart0, kPmdkPart0Checksum);
  ASSERT_EQ(checksum_end_offset(h), 2048u);
  h.unused2[100] = 0xAB;
  h.sds[3] = 0xCD;
  EXPECT_TRUE(checksum_valid(h));
  h.unused[1903] = 1;  // byte 2047
  EXPECT_FALSE(checksum_valid(h));
}

TEST(PoolHdr, Without2KTheChecksumCoversUpTo4088) {
  PoolHdr h = header_from(kPmdkPart0, 0);
  h.incompat_features = kFeatSds;
  ASSERT_EQ(checksum_end_offset(h), 4088u);
  update_checksum(h);
  EXPECT_TRUE(checksum_valid(h));
  uint64_t before = h.checksum;
  h.sds[63] = 1;  // byte 4087
  EXPECT_FALSE(checksum_valid(h));
  update_checksum(h);
  EXPECT_NE(h.checksum, before);
}

TEST(PoolHdr, ChecksumIsFletcherOverLittleEndianWords) {
  // One word 0x04030201 at offset 0, all else zero: lo = that word, and hi
  // adds lo once per 32-bit word of the 4096 bytes (1024 words, the two
  // checksum words included) -- 1024 * 0x04030201 mod 2^32.
  PoolHdr h{};
  h.incompat_features = 0;
  h.signature[0] = 1;
  h.signature[1] = 2;
  h.signature[2] = 3;
  h.signature[3] = 4;
  uint32_t lo = 0x04030201;
  uint32_t hi = static_cast<uint32_t>(1024u * lo);
  EXPECT_EQ(compute_checksum(h), (static_cast<uint64_t>(hi) << 32) | lo);
}

TEST(PoolHdr, IsZero) {
  PoolHdr h{};
  EXPECT_TRUE(is_zero(h));
  h.checksum = 1;
  EXPECT_FALSE(is_zero(h));
}

TEST(PoolHdr, AttrRoundTrip) {
  rpmem::PoolAttr a = test::full_attr("SIGNATUR", 7, {0x11, 0x22, 0x33}, 0x10, 0x10);
  PoolHdr h{};
  h.uuid = a.uuid;  // set_shared_attr leaves uuid alone
  set_shared_attr(h, a);
  EXPECT_EQ(h.next_repl_uuid, a.next_uuid);
  EXPECT_EQ(h.prev_repl_uuid, a.prev_uuid);
  EXPECT_EQ(std::memcmp(&h.arch_flags, a.user_flags.data(), 16), 0);
  EXPECT_EQ(h.prev_part_uuid, Uuid{});
  EXPECT_EQ(h.crtime, 0u);
  EXPECT_EQ(attr_from_hdr(h), a);
}

}  // namespace
}  // namespace rpmemd
