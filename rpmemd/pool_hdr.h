// SPDX-License-Identifier: BSD-3-Clause
// PoolHdr: PMDK's struct pool_hdr (4096 bytes at the start of each part),
// its Fletcher-64 checksum, the architecture flags, and the mapping between
// the header and rpmem::PoolAttr (reference §6.5).
//
// The layout and the checksum match PMDK 1.11/1.12 byte for byte, so that
// `pmempool info`/`pmempool check` and libpmemobj accept our replicas.
// Integers are little-endian on media; only little-endian hosts are
// supported (x86_64, aarch64), which a static_assert enforces.
#ifndef RPMEMD_POOL_HDR_H
#define RPMEMD_POOL_HDR_H

#include "common/pool_attr.h"

#include <array>
#include <cstddef>
#include <cstdint>

namespace rpmemd {

using Uuid = std::array<uint8_t, 16>;

// compat features
inline constexpr uint32_t kFeatCheckBadBlocks = 0x1;
// incompat features
inline constexpr uint32_t kFeatSingleHdr = 0x1;
inline constexpr uint32_t kFeatCksum2K = 0x2;
inline constexpr uint32_t kFeatSds = 0x4;

// PMDK's struct arch_flags (16 bytes).
struct ArchFlags {
  uint64_t alignment_desc;  // 4 bits per basic type: alignment - 1
  uint8_t machine_class;    // ELFCLASS64 = 2
  uint8_t data;             // ELFDATA2LSB = 1
  uint8_t reserved[4];      // must be zero
  uint16_t machine;         // ELF e_machine: 62 x86_64, 183 aarch64
};
static_assert(sizeof(ArchFlags) == 16);

// PMDK's struct pool_hdr (4096 bytes).
struct PoolHdr {
  char signature[8];
  uint32_t major;
  uint32_t compat_features;
  uint32_t incompat_features;
  uint32_t ro_compat_features;
  Uuid poolset_uuid;
  Uuid uuid;  // of this part
  Uuid prev_part_uuid;
  Uuid next_part_uuid;
  Uuid prev_repl_uuid;
  Uuid next_repl_uuid;
  uint64_t crtime;  // seconds since the epoch (the part file's ctime)
  ArchFlags arch_flags;
  uint8_t unused[1904];   // zero
  uint8_t unused2[1976];  // zero; not checksummed with CKSUM_2K
  uint8_t sds[64];        // shutdown state; we leave it zero
  uint64_t checksum;
};

static_assert(sizeof(PoolHdr) == rpmem::kPoolHdrSize);
static_assert(offsetof(PoolHdr, signature) == 0);
static_assert(offsetof(PoolHdr, major) == 8);
static_assert(offsetof(PoolHdr, compat_features) == 12);
static_assert(offsetof(PoolHdr, incompat_features) == 16);
static_assert(offsetof(PoolHdr, ro_compat_features) == 20);
static_assert(offsetof(PoolHdr, poolset_uuid) == 24);
static_assert(offsetof(PoolHdr, uuid) == 40);
static_assert(offsetof(PoolHdr, prev_part_uuid) == 56);
static_assert(offsetof(PoolHdr, next_part_uuid) == 72);
static_assert(offsetof(PoolHdr, prev_repl_uuid) == 88);
static_assert(offsetof(PoolHdr, next_repl_uuid) == 104);
static_assert(offsetof(PoolHdr, crtime) == 120);
static_assert(offsetof(PoolHdr, arch_flags) == 128);
static_assert(offsetof(PoolHdr, unused) == 144);
static_assert(offsetof(PoolHdr, unused2) == 2048);
static_assert(offsetof(PoolHdr, sds) == 4024);
static_assert(offsetof(PoolHdr, checksum) == 4088);

// PMDK's alignment_desc() for this compiler and platform
// (x86_64 and aarch64: 0x7f737777310).
uint64_t native_alignment_desc() noexcept;
// PMDK's util_get_arch_flags() for this platform.
ArchFlags native_arch_flags() noexcept;

// Byte offset where checksumming stops: 2048 with CKSUM_2K, else 4088.
size_t checksum_end_offset(const PoolHdr &hdr) noexcept;
// PMDK's util_checksum_compute over the header: Fletcher-64 over 32-bit
// little-endian words; the checksum field and everything from
// checksum_end_offset() on count as zero.
uint64_t compute_checksum(const PoolHdr &hdr) noexcept;
// Stores compute_checksum(hdr) (little-endian) in hdr.checksum.
void update_checksum(PoolHdr &hdr) noexcept;
bool checksum_valid(const PoolHdr &hdr) noexcept;

// True when every byte of the header is zero.
bool is_zero(const PoolHdr &hdr) noexcept;
// True when the n bytes at p are all zero.
bool is_zero_bytes(const void *p, size_t n) noexcept;

// Header -> attributes (util_get_rpmem_attr): uuid is this part's uuid,
// next/prev_uuid are the replica links, user_flags the raw arch_flags.
rpmem::PoolAttr attr_from_hdr(const PoolHdr &hdr) noexcept;
// Attributes -> header fields shared by every part (util_set_rpmem_attr):
// signature, major, features, poolset_uuid, replica links, arch_flags (raw
// user_flags). Leaves uuid, part links, crtime, sds and checksum alone.
void set_shared_attr(PoolHdr &hdr, const rpmem::PoolAttr &attr) noexcept;

}  // namespace rpmemd

#endif  // RPMEMD_POOL_HDR_H
