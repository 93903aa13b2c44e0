// SPDX-License-Identifier: BSD-3-Clause
// ControlStream: rpmemd's end of a control channel, whole frames in and out;
// ControlIo, the one over stdin/stdout under ssh (pipes or sockets). Every
// wait also watches a set of wake-up descriptors (signals, lane failures) so
// that nothing blocks the daemon's shutdown.
#ifndef RPMEMD_CONTROL_IO_H
#define RPMEMD_CONTROL_IO_H

#include "common/proto.h"

#include <system_error>
#include <vector>

namespace rpmemd {

namespace proto = rpmem::proto;

// The daemon's end of a control channel: whole frames in and out.
class ControlStream {
 public:
  virtual ~ControlStream() = default;
  // Reads one frame. Errors: ECONNRESET (EOF, or the peer is gone), EINTR (a wake-up descriptor
  // is readable; `woken` names it), EPROTO (malformed frame header).
  virtual std::error_code read_frame(proto::FrameHeader &hdr, proto::Bytes &payload,
                                     int &woken) = 0;
  virtual std::error_code write_all(const proto::Bytes &bytes) = 0;
  // Descriptors that interrupt a wait (readable = interrupt).
  virtual void add_wake_fd(int fd) = 0;
};

// Over two descriptors (ssh: stdin and stdout; pipes or sockets).
class ControlIo final : public ControlStream {
 public:
  ControlIo(int in_fd, int out_fd) : in_(in_fd), out_(out_fd) {}

  void add_wake_fd(int fd) override { wake_.push_back(fd); }
  std::error_code read_frame(proto::FrameHeader &hdr, proto::Bytes &payload, int &woken) override;
  std::error_code write_all(const proto::Bytes &bytes) override;

 private:
  std::error_code read_exact(uint8_t *buf, size_t n, int &woken);

  int in_, out_;
  std::vector<int> wake_;
};

// Waits until `fd` is readable (or at its end) or one of `wake` fires: then
// EINTR, with that descriptor in `woken`. Shared by every ControlStream.
std::error_code wait_readable(int fd, const std::vector<int> &wake, int &woken);

// Reads one frame with `read_exact(buf, n)`, shared by every ControlStream.
template <typename ReadExact>
std::error_code read_frame_with(ReadExact &&read_exact, proto::FrameHeader &hdr,
                                proto::Bytes &payload) {
  uint8_t raw[proto::kFrameHeaderSize];
  if (auto ec = read_exact(raw, sizeof(raw))) return ec;
  auto h = proto::decode_frame_header(raw);
  if (!h) return std::make_error_code(std::errc::protocol_error);
  hdr = *h;
  payload.resize(h->size);  // bounded by kMaxControlPayload
  return read_exact(payload.data(), payload.size());
}

}  // namespace rpmemd

#endif  // RPMEMD_CONTROL_IO_H
