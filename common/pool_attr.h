// SPDX-License-Identifier: BSD-3-Clause
// PoolAttr: the C++ view of struct rpmem_pool_attr (104 bytes, same layout).
#ifndef RPMEM_COMMON_POOL_ATTR_H
#define RPMEM_COMMON_POOL_ATTR_H

#include <array>
#include <cstddef>
#include <cstdint>

namespace rpmem {

inline constexpr size_t kPoolHdrSize = 4096;         // header bytes at the start of a pool
inline constexpr size_t kMinPool = 8 * 1024;         // RPMEM_MIN_POOL
inline constexpr size_t kMinPart = 2 * 1024 * 1024;  // RPMEM_MIN_PART

struct PoolAttr {
  std::array<char, 8> signature{};
  uint32_t major = 0;
  uint32_t compat_features = 0;
  uint32_t incompat_features = 0;
  uint32_t ro_compat_features = 0;
  std::array<uint8_t, 16> poolset_uuid{};
  std::array<uint8_t, 16> uuid{};
  std::array<uint8_t, 16> next_uuid{};
  std::array<uint8_t, 16> prev_uuid{};
  std::array<uint8_t, 16> user_flags{};

  bool is_zero() const noexcept {
    const auto *p = reinterpret_cast<const unsigned char *>(this);
    for (size_t i = 0; i < sizeof(*this); ++i)
      if (p[i]) return false;
    return true;
  }
  friend bool operator==(const PoolAttr &, const PoolAttr &) = default;
};
static_assert(sizeof(PoolAttr) == 104, "PoolAttr must match struct rpmem_pool_attr");

}  // namespace rpmem

#endif  // RPMEM_COMMON_POOL_ATTR_H
