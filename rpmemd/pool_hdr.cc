// SPDX-License-Identifier: BSD-3-Clause
// PMDK pool_hdr: checksum, architecture flags, attribute mapping.
#include "rpmemd/pool_hdr.h"

#include <sys/types.h>

#include <bit>
#include <cstring>

namespace rpmemd {

static_assert(std::endian::native == std::endian::little,
              "pool_hdr fields are stored in host order; add conversions for big-endian hosts");

namespace {

// PMDK computes each alignment as offsetof(struct { char c; T x; }, x),
// which can differ from alignof(T) on some ABIs; do the same.
template <typename T>
struct AlignProbe {
  char c;
  T x;
};

template <typename T>
constexpr uint64_t desc_of(unsigned index) {
  return ((static_cast<uint64_t>(offsetof(AlignProbe<T>, x)) - 1) & 0xF) << (4 * index);
}

constexpr uint64_t kAlignmentDesc = desc_of<char>(0) | desc_of<short>(1) | desc_of<int>(2) |
                                    desc_of<long>(3) | desc_of<long long>(4) | desc_of<size_t>(5) |
                                    desc_of<off_t>(6) | desc_of<float>(7) | desc_of<double>(8) |
                                    desc_of<long double>(9) | desc_of<void *>(10);

#if defined(__x86_64__)
constexpr uint16_t kMachine = 62;  // EM_X86_64
#elif defined(__aarch64__)
constexpr uint16_t kMachine = 183;  // EM_AARCH64
#elif defined(__powerpc64__)
constexpr uint16_t kMachine = 21;  // EM_PPC64
#elif defined(__riscv) && defined(_LP64)
constexpr uint16_t kMachine = 243;  // EM_RISCV
#else
#error "unsupported architecture: add its ELF e_machine value (see PMDK pool_hdr.c)"
#endif
constexpr uint8_t kMachineClass64 = 2;  // ELFCLASS64
constexpr uint8_t kDataLe = 1;          // ELFDATA2LSB

constexpr size_t kCksum2KEnd = offsetof(PoolHdr, unused2);
constexpr size_t kCksum4KEnd = offsetof(PoolHdr, checksum);

}  // namespace

uint64_t native_alignment_desc() noexcept { return kAlignmentDesc; }

ArchFlags native_arch_flags() noexcept {
  ArchFlags f{};
  f.alignment_desc = kAlignmentDesc;
  f.machine_class = kMachineClass64;
  f.data = kDataLe;
  f.machine = kMachine;
  return f;
}

size_t checksum_end_offset(const PoolHdr &hdr) noexcept {
  return (hdr.incompat_features & kFeatCksum2K) ? kCksum2KEnd : kCksum4KEnd;
}

uint64_t compute_checksum(const PoolHdr &hdr) noexcept {
  const auto *bytes = reinterpret_cast<const unsigned char *>(&hdr);
  const size_t end = checksum_end_offset(hdr);
  const size_t cksum_off = offsetof(PoolHdr, checksum);
  uint32_t lo32 = 0;
  uint32_t hi32 = 0;
  for (size_t off = 0; off < sizeof(PoolHdr); off += 4) {
    // Words in the checksum field or at/after `end` count as zero, but
    // still advance the running sum (hi32 += lo32), as in PMDK.
    if (off < end && (off < cksum_off || off >= cksum_off + sizeof(uint64_t))) {
      uint32_t w = static_cast<uint32_t>(bytes[off]) | static_cast<uint32_t>(bytes[off + 1]) << 8 |
                   static_cast<uint32_t>(bytes[off + 2]) << 16 |
                   static_cast<uint32_t>(bytes[off + 3]) << 24;
      lo32 += w;
    }
    hi32 += lo32;
  }
  return static_cast<uint64_t>(hi32) << 32 | lo32;
}

void update_checksum(PoolHdr &hdr) noexcept { hdr.checksum = compute_checksum(hdr); }

bool checksum_valid(const PoolHdr &hdr) noexcept { return hdr.checksum == compute_checksum(hdr); }

bool is_zero_bytes(const void *p, size_t n) noexcept {
  const auto *b = static_cast<const unsigned char *>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i]) return false;
  return true;
}

bool is_zero(const PoolHdr &hdr) noexcept { return is_zero_bytes(&hdr, sizeof(hdr)); }

rpmem::PoolAttr attr_from_hdr(const PoolHdr &hdr) noexcept {
  rpmem::PoolAttr a;
  std::memcpy(a.signature.data(), hdr.signature, sizeof(hdr.signature));
  a.major = hdr.major;
  a.compat_features = hdr.compat_features;
  a.incompat_features = hdr.incompat_features;
  a.ro_compat_features = hdr.ro_compat_features;
  a.poolset_uuid = hdr.poolset_uuid;
  a.uuid = hdr.uuid;
  a.next_uuid = hdr.next_repl_uuid;
  a.prev_uuid = hdr.prev_repl_uuid;
  static_assert(sizeof(a.user_flags) == sizeof(hdr.arch_flags));
  std::memcpy(a.user_flags.data(), &hdr.arch_flags, sizeof(hdr.arch_flags));
  return a;
}

void set_shared_attr(PoolHdr &hdr, const rpmem::PoolAttr &attr) noexcept {
  std::memcpy(hdr.signature, attr.signature.data(), sizeof(hdr.signature));
  hdr.major = attr.major;
  hdr.compat_features = attr.compat_features;
  hdr.incompat_features = attr.incompat_features;
  hdr.ro_compat_features = attr.ro_compat_features;
  hdr.poolset_uuid = attr.poolset_uuid;
  hdr.next_repl_uuid = attr.next_uuid;
  hdr.prev_repl_uuid = attr.prev_uuid;
  std::memcpy(&hdr.arch_flags, attr.user_flags.data(), sizeof(hdr.arch_flags));
}

}  // namespace rpmemd
