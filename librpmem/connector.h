// SPDX-License-Identifier: BSD-3-Clause
// How a pool reaches its target, and the steps every create, open and
// reopen takes.
//
// Connector is the seam between a pool's logic and the processes, sockets
// and queue pairs it runs on: a control channel to the target's rpmemd, and
// a session's lanes. The system's (system_connector()) spawns ssh or
// connects TLS and makes real lanes; tests of the pool's rules put fakes in
// its place (tests/unit/librpmem/pool_test.cc).
//
// The steps (handshake()): the control channel, the daemon's hello, the
// pool request and its answer. Pool::connect then connects the lanes; a
// reopen on a restarted service points the lanes it has at the new session.
// Errors: an errno with rpmem_errormsg() set, in PMDK's words where PMDK had
// them (the detail goes to the library's log).
#ifndef RPMEM_LIBRPMEM_CONNECTOR_H
#define RPMEM_LIBRPMEM_CONNECTOR_H

#include "common/error.h"
#include "common/proto.h"
#include "common/transport/transport.h"
#include "librpmem/control_channel.h"
#include "librpmem/lane_security.h"
#include "librpmem/lane_set.h"
#include "librpmem/settings.h"
#include "librpmem/target_address.h"

#include <chrono>
#include <functional>
#include <memory>

namespace rpmem {

class Connector {
 public:
  virtual ~Connector() = default;
  // A control channel to the target's rpmemd: TLS to an rpmems:// service,
  // else rpmemd started over ssh; `timeout` bounds a TLS connect (0: the
  // control timeout). The error's message is rpmem_errormsg()'s text.
  virtual Result<std::unique_ptr<ControlChannel>> channel(const TargetAddress &target,
                                                          const Settings &settings,
                                                          std::chrono::milliseconds timeout) = 0;
  // The lanes of the session `resp` describes, keyed as `security` says
  // (sealed: from `ch` or the response's key) and connected.
  virtual Result<Lanes> lanes(LaneSecurity security, const TargetAddress &target,
                              const proto::PoolResponse &resp, ControlChannel &ch,
                              const Settings &settings, transport::InitiatorParams &params) = 0;
};

// The real one: ssh or TLS, transport::connect_lanes.
Connector &system_connector();

// What a create, open or reopen's handshake leaves.
struct Handshake {
  std::unique_ptr<ControlChannel> channel;
  proto::Hello hello;
  proto::PoolRequest request;
  proto::PoolResponse response;  // its status may be an error (the caller decides)
};

struct HandshakeArgs {
  TargetAddress target;
  bool create = false;
  uint32_t transports = 0;  // what this client takes
  // Each step's bound, and the answer's (a pool's open may take longer).
  std::chrono::milliseconds step{0};
  std::chrono::milliseconds answer{0};
  // The request for the daemon of `hello` (its offers, its protocol); an
  // errno (with its message set) when there is none for it.
  std::function<int(const proto::Hello &hello, proto::PoolRequest &req)> request;
};

// The control channel, the daemon's hello (it serves us, speaks our
// protocol, offers a transport we take, TLS lanes when RPMEM_DATA_TLS=1
// asks for them), the request and the answer: 0, or an errno with its
// message set.
int handshake(Connector &c, const Settings &settings, const HandshakeArgs &args, Handshake &out);

// The create or open request for the daemon of `hello`: the pool, the
// lanes, the transports and the lanes' security this client takes, its
// level.
proto::PoolRequest pool_request(const std::string &pool_set, size_t size, unsigned nlanes,
                                bool create, const PoolAttr &create_attr, const Settings &settings,
                                const proto::Hello &hello, uint32_t transports);

// The lanes' parameters but their security, for the session of `resp`.
transport::InitiatorParams lane_params(const TargetAddress &target, const proto::PoolResponse &resp,
                                       const proto::Hello &hello, const Settings &settings,
                                       const uint8_t *base, size_t size);

// What this client accepts: enabled by the environment and usable here
// (verbs only with an RDMA device).
uint32_t client_transports(const Settings &s);

}  // namespace rpmem

#endif  // RPMEM_LIBRPMEM_CONNECTOR_H
