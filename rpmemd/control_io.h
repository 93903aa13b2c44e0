// SPDX-License-Identifier: BSD-3-Clause
// ControlIo: rpmemd's end of the control channel (stdin/stdout under ssh,
// which may be pipes or sockets): whole frames in and out. Every wait also
// watches a set of wake-up descriptors (signals, lane failures) so that
// nothing blocks the daemon's shutdown.
#ifndef RPMEMD_CONTROL_IO_H
#define RPMEMD_CONTROL_IO_H

#include "common/proto.h"

#include <system_error>
#include <vector>

namespace rpmemd {

namespace proto = rpmem::proto;

class ControlIo {
 public:
  ControlIo(int in_fd, int out_fd) : in_(in_fd), out_(out_fd) {}

  // Descriptors that interrupt a wait (readable = interrupt).
  void add_wake_fd(int fd) { wake_.push_back(fd); }

  // Reads one frame. Errors: ECONNRESET (EOF), EINTR (a wake fd is
  // readable; `woken` names it), EPROTO (malformed frame header).
  std::error_code read_frame(proto::FrameHeader &hdr, proto::Bytes &payload, int &woken);
  std::error_code write_all(const proto::Bytes &bytes);

 private:
  std::error_code read_exact(uint8_t *buf, size_t n, int &woken);

  int in_, out_;
  std::vector<int> wake_;
};

}  // namespace rpmemd

#endif  // RPMEMD_CONTROL_IO_H
