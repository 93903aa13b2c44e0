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
#include "librpmem/oos_map.h"
#include "librpmem/pool_life.h"
#include "librpmem/settings.h"
#include "librpmem/state_record.h"
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
  // errno with its message. `local`: the call is done (the pool runs
  // ahead of its target: what it covers is marked), not to be sent.
  int check(PoolCall call, size_t offset, size_t length, unsigned lane, bool guard_header,
            bool &local) noexcept;
  // The lane's result of `call` of [offset, +length): a lane lost for good
  // loses the target (the pool is lost, or runs ahead of it: a write
  // completes locally, marked).
  int lane_result(std::error_code ec, PoolCall call, const char *op, unsigned lane,
                  uint64_t offset = 0, uint64_t length = 0) noexcept;
  // A lane call on [offset, +length): while the pool catches up, what it
  // writes is noted first (Ahead::touched).
  template <class F>
  std::error_code on_lane(unsigned lane, uint64_t offset, uint64_t length, F &&f);
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
  void start_keepalive(bool send_keepalives) noexcept;  // logs why it cannot
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
  // Waits `d`, or until close() stops the thread (false then) or wake()
  // wakes it.
  bool pause(std::chrono::milliseconds d) const noexcept;
  void wake() noexcept;
  void drain_wake() const noexcept;

  // --- running ahead of a lost target (pool_ahead.cc, pool_catchup.cc) ---
  // The pool's record and out-of-sync map, at open with RPMEM_ON_LOSS=
  // continue, or when a record of the pool was found (`found`; `fresh`: the
  // target did not know its token, so the whole pool is sent again).
  std::error_code start_ahead(const PoolArgs &args, const Handshake &hs,
                              const TargetAddress &target, const PoolAttr &attr,
                              const std::optional<PoolRecord> &found, bool fresh);
  // PoolHooks: the record made durable before anything runs ahead; the
  // lanes shut down, and behind, what they had not had acknowledged marked.
  bool prepare_behind(const std::string &why) noexcept;
  void on_lost(bool behind) noexcept;
  // What a call that completes locally covers (and its lane's unacknowledged
  // ranges) marked; a write arms the catch-up.
  void mark_local(unsigned lane, uint64_t offset, uint64_t length) noexcept;
  // Lane `lane`'s unacknowledged ranges marked, once for each lane lost.
  void mark_unacknowledged(unsigned lane) noexcept;
  // The watch thread's turn while the pool is behind and not attached:
  // reattach to the target when the pool has something to send (a new
  // session, as the first open's: the token proves the replica is this
  // client's); false when close() stopped it. `hangup` becomes the new
  // channel's.
  bool behind_turn(int &hangup) noexcept;
  int reattach(int &hangup, std::string &why);
  const char *unfit_to_reattach(const proto::PoolResponse &resp, const PoolAttr &known);
  void take_reattached(Handshake &hs, Lanes lanes, std::shared_ptr<transport::LaneRoute> route,
                       const PoolAttr &known, int &hangup);
  // Sends every marked page again, proves it with the target's checksums,
  // and is in sync; false when the target is lost again (behind) or close()
  // stopped it.
  bool catch_up() noexcept;
  // The marked pages once, in runs on the lanes in turn (`held`: with every
  // lane's slot held); false when the target is lost again or close()
  // stopped it.
  bool copy_marked(uint64_t &bytes, bool held) noexcept;
  struct CopyFailure {
    std::error_code ec;
    unsigned lane = 0;
    uint64_t off = 0, len = 0;
  };
  template <class Send>
  bool copy_runs(uint64_t &bytes, CopyFailure &failed, Send &&send) noexcept;
  unsigned quiet_lane(unsigned last) const noexcept;
  bool verify_sent(uint64_t &mismatched, uint64_t &checked) noexcept;
  // A report of the pool to rpmemd (a daemon that takes them; a keepalive
  // to one that does not), at most every kReportInterval unless `now`.
  void report(proto::PoolSync state, uint64_t left, uint64_t done, bool now) noexcept;
  // close() of a pool behind or catching up: the record kept, whole.
  int close_ahead() noexcept;
  uint64_t behind_ms() const noexcept;  // 0 in sync

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

  // A pool that may run ahead of its target (RPMEM_ON_LOSS=continue), or
  // whose replica its record says is behind; null otherwise. The watch
  // thread reattaches and catches up; the data path marks.
  struct Ahead {
    explicit Ahead(StateRecord r) : record(std::move(r)) {}
    StateRecord record;
    std::mutex mu;                    // rec and the record's file
    PoolRecord rec;                   // as last saved
    std::unique_ptr<OosMap> oos;      // out of sync: to send again
    std::unique_ptr<OosMap> touched;  // written by the application during a catch-up
    std::unique_ptr<OosMap> sent;     // sent again, to verify
    // The losses of the target so far; per lane, under its slot, the loss
    // whose unacknowledged ranges it marked.
    std::atomic<uint64_t> losses{0};
    std::unique_ptr<uint64_t[]> lane_marked;
    // Per lane, while catching up: when the application last called on it
    // (steady clock): the catch-up sends on the lane it left the longest.
    std::unique_ptr<std::atomic<int64_t>[]> lane_used;
    std::atomic<bool> armed{false};        // there is something to send
    std::atomic<bool> attached{true};      // the lanes and channel are a live session's
    std::atomic<bool> old_channel{false};  // the lost session's channel is still open
    // The watch thread's: the daemon takes kPoolState and kChecksum (minor
    // 10); the next reattach opens the pool anew (its token was refused);
    // a reattach's failure was logged.
    bool reports = false;
    bool fresh = false;
    bool warned = false;
    std::atomic<int64_t> behind_ns{0};  // steady clock: when it went behind (0: in sync)
    std::chrono::steady_clock::time_point reported_at;
    TargetAddress target;
    PoolAttr attr{};  // the pool's attributes (under control_mu_): a reattach must find them
  };
  std::unique_ptr<Ahead> ahead_;
  PoolLife life_;  // after lanes_ and ahead_: losing the target uses both

  std::thread keepalive_;
  int keepalive_stop_fd_ = -1;  // an eventfd: written to stop the thread
  int wake_fd_ = -1;            // an eventfd: the pool went behind, or has something to send

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
