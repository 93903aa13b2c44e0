// SPDX-License-Identifier: BSD-3-Clause
// Verbs provider, client side, the control path: where the lanes connect,
// and each lane's setup (rdma_cm id, protection domain and the pool's
// registration, completion queue, queue pair, buffers) and connection,
// first and when it comes back; the requests are in
// verbs_initiator_datapath.cc.
#include "common/transport/verbs/verbs_initiator.h"

#include "common/log.h"
#include "common/text.h"
#include "common/transport/lane_proof.h"
#include "common/transport/verbs/verbs_lane.h"
#include "common/transport/verbs/verbs_rdma.h"
#include "common/transport/verbs/verbs_wire.h"

#include <arpa/inet.h>
#include <netdb.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

namespace rpmem::transport::verbs {

namespace {

bool is_loopback(const sockaddr *sa) {
  if (sa->sa_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in *>(sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6) {
    const auto *a = &reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(a)) return true;
    return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
  }
  return false;
}

// Where lane connections go: the target host, or, when that is a loopback
// address (no RDMA route), the address the daemon on this machine listens on.
Result<sockaddr_storage> destination(const InitiatorParams &params, const ProviderInfo &info) {
  sockaddr_storage ss{};
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *res = nullptr;
  const std::string port = std::to_string(params.port);
  if (int rc = ::getaddrinfo(params.host.c_str(), port.c_str(), &hints, &res); rc != 0)
    return Error{errc(EHOSTUNREACH), "cannot resolve '" + params.host + "': " + ::gai_strerror(rc)};
  std::memcpy(&ss, res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  if (!is_loopback(reinterpret_cast<sockaddr *>(&ss)) || info.family == 0) return ss;
  ss = {};
  if (info.family == AF_INET) {
    auto *in = reinterpret_cast<sockaddr_in *>(&ss);
    in->sin_family = AF_INET;
    std::memcpy(&in->sin_addr, info.addr.data(), 4);
    in->sin_port = htons(params.port);
  } else {
    auto *in6 = reinterpret_cast<sockaddr_in6 *>(&ss);
    in6->sin6_family = AF_INET6;
    std::memcpy(&in6->sin6_addr, info.addr.data(), 16);
    in6->sin6_port = htons(params.port);
  }
  char text[INET6_ADDRSTRLEN] = "?";
  ::inet_ntop(info.family, info.addr.data(), text, sizeof(text));
  RPMEM_LOG_INFO("verbs: '%s' is a loopback address; lanes connect to %s", params.host.c_str(),
                 text);
  return ss;
}

void set_port(sockaddr_storage &ss, uint16_t port) {
  if (ss.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in *>(&ss)->sin_port = htons(port);
  else if (ss.ss_family == AF_INET6)
    reinterpret_cast<sockaddr_in6 *>(&ss)->sin6_port = htons(port);
}

uint16_t port_of(const sockaddr_storage &ss) {
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in *>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6 *>(&ss)->sin6_port);
  return 0;
}

// Between two tries to connect a lane again that fail at once (a refusal,
// no route), the pause before the next.
constexpr std::chrono::milliseconds kDialPause{200};

}  // namespace

std::optional<Error> VerbsLane::dial(uint16_t epoch, int timeout_ms) noexcept try {
  const std::string name = "lane " + std::to_string(index_);
  Shared &sh = *shared_;
  // Where the session is now: it moves when the client reopens its pool on
  // a restarted service.
  sockaddr_storage dst = sh.dst;
  proto::Secret secret = sh.secret;
  std::optional<ProviderInfo> moved;
  proto::Bytes moved_data;
  if (sh.route) {
    LaneRoute::Where w = sh.route->get();
    set_port(dst, w.port);
    secret = w.secret;
    if (w.provider_data != provider_data_) {
      moved = decode_provider_info(w.provider_data);
      if (!moved) return Error{errc(EPROTO), "invalid verbs provider data from the target"};
      if (const char *why = incompatible(*moved)) return Error{errc(ECONNRESET), name + ": " + why};
      moved_data = std::move(w.provider_data);
    }
  }
  Connection c;
  auto channel = create_event_channel();
  if (!channel) return channel.error();
  c.channel = std::move(channel.value());
  auto id = create_id(c.channel.get());
  if (!id) return id.error();
  c.id = std::move(id.value());
  const bool again = epoch > 0;  // a try to come back: the caller logs the outcome
  if (auto ec = resolve(c.id.get(), reinterpret_cast<sockaddr *>(&dst), timeout_ms, again))
    return Error{ec.value() == EHOSTUNREACH ? ec : errc(ECONNRESET),
                 "cannot reach " + sh.host + " over RDMA for " + name + ": " + ec.message()};
  ibv_context *ctx = c.id->verbs;
  if (!sh.pd) {
    auto pd = alloc_pd(ctx);
    if (!pd) return pd.error();
    sh.pd = std::move(pd.value());
    auto mr = register_memory(sh.pd.get(), base_, sh.pool_size, 0, "the local pool");
    if (!mr) return mr.error();
    sh.pool_mr = std::move(mr.value());
  } else if (sh.pd->context != ctx) {
    return Error{errc(ECONNRESET), name + " resolved to another RDMA device"};
  }
  auto comp = create_comp_channel(ctx);
  if (!comp) return comp.error();
  c.comp = std::move(comp.value());
  auto cq = create_cq(ctx, static_cast<int>(wq_size_ + 8), c.comp.get());
  if (!cq) return cq.error();
  c.cq = std::move(cq.value());
  if (auto ec = create_qp(c.id.get(), sh.pd.get(), c.cq.get(), wq_size_ + 2, 1))
    return Error{ec, "cannot create the queue pair of " + name};
  if (!buf_) {
    const size_t bsize = buffer_size(max_inline_);
    buf_ = std::make_unique<uint8_t[]>(bsize);
    auto bmr =
        register_memory(sh.pd.get(), buf_.get(), bsize, IBV_ACCESS_LOCAL_WRITE, "lane buffers");
    if (!bmr) return bmr.error();
    buf_mr_ = std::move(bmr.value());
  }
  if (auto ec = post_reply_buffer(c.id->qp)) return Error{ec, "ibv_post_recv failed for " + name};

  if (sh.comeback) [[maybe_unused]]
    auto ignored = set_ack_timeout(c.id.get(), kAckTimeout);  // logged; the default then
  ConnectData cd{{}, index_, epoch, sh.nlanes};
  if (auto ec = prove(secret, {index_, epoch, sh.nlanes}, sh.proofs, cd.proof))
    return Error{ec, "cannot prove the session secret for " + name};
  uint8_t pdata[kConnectDataSize];
  encode(cd, pdata);
  std::error_code ec = connect(c.id.get(), pdata, sizeof(pdata), sh.comeback ? kRetryCount : 7);
  if (!ec)
    ec = expect_event(c.channel.get(), RDMA_CM_EVENT_ESTABLISHED, timeout_ms, "connect", again);
  if (ec) return Error{errc(ECONNRESET), name + " refused by the target: " + ec.message()};
  install(c);
  epoch_ = epoch;
  if (moved) {
    adopt(*moved, std::move(moved_data));
    RPMEM_LOG_NOTICE("verbs lane %u: on the reopened pool's session (port %u)", index_,
                     static_cast<unsigned>(port_of(dst)));
  }
  return std::nullopt;
} catch (const std::bad_alloc &) {
  return Error{errc(ENOMEM), "out of memory connecting a verbs lane"};
}

const char *VerbsLane::incompatible(const ProviderInfo &info) const noexcept {
  const uint64_t window = (info.flags & kInfoBounded) ? info.window : 0;
  if (window != window_) return "the restarted service lands RDMA writes another way";
  if (std::min<uint32_t>(info.max_inline, kMaxInline) < max_inline_)
    return "the restarted service takes fewer inline bytes";
  return nullptr;
}

void VerbsLane::adopt(const ProviderInfo &info, proto::Bytes data) {
  raddr_ = info.raddr;
  rkey_ = info.rkey;
  staged_ = (info.flags & kInfoStaged) != 0;
  window_raddr_ = info.raddr + uint64_t{index_} * window_;
  use_method(info.method);
  provider_data_ = std::move(data);
}

std::error_code VerbsLane::come_back() noexcept {
  std::string last = cause_;
  RPMEM_LOG_WARN("verbs lane %u: %s; connecting again", index_, last.c_str());
  const auto stalled_since = progress_;
  const auto deadline = stalled_since + std::chrono::milliseconds(timeout_ms_);
  for (;;) {
    if (dead_.load(std::memory_order_relaxed)) return errc(ECONNRESET);
    const auto start = Clock::now();
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - start);
    if (left.count() <= 0 || epoch_ == UINT16_MAX)
      return give_up(no_answer_text(std::chrono::milliseconds(timeout_ms_)) +
                     " (last try: " + last + ")");
    // Every try at an epoch of its own: the target may have admitted the
    // last one (its answer lost), and takes no epoch twice.
    if (auto err = dial(++epoch_, static_cast<int>(std::min(left, kDialTry).count()))) {
      last = err->message;
      RPMEM_LOG_DEBUG("verbs lane %u: %s", index_, last.c_str());
      // A refusal comes at once: the next try a little later.
      const auto next = std::min<Clock::time_point>(start + kDialPause, deadline);
      while (Clock::now() < next && !dead_.load(std::memory_order_relaxed))
        std::this_thread::sleep_for(std::min<Clock::duration>(next - Clock::now(), kDialPause));
      continue;
    }
    if (dead_.load(std::memory_order_relaxed)) {  // shut down while it dialed
      std::lock_guard lock(id_mu_);
      disconnect(conn_.id.get());
      return errc(ECONNRESET);
    }
    RPMEM_LOG_NOTICE("verbs lane %u: connected again (epoch %u) after %lld ms", index_,
                     static_cast<unsigned>(epoch_),
                     static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                Clock::now() - stalled_since)
                                                .count()));
    broken_ = false;
    if (auto ec = replay(); ec && broken_) {
      last = cause_;
      continue;
    } else if (ec) {
      return ec;  // dead (the timeout)
    }
    return {};
  }
}

std::error_code VerbsLane::replay() noexcept {
  if (window_ > 0) {  // the window as it was, range after range
    uint64_t at = 0;
    for (const auto &r : landed_) {
      if (auto ec = post_writes(r.offset, r.length, window_raddr_ + at)) return ec;
      at += r.length;
    }
    return {};
  }
  for (const auto &r : ranges_.ranges())
    if (auto ec = post_writes(r.offset, r.length, raddr_ + r.offset)) return ec;
  return {};
}

Result<std::vector<std::unique_ptr<InitiatorLane>>> connect_lanes(const InitiatorParams &params) {
  auto info = decode_provider_info(params.provider_data);
  if (!info) return Error{errc(EPROTO), "invalid verbs provider data from the target"};
  auto dst = destination(params, *info);
  if (!dst) return dst.error();
  const int timeout_ms = static_cast<int>(params.timeout.count());
  const unsigned wq = std::clamp(params.work_queue_size, 2u, 4096u);
  const uint32_t max_inline = std::min<uint32_t>(info->max_inline, kMaxInline);

  std::string why;
  if (auto ec = check_memlock(params.pool_size + params.nlanes * VerbsLane::buffer_size(max_inline),
                              "the local pool and lane buffers", why))
    return Error{ec, why};

  auto shared = std::make_shared<VerbsLane::Shared>();
  shared->dst = dst.value();
  shared->host = params.host;
  shared->secret = params.secret;
  shared->proofs = params.proofs;
  shared->nlanes = params.nlanes;
  shared->pool_size = params.pool_size;
  shared->comeback = params.comeback;
  shared->route = params.route;
  shared->provider_data = params.provider_data;
  std::vector<std::unique_ptr<InitiatorLane>> lanes;
  lanes.reserve(params.nlanes);
  for (unsigned i = 0; i < params.nlanes; ++i) {
    auto lane = std::make_unique<VerbsLane>(shared, *info, i, params.local_base, wq, timeout_ms);
    lane->use_method(info->method);
    if (auto err = lane->dial(0, timeout_ms)) return *err;
    lanes.push_back(std::move(lane));
  }
  RPMEM_LOG_INFO("verbs: %u lanes connected, %s, work queue %u%s%s", params.nlanes,
                 proto::method_name(info->method), wq,
                 (info->flags & kInfoBounded) ? ", writes through landing windows" : "",
                 params.comeback ? ", lanes come back" : "");
  return lanes;
}

}  // namespace rpmem::transport::verbs
