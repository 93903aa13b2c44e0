// SPDX-License-Identifier: BSD-3-Clause
// Which session last opened a service's pool: a random token, kept in a
// file beside the pool set file (".NAME.rpmemd-session", mode 0600) and
// written durably, so that a restart of the service -- or of the machine --
// keeps it. A client whose service restarted reopens its pool by proving
// the token it was given; any other session's open since gave the pool a
// new one, and the reopen is refused (the client must not write into a pool
// someone else has written to in between). A client's close forgets it.
//
// Thread-safety: callers hold the pool's lock (an open pool is one
// session's), so no two calls race on one pool set.
#ifndef RPMEMD_SESSION_TOKENS_H
#define RPMEMD_SESSION_TOKENS_H

#include "common/proto.h"

#include <string>
#include <system_error>

namespace rpmemd::session_tokens {

namespace proto = rpmem::proto;

// The token file of the pool set file at `poolset_path`.
std::string file_for(const std::string &poolset_path);
// A new random token for the pool set, written durably (a file of its own,
// renamed over the old one, the directory synced).
std::error_code issue(const std::string &poolset_path, proto::SessionToken &out) noexcept;
// Whether `token` is the pool set's latest (false without one).
bool matches(const std::string &poolset_path, const proto::SessionToken &token) noexcept;
// The pool set has no session any more (its client closed it, or removed it).
void forget(const std::string &poolset_path) noexcept;

}  // namespace rpmemd::session_tokens

#endif  // RPMEMD_SESSION_TOKENS_H
