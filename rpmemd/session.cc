// SPDX-License-Identifier: BSD-3-Clause
// One client session of rpmemd.
#include "rpmemd/session.h"

#include "common/log.h"
#include "common/transport/verbs/verbs_wire.h"
#include "rpmemd/session_log.h"
#include "rpmemd/session_tokens.h"
#include "rpmemd/signal_fd.h"

#include <signal.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

namespace rpmemd {

using rpmem::errc;
using rpmem::proto::MsgType;
using rpmem::proto::Status;

namespace {

std::atomic<uint64_t> g_reopened{0};

}  // namespace

std::error_code remove_pool(PoolStore &store, const std::string &pool_set, bool force,
                            bool remove_poolset) noexcept {
  std::string poolset_path;
  const bool has_path = !store.path_of(pool_set, poolset_path);
  auto ec = store.remove(pool_set, force, remove_poolset);
  // Removed, the pool has no session any more; refused (it is open, say),
  // it keeps the one it has.
  if (!ec && has_path) session_tokens::forget(poolset_path);
  return ec;
}

void Session::count_reopened() noexcept { g_reopened.fetch_add(1, std::memory_order_relaxed); }

SessionParams session_params(const Config &config) {
  SessionParams p;
  p.transports = rpmem::transport::available_transports();
  p.persist_apm = config.persist_apm;
  p.max_lanes = config.max_lanes;
  p.data_tls = config.data_tls;
  p.data_seal = config.data_seal;
  p.durability_visible = config.durability_visible;
  p.visible_writeback = std::chrono::milliseconds(config.visible_writeback_ms);
  p.target.nthreads = config.nthreads;
  p.target.verbs_window = config.verbs_window;
  p.target.verbs_windows_always = config.verbs_windows_always;
  p.target.peer_timeout = config.peer_timeout;
  return p;
}

Session::Session(PoolStore &store, ControlStream &io, SessionParams params, int signal_fd)
    : store_(store), io_(io), params_(std::move(params)), signal_fd_(signal_fd) {
  fatal_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (signal_fd_ >= 0) io_.add_wake_fd(signal_fd_);
  if (fatal_fd_ >= 0) io_.add_wake_fd(fatal_fd_);
  if (params_.target.peer_timeout.count() > 0) {
    idle_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (idle_fd_ >= 0) io_.add_wake_fd(idle_fd_);
  }
}

// The client's keepalives must keep coming: the session ends when the
// control channel has been silent for peer_timeout.
void Session::arm_idle_timer() noexcept {
  if (idle_fd_ < 0) return;
  const auto ms = params_.target.peer_timeout.count();
  itimerspec its{};
  its.it_value.tv_sec = static_cast<time_t>(ms / 1000);
  its.it_value.tv_nsec = static_cast<long>(ms % 1000) * 1000000;
  ::timerfd_settime(idle_fd_, 0, &its, nullptr);
}

Session::~Session() {
  release(false);
  if (fatal_fd_ >= 0) ::close(fatal_fd_);
  if (idle_fd_ >= 0) ::close(idle_fd_);
}

std::error_code Session::release(bool remove) noexcept {
  // A pool whose client could run ahead of it, left without a close: it
  // may be behind its master until that client comes back.
  if (pool_ && ahead_ && !token_path_.empty()) {
    RPMEM_LOG_NOTICE(
        "pool set '%s' may be behind its master from now on (its session, which could run "
        "ahead of it, ended without a close)",
        pool_set_.c_str());
    try {
      if (params_.behind)
        params_.behind->ended(pool_set_, params_.status ? params_.status->cn() : "");
    } catch (...) {
    }
  }
  ahead_ = false;
  if (target_) target_->stop();
  if (target_ && params_.status) params_.status->pool_closed();
  target_.reset();
  write_back_.reset();  // before the pool's own write-back at its close
  grant_.release();
  view_.reset();
  if (!pool_) return {};
  // Logged in PMDK's order: closing, closed, removing, removed (the parts
  // are unlinked before the pool is unlocked).
  RPMEM_LOG_NOTICE("closing pool");
  std::error_code removed, synced;
  if (remove)
    removed = pool_->remove_parts();
  else
    synced = pool_->persister().sync_all();  // a failure is the close's answer
  if (synced)
    RPMEM_LOG_ERR("pool set '%s' is not durable at its close: %s", pool_set_.c_str(),
                  synced.message().c_str());
  pool_.reset();  // durable, unmapped, unlocked
  RPMEM_LOG_INFO("pool closed");
  if (remove) {
    RPMEM_LOG_NOTICE("removing '%s'", pool_set_.c_str());
    if (removed)
      RPMEM_LOG_ERR("removing pool '%s' failed: %s", pool_set_.c_str(), removed.message().c_str());
    else
      RPMEM_LOG_INFO("removed '%s'", pool_set_.c_str());
  }
  return synced;
}

std::error_code Session::handle_pool_request(MsgType type, const proto::Bytes &payload,
                                             SessionEnd &end) {
  const bool create = type == MsgType::kCreate;
  auto req = proto::decode_pool_request(payload);
  if (!req) {
    RPMEM_LOG_ERR("malformed %s request", create ? "create" : "open");
    return errc(EPROTO);
  }
  RPMEM_LOG_NOTICE("%s request:", create ? "create" : "open");
  RPMEM_LOG_NOTICE("\tpool descriptor: '%s'", req->pool_set.c_str());
  RPMEM_LOG_NOTICE("\tpool size: %llu", static_cast<unsigned long long>(req->pool_size));
  RPMEM_LOG_NOTICE("\tnlanes: %u", req->nlanes);
  RPMEM_LOG_NOTICE("\tprovider: %s", provider_names(req->transports).c_str());
  // PMDK's request carried the inline capacity of a lane (8192); ours is
  // fixed by the protocol: what one lane message carries inline.
  RPMEM_LOG_NOTICE("\tbuff_size: %u", rpmem::transport::verbs::kMaxInline);
  if (create) {
    RPMEM_LOG_NOTICE("pool attributes:");
    log_pool_attr(req->attr.is_zero() ? nullptr : &req->attr);
  }
  proto::PoolResponse resp;
  resp.status = open_or_create(type, *req, resp);
  if (resp.status != Status::kSuccess) resp.lane_psk.clear();
  // PMDK logged the response block only for a request that succeeded.
  if (resp.status != Status::kSuccess)
    RPMEM_LOG_DEBUG("%s request response: (status = %u)", create ? "create" : "open",
                    static_cast<unsigned>(resp.status));
  // Before the response: once it is sent, the lanes may come (and be
  // logged by the data listener) before this thread logs anything more.
  if (resp.status == Status::kSuccess) RPMEM_LOG_INFO("waiting for in-band connection");
  if (auto ec = io_.write_all(proto::encode(resp))) return ec;
  if (resp.status != Status::kSuccess) {
    end = SessionEnd::kRequestFailed;
    return {};
  }
  return {};
}

std::error_code Session::handle_set_attr(const proto::Bytes &payload) {
  auto req = proto::decode_set_attr(payload);
  if (!req) {
    RPMEM_LOG_ERR("malformed set_attr request");
    return errc(EPROTO);
  }
  RPMEM_LOG_NOTICE("set attributes request");
  Status status = Status::kFatal;
  if (pool_) {
    const rpmem::PoolAttr *attr = req->attr.is_zero() ? nullptr : &req->attr;
    auto ec = pool_->set_attr(attr);
    if (ec) {
      RPMEM_LOG_ERR("cannot set pool attributes -- '%s': %s", pool_set_.c_str(),
                    ec.message().c_str());
    } else {
      RPMEM_LOG_NOTICE("new pool attributes:");
      log_pool_attr(attr);
      if (target_ && pool_->has_headers()) target_->pool_changed(0, rpmem::kPoolHdrSize);
    }
    status = proto::errno_to_status(ec.value());
  } else {
    RPMEM_LOG_ERR("pool not opened");
  }
  return io_.write_all(proto::encode(MsgType::kSetAttrResp, proto::StatusResponse{status}));
}

std::error_code Session::handle_close(const proto::Bytes &payload) {
  auto req = proto::decode_close(payload);
  if (!req) {
    RPMEM_LOG_ERR("malformed close request");
    return errc(EPROTO);
  }
  RPMEM_LOG_NOTICE("close request");
  Status status = Status::kSuccess;
  if (!token_path_.empty()) {  // closed by its client: nobody is to reopen it
    session_tokens::forget(token_path_);
    token_path_.clear();
  }
  ahead_ = false;  // nor is it behind anything
  if (pool_) {
    if (auto ec = release(created_ && (req->flags & proto::kCloseRemove)))
      status = proto::errno_to_status(ec.value());
  } else {
    RPMEM_LOG_ERR("pool not opened");
    status = Status::kFatal;
  }
  RPMEM_LOG_NOTICE("close request response (status = %u)", static_cast<unsigned>(status));
  return io_.write_all(proto::encode(MsgType::kCloseResp, proto::StatusResponse{status}));
}

std::error_code Session::handle_remove(const proto::Bytes &payload) {
  auto req = proto::decode_remove(payload);
  if (!req) {
    RPMEM_LOG_ERR("malformed remove request");
    return errc(EPROTO);
  }
  RPMEM_LOG_NOTICE("remove request");
  RPMEM_LOG_NOTICE("\tpool descriptor: '%s'", req->pool_set.c_str());
  Status status = Status::kFatal;
  if (pool_) {
    RPMEM_LOG_ERR("remove request in a session that has a pool open");
  } else {
    auto ec = remove_pool(store_, req->pool_set, req->flags & proto::kRemoveForce,
                          req->flags & proto::kRemovePoolSet);
    if (ec)
      RPMEM_LOG_ERR("removing '%s' failed: %s", req->pool_set.c_str(), ec.message().c_str());
    else
      RPMEM_LOG_NOTICE("removed '%s'", req->pool_set.c_str());
    status = proto::errno_to_status(ec.value());
  }
  return io_.write_all(proto::encode(MsgType::kRemoveResp, proto::StatusResponse{status}));
}

SessionEnd Session::run() noexcept try {
  proto::Bytes payload;
  for (;;) {
    proto::FrameHeader hdr{};
    int woken = -1;
    std::error_code ec = io_.read_frame(hdr, payload, woken);
    if (ec == std::errc::interrupted) {
      if (woken == signal_fd_) {
        RPMEM_LOG_NOTICE("signal received: making the pool durable and exiting");
        release(false);
        return SessionEnd::kSignal;
      }
      if (woken == idle_fd_) {
        RPMEM_LOG_NOTICE("client silent for %lld ms (its keepalives stopped): ending the session",
                         static_cast<long long>(params_.target.peer_timeout.count()));
        release(false);
        return SessionEnd::kDisconnected;
      }
      RPMEM_LOG_ERR("a data lane failed: ending the session");
      release(false);
      return SessionEnd::kFatal;
    }
    if (ec == std::errc::connection_reset) {
      RPMEM_LOG_NOTICE("client disconnected");
      release(false);
      return SessionEnd::kDisconnected;
    }
    if (ec) {
      RPMEM_LOG_ERR("control channel: %s", ec.message().c_str());
      release(false);
      return SessionEnd::kFatal;
    }
    if (hdr.type == MsgType::kKeepalive && !keepalives_) {
      keepalives_ = true;
      RPMEM_LOG_DEBUG("the client sends keepalives: %lld ms of silence end the session",
                      static_cast<long long>(params_.target.peer_timeout.count()));
    }
    if (keepalives_) arm_idle_timer();
    SessionEnd end = SessionEnd::kClosed;
    bool done = false;
    switch (hdr.type) {
      case MsgType::kKeepalive:  // no reply
        if (hdr.size != 0) ec = errc(EPROTO);
        break;
      case MsgType::kCreate:
      case MsgType::kOpen:
        ec = handle_pool_request(hdr.type, payload, end);
        done = end == SessionEnd::kRequestFailed;
        break;
      case MsgType::kSetAttr:
        ec = handle_set_attr(payload);
        break;
      case MsgType::kPoolState:  // no reply
        ec = handle_pool_state(payload);
        break;
      case MsgType::kChecksum:
        ec = handle_checksum(payload);
        break;
      case MsgType::kClose:
        ec = handle_close(payload);
        done = true;
        break;
      case MsgType::kRemove:
        ec = handle_remove(payload);
        done = true;
        break;
      default:
        RPMEM_LOG_ERR("unexpected message type %u", static_cast<unsigned>(hdr.type));
        ec = errc(EPROTO);
    }
    if (ec) {
      RPMEM_LOG_ERR("control channel: %s", ec.message().c_str());
      release(false);
      return SessionEnd::kFatal;
    }
    if (done) return end;
  }
} catch (const std::exception &e) {
  RPMEM_LOG_ERR("session failed: %s", e.what());
  release(false);
  return SessionEnd::kFatal;
}

int termination_signal_fd() noexcept { return blocked_signal_fd({SIGTERM, SIGINT}); }

uint64_t sessions_reopened() noexcept { return g_reopened.load(std::memory_order_relaxed); }

}  // namespace rpmemd
