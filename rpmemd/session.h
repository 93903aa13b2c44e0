// SPDX-License-Identifier: BSD-3-Clause
// Session: one client, one pool, served over a control channel -- the
// create/open, set_attr and close requests, and the data-plane target that
// serves the lanes. As in PMDK, an ssh-mode rpmemd runs one session.
#ifndef RPMEMD_SESSION_H
#define RPMEMD_SESSION_H

#include "common/proto.h"
#include "common/transport/transport.h"
#include "rpmemd/config.h"
#include "rpmemd/control_io.h"
#include "rpmemd/lane_budget.h"
#include "rpmemd/lane_security.h"
#include "rpmemd/pool_store.h"
#include "rpmemd/status.h"
#include "rpmemd/write_back.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace rpmemd {

// Why a session ended; main turns it into the exit code.
enum class SessionEnd {
  kClosed,         // CLOSE (or, in service mode, REMOVE) served (exit 0)
  kRequestFailed,  // CREATE/OPEN answered with an error (exit 0, as PMDK)
  kDisconnected,   // EOF on the control channel (exit 1)
  kSignal,         // SIGTERM/SIGINT (exit 0)
  kFatal,          // malformed input or I/O failure (exit 255)
};

struct SessionParams {
  // What each open pool's target starts from (listen_address: where lanes
  // connect, empty = any; peer_address: the client's address, where data
  // connections must come from; peer_timeout, nthreads, verbs_window,
  // verbs_windows_always: the configuration's). The session adds the rest:
  // the secret, the lanes granted, their security, the method.
  rpmem::transport::TargetParams target;
  uint32_t transports = 0;  // what this daemon offers
  bool persist_apm = false;
  unsigned max_lanes = 0;  // granted at most (Config::max_lanes)
  DataTls data_tls = DataTls::kAllow;
  bool data_seal = true;
  // The visible durability level: granted to a client of protocol minor 7
  // that asks for it, and written back at the latest `visible_writeback`
  // after its acknowledgement.
  bool durability_visible = true;
  std::chrono::milliseconds visible_writeback{5000};
  // Service mode: the control channel's TLS exporter
  // (SSL_export_keying_material with `label` and `context`), whence sealed
  // lanes take their master key. Empty: ssh mode, where the key is random
  // and goes to the client over the ssh channel.
  std::function<bool(uint8_t *out, size_t len, const char *label, const uint8_t *context,
                     size_t context_len)>
      export_keying_material;
  // Service mode: the lanes' TLS with the control channel's certificates
  // (the service's context, the client's certificate). ssh mode leaves it
  // empty: a session keys its TLS lanes with a pre-shared key of its own.
  rpmem::transport::LaneTls cert_lanes;
  // Service mode: the lanes granted to all sessions of this session's client
  // certificate (shared with them), and their cap. Null: no such cap.
  std::shared_ptr<std::atomic<long>> client_lanes;
  unsigned max_client_lanes = 0;
  // Service mode: where the status channel reads what this session's pool
  // and lanes are doing (null: nothing is counted).
  std::shared_ptr<SessionStatus> status;
  // Service mode: where a pool whose client could run ahead of it, and
  // whose session ended without a close, is listed (null: nowhere).
  std::shared_ptr<BehindPools> behind;
  // Service mode: each open gives the pool a session token
  // (session_tokens.h), and a client whose service restarted may reopen its
  // pool with it.
  bool session_tokens = false;
  // Makes the data-plane target of an open pool, as make_target() (never
  // empty). Tests put a fake transport's here.
  std::function<std::unique_ptr<rpmem::transport::Target>(rpmem::transport::TransportKind,
                                                          rpmem::transport::TargetPool &,
                                                          const rpmem::transport::TargetParams &)>
      make_target = rpmem::transport::make_target;
};

// What both ways in (ssh, the service) take from the configuration; the
// caller adds where lanes connect (listen_address) and whom from
// (peer_address).
SessionParams session_params(const Config &config);

class Session {
 public:
  // `signal_fd` becomes readable on SIGTERM/SIGINT (-1: none).
  Session(PoolStore &store, ControlStream &io, SessionParams params, int signal_fd);
  ~Session();
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  // Serves requests until the session ends. Never throws.
  SessionEnd run() noexcept;

 private:
  std::error_code handle_pool_request(proto::MsgType type, const proto::Bytes &payload,
                                      SessionEnd &end);
  proto::Status open_or_create(proto::MsgType type, const proto::PoolRequest &req,
                               proto::PoolResponse &resp);
  // Its steps (session_open.cc).
  proto::Status check_request(const proto::PoolRequest &req, LaneSecurity &security,
                              uint32_t &offered, proto::PoolResponse &resp) const;
  proto::Status open_pool(bool create, const proto::PoolRequest &req, rpmem::PoolAttr &attr);
  proto::Status check_pool(bool create, const proto::PoolRequest &req, std::string &poolset_path);
  rpmem::transport::TargetParams target_params(const proto::PoolRequest &req,
                                               const proto::Secret &secret, unsigned nlanes) const;
  proto::Status key_lanes(const LaneSecurity &security, rpmem::transport::TargetParams &tp,
                          proto::PoolResponse &resp) const;
  proto::Status start_target(uint32_t offered, const rpmem::transport::TargetParams &tp,
                             proto::TransportKind &kind);
  void issue_token(const proto::PoolRequest &req, const std::string &poolset_path,
                   proto::PoolResponse &resp);
  proto::Status grant_levels(const proto::PoolRequest &req);
  proto::Status write_back_left_over(bool create);
  proto::Status open_behind(const proto::PoolRequest &req) const;
  // The catch-up of a pool that ran ahead (session_catchup.cc): the
  // client's report, the checksums of pages.
  std::error_code handle_pool_state(const proto::Bytes &payload);
  std::error_code handle_checksum(const proto::Bytes &payload);
  static void count_reopened() noexcept;
  std::error_code handle_set_attr(const proto::Bytes &payload);
  std::error_code handle_close(const proto::Bytes &payload);
  std::error_code handle_remove(const proto::Bytes &payload);
  // Stops the lanes and closes the pool; EIO when it could not be made
  // durable (not asked when it is removed).
  std::error_code release(bool remove) noexcept;
  void arm_idle_timer() noexcept;

  PoolStore &store_;
  ControlStream &io_;
  SessionParams params_;
  int signal_fd_;
  int fatal_fd_ = -1;  // eventfd: a lane saw malformed input
  std::unique_ptr<MappedPool> pool_;
  std::unique_ptr<rpmem::transport::TargetPool> view_;  // the client's range of pool_
  std::unique_ptr<rpmem::transport::Target> target_;
  std::unique_ptr<WriteBack> write_back_;  // the visible bytes' bound, where they cost less
  SessionInBudget in_budget_;              // counted in the process's descriptor budget
  LaneGrant grant_;                        // the open pool's lanes
  int idle_fd_ = -1;                       // timerfd: the control channel's silence bound
  bool keepalives_ = false;                // the client sends them: silence ends the session
  bool created_ = false;
  bool ahead_ = false;      // the open pool's client may run ahead of it (proto::kRunAhead)
  std::string pool_set_;    // the name the open pool was created/opened by
  std::string token_path_;  // its pool set file, when it has a session token
  proto::PoolSync reported_ = proto::PoolSync::kInSync;  // the client's last report
  bool apm_ = false;  // the open pool is served with APM (verbs only)
};

// Blocks SIGTERM and SIGINT in the calling thread, so that every thread
// started after it inherits the mask, and returns a signalfd that becomes
// readable when one of them arrives (a Session's `signal_fd`); -1 with
// errno set when there is none.
int termination_signal_fd() noexcept;

// rpmemd --remove and a service's remove request: PoolStore::remove, and
// when it succeeds the pool set's session token goes with it (a failed
// remove, of an open pool say, keeps it for the session that has it).
std::error_code remove_pool(PoolStore &store, const std::string &pool_set, bool force,
                            bool remove_poolset) noexcept;

// Pools reopened by their session after a restart of the service, since
// this process started.
uint64_t sessions_reopened() noexcept;

}  // namespace rpmemd

#endif  // RPMEMD_SESSION_H
