// SPDX-License-Identifier: BSD-3-Clause
// WriteBack: a pool's place in the process's write-back thread, which makes
// visible bytes persistent within rpmemd's visible-writeback bound, for a
// session granted the visible level on a medium where visible costs less
// than persistent (the page cache). One thread serves every such pool of
// the process, however many sessions a service has: it looks at each every
// quarter of the shortest bound and writes a pool back when its oldest
// visible byte not yet durable is half its bound old, so that the
// write-back starts at the latest three quarters of the bound after the
// byte's acknowledgement (later only while another pool's write-back
// takes longer than a quarter of the bound).
#ifndef RPMEMD_WRITE_BACK_H
#define RPMEMD_WRITE_BACK_H

#include "common/transport/persister.h"

#include <chrono>

namespace rpmemd {

class WriteBack {
 public:
  // Puts `persister` in the thread's care (starting the thread when it is
  // the first); throws std::system_error when there is no thread.
  WriteBack(rpmem::transport::Persister &persister, std::chrono::milliseconds bound);
  // Takes it out, after a write-back of it in progress.
  ~WriteBack();
  WriteBack(const WriteBack &) = delete;
  WriteBack &operator=(const WriteBack &) = delete;

  rpmem::transport::Persister &persister;
  const std::chrono::milliseconds bound;
};

}  // namespace rpmemd

#endif  // RPMEMD_WRITE_BACK_H
