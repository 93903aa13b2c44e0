// SPDX-License-Identifier: BSD-3-Clause
// page_sum(): XXH3_64bits (libxxhash).
#include "common/page_sum.h"

#include <xxhash.h>

namespace rpmem {

uint64_t page_sum(const void *p, size_t n) noexcept { return XXH3_64bits(p, n); }

}  // namespace rpmem
