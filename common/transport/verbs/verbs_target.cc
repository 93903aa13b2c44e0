// SPDX-License-Identifier: BSD-3-Clause
// Verbs provider, target side.
#include "common/transport/verbs/verbs_target.h"

#include "common/log.h"
#include "common/transport/copy_words.h"
#include "common/transport/lane_admission.h"
#include "common/transport/spin_gauge.h"
#include "common/transport/verbs/verbs_wire.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

namespace rpmem::transport::verbs {

namespace {

enum WrId : uint64_t { kWrRecv = 1, kWrReply = 2 };
constexpr size_t kRecvSize = kMsgHeaderSize + kMaxInline;
// At most one verbs lane thread per two CPUs polls for the next request.
using LaneSpinSlots = SpinSlots<VerbsTarget::Lane>;

}  // namespace

struct VerbsTarget::Lane {
  unsigned index = 0;
  EventChannelPtr channel;
  CompChannelPtr comp;
  CqPtr cq;
  std::unique_ptr<uint8_t[]> buf;  // receive buffer | reply buffer
  MrPtr mr;
  CmIdPtr id;
  bool reply_busy = false;

  uint8_t *reply_buf() const { return buf.get() + kRecvSize; }
  ~Lane() {
    id.reset();  // the queue pair before its CQ and buffers
    mr.reset();
    cq.reset();
    comp.reset();
  }
};

VerbsTarget::VerbsTarget(TargetPool &pool, TargetParams params)
    : pool_(pool),
      params_(std::move(params)),
      state_(params_.on_fatal),
      admission_(params_.secret, params_.max_lanes) {
  sockaddr_storage ss{};
  ProviderInfo info;
  info.method = params_.persist_method;
  if (params_.listen_address.empty()) {
    auto *in6 = reinterpret_cast<sockaddr_in6 *>(&ss);
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_any;
  } else {
    auto *in = reinterpret_cast<sockaddr_in *>(&ss);
    auto *in6 = reinterpret_cast<sockaddr_in6 *>(&ss);
    if (::inet_pton(AF_INET, params_.listen_address.c_str(), &in->sin_addr) == 1) {
      in->sin_family = AF_INET;
      info.family = AF_INET;
      std::memcpy(info.addr.data(), &in->sin_addr, 4);
      if ((ntohl(in->sin_addr.s_addr) >> 24) == 127)
        throw SetupError(EADDRNOTAVAIL,
                         "verbs: no RDMA on the loopback address " + params_.listen_address);
    } else if (::inet_pton(AF_INET6, params_.listen_address.c_str(), &in6->sin6_addr) == 1) {
      in6->sin6_family = AF_INET6;
      info.family = AF_INET6;
      std::memcpy(info.addr.data(), &in6->sin6_addr, 16);
      if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
        throw SetupError(EADDRNOTAVAIL, "verbs: no RDMA on the loopback address ::1");
    } else {
      throw SetupError(EINVAL, "verbs: bad listen address '" + params_.listen_address + "'");
    }
  }
  auto channel = create_event_channel();
  if (!channel) throw SetupError(channel.error().code.value(), channel.error().message);
  channel_ = std::move(channel.value());
  auto id = create_id(channel_.get());
  if (!id) throw SetupError(id.error().code.value(), id.error().message);
  listen_id_ = std::move(id.value());
  if (auto ec = bind_listen(listen_id_.get(), reinterpret_cast<sockaddr *>(&ss), 128))
    throw SetupError(ec.value(),
                     "verbs: cannot listen on '" + params_.listen_address + "': " + ec.message());
  ctx_ = listen_id_->verbs ? listen_id_->verbs : first_device();
  if (!ctx_) throw SetupError(ENODEV, "verbs: no RDMA device");
  port_ = local_port(listen_id_.get());

  auto pd = alloc_pd(ctx_);
  if (!pd) throw SetupError(pd.error().code.value(), pd.error().message);
  pd_ = std::move(pd.value());
  const size_t lane_bytes = params_.max_lanes * (kRecvSize + kReplySize);
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  std::string why;
  if (params_.verbs_windows_always) {
    why = "served through lane windows (verbs-landing = windows)";
  } else if (pool_.traits().nic_writes) {
    if (auto ec = check_memlock(pool_.size() + lane_bytes, "the pool and lane buffers", why))
      throw SetupError(ec.value(), why);
    register_pool(why);
  } else {
    why = std::string(pool_.traits().noun) + ", whose pages a NIC's writes would never dirty";
  }
  if (!pool_mr_) {
    // The bounded path. A window holds one inline persist's worth at least.
    window_ = std::max<size_t>(params_.verbs_window, kMaxInline);
    if (params_.client_minor < proto::kMinorBounded)
      throw SetupError(EPROTONOSUPPORT,
                       "verbs: the pool is " + why +
                           "; its lanes need per-lane landing windows, which this client "
                           "(protocol 1." +
                           std::to_string(params_.client_minor) + ") does not know");
    const size_t bytes = window_ * params_.max_lanes;
    if (auto ec = check_memlock(bytes + lane_bytes, "the lanes' landing windows and buffers", why))
      throw SetupError(ec.value(), why);
    void *p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      throw SetupError(errno, "verbs: cannot allocate " + std::to_string(params_.max_lanes) +
                                  " landing windows of " + std::to_string(window_) + " bytes");
    windows_ = Windows(static_cast<uint8_t *>(p), Unmap{bytes});
    auto mr = register_memory(pd_.get(), windows_.get(), bytes, access, "the landing windows");
    if (!mr) throw SetupError(mr.error().code.value(), mr.error().message);
    pool_mr_ = std::move(mr.value());
    info.method = proto::PersistMethod::kGpspm;  // APM would bypass the copy
    info.flags = kInfoStaged | kInfoBounded;
    info.window = static_cast<uint32_t>(window_);
    info.raddr = reinterpret_cast<uintptr_t>(windows_.get());
    data_path_ = "into " + std::to_string(params_.max_lanes) + " lane windows of " +
                 std::to_string(window_ >> 10) +
                 " KiB (verbs-window), copied into the pool by rpmemd: the pool is " + why;
  } else {
    info.raddr = reinterpret_cast<uintptr_t>(pool_.base());
    data_path_ = std::string("into the pool itself (") + pool_.traits().noun + ")";
  }
  info.rkey = pool_mr_->rkey;
  info.max_inline = kMaxInline;
  provider_data_ = encode(info);
  method_ = info.method;

  RPMEM_LOG_INFO("verbs: listening on %s port %u, device %s, %s",
                 params_.listen_address.empty() ? "*" : params_.listen_address.c_str(), port_,
                 ibv_get_device_name(ctx_->device),
                 info.method == proto::PersistMethod::kApm ? "APM" : "GPSPM");
}

void VerbsTarget::register_pool(std::string &why) {
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  auto mr = register_memory(pd_.get(), pool_.base(), pool_.size(), access, "the pool");
  if (mr) {
    pool_mr_ = std::move(mr.value());
    return;
  }
  // fsdax: no long-term pins of its pages (EOPNOTSUPP). A device with
  // on-demand paging needs no pin.
  why =
      std::string(pool_.traits().noun) + " that cannot be registered (" + mr.error().message + ")";
  if (supports_odp_rc(ctx_)) {
    auto odp = register_memory(pd_.get(), pool_.base(), pool_.size(), access | IBV_ACCESS_ON_DEMAND,
                               "the pool (on-demand paging)");
    if (odp) {
      pool_mr_ = std::move(odp.value());
      RPMEM_LOG_NOTICE("verbs: the pool is registered with on-demand paging");
      return;
    }
    why += ", nor with on-demand paging (" + odp.error().message + ")";
  } else {
    why += ", and the device offers no on-demand paging";
  }
}

VerbsTarget::~VerbsTarget() {
  stop();
  pool_mr_.reset();
  windows_.reset();  // after the region that registered it
  pd_.reset();
  listen_id_.reset();
  channel_.reset();
}

void VerbsTarget::start() {
  acceptor_ = std::thread([this] { accept_loop(); });
}

void VerbsTarget::stop() noexcept {
  if (!state_.request_stop()) return;
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    threads.swap(threads_);
  }
  for (auto &t : threads) t.join();
}

void VerbsTarget::fatal(const std::string &why) { state_.fatal(why); }

void VerbsTarget::accept_loop() {
  for (;;) {
    pollfd p[2] = {{fd_of(channel_.get()), POLLIN, 0}, {state_.wake_fd(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      fatal(std::string("verbs listener: poll failed: ") + strerror(errno));
      return;
    }
    if (p[1].revents || state_.stopping()) return;
    CmEvent ev;
    while (!next_event(channel_.get(), 0, ev)) {
      if (ev.type == RDMA_CM_EVENT_CONNECT_REQUEST)
        on_connect_request(ev.id, ev.private_data);
      else
        RPMEM_LOG_DEBUG("verbs listener: event %s", rdma_event_str(ev.type));
    }
  }
}

void VerbsTarget::on_connect_request(rdma_cm_id *raw_id, const std::vector<uint8_t> &pdata) {
  CmIdPtr id(raw_id);
  auto cd = decode_connect_data(pdata);
  const char *refusal = nullptr;
  if (!cd)
    refusal = "malformed connect request";
  else if (id->verbs != ctx_)
    refusal = "request on another RDMA device";
  else
    refusal = admission_.admit(cd->secret, cd->lane, cd->nlanes);
  if (refusal) {
    RPMEM_LOG_WARN("verbs connect request refused: %s", refusal);
    reject(id.get());
    return;
  }

  auto lane = std::make_unique<Lane>();
  lane->index = cd->lane;
  std::string err;
  auto channel = create_event_channel();
  if (!channel) err = channel.error().message;
  if (err.empty()) {
    lane->channel = std::move(channel.value());
    if (auto ec = migrate(id.get(), lane->channel.get())) err = "rdma_migrate_id: " + ec.message();
  }
  if (err.empty()) {
    auto comp = create_comp_channel(ctx_);
    if (!comp)
      err = comp.error().message;
    else
      lane->comp = std::move(comp.value());
  }
  if (err.empty()) {
    auto cq = create_cq(ctx_, 8, lane->comp.get());
    if (!cq)
      err = cq.error().message;
    else
      lane->cq = std::move(cq.value());
  }
  if (err.empty())
    if (auto ec = create_qp(id.get(), pd_.get(), lane->cq.get(), 2, 1)) err = ec.message();
  if (err.empty()) {
    lane->buf = std::make_unique<uint8_t[]>(kRecvSize + kReplySize);
    auto mr = register_memory(pd_.get(), lane->buf.get(), kRecvSize + kReplySize,
                              IBV_ACCESS_LOCAL_WRITE, "lane buffers");
    if (!mr)
      err = mr.error().message;
    else
      lane->mr = std::move(mr.value());
  }
  if (err.empty())
    if (auto ec = post_recv(id->qp, kWrRecv, lane->buf.get(), kRecvSize, lane->mr->lkey))
      err = "ibv_post_recv: " + ec.message();
  if (err.empty())
    if (auto ec = arm(lane->cq.get())) err = "ibv_req_notify_cq: " + ec.message();
  if (err.empty()) state_.lane_in(cd->nlanes);
  if (err.empty())
    if (auto ec = accept(id.get())) err = "rdma_accept: " + ec.message();
  if (!err.empty()) {
    RPMEM_LOG_ERR("verbs lane %u: %s", cd->lane, err.c_str());
    if (!id->qp) reject(id.get());
    admission_.release(cd->lane);
    lane->id = std::move(id);
    return;
  }
  lane->id = std::move(id);
  RPMEM_LOG_INFO("verbs lane %u of %u accepted", cd->lane, cd->nlanes);
  std::lock_guard lock(mu_);
  try {
    threads_.emplace_back([this, l = std::shared_ptr<Lane>(std::move(lane))] { lane_loop(*l); });
  } catch (const std::exception &e) {  // the lane closes; the session goes on
    RPMEM_LOG_ERR("verbs lane %u dropped: cannot start a thread: %s", cd->lane, e.what());
  }
}

void VerbsTarget::lane_loop(Lane &lane) {
  using Clock = std::chrono::steady_clock;
  bool armed = true;  // armed before rdma_accept
  // After a reply the lane polls its CQ for about as long as the next
  // request has been taking to come (WaitSpin: 1.25x the moving average,
  // 20 us to 200 us; none while such polls keep missing), then sleeps on
  // the completion channel. A wake-up from the channel costs more than an
  // RNIC's round trip (about 100 us under emulation), and a client that
  // persists in a loop sends its next request a turn-around after the reply.
  WaitSpin spin;
  Clock::time_point idle_since{}, spin_until{};
  LaneSpinSlots::Hold slot;  // while polling
  for (;;) {
    Completion wc[4];
    const int n = poll(lane.cq.get(), wc, 4);
    if (n < 0) return fatal("verbs lane: ibv_poll_cq failed");
    // Reply completions first: the one for the previous reply may sit
    // behind the next request in this batch, and serve() waits for it.
    for (int i = 0; i < n; ++i) {
      if (!wc[i].ok) {
        if (!state_.stopping())
          RPMEM_LOG_INFO("verbs lane %u closed: %s", lane.index, wc[i].status);
        disconnect(lane.id.get());
        return;
      }
      if (wc[i].wr_id == kWrReply) lane.reply_busy = false;
    }
    bool served = false;
    for (int i = 0; i < n; ++i) {
      if (wc[i].wr_id != kWrRecv) continue;
      if (!served && idle_since != Clock::time_point{}) {
        const auto now = Clock::now();
        spin.took(now - idle_since);
        if (spin_until != Clock::time_point{}) spin.spun(now <= spin_until);
      }
      served = true;
      if (!serve(lane, wc[i].byte_len)) {
        disconnect(lane.id.get());
        return;
      }
    }
    if (served) {
      idle_since = Clock::now();
      const auto budget = spin.budget();
      spin_until = budget.count() > 0 ? idle_since + budget : Clock::time_point{};
    }
    if (n > 0) continue;
    if (spin_until != Clock::time_point{}) {
      const bool in_time = Clock::now() < spin_until;
      if (in_time && slot.take()) {
        ::sched_yield();  // rxe's and the client's threads may need this CPU
        continue;
      }
      if (!in_time) spin.spun(false);  // polled the whole budget in vain
      spin_until = {};                 // or no slot: sleep, and record nothing
    }
    slot.release();
    if (!armed) {  // arm, then poll once more: nothing slips between the two
      if (arm(lane.cq.get())) return fatal("verbs lane: ibv_req_notify_cq failed");
      armed = true;
      continue;
    }
    pollfd p[3] = {{fd_of(lane.comp.get()), POLLIN, 0},
                   {fd_of(lane.channel.get()), POLLIN, 0},
                   {state_.wake_fd(), POLLIN, 0}};
    if (::poll(p, 3, -1) < 0 && errno != EINTR) return fatal("verbs lane: poll failed");
    if (p[2].revents || state_.stopping()) {
      disconnect(lane.id.get());
      return;
    }
    if (p[1].revents) {
      CmEvent ev;
      while (!next_event(lane.channel.get(), 0, ev)) {
        if (ev.type == RDMA_CM_EVENT_ESTABLISHED) {
          RPMEM_LOG_INFO("verbs lane %u established", lane.index);
          continue;
        }
        RPMEM_LOG_INFO("verbs lane %u: %s", lane.index, rdma_event_str(ev.type));
        disconnect(lane.id.get());
        return;
      }
    }
    if (p[0].revents) {
      consume_events(lane.comp.get());
      armed = false;
    }
  }
}

bool VerbsTarget::serve(Lane &lane, uint32_t byte_len) {
  const uint8_t *msg = lane.buf.get();
  auto h = decode_msg({msg, byte_len});
  const std::string who = "verbs lane " + std::to_string(lane.index);
  if (!h) {
    fatal(who + ": malformed request");
    return false;
  }
  LaneCounters *counters = params_.counters ? params_.counters->lane(lane.index) : nullptr;
  const int64_t started_ns = counters ? LaneCounters::now_ns() : 0;
  std::error_code status;
  if (h->op == MsgOp::kDrain && windows_) {
    if (!drain_window(lane, msg + kMsgHeaderSize, h->length, status)) return false;
  } else if (h->op == MsgOp::kDrain) {
    for (uint64_t i = 0; i < h->length; ++i) {
      uint64_t off, len;
      decode_range(msg + kMsgHeaderSize + i * kRangeSize, off, len);
      if (const char *why = pool_.refusal(off, len, false)) {
        fatal(who + ": drain " + why);
        return false;
      }
      auto ec = pool_.persist(off, len, false);
      if (ec && !status) status = ec;
    }
  } else if (h->op == MsgOp::kRead) {
    const char *why = !windows_             ? "read request on a lane without a window"
                      : h->length > window_ ? "read larger than the window"
                                            : pool_.refusal(h->offset, h->length, false);
    if (why) {
      fatal(who + ": " + why);
      return false;
    }
    std::memcpy(windows_.get() + lane.index * window_, pool_.base() + h->offset, h->length);
  } else if (h->flags & kMsgInline) {
    if (const char *why = pool_.refusal(h->offset, h->length, true)) {
      fatal(who + ": " + why);
      return false;
    }
    const uint8_t *data = msg + kMsgHeaderSize;
    status = pool_.write_durable(h->offset, data, h->length, h->op == MsgOp::kDeepPersist);
  } else {
    // What the NIC wrote into the pool itself; on the bounded path nothing is.
    const char *why = windows_ ? "persist of RDMA-written bytes on a lane with a window"
                               : pool_.refusal(h->offset, h->length, false);
    if (why) {
      fatal(who + ": " + why);
      return false;
    }
    status = pool_.persist(h->offset, h->length, h->op == MsgOp::kDeepPersist);
  }
  // The next request may come as soon as the reply is out: receive first.
  if (auto ec = post_recv(lane.id->qp, kWrRecv, lane.buf.get(), kRecvSize, lane.mr->lkey)) {
    RPMEM_LOG_ERR("%s: ibv_post_recv failed: %s", who.c_str(), ec.message().c_str());
    return false;
  }
  while (lane.reply_busy) {  // the previous reply's SEND; the client is waiting anyway
    Completion wc[1];
    const int n = poll(lane.cq.get(), wc, 1);
    if (n < 0 || (n == 1 && !wc[0].ok)) return false;
    if (n == 1 && wc[0].wr_id == kWrReply) lane.reply_busy = false;
    if (state_.stopping()) return false;
  }
  if (counters) {
    const LaneOp op = h->op == MsgOp::kDrain  ? LaneOp::kDrain
                      : h->op == MsgOp::kRead ? LaneOp::kRead
                                              : LaneOp::kPersist;
    counters->served(op, op == LaneOp::kDrain ? 0 : h->length, started_ns, bool(status));
  }
  encode_reply(static_cast<uint32_t>(status.value()), lane.reply_buf());
  if (auto ec = post_send(lane.id->qp, kWrReply, lane.reply_buf(), kReplySize, lane.mr->lkey)) {
    RPMEM_LOG_ERR("%s: ibv_post_send failed: %s", who.c_str(), ec.message().c_str());
    return false;
  }
  lane.reply_busy = true;
  return true;
}

bool VerbsTarget::drain_window(Lane &lane, const uint8_t *ranges, uint64_t n,
                               std::error_code &status) {
  const uint8_t *window = windows_.get() + lane.index * window_;
  uint64_t at = 0;  // where the next range's bytes are in the window
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t off, len;
    decode_range(ranges + i * kRangeSize, off, len);
    const char *why =
        len > window_ - at ? "drain ranges larger than the window" : pool_.refusal(off, len, false);
    if (why) {
      fatal("verbs lane " + std::to_string(lane.index) + ": drain " + why);
      return false;
    }
    // Bytes of the pool header are never written (refusal() keeps writes
    // out of it; a flush that names it has nothing there to copy).
    const uint64_t from = std::max<uint64_t>(off, pool_.writable_from());
    if (from < off + len) {
      // On pmem whole-word stores (streaming for large copies) and a flush;
      // in the page cache a durable write of the file.
      auto ec = pool_.write_durable(from, window + at + (from - off), off + len - from);
      if (ec && !status) status = ec;
    }
    at += len;
  }
  return true;
}

}  // namespace rpmem::transport::verbs
