// SPDX-License-Identifier: BSD-3-Clause
// copy_words: the word-atomic copy both targets use for atomic (not relaxed) writes.
#include "common/transport/copy_words.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include <atomic>
#include <cstring>

namespace rpmem::transport {

namespace {

// One 8-byte store. atomic_ref keeps it one store: the compiler may not
// turn a loop of these into memcpy or into stores that split a word.
inline void store_word(uint8_t *dst, const uint8_t *src) noexcept {
  uint64_t w;
  std::memcpy(&w, src, 8);
  std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t *>(dst)).store(w, std::memory_order_relaxed);
}

#if defined(__x86_64__)
// Four 16-byte-aligned 16-byte stores, each one instruction (inline asm, so
// that no compiler splits them) covering two whole words.
inline void store_64(uint8_t *dst, const uint8_t *src) noexcept {
  __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src));
  __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + 16));
  __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + 32));
  __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + 48));
  auto *o = reinterpret_cast<__m128i *>(dst);
  asm("movdqa %1, %0" : "=m"(o[0]) : "x"(a));
  asm("movdqa %1, %0" : "=m"(o[1]) : "x"(b));
  asm("movdqa %1, %0" : "=m"(o[2]) : "x"(c));
  asm("movdqa %1, %0" : "=m"(o[3]) : "x"(d));
}

// The same as store_64 with non-temporal stores: they write whole lines to
// memory without reading them into the cache first, which a large copy into
// a pool (whose lines are mostly in no cache) would otherwise do for each
// line. Each is one 16-byte-aligned instruction too.
inline void stream_64(uint8_t *dst, const uint8_t *src) noexcept {
  auto *o = reinterpret_cast<__m128i *>(dst);
  _mm_stream_si128(o, _mm_loadu_si128(reinterpret_cast<const __m128i *>(src)));
  _mm_stream_si128(o + 1, _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + 16)));
  _mm_stream_si128(o + 2, _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + 32)));
  _mm_stream_si128(o + 3, _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + 48)));
}

// From this size on, a copy streams (persist 64 KiB: 1.1x the calls/s,
// 1 MiB: 1.3x; docs/performance.md).
constexpr size_t kStreamFrom = 2048;
#endif

}  // namespace

void copy_words(uint8_t *dst, const uint8_t *src, size_t n) noexcept {
  while (n > 0 && reinterpret_cast<uintptr_t>(dst) % 8 != 0) {
    *dst++ = *src++;
    --n;
  }
#if defined(__x86_64__)
  // Vector stores copy large payloads about 1.5x faster than word stores.
  if (n >= 128) {
    for (; reinterpret_cast<uintptr_t>(dst) % 16 != 0; dst += 8, src += 8, n -= 8)
      store_word(dst, src);
    if (n >= kStreamFrom) {
      for (; n >= 64; dst += 64, src += 64, n -= 64) stream_64(dst, src);
      // Non-temporal stores are weakly ordered: all of them are visible
      // before anything this thread does next (a flush, the reply).
      _mm_sfence();
    }
    for (; n >= 64; dst += 64, src += 64, n -= 64) store_64(dst, src);
  }
#endif
  for (; n >= 8; dst += 8, src += 8, n -= 8) store_word(dst, src);
  while (n-- > 0) *dst++ = *src++;
}

}  // namespace rpmem::transport
