// SPDX-License-Identifier: BSD-3-Clause
// The same header checks as header_c99.c, compiled as C++ (extern "C"
// linkage, no C-only constructs in the header).
#include "header_c99.c"  // NOLINT(bugprone-suspicious-include)

static_assert(sizeof(rpmem_pool_attr) == 104);
