// SPDX-License-Identifier: BSD-3-Clause
// The persister of a pool of files in the page cache (a part on a disk is
// enough): a persist writes the pages back to the disk (msync), whole writes
// go through the part files (pwritev2, RWF_DSYNC when durable), and a NIC's
// writes into the mapping would never dirty a page, so it may not write
// there.
#include "common/error.h"
#include "common/log.h"
#include "rpmemd/persister.h"

#include <libpmem.h>

#include <sys/mman.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rpmemd {
namespace {

using rpmem::errc;
using rpmem::last_errc;

// name, noun, description, GPSPM's flush, NIC writes, waits for a device, APM sound
constexpr MediumTraits kPageCache{"disk",
                                  "a file in the page cache",
                                  "a file in the page cache, written back to its disk on persist",
                                  "pmem_msync",
                                  false,
                                  true,
                                  false};

class PageCachePersister final : public Persister {
 public:
  PageCachePersister(uint8_t *base, size_t size, const std::vector<MappedPart> &parts)
      : base_(base), size_(size), parts_(parts) {}
  const MediumTraits &traits() const noexcept override { return kPageCache; }
  std::error_code persist(size_t offset, size_t len, bool) noexcept override {
    if (len == 0) return {};
    // pmem_msync aligns the range down to a page boundary itself.
    if (pmem_msync(base_ + offset, len) != 0) {
      RPMEM_LOG_ERR("msync of [%zu, +%zu) failed: %s", offset, len, last_errc().message().c_str());
      return errc(EIO);
    }
    return {};
  }
  std::error_code write_durable(size_t offset, const uint8_t *src, size_t len,
                                bool) noexcept override {
    return write_parts(offset, src, len, RWF_DSYNC);
  }
  std::error_code write_posted(size_t offset, const uint8_t *src, size_t len) noexcept override {
    return write_parts(offset, src, len, 0);
  }
  std::error_code persist_mapped(void *addr, size_t len) noexcept override {
    return pmem_msync(addr, len) == 0 ? std::error_code{} : errc(EIO);
  }
  std::error_code sync_all() noexcept override {
    if (::msync(base_, size_, MS_SYNC) == 0) return {};
    auto ec = last_errc();
    RPMEM_LOG_ERR("msync of the pool on close failed: %s", ec.message().c_str());
    return ec;
  }

 private:
  std::error_code write_parts(size_t offset, const uint8_t *src, size_t len, int flags) noexcept;

  uint8_t *base_;
  size_t size_;
  const std::vector<MappedPart> &parts_;
};

// Through the file, not the mapping: a page written through the mapping
// must be write-protected again by its writeback and fault on the next
// store, which costs several durable writes. The mapping sees the bytes
// (one page cache).
std::error_code PageCachePersister::write_parts(size_t offset, const uint8_t *src, size_t len,
                                                int flags) noexcept {
  for (const MappedPart &part : parts_) {
    if (len == 0) break;
    if (offset >= part.map_start + part.map_len) continue;
    const size_t in = offset - part.map_start;
    size_t n = std::min(len, part.map_len - in);
    const off_t at = part.file_off + static_cast<off_t>(in);
    for (size_t done = 0; done < n;) {
      iovec v{const_cast<uint8_t *>(src + done), n - done};
      const ssize_t w = ::pwritev2(part.fd, &v, 1, at + static_cast<off_t>(done), flags);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        RPMEM_LOG_ERR("write of [%zu, +%zu) into '%s' failed: %s", offset + done, n - done,
                      part.path.c_str(), w < 0 ? strerror(errno) : "wrote nothing");
        return errc(EIO);
      }
      done += static_cast<size_t>(w);
    }
    offset += n;
    src += n;
    len -= n;
  }
  return {};
}

}  // namespace

std::unique_ptr<Persister> make_page_cache_persister(uint8_t *base, size_t size,
                                                     const std::vector<MappedPart> &parts) {
  return std::make_unique<PageCachePersister>(base, size, parts);
}

}  // namespace rpmemd
