// SPDX-License-Identifier: BSD-3-Clause
// SpareDescriptor: the descriptor a listener spends to shed a connection
// when the process is out of them.
#include "common/transport/tcp/spare_descriptor.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace rpmem::transport::tcp {

namespace {

int open_spare() noexcept { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

}  // namespace

SpareDescriptor::SpareDescriptor() noexcept : fd_(open_spare()) {}

SpareDescriptor::~SpareDescriptor() {
  if (fd_ >= 0) ::close(fd_);
}

void SpareDescriptor::shed(int listen_fd) noexcept {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  int victim = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (victim >= 0) ::close(victim);
  fd_ = open_spare();
}

}  // namespace rpmem::transport::tcp
