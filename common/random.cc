// SPDX-License-Identifier: BSD-3-Clause
// fill_random() (random.h).
#include "common/random.h"

#include "common/error.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>

namespace rpmem {

std::error_code fill_random(void *p, size_t n) noexcept {
  auto *b = static_cast<uint8_t *>(p);
  for (size_t got = 0; got < n;) {
    const ssize_t r = ::getrandom(b + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return last_errc();
    got += static_cast<size_t>(r);
  }
  return {};
}

}  // namespace rpmem
