// SPDX-License-Identifier: BSD-3-Clause
// Which sanitizer a test build runs under: GCC defines __SANITIZE_*__,
// clang answers __has_feature. Defines RPMEM_TEST_ASAN / RPMEM_TEST_TSAN
// for the preprocessor and rpmem_test::kUnderTsan for code.
#ifndef RPMEM_TESTS_SANITIZERS_H
#define RPMEM_TESTS_SANITIZERS_H

#if defined(__SANITIZE_ADDRESS__)
#define RPMEM_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RPMEM_TEST_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define RPMEM_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RPMEM_TEST_TSAN 1
#endif
#endif

namespace rpmem_test {
#ifdef RPMEM_TEST_TSAN
inline constexpr bool kUnderTsan = true;
#else
inline constexpr bool kUnderTsan = false;
#endif
#if defined(RPMEM_TEST_TSAN) || defined(RPMEM_TEST_ASAN)
inline constexpr bool kUnderSanitizer = true;
#else
inline constexpr bool kUnderSanitizer = false;
#endif
}  // namespace rpmem_test

#endif  // RPMEM_TESTS_SANITIZERS_H
