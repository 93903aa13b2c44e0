// SPDX-License-Identifier: BSD-3-Clause
// Verbs provider, target side, its control path: the listener, where RDMA
// writes land (the pool itself or lane windows), admitting lanes (their
// requests: verbs_target_data.cc).
#include "common/transport/verbs/verbs_target.h"

#include "common/log.h"
#include "common/transport/copy_words.h"
#include "common/transport/lane_admission.h"
#include "common/transport/spin_gauge.h"
#include "common/transport/verbs/verbs_target_lane.h"
#include "common/transport/verbs/verbs_wire.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

namespace rpmem::transport::verbs {

namespace {

// Where the listener binds (any address for an empty one), which goes to
// the client in `info` too. No RDMA on a loopback address.
sockaddr_storage listen_address(const std::string &address, ProviderInfo &info) {
  sockaddr_storage ss{};
  if (address.empty()) {
    auto *in6 = reinterpret_cast<sockaddr_in6 *>(&ss);
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_any;
  } else {
    auto *in = reinterpret_cast<sockaddr_in *>(&ss);
    auto *in6 = reinterpret_cast<sockaddr_in6 *>(&ss);
    if (::inet_pton(AF_INET, address.c_str(), &in->sin_addr) == 1) {
      in->sin_family = AF_INET;
      info.family = AF_INET;
      std::memcpy(info.addr.data(), &in->sin_addr, 4);
      if ((ntohl(in->sin_addr.s_addr) >> 24) == 127)
        throw SetupError(EADDRNOTAVAIL, "verbs: no RDMA on the loopback address " + address);
    } else if (::inet_pton(AF_INET6, address.c_str(), &in6->sin6_addr) == 1) {
      in6->sin6_family = AF_INET6;
      info.family = AF_INET6;
      std::memcpy(info.addr.data(), &in6->sin6_addr, 16);
      if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
        throw SetupError(EADDRNOTAVAIL, "verbs: no RDMA on the loopback address ::1");
    } else {
      throw SetupError(EINVAL, "verbs: bad listen address '" + address + "'");
    }
  }
  return ss;
}

}  // namespace

VerbsTarget::VerbsTarget(TargetPool &pool, TargetParams params)
    : pool_(pool),
      params_(std::move(params)),
      state_(params_.on_fatal),
      admission_(params_.secret, params_.max_lanes, claim_rules(params_.client_minor, false)),
      slots_(params_.max_lanes) {
  ProviderInfo info;
  info.method = params_.persist_method;
  sockaddr_storage ss = listen_address(params_.listen_address, info);
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
  land(info);
  info.rkey = pool_mr_->rkey;
  info.max_inline = kMaxInline;
  provider_data_ = encode(info);
  method_ = info.method;

  RPMEM_LOG_INFO("verbs: listening on %s port %u, device %s, %s",
                 params_.listen_address.empty() ? "*" : params_.listen_address.c_str(), port_,
                 ibv_get_device_name(ctx_->device), proto::method_name(info.method));
}

// Where RDMA writes land: the pool itself, registered, where a NIC may write
// into it (and it registers), else a window for each lane (verbs_target.h).
void VerbsTarget::land(ProviderInfo &info) {
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
  std::vector<Slot> slots;
  {
    std::lock_guard lock(mu_);
    slots.swap(slots_);
  }
  for (auto &s : slots)
    if (s.thread.joinable()) s.thread.join();
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
  bool returned = false;
  if (!cd)
    refusal = "malformed connect request";
  else if (id->verbs != ctx_)
    refusal = "request on another RDMA device";
  else
    refusal = admission_.admit(cd->proof, cd->lane, cd->nlanes, cd->epoch, returned);
  if (refusal) {
    RPMEM_LOG_WARN("verbs connect request refused: %s", refusal);
    reject(id.get());
    return;
  }
  if (returned) retire(cd->lane);

  auto lane = std::make_unique<Lane>();
  lane->index = cd->lane;
  std::string err = set_up(*lane, id.get());
  if (err.empty() && !returned) state_.lane_in(cd->nlanes);
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
  if (returned) {
    RPMEM_LOG_NOTICE("verbs lane %u of %u came back, epoch %u", cd->lane, cd->nlanes,
                     static_cast<unsigned>(cd->epoch));
    if (params_.counters) params_.counters->lane_returned();
  } else {
    RPMEM_LOG_INFO("verbs lane %u of %u accepted", cd->lane, cd->nlanes);
  }
  std::lock_guard lock(mu_);
  Slot &slot = slots_[cd->lane];
  try {
    slot.lane = std::shared_ptr<Lane>(std::move(lane));
    slot.thread = std::thread([this, l = slot.lane] { lane_loop(*l); });
  } catch (const std::exception &e) {  // the lane closes; the session goes on
    RPMEM_LOG_ERR("verbs lane %u dropped: cannot start a thread: %s", cd->lane, e.what());
    if (slot.lane) disconnect(slot.lane->id.get());
  }
}

// The lane's own handles for the queue pair of `id` (not yet accepted): its
// wake-up, rdma_cm channel, completion channel and queue, the queue pair, a
// posted receive buffer; the error's text, or empty.
std::string VerbsTarget::set_up(Lane &lane, rdma_cm_id *id) {
  std::string err;
  lane.kick = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (lane.kick < 0) err = std::string("eventfd: ") + strerror(errno);
  if (err.empty()) {
    auto channel = create_event_channel();
    if (!channel)
      err = channel.error().message;
    else
      lane.channel = std::move(channel.value());
  }
  if (err.empty()) {
    if (auto ec = migrate(id, lane.channel.get())) err = "rdma_migrate_id: " + ec.message();
  }
  if (err.empty()) {
    auto comp = create_comp_channel(ctx_);
    if (!comp)
      err = comp.error().message;
    else
      lane.comp = std::move(comp.value());
  }
  if (err.empty()) {
    auto cq = create_cq(ctx_, 8, lane.comp.get());
    if (!cq)
      err = cq.error().message;
    else
      lane.cq = std::move(cq.value());
  }
  if (err.empty())
    if (auto ec = create_qp(id, pd_.get(), lane.cq.get(), 2, 1)) err = ec.message();
  if (err.empty()) {
    lane.buf = std::make_unique<uint8_t[]>(kRecvSize + kReplySize);
    auto mr = register_memory(pd_.get(), lane.buf.get(), kRecvSize + kReplySize,
                              IBV_ACCESS_LOCAL_WRITE, "lane buffers");
    if (!mr)
      err = mr.error().message;
    else
      lane.mr = std::move(mr.value());
  }
  if (err.empty())
    if (auto ec = post_recv(id->qp, kWrRecv, lane.buf.get(), kRecvSize, lane.mr->lkey))
      err = "ibv_post_recv: " + ec.message();
  if (err.empty())
    if (auto ec = arm(lane.cq.get())) err = "ibv_req_notify_cq: " + ec.message();
  return err;
}

void VerbsTarget::retire(unsigned index) {
  Slot old;
  {
    std::lock_guard lock(mu_);
    old = std::move(slots_[index]);
  }
  if (old.lane) {
    old.lane->replaced.store(true);
    const uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(old.lane->kick, &one, sizeof(one));
    disconnect(old.lane->id.get());  // its queue pair to the error state: nothing lands
  }
  if (old.thread.joinable()) old.thread.join();
}

}  // namespace rpmem::transport::verbs
