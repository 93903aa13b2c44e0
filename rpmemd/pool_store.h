// SPDX-License-Identifier: BSD-3-Clause
// PoolStore: the pool sets under one directory -- create, open, remove --
// and MappedPool, one open pool mapped contiguously with its parts locked.
//
// Errors are errno values (generic category):
//   kBadName (EBADF)  bad pool set name (absolute, escapes the directory) -> BADNAME
//   EINVAL  bad pool set file, part size mismatch, bad header, attributes
//           that do not fit the set's options -> POOL_CFG
//   ENOENT  pool set file or a part missing;  EACCES  permission denied
//   EEXIST  create over a part whose header area is not zero
//   EWOULDBLOCK  a part is locked by another open file description (flock)
//   anything else (ENOSPC, EIO, ENOMEM...) -> FATAL
//
// Thread-safety: a PoolStore may be used from several threads at once
// (it keeps no state beyond the directory); flock keeps two openers of the
// same pool apart.
#ifndef RPMEMD_POOL_STORE_H
#define RPMEMD_POOL_STORE_H

#include "common/pool_attr.h"
#include "common/transport/persister.h"

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace rpmemd {

// Returned (as errc(EBADF)) when the pool set name itself is refused:
// absolute, contains a ".." that leads out, or resolves through a symlink
// outside the pool set directory. The session answers BADNAME (EINVAL).
inline constexpr int kBadName = EBADF;

// A file's identity: its device, inode and birth time (statx; 0 where the
// file system keeps none). A part removed and made again, or a pool set
// that names another file, has another, even where the inode number is
// used again.
struct FileId {
  uint64_t dev = 0;
  uint64_t ino = 0;
  uint64_t born_ns = 0;
  bool operator==(const FileId &) const = default;
};

class MappedPool {
 public:
  virtual ~MappedPool() = default;  // makes the whole pool durable, unmaps, unlocks

  // Client offset X is base()[X]; size() is the net pool size (whole
  // contiguous mapping, header of part 0 included).
  virtual uint8_t *base() const noexcept = 0;
  virtual size_t size() const noexcept = 0;
  // True when the pool set has headers (not NOHDRS); offsets < 4096 are then
  // reserved for the header of part 0.
  virtual bool has_headers() const noexcept = 0;
  // How the pool's medium makes bytes durable, and its traits; chosen once
  // when the pool is mapped (rpmemd/persister.h). Transports reach it
  // through a TargetPool (common/transport/transport.h).
  virtual rpmem::transport::Persister &persister() const noexcept = 0;

  // Rewrites the headers from attr as PMDK's util_replica_set_attr (part 0
  // takes attr.uuid, its neighbours' links follow). nullptr or all-zero:
  // zeroed attributes, but every part keeps its UUID and links (so open then
  // returns zeros except uuid). NOHDRS: nullptr/zero is a no-op, non-zero
  // attributes give EINVAL.
  virtual std::error_code set_attr(const rpmem::PoolAttr *attr) noexcept = 0;
  // The persister's persist() of [offset, offset+len), checked: EINVAL when
  // the range is not inside [0, size()) (overflow-safe). Thread-safe.
  virtual std::error_code persist(size_t offset, size_t len, bool deep) noexcept = 0;
  // Unmaps, unlocks and unlinks the part files (not the pool set file).
  // Used for a failed create and for close with the remove flag.
  virtual std::error_code remove_parts() noexcept = 0;
  // The identity of each part file, in order.
  virtual std::vector<FileId> part_ids() const = 0;
};

class PoolStore {
 public:
  // dir: absolute path of the pool set directory (checked by the caller).
  explicit PoolStore(std::string dir);

  // Creates the parts of pool set `name`, writes the headers from attr
  // (nullptr = no headers: the set must be NOHDRS) and maps them. On failure
  // nothing it created is left behind.
  std::error_code create(std::string_view name, const rpmem::PoolAttr *attr,
                         std::unique_ptr<MappedPool> &out) noexcept;
  // Opens, locks, maps and checks an existing pool; attr_out gets part 0's
  // attributes (zeros for NOHDRS).
  std::error_code open(std::string_view name, std::unique_ptr<MappedPool> &out,
                       rpmem::PoolAttr &attr_out) noexcept;
  // rpmemd --remove: unlink every part (force: skip missing/locked ones and
  // parse errors), and with remove_poolset the pool set file too.
  std::error_code remove(std::string_view name, bool force, bool remove_poolset) noexcept;

  const std::string &dir() const noexcept { return dir_; }
  // The canonical path of pool set `name`'s file, confined as open() does.
  std::error_code path_of(std::string_view name, std::string &out) const noexcept;

 private:
  struct ResolvedName {
    std::string path;   // canonical path of the pool set file, for reading it
    std::string entry;  // the directory entry `name` denotes (a symlink itself,
                        // not its target), for unlinking it
  };
  // Resolves pool set name `name`: errc(kBadName) when it is absolute,
  // climbs out with "..", or when its directory or the file itself resolves
  // (symlinks followed) outside realpath(dir_); otherwise realpath's errno
  // (ENOENT, EACCES, ...). The part paths inside a pool set file are
  // absolute and not confined, as in PMDK. Throws std::bad_alloc.
  std::error_code resolve(std::string_view name, ResolvedName &out) const;

  std::string dir_;
};

}  // namespace rpmemd

#endif  // RPMEMD_POOL_STORE_H
