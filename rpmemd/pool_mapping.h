// SPDX-License-Identifier: BSD-3-Clause
// PoolMapping: the MappedPool of rpmemd -- the part files of one pool set
// opened (or created) and flock'ed, mapped into one contiguous range, their
// pool headers written or checked. Internal to the pool store.
//
// Thread-safety: setup (open_parts .. check_headers/init_headers) and
// set_attr/remove_parts are single-threaded; persist() may be called from
// many threads at once on disjoint or overlapping ranges.
#ifndef RPMEMD_POOL_MAPPING_H
#define RPMEMD_POOL_MAPPING_H

#include "common/pool_attr.h"
#include "rpmemd/persister.h"
#include "rpmemd/pool_hdr.h"
#include "rpmemd/pool_store.h"
#include "rpmemd/poolset.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

namespace rpmemd {

class PoolMapping final : public MappedPool {
 public:
  explicit PoolMapping(PoolSet set);
  ~PoolMapping() override;
  PoolMapping(const PoolMapping &) = delete;
  PoolMapping &operator=(const PoolMapping &) = delete;

  // Setup, in this order; after any error the caller must call discard().
  //
  // Opens and locks every part (flock LOCK_EX|LOCK_NB) and checks its size.
  // create: a missing part is created (O_EXCL, allocated at its size,
  // mode 0666); an existing one is reused if its size is exactly the
  // configured one and, when it will carry a header, its first 4096 bytes
  // are zero. Errors: ENOENT, EACCES, EWOULDBLOCK (locked), EINVAL (size
  // mismatch, not a regular file), EEXIST (non-zero header area), ENOSPC...
  std::error_code open_parts(bool create) noexcept;
  // Maps all parts into one contiguous range (MAP_SYNC when the file system
  // allows it) and chooses the persister of their medium.
  std::error_code map() noexcept;
  // create: writes every header from attr (non-zero; reference §6.5).
  std::error_code init_headers(const rpmem::PoolAttr &attr) noexcept;
  // open: checks every header (EINVAL when zero, inconsistent with part 0,
  // badly linked or with a bad checksum); attr_out = part 0's attributes,
  // zeros without headers.
  std::error_code check_headers(rpmem::PoolAttr &attr_out) noexcept;
  // CHECK_BAD_BLOCKS (compat 0x1), on create and open as PMDK's rpmemd:
  // EIO when a part lies on known pmem bad blocks (count_bad_blocks), or
  // when they cannot be read for a part on pmem.
  std::error_code check_bad_blocks() const noexcept;
  // Undoes a failed setup: unmaps, unlinks the parts open_parts created
  // (never pre-existing ones), closes (unlocks) everything.
  void discard() noexcept;

  uint8_t *base() const noexcept override { return base_; }
  size_t size() const noexcept override { return size_; }
  bool has_headers() const noexcept override { return set_.header_count() > 0; }
  Persister &persister() const noexcept override { return *persister_; }
  std::error_code set_attr(const rpmem::PoolAttr *attr) noexcept override;
  std::error_code persist(size_t offset, size_t len, bool deep) noexcept override;
  std::error_code remove_parts() noexcept override;
  std::vector<FileId> part_ids() const override;

 private:
  using Part = MappedPart;
  class HeaderPages;  // the header pages of the parts that have one, mapped

  std::error_code open_part(Part &part, bool create, bool check_hdr_zero) noexcept;
  std::error_code persist_header(void *hdr) noexcept;
  void unmap() noexcept;
  void close_fds() noexcept;

  PoolSet set_;
  std::vector<Part> parts_;
  uint8_t *base_ = nullptr;
  size_t size_ = 0;
  std::unique_ptr<Persister> persister_;  // from map()
};

// A random RFC 4122 version 4 UUID, in PMDK's byte order (its struct uuid
// with host-order fields, as pmempool prints it). EIO if getrandom fails.
std::error_code generate_uuid(Uuid &out) noexcept;

}  // namespace rpmemd

#endif  // RPMEMD_POOL_MAPPING_H
