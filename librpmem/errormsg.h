// SPDX-License-Identifier: BSD-3-Clause
// The thread-local message behind rpmem_errormsg(). Setting it never
// changes errno; each call overwrites the previous message.
#ifndef RPMEM_LIBRPMEM_ERRORMSG_H
#define RPMEM_LIBRPMEM_ERRORMSG_H

#include <string>

namespace rpmem {

inline constexpr size_t kErrormsgMax = 8192;

void set_errormsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
inline void set_errormsg(const std::string &msg) { set_errormsg("%s", msg.c_str()); }
const char *errormsg() noexcept;

}  // namespace rpmem

#endif  // RPMEM_LIBRPMEM_ERRORMSG_H
