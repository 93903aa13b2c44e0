// SPDX-License-Identifier: BSD-3-Clause
// systemd's notifications, socket activation and watchdog, for the service.
#include "rpmemd/systemd_notify.h"

#include "common/log.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#ifdef RPMEM_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

namespace rpmemd::systemd {

void notify(const char *state) {
  const char *path = std::getenv("NOTIFY_SOCKET");
  if (!path || (path[0] != '/' && path[0] != '@')) return;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const size_t n = std::strlen(path);
  if (n >= sizeof(a.sun_path)) return;
  std::memcpy(a.sun_path, path, n);
  if (a.sun_path[0] == '@') a.sun_path[0] = '\0';  // the abstract namespace
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return;
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + n);
  if (::sendto(fd, state, std::strlen(state), MSG_DONTWAIT | MSG_NOSIGNAL,
               reinterpret_cast<sockaddr *>(&a), len) < 0)
    RPMEM_LOG_DEBUG("service: notification '%s' not sent: %s", state, std::strerror(errno));
  ::close(fd);
}

int activated_socket() noexcept {
#ifdef RPMEM_HAVE_SYSTEMD
  if (sd_listen_fds(1) >= 1) return SD_LISTEN_FDS_START;
#endif
  return -1;
}

uint64_t watchdog_usec() noexcept {
  uint64_t usec = 0;
#ifdef RPMEM_HAVE_SYSTEMD
  if (sd_watchdog_enabled(0, &usec) <= 0) usec = 0;
#endif
  return usec;
}

}  // namespace rpmemd::systemd
