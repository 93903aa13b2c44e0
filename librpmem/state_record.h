// SPDX-License-Identifier: BSD-3-Clause
// The record a client keeps of a pool that runs ahead of its target
// (RPMEM_ON_LOSS=continue), in its state directory (RPMEM_STATE_DIR): a
// pool whose replica is behind, or catching up, is known to be so by the
// next process that opens it, whatever became of the one that was writing
// (it closed the pool, it was killed, the machine lost its power).
//
// Two files per pool, named after a digest of the target and the pool
// set: NAME.pool, the record (what the target and the pool are, the
// session's token that proves this client's ownership of the replica, the
// boot that wrote the map and whether the map was saved whole), written
// durably (a new file renamed in place, the directory synced); and
// NAME.map, the pool's out-of-sync map (oos_map.h). The record exists from
// the moment the pool goes behind until it is in sync again.
//
// The map holds every bit set before the process ended, but a power cut of
// the client machine can lose the last ones (they were in its page cache):
// a map not saved whole by a boot other than the running one is not
// trusted, and the next catch-up copies the whole pool.
//
// Thread-safety: none (the pool's catch-up thread, or its open and close).
#ifndef RPMEM_LIBRPMEM_STATE_RECORD_H
#define RPMEM_LIBRPMEM_STATE_RECORD_H

#include "common/proto.h"

#include <optional>
#include <string>
#include <system_error>

namespace rpmem {

struct PoolRecord {
  std::string target;    // as given to rpmem_open/rpmem_create
  std::string pool_set;  // its pool set name
  uint64_t pool_size = 0;
  proto::SessionToken token{};  // of the last session: it proves the replica is this client's
  std::string boot_id;          // of the boot that last wrote the map
  bool saved = false;           // the map was saved whole (the pool closed)
  uint64_t behind_since_s = 0;  // wall clock (seconds since the epoch) it went behind
};

class StateRecord {
 public:
  StateRecord(std::string dir, const std::string &target, const std::string &pool_set);
  const std::string &record_path() const noexcept { return record_; }
  const std::string &map_path() const noexcept { return map_; }

  // The record, if there is one of this target and pool set.
  std::optional<PoolRecord> load() const;
  // Writes it durably (the directory made first when missing).
  std::error_code save(const PoolRecord &r) const;
  // The directory, made when missing (mode 0700).
  std::error_code make_dir() const;
  // Both files gone (the pool closed in sync, or created anew).
  void remove() const noexcept;
  // The record gone, the map kept (the pool, still open, is in sync again:
  // its map is all clear).
  void drop_record() const noexcept;

 private:
  std::string dir_, record_, map_;
};

// This boot's id (/proc/sys/kernel/random/boot_id); empty when unknown.
std::string current_boot_id();

// Whether `r`'s map holds every page the pool wrote while behind: saved
// whole, or written by this very boot.
bool map_trusted(const PoolRecord &r);

}  // namespace rpmem

#endif  // RPMEM_LIBRPMEM_STATE_RECORD_H
