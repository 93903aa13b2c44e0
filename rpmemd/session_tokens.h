// SPDX-License-Identifier: BSD-3-Clause
// Which session last opened a service's pool: a random token, kept in a
// file beside the pool set file (".NAME.rpmemd-session", mode 0600, owned
// by rpmemd's user) and written durably, so that a restart of the service
// -- or of the machine -- keeps it. A client whose service restarted
// reopens its pool by proving the token it was given; any other session's
// open since gave the pool a new one (or, in ssh mode, none), and the
// reopen is refused: the client must not write into a pool someone else
// has written to in between. A client's close forgets it, and so does a
// remove that succeeded.
//
// A reopen's answer may be lost (the connection breaks right then): the
// file keeps, beside the new token, the one that reopen proved, which may
// reopen the pool once more. The file also holds the identity of the
// pool's part files (device, inode) when the token was issued, so that a
// pool whose parts were removed and made again (rpmemd --remove and a
// create, pmempool, cp) is refused even without a header to compare.
//
// Thread-safety: callers hold the pool's lock (an open pool is one
// session's), so no two calls race on one pool set.
#ifndef RPMEMD_SESSION_TOKENS_H
#define RPMEMD_SESSION_TOKENS_H

#include "common/proto.h"
#include "rpmemd/pool_store.h"

#include <string>
#include <system_error>
#include <vector>

namespace rpmemd::session_tokens {

namespace proto = rpmem::proto;

// The token file of the pool set file at `poolset_path`.
std::string file_for(const std::string &poolset_path);
// A new random token for the pool set whose parts are `parts`, written
// durably (a file of a new name of its own, created exclusively, renamed
// over the old one, the directory synced). `proved`: the token a reopen
// proved, kept as the one that may reopen the pool again (null: a new
// session's open). `ahead`: the session's client may run ahead of the pool
// (RPMEM_ON_LOSS=continue): until the file is forgotten (the client's
// close), the pool may be behind its master, and only the token opens it.
std::error_code issue(const std::string &poolset_path, const std::vector<FileId> &parts,
                      const proto::SessionToken *proved, bool ahead,
                      proto::SessionToken &out) noexcept;
// Whether the pool set's token is of a session that may run ahead of it
// (issue()'s `ahead`): a pool that may be behind its master.
bool runs_ahead(const std::string &poolset_path) noexcept;

enum class Verdict {
  kMatches,   // the latest token, or the one its last reopen proved
  kStale,     // no token, or another session's: opened by another since
  kReplaced,  // the token, but the pool's parts are other files now
};
// Whether `token` may reopen the pool set whose parts are now `parts`. A
// file that is not rpmemd's own (another owner, a symlink, another
// length) holds no token.
Verdict check(const std::string &poolset_path, const proto::SessionToken &token,
              const std::vector<FileId> &parts) noexcept;
// The pool set has no session any more (its client closed it, it was
// removed, or someone other than its session opened it).
void forget(const std::string &poolset_path) noexcept;

}  // namespace rpmemd::session_tokens

#endif  // RPMEMD_SESSION_TOKENS_H
