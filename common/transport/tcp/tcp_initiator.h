// SPDX-License-Identifier: BSD-3-Clause
// TCP provider, client side: one connection per lane. A persist is one
// gathered send (header + the bytes straight from the local pool) and one
// 16-byte reply. A flush is posted, as an RDMA write is posted to a send
// queue: up to work_queue_size flushes wait on the lane and go out, in one
// gathered send, with the next request (drain, persist, read) or when the
// queue is full; drain is then one round trip.
#ifndef RPMEM_COMMON_TRANSPORT_TCP_TCP_INITIATOR_H
#define RPMEM_COMMON_TRANSPORT_TCP_TCP_INITIATOR_H

#include "common/transport/spin_gauge.h"
#include "common/transport/tcp/byte_stream.h"
#include "common/transport/transport.h"

#include <sys/uio.h>

#include <atomic>
#include <memory>
#include <vector>

namespace rpmem::transport::tcp {

class TcpInitiatorLane final : public InitiatorLane {
 public:
  // Takes ownership of fd, a connected socket that passed the lane hello,
  // or of `tls`, the TLS stream on fd (then every byte goes through it).
  // work_queue_size: flushes posted before one has to be sent (2..256).
  TcpInitiatorLane(int fd, const uint8_t *local_base, int timeout_ms, unsigned work_queue_size,
                   std::unique_ptr<ByteStream> tls = nullptr);
  ~TcpInitiatorLane() override;
  TcpInitiatorLane(const TcpInitiatorLane &) = delete;
  TcpInitiatorLane &operator=(const TcpInitiatorLane &) = delete;

  std::error_code write(DataOp op, uint64_t offset, uint64_t length,
                        bool relaxed) noexcept override;
  std::error_code drain() noexcept override;
  std::error_code read(void *dst, uint64_t offset, uint64_t length) noexcept override;
  void shutdown() noexcept override;

 private:
  // Adds a request (and its payload from the pool) to the posted queue.
  void enqueue(const proto::DataRequest &req, unsigned slot) noexcept;
  // Sends the posted flushes, then `req` if it is not null.
  std::error_code post(const proto::DataRequest *req) noexcept;
  // Posts `req` behind the queued flushes and waits for its reply header.
  std::error_code exchange(const proto::DataRequest &req, proto::DataReply &reply) noexcept;
  std::error_code fail(std::error_code ec) noexcept;
  std::error_code send_iov(iovec *iov, int n) noexcept;
  std::error_code recv_exact(void *buf, size_t len) noexcept;

  int fd_;
  std::unique_ptr<ByteStream> tls_;
  const uint8_t *base_;
  int timeout_ms_;
  WaitSpin spin_;        // how long to spin for a reply
  unsigned wq_;          // queue bound
  unsigned queued_ = 0;  // flushes posted, not yet sent
  int niov_ = 0;
  std::unique_ptr<uint8_t[]> hdrs_;  // wq_ + 1 encoded headers (the last: the request)
  std::unique_ptr<iovec[]> iov_;     // 2 per header
  std::atomic<bool> dead_{false};
};

Result<std::vector<std::unique_ptr<InitiatorLane>>> connect_lanes(const InitiatorParams &params);

}  // namespace rpmem::transport::tcp

#endif  // RPMEM_COMMON_TRANSPORT_TCP_TCP_INITIATOR_H
