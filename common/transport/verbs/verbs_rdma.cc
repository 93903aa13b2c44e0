// SPDX-License-Identifier: BSD-3-Clause
// rdma-core calls of the verbs provider.
#include "common/transport/verbs/verbs_rdma.h"

#include "common/log.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

namespace rpmem::transport::verbs {

namespace {

std::error_code logged(int err, const char *call, const std::string &args) {
  RPMEM_LOG_ERR("%s(%s) failed: %s", call, args.c_str(), strerror(err));
  return errc(err);
}

// rdma_* calls return -1 and set errno; ibv_* calls return the errno.
int err_of_rdma(int rc) { return rc == 0 ? 0 : (errno != 0 ? errno : EIO); }

std::error_code set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) return last_errc();
  return {};
}

// CAP_IPC_LOCK in the effective set (/proc/self/status CapEff, bit 14).
bool has_ipc_lock() {
  FILE *f = std::fopen("/proc/self/status", "r");
  if (!f) return ::geteuid() == 0;
  char line[256];
  unsigned long long eff = 0;
  bool found = false;
  while (std::fgets(line, sizeof(line), f))
    if (std::sscanf(line, "CapEff: %llx", &eff) == 1) {
      found = true;
      break;
    }
  std::fclose(f);
  return found ? (eff >> 14) & 1 : ::geteuid() == 0;
}

std::string human(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%llu KiB", static_cast<unsigned long long>(bytes / 1024));
  return buf;
}

}  // namespace

void EventChannelDeleter::operator()(rdma_event_channel *c) const noexcept {
  rdma_destroy_event_channel(c);
}
void CmIdDeleter::operator()(rdma_cm_id *id) const noexcept {
  if (id->qp) rdma_destroy_qp(id);
  rdma_destroy_id(id);
}
void PdDeleter::operator()(ibv_pd *pd) const noexcept { ibv_dealloc_pd(pd); }
void MrDeleter::operator()(ibv_mr *mr) const noexcept { ibv_dereg_mr(mr); }
void CqDeleter::operator()(ibv_cq *cq) const noexcept { ibv_destroy_cq(cq); }
void CompChannelDeleter::operator()(ibv_comp_channel *c) const noexcept {
  ibv_destroy_comp_channel(c);
}

bool device_present() noexcept {
  int n = 0;
  ibv_device **list = ibv_get_device_list(&n);
  if (!list) return false;
  ibv_free_device_list(list);
  return n > 0;
}

ibv_context *first_device() noexcept {
  int n = 0;
  ibv_context **list = rdma_get_devices(&n);
  if (!list) return nullptr;
  ibv_context *ctx = n > 0 ? list[0] : nullptr;
  rdma_free_devices(list);
  return ctx;
}

bool supports_odp_rc(ibv_context *ctx) noexcept {
  ibv_device_attr_ex attr{};
  if (ibv_query_device_ex(ctx, nullptr, &attr) != 0) return false;
  const uint32_t need = IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ;
  return (attr.odp_caps.general_caps & IBV_ODP_SUPPORT) != 0 &&
         (attr.odp_caps.per_transport_caps.rc_odp_caps & need) == need;
}

std::error_code check_memlock(size_t bytes, const char *what, std::string &why) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return {};
  if (has_ipc_lock()) return {};  // the limit does not apply
  if (rl.rlim_cur >= bytes) return {};
  why = std::string("RLIMIT_MEMLOCK (") + human(rl.rlim_cur) + ") is below the " + human(bytes) +
        " " + what + " must pin for RDMA; raise the memlock limit (ulimit -l, " +
        "LimitMEMLOCK= in a systemd unit, memlock in /etc/security/limits.conf)";
  return errc(ENOMEM);
}

namespace {

// Creating `what` (which takes a descriptor) failed in `call`: the error,
// with a hint when the descriptor limit is the cause.
Error channel_error(int err, const char *call, const char *what) {
  std::string msg = std::string("cannot create ") + what + ": " + strerror(err);
  if (err == EMFILE || err == ENFILE) msg += " (RLIMIT_NOFILE too low for the lanes)";
  return Error{logged(err, call, ""), msg};
}

}  // namespace

Result<EventChannelPtr> create_event_channel() {
  EventChannelPtr ch(rdma_create_event_channel());
  if (!ch)
    return channel_error(errno ? errno : ENODEV, "rdma_create_event_channel",
                         "an rdma_cm event channel");
  if (auto ec = set_nonblocking(ch->fd)) return Error{ec, "cannot set up an rdma_cm channel"};
  return ch;
}

Result<CmIdPtr> create_id(rdma_event_channel *channel) {
  rdma_cm_id *id = nullptr;
  if (rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP) != 0)
    return Error{logged(err_of_rdma(-1), "rdma_create_id", "RDMA_PS_TCP"),
                 "cannot create an rdma_cm id"};
  return CmIdPtr(id);
}

Result<PdPtr> alloc_pd(ibv_context *ctx) {
  PdPtr pd(ibv_alloc_pd(ctx));
  if (!pd)
    return Error{logged(errno ? errno : ENOMEM, "ibv_alloc_pd", ctx->device->name),
                 "cannot allocate a protection domain"};
  return pd;
}

Result<MrPtr> register_memory(ibv_pd *pd, const void *addr, size_t length, int access,
                              const char *what) {
  MrPtr mr(ibv_reg_mr(pd, const_cast<void *>(addr), length, access));
  if (mr) return mr;
  const int err = errno ? errno : ENOMEM;
  char args[128];
  std::snprintf(args, sizeof(args), "%p, %zu, 0x%x", addr, length, static_cast<unsigned>(access));
  logged(err, "ibv_reg_mr", args);
  std::string msg = std::string("cannot register ") + what + " (" + std::to_string(length) +
                    " bytes) for RDMA: " + strerror(err);
  if (err == ENOMEM || err == EPERM || err == EAGAIN) {
    rlimit rl{};
    ::getrlimit(RLIMIT_MEMLOCK, &rl);
    msg += rl.rlim_cur == RLIM_INFINITY
               ? std::string(" (RLIMIT_MEMLOCK is unlimited)")
               : " (RLIMIT_MEMLOCK is " + human(rl.rlim_cur) + "; raise it with ulimit -l)";
  }
  return Error{errc(err == EPERM || err == EAGAIN ? ENOMEM : err), msg};
}

Result<CompChannelPtr> create_comp_channel(ibv_context *ctx) {
  CompChannelPtr ch(ibv_create_comp_channel(ctx));
  if (!ch)
    return channel_error(errno ? errno : ENOMEM, "ibv_create_comp_channel", "a completion channel");
  if (auto ec = set_nonblocking(ch->fd)) return Error{ec, "cannot set up a completion channel"};
  return ch;
}

Result<CqPtr> create_cq(ibv_context *ctx, int entries, ibv_comp_channel *channel) {
  CqPtr cq(ibv_create_cq(ctx, entries, nullptr, channel, 0));
  if (!cq)
    return Error{logged(errno ? errno : ENOMEM, "ibv_create_cq", std::to_string(entries)),
                 "cannot create a completion queue"};
  return cq;
}

std::error_code create_qp(rdma_cm_id *id, ibv_pd *pd, ibv_cq *cq, uint32_t send_depth,
                          uint32_t recv_depth) {
  ibv_qp_init_attr attr{};
  attr.send_cq = cq;
  attr.recv_cq = cq;
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = 0;
  attr.cap.max_send_wr = send_depth;
  attr.cap.max_recv_wr = recv_depth;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  if (rdma_create_qp(id, pd, &attr) != 0)
    return logged(err_of_rdma(-1), "rdma_create_qp",
                  "send " + std::to_string(send_depth) + ", recv " + std::to_string(recv_depth));
  return {};
}

std::error_code next_event(rdma_event_channel *channel, int timeout_ms, CmEvent &out) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    rdma_cm_event *ev = nullptr;
    if (rdma_get_cm_event(channel, &ev) == 0) {
      out.type = ev->event;
      out.status = ev->status;
      out.id = ev->id;
      out.private_data.clear();
      if (ev->param.conn.private_data && ev->param.conn.private_data_len > 0) {
        const auto *p = static_cast<const uint8_t *>(ev->param.conn.private_data);
        out.private_data.assign(p, p + ev->param.conn.private_data_len);
      }
      rdma_ack_cm_event(ev);
      return {};
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return logged(errno, "rdma_get_cm_event", "");
    if (timeout_ms == 0) return errc(EAGAIN);
    int wait = -1;
    if (timeout_ms > 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return errc(ETIMEDOUT);
      wait = static_cast<int>(left.count()) + 1;
    }
    pollfd p{channel->fd, POLLIN, 0};
    if (::poll(&p, 1, wait) < 0 && errno != EINTR) return logged(errno, "poll", "rdma_cm channel");
  }
}

std::error_code expect_event(rdma_event_channel *channel, rdma_cm_event_type expected,
                             int timeout_ms, const char *step, bool quiet) {
  const log::Level level = quiet ? log::Level::kDebug : log::Level::kErr;
  CmEvent ev;
  if (auto ec = next_event(channel, timeout_ms, ev)) {
    if (log::enabled(level))
      log::write(level, "%s: no rdma_cm event within %d ms (%s)", step, timeout_ms,
                 ec.message().c_str());
    return ec.value() == ETIMEDOUT ? errc(ETIMEDOUT) : errc(ECONNRESET);
  }
  if (ev.type == expected && ev.status == 0) return {};
  if (log::enabled(level))
    log::write(level, "%s: rdma_cm event %s (status %d), expected %s", step,
               rdma_event_str(ev.type), ev.status, rdma_event_str(expected));
  if (ev.type == RDMA_CM_EVENT_REJECTED) return errc(ECONNREFUSED);
  if (ev.type == RDMA_CM_EVENT_ADDR_ERROR || ev.type == RDMA_CM_EVENT_ROUTE_ERROR ||
      ev.type == RDMA_CM_EVENT_UNREACHABLE)
    return errc(EHOSTUNREACH);
  return errc(ECONNRESET);
}

std::error_code resolve(rdma_cm_id *id, const sockaddr *dst, int timeout_ms, bool quiet) {
  if (rdma_resolve_addr(id, nullptr, const_cast<sockaddr *>(dst), timeout_ms) != 0)
    return logged(err_of_rdma(-1), "rdma_resolve_addr", "");
  if (auto ec = expect_event(id->channel, RDMA_CM_EVENT_ADDR_RESOLVED, timeout_ms + 1000,
                             "address resolution", quiet))
    return ec;
  if (rdma_resolve_route(id, timeout_ms) != 0)
    return logged(err_of_rdma(-1), "rdma_resolve_route", "");
  return expect_event(id->channel, RDMA_CM_EVENT_ROUTE_RESOLVED, timeout_ms + 1000,
                      "route resolution", quiet);
}

std::error_code bind_listen(rdma_cm_id *id, const sockaddr *src, int backlog) {
  if (rdma_bind_addr(id, const_cast<sockaddr *>(src)) != 0)
    return logged(err_of_rdma(-1), "rdma_bind_addr", "");
  if (rdma_listen(id, backlog) != 0) return logged(err_of_rdma(-1), "rdma_listen", "");
  return {};
}

namespace {
rdma_conn_param conn_param(const void *private_data, uint8_t length, uint8_t retry_count = 7) {
  rdma_conn_param p{};
  p.private_data = private_data;
  p.private_data_len = length;
  p.responder_resources = 1;  // one RDMA READ in flight (APM probe, rpmem_read)
  p.initiator_depth = 1;
  p.retry_count = retry_count;
  p.rnr_retry_count = 7;  // a receive buffer is always reposted: retry forever
  return p;
}
}  // namespace

std::error_code connect(rdma_cm_id *id, const void *private_data, uint8_t length,
                        uint8_t retry_count) {
  rdma_conn_param p = conn_param(private_data, length, retry_count);
  if (rdma_connect(id, &p) != 0) return logged(err_of_rdma(-1), "rdma_connect", "");
  return {};
}

std::error_code set_ack_timeout(rdma_cm_id *id, uint8_t exponent) {
  if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &exponent,
                      sizeof(exponent)) != 0)
    return logged(err_of_rdma(-1), "rdma_set_option(ACK_TIMEOUT)", std::to_string(exponent));
  return {};
}

std::error_code accept(rdma_cm_id *id) {
  rdma_conn_param p = conn_param(nullptr, 0);
  if (rdma_accept(id, &p) != 0) return logged(err_of_rdma(-1), "rdma_accept", "");
  return {};
}

void reject(rdma_cm_id *id) noexcept { rdma_reject(id, nullptr, 0); }

std::error_code migrate(rdma_cm_id *id, rdma_event_channel *channel) {
  if (rdma_migrate_id(id, channel) != 0) return logged(err_of_rdma(-1), "rdma_migrate_id", "");
  return {};
}

void disconnect(rdma_cm_id *id) noexcept { rdma_disconnect(id); }

uint16_t local_port(rdma_cm_id *id) noexcept { return ntohs(rdma_get_src_port(id)); }

namespace {

// One work request on the send queue; the three posts below differ only in
// the opcode, the completion flag and the remote address.
std::error_code post_one(ibv_qp *qp, uint64_t wr_id, const void *local, uint32_t length,
                         uint32_t lkey, ibv_wr_opcode opcode, bool signaled, uint64_t raddr = 0,
                         uint32_t rkey = 0) noexcept {
  ibv_sge sge{reinterpret_cast<uintptr_t>(local), length, lkey};
  ibv_send_wr wr{};
  ibv_send_wr *bad = nullptr;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = length ? 1 : 0;
  wr.opcode = opcode;
  wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  if (int rc = ibv_post_send(qp, &wr, &bad)) return errc(rc);
  return {};
}

}  // namespace

std::error_code post_write(ibv_qp *qp, uint64_t wr_id, const void *local, uint32_t length,
                           uint32_t lkey, uint64_t raddr, uint32_t rkey, bool signaled) noexcept {
  return post_one(qp, wr_id, local, length, lkey, IBV_WR_RDMA_WRITE, signaled, raddr, rkey);
}

std::error_code post_read(ibv_qp *qp, uint64_t wr_id, void *local, uint32_t length, uint32_t lkey,
                          uint64_t raddr, uint32_t rkey) noexcept {
  return post_one(qp, wr_id, local, length, lkey, IBV_WR_RDMA_READ, true, raddr, rkey);
}

std::error_code post_send(ibv_qp *qp, uint64_t wr_id, const void *local, uint32_t length,
                          uint32_t lkey) noexcept {
  return post_one(qp, wr_id, local, length, lkey, IBV_WR_SEND, true);
}

std::error_code post_recv(ibv_qp *qp, uint64_t wr_id, void *local, uint32_t length,
                          uint32_t lkey) noexcept {
  ibv_sge sge{reinterpret_cast<uintptr_t>(local), length, lkey};
  ibv_recv_wr wr{};
  ibv_recv_wr *bad = nullptr;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (int rc = ibv_post_recv(qp, &wr, &bad)) return errc(rc);
  return {};
}

int poll(ibv_cq *cq, Completion *out, int n) noexcept {
  ibv_wc wc[8];
  if (n > 8) n = 8;
  int got = ibv_poll_cq(cq, n, wc);
  for (int i = 0; i < got; ++i)
    out[i] = {wc[i].wr_id, wc[i].status == IBV_WC_SUCCESS, wc[i].byte_len,
              ibv_wc_status_str(wc[i].status)};
  return got;
}

std::error_code arm(ibv_cq *cq) noexcept {
  if (int rc = ibv_req_notify_cq(cq, 0)) return errc(rc);
  return {};
}

void consume_events(ibv_comp_channel *channel) noexcept {
  ibv_cq *cq = nullptr;
  void *ctx = nullptr;
  while (ibv_get_cq_event(channel, &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
}

int fd_of(ibv_comp_channel *channel) noexcept { return channel->fd; }
int fd_of(rdma_event_channel *channel) noexcept { return channel->fd; }

}  // namespace rpmem::transport::verbs
