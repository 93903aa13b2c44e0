// SPDX-License-Identifier: BSD-3-Clause
// The word-atomic copy both targets use for atomic (not relaxed) writes.
#ifndef RPMEM_COMMON_TRANSPORT_COPY_WORDS_H
#define RPMEM_COMMON_TRANSPORT_COPY_WORDS_H

#include <cstddef>
#include <cstdint>

namespace rpmem::transport {

// Copies n bytes so that every 8-byte-aligned word of dst is written by one
// store (no word is ever seen half old, half new).
void copy_words(uint8_t *dst, const uint8_t *src, size_t n) noexcept;

}  // namespace rpmem::transport

#endif  // RPMEM_COMMON_TRANSPORT_COPY_WORDS_H
