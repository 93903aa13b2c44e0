// SPDX-License-Identifier: BSD-3-Clause
// fill_random(): bytes from the kernel's random source (getrandom), for
// secrets, keys, session tokens and UUIDs.
#ifndef RPMEM_COMMON_RANDOM_H
#define RPMEM_COMMON_RANDOM_H

#include <cstddef>
#include <system_error>

namespace rpmem {

// Fills n bytes at p; the errno of getrandom when it fails (EINTR is
// retried).
std::error_code fill_random(void *p, size_t n) noexcept;

}  // namespace rpmem

#endif  // RPMEM_COMMON_RANDOM_H
