// SPDX-License-Identifier: BSD-3-Clause
// TCP provider, client side: one connection per lane. A persist is one
// gathered send (header + the bytes straight from the local pool) and one
// 16-byte reply. A flush is posted, as an RDMA write is posted to a send
// queue: up to work_queue_size flushes wait on the lane and go out, in one
// gathered send, with the next request (drain, persist, read) or when the
// queue is full; drain is then one round trip.
//
// A lane that can come back (LaneDialer, to a target of protocol minor 6)
// does not fail when its connection breaks or stalls: it waits in slices of
// kStallCheck, and between them asks the kernel whether the connection still
// gets answers (TCP_INFO: two retransmissions or keepalive probes in a row
// unanswered). A connection that does not is given up at once, without
// waiting for TCP's backoff, and the lane connects again (a new connection
// each kDialTry, so that one comes through within a second of the link's
// return), proves the session secret at a higher epoch, sends again the
// flushes posted since its last drain and the request under way, and goes
// on. The lane fails only when no byte has moved for the bound
// (InitiatorParams::timeout, RPMEM_TIMEOUT), its attempts included.
//
// A lane that probes (to a target of protocol minor 11) sends a probe
// behind its request when the reply is late (reply_probe.h: a lost packet
// then costs milliseconds, not TCP's 200 ms), and skips the probes'
// replies, which come in their turn, behind the replies before them.
#ifndef RPMEM_COMMON_TRANSPORT_TCP_TCP_INITIATOR_H
#define RPMEM_COMMON_TRANSPORT_TCP_TCP_INITIATOR_H

#include "common/transport/flush_ranges.h"
#include "common/transport/spin_gauge.h"
#include "common/transport/tcp/byte_stream.h"
#include "common/transport/tcp/reply_probe.h"
#include "common/transport/transport.h"

#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace rpmem::transport::tcp {

// How often a waiting lane looks at its connection's health, and how long
// one attempt to connect again may take.
inline constexpr std::chrono::milliseconds kStallCheck{500};
inline constexpr std::chrono::milliseconds kDialTry{1000};

// How the lanes of one pool connect to the target, first and again: the
// target's address, the session's secret, the lanes' security. Shared by
// the lanes; thread-safe (each dial has its own sockets).
class LaneDialer {
 public:
  struct Connection {
    int fd = -1;
    std::unique_ptr<ByteStream> stream;  // encrypted lanes: owns fd
  };
  // Resolves the target's address once.
  static Result<std::shared_ptr<LaneDialer>> make(const InitiatorParams &params);
  ~LaneDialer();
  LaneDialer(const LaneDialer &) = delete;
  LaneDialer &operator=(const LaneDialer &) = delete;

  // Connects lane `lane` at `epoch`, sets up its security and has the
  // target admit it, all within `timeout`. ECONNRESET for a refusal or a
  // failed handshake, ETIMEDOUT, or the connect's own error.
  Result<Connection> dial(unsigned lane, uint16_t epoch, std::chrono::milliseconds timeout) const;
  const InitiatorParams &params() const noexcept { return params_; }

 private:
  explicit LaneDialer(const InitiatorParams &params);
  // Resolves the host for `port` into endpoints_ (endpoints_mu_ held);
  // EHOSTUNREACH with `why` when it does not resolve.
  std::error_code resolve_locked(uint16_t port, std::string &why) const;

  InitiatorParams params_;
  struct Endpoints;
  mutable std::mutex endpoints_mu_;
  std::unique_ptr<Endpoints> endpoints_;  // of the route's port, resolved again when it moves
};

class TcpInitiatorLane final : public InitiatorLane {
 public:
  // Takes ownership of fd, a connected socket that passed the lane hello,
  // or of `tls`, the TLS stream on fd (then every byte goes through it).
  // work_queue_size: flushes posted before one has to be sent (2..256).
  // timeout_ms: the bound on a stall. With a `dialer`, the lane (number
  // `lane`) connects again when its connection breaks or stalls. `probes`:
  // the target answers probes (protocol minor 11).
  TcpInitiatorLane(int fd, const uint8_t *local_base, int timeout_ms, unsigned work_queue_size,
                   std::unique_ptr<ByteStream> tls = nullptr,
                   std::shared_ptr<const LaneDialer> dialer = nullptr, unsigned lane = 0,
                   bool probes = false);
  ~TcpInitiatorLane() override;
  TcpInitiatorLane(const TcpInitiatorLane &) = delete;
  TcpInitiatorLane &operator=(const TcpInitiatorLane &) = delete;

  std::error_code write(DataOp op, uint64_t offset, uint64_t length,
                        unsigned flags) noexcept override;
  std::error_code drain(unsigned flags) noexcept override;
  using InitiatorLane::drain;
  std::error_code read(void *dst, uint64_t offset, uint64_t length) noexcept override;
  void shutdown() noexcept override;
  std::string failure() const override { return why_; }
  std::vector<PoolRange> unacknowledged() const override { return unacked_.ranges(); }

 private:
  // Adds a request (and its payload from the pool) to the posted queue.
  void enqueue(const proto::DataRequest &req, unsigned slot) noexcept;
  // Sends the posted flushes, then `req` if it is not null.
  std::error_code post(const proto::DataRequest *req) noexcept;
  // Posts `req` behind the queued flushes and waits for its reply header.
  std::error_code exchange(const proto::DataRequest &req, proto::DataReply &reply) noexcept;
  // The next reply header into `raw`, the replies to earlier probes
  // skipped; it spins (and naps) first, as long as replies take.
  std::error_code recv_reply(uint8_t (&raw)[proto::kDataReplySize]) noexcept;
  // A probe behind the request, if probe_ says it is time (at `now`).
  std::error_code probe(std::chrono::steady_clock::time_point now) noexcept;
  // One read: a transport error, or none with the target's `status`.
  std::error_code read_once(void *dst, uint64_t offset, uint64_t length,
                            std::error_code &status) noexcept;
  // Runs `attempt` (a request and its reply) until it is done, connecting
  // again and sending the unacknowledged flushes before each retry, within
  // the bound; the lane's final error otherwise.
  template <class Attempt>
  std::error_code with_comeback(Attempt &&attempt) noexcept;
  // Connects again at the next epoch and sends the flushes posted since the
  // last drain; `cause`: why the old connection was given up.
  std::error_code come_back(std::error_code cause) noexcept;
  std::error_code fail(std::error_code ec) noexcept;
  std::error_code send_iov(iovec *iov, int n) noexcept;
  std::error_code recv_exact(void *buf, size_t len) noexcept;
  // Waits until the socket is ready for `events`, in slices of
  // kStallCheck: ETIMEDOUT past the bound, ENOLINK when the connection gets
  // no answers any more (a lane that can come back). Waiting for a reply
  // (POLLIN: the request is sent whole), it probes when it is time.
  std::error_code await(short events) noexcept;
  void moved() noexcept { progress_ = std::chrono::steady_clock::now(); }

  int fd_;  // written by the lane's thread under fd_mu_ (come_back)
  std::unique_ptr<ByteStream> tls_;
  std::mutex fd_mu_;  // shutdown() against a swap of the connection
  const std::shared_ptr<const LaneDialer> dialer_;
  const unsigned number_;
  uint16_t epoch_ = 0;
  bool keepalive_ = false;                          // probes on while a wait is long
  std::chrono::steady_clock::time_point progress_;  // last byte moved, or the call's start
  // Flushes posted since the last drain: sent again on a new connection,
  // and what unacknowledged() answers.
  FlushRanges unacked_{kReplayRanges};
  std::string why_;  // the last failure, in words
  static constexpr size_t kReplayRanges = 1024;
  const uint8_t *base_;
  int timeout_ms_;
  WaitSpin spin_;        // how long to spin for a reply
  const bool probes_;    // the target answers probes
  ProbeSchedule probe_;  // of the reply under way
  unsigned owed_ = 0;    // replies to probes still to come on this connection
  uint64_t probed_ = 0;  // probes sent, in all
  uint8_t probe_hdr_[proto::kDataRequestSize] = {};
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
