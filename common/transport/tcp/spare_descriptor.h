// SPDX-License-Identifier: BSD-3-Clause
// SpareDescriptor: one descriptor held in reserve (/dev/null) for a listener
// of a process that runs out of them (EMFILE, ENFILE). accept() then fails
// and leaves the connection queued, so the listener, woken again at once,
// would spin; shed() spends the spare to take that connection off the queue
// and close it, then holds a new spare.
// Thread-safety: one thread at a time (the listener's). No errors: without
// a spare (none could be opened), shed() does nothing.
#ifndef RPMEM_COMMON_TRANSPORT_TCP_SPARE_DESCRIPTOR_H
#define RPMEM_COMMON_TRANSPORT_TCP_SPARE_DESCRIPTOR_H

namespace rpmem::transport::tcp {

class SpareDescriptor {
 public:
  SpareDescriptor() noexcept;  // opens the spare
  ~SpareDescriptor();
  SpareDescriptor(const SpareDescriptor &) = delete;
  SpareDescriptor &operator=(const SpareDescriptor &) = delete;

  // Whether a spare is held (false: /dev/null could not be opened).
  bool held() const noexcept { return fd_ >= 0; }
  // Closes the spare, accepts the next connection queued on `listen_fd` and
  // closes it, and opens the spare again.
  void shed(int listen_fd) noexcept;

 private:
  int fd_ = -1;
};

}  // namespace rpmem::transport::tcp

#endif  // RPMEM_COMMON_TRANSPORT_TCP_SPARE_DESCRIPTOR_H
