// SPDX-License-Identifier: BSD-3-Clause
// OosMap: the pages of a pool that its replica may not hold (out of sync),
// one bit a kPage (4 KiB) of the pool: 32 KiB a GiB. A pool that runs
// ahead of a lost target (RPMEM_ON_LOSS=continue) marks every range a call
// covers, and every range its lanes had not had acknowledged; the catch-up
// sends the marked pages again and clears them.
//
// Backed by a file (the pool's record in the state directory, mapped
// shared: a bit set before a call returns survives the process's death; a
// power cut of the client may lose the last ones, which the record's boot
// id tells: state_record.h), or by anonymous memory.
//
// Thread-safety: mark(), clear() and test() are atomic on their words and
// may run in parallel with each other and with next(); count() and next()
// see a consistent word at a time. Every access is sequentially consistent:
// a page marked before a write is sent, and cleared before the pool's bytes
// are read for a copy, orders that write and that read (the catch-up's
// rule for what the application wrote during its copy: pool_catchup.cc).
#ifndef RPMEM_LIBRPMEM_OOS_MAP_H
#define RPMEM_LIBRPMEM_OOS_MAP_H

#include "common/error.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace rpmem {

class OosMap {
 public:
  static constexpr uint64_t kPage = 4096;

  // The map of a pool of `pool_size` bytes in the file at `path` (created,
  // all clear, when `create`; else it must be the size the pool needs), or
  // in anonymous memory when `path` is empty.
  static Result<std::unique_ptr<OosMap>> open(const std::string &path, uint64_t pool_size,
                                              bool create);
  ~OosMap();
  OosMap(const OosMap &) = delete;
  OosMap &operator=(const OosMap &) = delete;

  uint64_t pages() const noexcept { return pages_; }
  // Every page [offset, offset + length) touches.
  void mark(uint64_t offset, uint64_t length) noexcept;
  void mark_pages(uint64_t first, uint64_t count) noexcept;
  void mark_all() noexcept;
  void clear(uint64_t first, uint64_t count) noexcept;
  // Whether a page of [first, first + count) is marked.
  bool any(uint64_t first, uint64_t count) const noexcept;
  // The first run of marked pages at or after `from`, at most `most` of
  // them: false when none is.
  bool next(uint64_t from, uint64_t most, uint64_t &first, uint64_t &count) const noexcept;
  uint64_t count() const noexcept;  // marked pages
  // The bits on the file's storage (msync); nothing for memory.
  std::error_code sync() noexcept;

 private:
  OosMap(uint64_t *words, size_t bytes, uint64_t pages, bool file)
      : words_(words), bytes_(bytes), pages_(pages), file_(file) {}
  bool test(uint64_t page) const noexcept;

  uint64_t *words_;
  size_t bytes_;  // of the mapping
  uint64_t pages_;
  bool file_;
};

}  // namespace rpmem

#endif  // RPMEM_LIBRPMEM_OOS_MAP_H
