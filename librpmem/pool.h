// SPDX-License-Identifier: BSD-3-Clause
// Pool: one remote pool as the client sees it -- the control channel to its
// rpmemd, and the lanes of the data plane.
//
// Errors: every method returns 0 or a positive errno value and leaves a
// message (set_errormsg) on failure. Bad arguments fail only that call. A
// lane whose connection breaks or stalls connects again on its own within
// RPMEM_TIMEOUT (the application sees latency); losing the target for good
// (past that bound, or its rpmemd ending the control channel) makes every
// later data-path call fail at once with ECONNRESET and a message naming
// the cause (sticky), and close() return at once.
// Thread-safety: many threads may use one Pool, one thread per lane at a
// time. set_attr may be called from any thread (it serialises itself);
// close() must not race with anything.
#ifndef RPMEM_LIBRPMEM_POOL_H
#define RPMEM_LIBRPMEM_POOL_H

#include "common/pool_attr.h"
#include "common/transport/transport.h"
#include "librpmem/control_channel.h"
#include "librpmem/settings.h"
#include "librpmem/target_address.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rpmem {

struct ReopenTry;  // pool_reopen.cc

struct PoolArgs {
  std::string target;
  std::string pool_set;
  void *addr = nullptr;
  size_t size = 0;
  unsigned nlanes = 0;
  bool create = false;
  PoolAttr create_attr{};  // create: all-zero means "no headers"
};

class Pool {
 public:
  // Creates or opens the remote pool. On success `nlanes` holds the lanes
  // granted and, for open, `open_attr` (if not null) the stored attributes.
  static int connect(const PoolArgs &args, std::unique_ptr<Pool> &out, unsigned &nlanes,
                     PoolAttr *open_attr) noexcept;
  static int remove(const std::string &target, const std::string &pool_set, int flags) noexcept;

  ~Pool();
  Pool(const Pool &) = delete;
  Pool &operator=(const Pool &) = delete;

  int persist(size_t offset, size_t length, unsigned lane, unsigned flags) noexcept;
  int deep_persist(size_t offset, size_t length, unsigned lane) noexcept;
  int flush(size_t offset, size_t length, unsigned lane, unsigned flags) noexcept;
  int drain(unsigned lane, unsigned flags) noexcept;
  int read(void *buf, size_t offset, size_t length, unsigned lane) noexcept;
  int set_attr(const PoolAttr *attr) noexcept;
  // Ends the session; the Pool is unusable afterwards (but still owned by
  // the caller, who frees it).
  int close() noexcept;

 private:
  Pool(Settings settings, std::unique_ptr<ControlChannel> channel, const uint8_t *base,
       size_t size);

  // Remembers what reopening the pool on a restarted service takes.
  void keep_for_reopen(const TargetAddress &target, const proto::PoolRequest &req,
                       const proto::PoolResponse &resp, const PoolAttr &attr,
                       std::shared_ptr<transport::LaneRoute> route);
  // Argument and state checks shared by the data-path calls.
  int check(size_t offset, size_t length, unsigned lane, bool guard_header) noexcept;
  int lane_result(std::error_code ec, const char *op, unsigned lane) noexcept;
  // persist and flush: `op` of [offset, +length) on `lane`, called `name`
  // in the messages.
  // EINVAL for flags outside `allowed`, or both levels.
  static int check_flags(unsigned flags, unsigned allowed) noexcept;
  unsigned lane_flags(unsigned flags) const noexcept;
  int write_range(transport::DataOp op, const char *name, size_t offset, size_t length,
                  unsigned lane, unsigned flags) noexcept;
  // The target is lost for good: every lane fails now, every later call at
  // once; `why` names the cause (the first one stays).
  void lose(const std::string &why) noexcept;
  std::string lost_why() const;
  // A thread that sends a keepalive on the control channel every
  // kKeepaliveInterval, so that rpmemd can tell a live but quiet client
  // from one that vanished or was stopped (only to a daemon that takes
  // them), and that watches the channel: when rpmemd ends it, the pool is
  // lost at once rather than after the lanes' bound.
  void start_keepalive(bool send_keepalives);
  void stop_keepalive() noexcept;
  // `hangup_fd`: the thread's own copy of the channel's descriptor; a
  // reopen replaces it (the caller closes the last one).
  void watch_channel(int &hangup_fd, bool send_keepalives) noexcept;
  // The service ended the session (it restarted): opens the pool again as
  // the same session (its token) within RPMEM_TIMEOUT, checks that it is
  // the same pool, and points the lanes at the new session. False when
  // that cannot be (the pool is lost then) or close() stopped it;
  // `hangup` becomes the new channel's.
  bool reopen(int &hangup) noexcept;
  // Puts a reopened session in this one's place; false with `why` when the
  // pool it opened is not this one, or not served the same way.
  bool take_reopened(ReopenTry &t, int &hangup, std::string &why);
  bool stop_requested() const noexcept;

  Settings settings_;
  std::unique_ptr<ControlChannel> channel_;
  std::mutex control_mu_;  // serialises control-channel exchanges
  std::vector<std::unique_ptr<transport::InitiatorLane>> lanes_;
  const uint8_t *base_;
  size_t size_;
  bool has_headers_ = false;
  // The levels (proto::Durability): the pool's own (RPMEM_DURABILITY), and
  // whether the target grants visible at all; without the grant every call
  // is persistent.
  bool visible_pool_ = false;
  std::atomic<bool> visible_granted_{false};
  std::atomic<int> error_{0};  // sticky: connection lost
  mutable std::mutex lost_mu_;
  std::string lost_why_;  // guarded by lost_mu_

  std::thread keepalive_;
  int keepalive_stop_fd_ = -1;  // an eventfd: written to stop the thread

  // What reopening the pool on a restarted service takes (service mode,
  // tcp lanes, a daemon that gave a session token): set by connect().
  struct Reopen {
    TargetAddress target;
    proto::PoolRequest request;  // kOpen of the same pool, lanes and lane security
    proto::Bytes token;          // the session's token, renewed at each reopen
    PoolAttr attr{};             // the pool's attributes as last known (headers)
    uint32_t lane_flags = 0;     // the lanes' security the session got
    proto::TransportKind transport = proto::TransportKind::kTcp;  // its lanes' transport
    std::shared_ptr<transport::LaneRoute> route;
  };
  std::unique_ptr<Reopen> reopen_;  // null: the pool cannot be reopened
};

}  // namespace rpmem

#endif  // RPMEM_LIBRPMEM_POOL_H
