// SPDX-License-Identifier: BSD-3-Clause
// What the Pool's files (pool.cc, pool_control.cc, pool_ahead.cc) share:
// failures in PMDK's words, the target's check, and a request with a status
// reply. Internal to librpmem.
#ifndef RPMEM_LIBRPMEM_POOL_DETAIL_H
#define RPMEM_LIBRPMEM_POOL_DETAIL_H

#include "common/error.h"
#include "common/log.h"
#include "common/proto.h"
#include "librpmem/control_channel.h"
#include "librpmem/errormsg.h"
#include "librpmem/target_address.h"

#include <chrono>
#include <cstring>
#include <string>
#include <system_error>

namespace rpmem::pool_detail {

inline int fail(int err, const std::string &msg) {
  set_errormsg(msg);
  return err;
}

// `msg` is PMDK's text for the failure, the one rpmem_errormsg() gives;
// what we know beyond it goes to the library's log only.
inline int fail(int err, const std::string &msg, const std::string &detail) {
  if (!detail.empty()) RPMEM_LOG_ERR("%s -- %s", msg.c_str(), detail.c_str());
  return fail(err, msg);
}

inline std::string with_errno(const char *msg, int err) {
  return std::string(msg) + ": " + strerror(err);
}

// The target, or EINVAL with its message: PMDK's text for one that does not
// parse (the detail in the log), ours, naming the problem, for one that
// parses but may not reach ssh (a user or host beginning with '-', holding
// whitespace or a control character: PMDK passed those on).
Result<TargetAddress> checked_target(const std::string &text);

// Sends `request` and receives its status reply (`reply_type`). A failed
// exchange is EPROTO (malformed reply) or ECONNRESET (anything else).
std::error_code status_exchange(ControlChannel &ch, const proto::Bytes &request,
                                proto::MsgType reply_type, std::chrono::milliseconds timeout,
                                proto::Status &status);

// Ends a session the pool cannot use, with a close request: the target
// undoes what it did (`create`: the pool it created is removed).
void end_session(ControlChannel &ch, bool create, std::chrono::milliseconds timeout);

}  // namespace rpmem::pool_detail

#endif  // RPMEM_LIBRPMEM_POOL_DETAIL_H
