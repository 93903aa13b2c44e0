// SPDX-License-Identifier: BSD-3-Clause
// The checksum of a pool's page that a catch-up compares on both sides
// (protocol minor 10, proto::kChecksum): XXH3_64bits of its bytes. 64 bits,
// so that a page that differs goes unnoticed with a chance of 2^-64 (a
// 32-bit CRC32C would leave 2^-32 a page: one in sixty thousand whole
// copies of a 1 GiB pool), at about the speed of memory on either side.
#ifndef RPMEM_COMMON_PAGE_SUM_H
#define RPMEM_COMMON_PAGE_SUM_H

#include <cstddef>
#include <cstdint>

namespace rpmem {

uint64_t page_sum(const void *p, size_t n) noexcept;

}  // namespace rpmem

#endif  // RPMEM_COMMON_PAGE_SUM_H
