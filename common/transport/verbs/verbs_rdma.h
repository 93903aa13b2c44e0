// SPDX-License-Identifier: BSD-3-Clause
// The only place that calls rdma-core (librdmacm + libibverbs): an owner
// (std::unique_ptr with a deleter) for every handle, and thin noexcept
// wrappers for the calls the lanes make. Failures are logged with the call,
// its key arguments and strerror, and returned as errno values.
//
// Thread-safety: as rdma-core's: a queue pair is posted to and its
// completion queue polled by one thread at a time.
#ifndef RPMEM_COMMON_TRANSPORT_VERBS_VERBS_RDMA_H
#define RPMEM_COMMON_TRANSPORT_VERBS_VERBS_RDMA_H

#include "common/error.h"

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

namespace rpmem::transport::verbs {

struct EventChannelDeleter {
  void operator()(rdma_event_channel *c) const noexcept;
};
struct CmIdDeleter {  // destroys the id's queue pair first, if it has one
  void operator()(rdma_cm_id *id) const noexcept;
};
struct PdDeleter {
  void operator()(ibv_pd *pd) const noexcept;
};
struct MrDeleter {
  void operator()(ibv_mr *mr) const noexcept;
};
struct CqDeleter {
  void operator()(ibv_cq *cq) const noexcept;
};
struct CompChannelDeleter {
  void operator()(ibv_comp_channel *c) const noexcept;
};
using EventChannelPtr = std::unique_ptr<rdma_event_channel, EventChannelDeleter>;
using CmIdPtr = std::unique_ptr<rdma_cm_id, CmIdDeleter>;
using PdPtr = std::unique_ptr<ibv_pd, PdDeleter>;
using MrPtr = std::unique_ptr<ibv_mr, MrDeleter>;
using CqPtr = std::unique_ptr<ibv_cq, CqDeleter>;
using CompChannelPtr = std::unique_ptr<ibv_comp_channel, CompChannelDeleter>;

// True when libibverbs lists at least one device.
bool device_present() noexcept;
// The context librdmacm opened for the first device (it owns it), or null.
ibv_context *first_device() noexcept;

// Whether the device offers on-demand paging for RDMA WRITE and READ on RC
// queue pairs (IBV_ACCESS_ON_DEMAND: memory registered without pinning).
bool supports_odp_rc(ibv_context *ctx) noexcept;

// Whether RLIMIT_MEMLOCK lets this process pin `bytes` more; the error
// (ENOMEM) names the limit and how to raise it. `what`: e.g. "the pool".
std::error_code check_memlock(size_t bytes, const char *what, std::string &why);

// Event channel with a non-blocking descriptor.
Result<EventChannelPtr> create_event_channel();
Result<CmIdPtr> create_id(rdma_event_channel *channel);
Result<PdPtr> alloc_pd(ibv_context *ctx);
// access: IBV_ACCESS_* flags. ENOMEM/EPERM/EAGAIN failures mention RLIMIT_MEMLOCK.
Result<MrPtr> register_memory(ibv_pd *pd, const void *addr, size_t length, int access,
                              const char *what);
Result<CompChannelPtr> create_comp_channel(ibv_context *ctx);  // non-blocking fd
Result<CqPtr> create_cq(ibv_context *ctx, int entries, ibv_comp_channel *channel);
// An RC queue pair on id, sending and receiving through cq.
std::error_code create_qp(rdma_cm_id *id, ibv_pd *pd, ibv_cq *cq, uint32_t send_depth,
                          uint32_t recv_depth);

// One connection-manager event, copied out and acknowledged.
struct CmEvent {
  rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_ERROR;
  int status = 0;
  rdma_cm_id *id = nullptr;  // for CONNECT_REQUEST: a new id, owned by the caller
  std::vector<uint8_t> private_data;
};
// Waits up to timeout_ms (-1: no limit) for the next event on channel.
// ETIMEDOUT when none came; EAGAIN at once when timeout_ms is 0 and none is there.
std::error_code next_event(rdma_event_channel *channel, int timeout_ms, CmEvent &out);
// Waits for `expected` (within timeout_ms), failing on any other event:
// ECONNREFUSED for REJECTED, ECONNRESET otherwise.
// `quiet`: a failure is logged as debug, not as an error (a lane's try to
// connect again during an outage: its caller logs the outcome).
std::error_code expect_event(rdma_event_channel *channel, rdma_cm_event_type expected,
                             int timeout_ms, const char *step, bool quiet = false);

std::error_code resolve(rdma_cm_id *id, const sockaddr *dst, int timeout_ms,
                        bool quiet = false);  // addr + route
std::error_code bind_listen(rdma_cm_id *id, const sockaddr *src, int backlog);
// retry_count: the queue pairs' transport retries (7, the most; soft-RoCE
// takes 7 as "retry forever").
std::error_code connect(rdma_cm_id *id, const void *private_data, uint8_t length,
                        uint8_t retry_count = 7);
// The queue pair's local ACK timeout, 4.096 us << `exponent` per try
// (RDMA_OPTION_ID_ACK_TIMEOUT); before connect().
std::error_code set_ack_timeout(rdma_cm_id *id, uint8_t exponent);
std::error_code accept(rdma_cm_id *id);
void reject(rdma_cm_id *id) noexcept;
std::error_code migrate(rdma_cm_id *id, rdma_event_channel *channel);
void disconnect(rdma_cm_id *id) noexcept;
// Local port of a bound id (host order).
uint16_t local_port(rdma_cm_id *id) noexcept;

// Work requests. wr_id identifies the request in the completion.
std::error_code post_write(ibv_qp *qp, uint64_t wr_id, const void *local, uint32_t length,
                           uint32_t lkey, uint64_t raddr, uint32_t rkey, bool signaled) noexcept;
std::error_code post_read(ibv_qp *qp, uint64_t wr_id, void *local, uint32_t length, uint32_t lkey,
                          uint64_t raddr, uint32_t rkey) noexcept;
std::error_code post_send(ibv_qp *qp, uint64_t wr_id, const void *local, uint32_t length,
                          uint32_t lkey) noexcept;
std::error_code post_recv(ibv_qp *qp, uint64_t wr_id, void *local, uint32_t length,
                          uint32_t lkey) noexcept;

struct Completion {
  uint64_t wr_id;
  bool ok;
  uint32_t byte_len;
  const char *status;  // ibv_wc_status_str
};
// Up to n completions; returns how many, or -1 when polling failed.
int poll(ibv_cq *cq, Completion *out, int n) noexcept;
// Arms cq for the next completion event (completion-channel waits).
std::error_code arm(ibv_cq *cq) noexcept;
// Consumes the pending completion events of channel (non-blocking).
void consume_events(ibv_comp_channel *channel) noexcept;
int fd_of(ibv_comp_channel *channel) noexcept;
int fd_of(rdma_event_channel *channel) noexcept;

}  // namespace rpmem::transport::verbs

#endif  // RPMEM_COMMON_TRANSPORT_VERBS_VERBS_RDMA_H
