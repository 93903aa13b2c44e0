// SPDX-License-Identifier: BSD-3-Clause
// The thread-local error message buffer.
#include "librpmem/errormsg.h"

#include "common/log.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>

namespace rpmem {
namespace {
thread_local char t_msg[kErrormsgMax];
}

void set_errormsg(const char *fmt, ...) {
  int saved = errno;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t_msg, sizeof(t_msg), fmt, ap);
  va_end(ap);
  RPMEM_LOG_ERR("%s", t_msg);
  errno = saved;
}

const char *errormsg() noexcept { return t_msg; }

}  // namespace rpmem
