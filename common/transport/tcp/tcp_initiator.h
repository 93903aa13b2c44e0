// SPDX-License-Identifier: BSD-3-Clause
// TCP provider, client side: one connection per lane. A persist is one
// gathered send (header + the bytes straight from the local pool) and one
// 16-byte reply; a flush is the send alone; drain is one round trip.
#ifndef RPMEM_COMMON_TRANSPORT_TCP_TCP_INITIATOR_H
#define RPMEM_COMMON_TRANSPORT_TCP_TCP_INITIATOR_H

#include "common/transport/transport.h"

#include <atomic>
#include <memory>
#include <vector>

namespace rpmem::transport::tcp {

class TcpInitiatorLane final : public InitiatorLane {
 public:
  // Takes ownership of fd, a connected socket that passed the lane hello.
  TcpInitiatorLane(int fd, const uint8_t *local_base, int timeout_ms);
  ~TcpInitiatorLane() override;
  TcpInitiatorLane(const TcpInitiatorLane &) = delete;
  TcpInitiatorLane &operator=(const TcpInitiatorLane &) = delete;

  std::error_code write(DataOp op, uint64_t offset, uint64_t length,
                        bool relaxed) noexcept override;
  std::error_code drain() noexcept override;
  std::error_code read(void *dst, uint64_t offset, uint64_t length) noexcept override;
  void shutdown() noexcept override;

 private:
  // Sends a request (and its payload) and, unless it is a flush, waits for
  // the reply header.
  std::error_code exchange(const proto::DataRequest &req, const void *payload,
                           proto::DataReply &reply) noexcept;
  std::error_code fail(std::error_code ec) noexcept;

  int fd_;
  const uint8_t *base_;
  int timeout_ms_;
  std::atomic<bool> dead_{false};
};

Result<std::vector<std::unique_ptr<InitiatorLane>>> connect_lanes(const InitiatorParams &params);

}  // namespace rpmem::transport::tcp

#endif  // RPMEM_COMMON_TRANSPORT_TCP_TCP_INITIATOR_H
