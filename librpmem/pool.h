// SPDX-License-Identifier: BSD-3-Clause
// Pool: one remote pool as the client sees it -- its life (PoolLife: in
// sync, coming back, lost), its control channel to rpmemd, its lanes
// (LaneSet), and the Connector it reaches the target through (the seam:
// the system's, or a test's fakes).
//
// Errors: every method returns 0 or a positive errno value and leaves a
// message (set_errormsg) on failure. Bad arguments fail only that call. A
// lane whose connection breaks or stalls connects again on its own within
// RPMEM_TIMEOUT (the application sees latency); a service that restarts is
// reopened as the same session (coming back); losing the target for good
// (past that bound, or its rpmemd ending an ssh session) makes every later
// call fail at once with ECONNRESET and a message naming the cause, and
// close() return at once.
// Thread-safety: many threads may use one Pool, one thread per lane at a
// time (each lane's calls hold that lane's slot, and nothing else on the
// data path). set_attr may be called from any thread (it serialises
// itself); close() must not race with anything.
#ifndef RPMEM_LIBRPMEM_POOL_H
#define RPMEM_LIBRPMEM_POOL_H

#include "common/pool_attr.h"
#include "common/transport/transport.h"
#include "librpmem/connector.h"
#include "librpmem/control_channel.h"
#include "librpmem/lane_set.h"
#include "librpmem/pool_life.h"
#include "librpmem/settings.h"
#include "librpmem/target_address.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace rpmem {

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
  // Creates or opens the remote pool through `connector`, with `settings`
  // (Settings::from_env() when null). On success `nlanes` holds the lanes
  // granted and, for open, `open_attr` (if not null) the stored attributes.
  static int connect(const PoolArgs &args, std::unique_ptr<Pool> &out, unsigned &nlanes,
                     PoolAttr *open_attr, Connector &connector = system_connector(),
                     const Settings *settings = nullptr) noexcept;
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

  PoolState state() const noexcept { return life_.state(); }

 private:
  Pool(Settings settings, Connector &connector, const Handshake &hs, const uint8_t *base,
       size_t size, Lanes lanes);

  // Remembers what reopening the pool on a restarted service takes.
  void keep_for_reopen(const TargetAddress &target, const Handshake &hs, const PoolAttr &attr,
                       std::shared_ptr<transport::LaneRoute> route);
  // Argument and state checks shared by the data-path calls: 0, or the
  // errno with its message.
  int check(PoolCall call, size_t offset, size_t length, unsigned lane, bool guard_header) noexcept;
  // The lane's result of `call`: a lane lost for good loses the pool.
  int lane_result(std::error_code ec, PoolCall call, const char *op, unsigned lane) noexcept;
  // EINVAL for flags outside `allowed`, or both levels.
  static int check_flags(unsigned flags, unsigned allowed) noexcept;
  unsigned lane_flags(unsigned flags) const noexcept;
  // persist and flush: `op` of [offset, +length) on `lane`.
  int write_range(transport::DataOp op, PoolCall call, const char *name, size_t offset,
                  size_t length, unsigned lane, unsigned flags) noexcept;

  // A thread that sends a keepalive on the control channel every
  // kKeepaliveInterval, so that rpmemd can tell a live but quiet client
  // from one that vanished or was stopped (only to a daemon that takes
  // them), and that watches the channel: when rpmemd ends it, a service's
  // pool comes back (reopen), any other is lost at once rather than after
  // the lanes' bound (pool_watch.cc).
  void start_keepalive(bool send_keepalives);
  void stop_keepalive() noexcept;
  // `hangup_fd`: the thread's own copy of the channel's descriptor; a
  // reopen replaces it (the caller closes the last one).
  void watch_channel(int &hangup_fd, bool send_keepalives) noexcept;
  // The service ended the session (it restarted): opens the pool again as
  // the same session (its token) within RPMEM_TIMEOUT, through the same
  // steps as the first open, checks that it is the same pool, and points
  // the lanes at the new session. False when that cannot be (the pool is
  // lost then) or close() stopped it; `hangup` becomes the new channel's.
  bool reopen(int &hangup) noexcept;
  // One try: 0 and `hs` the reopened session's, or the errno with its
  // message; `fatal`: no later try can do better.
  int reopen_once(Handshake &hs, std::chrono::milliseconds left, bool &fatal);
  // Puts a reopened session in this one's place; false with `why` when the
  // pool it opened is not this one, or not served the same way.
  bool take_reopened(Handshake &hs, int &hangup, std::string &why);
  bool stop_requested() const noexcept;

  Settings settings_;
  Connector &connector_;
  std::mutex control_mu_;  // serialises control-channel exchanges
  std::unique_ptr<ControlChannel> channel_;
  const uint8_t *base_;
  size_t size_;
  bool has_headers_ = false;
  // The levels (proto::Durability): the pool's own (RPMEM_DURABILITY), and
  // whether the target grants visible at all; without the grant every call
  // is persistent.
  bool visible_pool_ = false;
  std::atomic<bool> visible_granted_{false};
  LaneSet lanes_;
  PoolLife life_;  // after lanes_: losing the pool shuts them down

  std::thread keepalive_;
  int keepalive_stop_fd_ = -1;  // an eventfd: written to stop the thread

  // What reopening the pool on a restarted service takes (service mode,
  // lanes that come back, a daemon that gave a session token): set by
  // connect().
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
