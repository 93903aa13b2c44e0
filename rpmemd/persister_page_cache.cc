// SPDX-License-Identifier: BSD-3-Clause
// The persister of a pool of files in the page cache (a part on a disk is
// enough): a persist writes the pages back to the disk (msync), durable and
// posted writes go through the part files (pwritev2, RWF_DSYNC when
// durable), and a NIC's writes into the mapping would never dirty a page, so
// it may not write there. Visible bytes are stores into the mapping, counted
// until the first persistent call after them, a write-back they are old
// enough for, or the close writes the whole pool back. A write-back that
// fails may have lost visible bytes nobody can name: from then on every
// write and persist of the pool fails with EIO.
#include "common/error.h"
#include "common/log.h"
#include "common/transport/copy_words.h"
#include "common/transport/lane_stats.h"
#include "rpmemd/persister.h"

#include <libpmem.h>

#include <sys/mman.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>

namespace rpmemd {
namespace {

using rpmem::errc;
using rpmem::last_errc;

constexpr MediumTraits kPageCache{
    .name = "disk",
    .noun = "a file in the page cache",
    .description = "a file in the page cache, written back to its disk on persist",
    .flush = "pmem_msync",
    .nic_writes = false,
    .waits_for_device = true,
    .apm_sound = false,
    .visible_cheaper = true,
};

class PageCachePersister final : public Persister {
 public:
  PageCachePersister(uint8_t *base, size_t size, const std::vector<MappedPart> &parts)
      : base_(base), size_(size), parts_(parts) {}
  const MediumTraits &traits() const noexcept override { return kPageCache; }
  std::error_code persist(size_t offset, size_t len, bool) noexcept override {
    if (lost_.load()) return errc(EIO);
    if (len == 0) return {};
    if (unpersisted()) return write_back_all();  // the range with the visible bytes
    // pmem_msync aligns the range down to a page boundary itself.
    if (pmem_msync(base_ + offset, len) != 0) {
      RPMEM_LOG_ERR("msync of [%zu, +%zu) failed: %s", offset, len, last_errc().message().c_str());
      return errc(EIO);
    }
    return {};
  }
  std::error_code write_durable(size_t offset, const uint8_t *src, size_t len,
                                bool) noexcept override {
    if (lost_.load()) return errc(EIO);
    if (!unpersisted()) return write_parts(offset, src, len, RWF_DSYNC);
    if (auto ec = write_parts(offset, src, len, 0)) return ec;
    return write_back_all();
  }
  std::error_code write_posted(size_t offset, const uint8_t *src, size_t len) noexcept override {
    return lost_.load() ? errc(EIO) : write_parts(offset, src, len, 0);
  }
  std::error_code persist_mapped(void *addr, size_t len) noexcept override {
    return pmem_msync(addr, len) == 0 ? std::error_code{} : errc(EIO);
  }
  std::error_code sync_all() noexcept override { return write_back_all(); }

  // Whole-word stores into the mapping, as a transport's stores that
  // made_visible() counts: no system call (write_parts below says what a
  // page written through the mapping costs).
  std::error_code write_visible(size_t offset, const uint8_t *src, size_t len) noexcept override {
    if (lost_.load()) return errc(EIO);
    rpmem::transport::copy_words(base_ + offset, src, len);
    return made_visible(offset, len);
  }
  std::error_code made_visible(size_t, size_t len) noexcept override {
    if (lost_.load()) return errc(EIO);
    if (len != 0) noted();
    return {};
  }
  std::error_code persist_visible() noexcept override {
    if (lost_.load()) return errc(EIO);
    return unpersisted() ? write_back_all() : std::error_code{};
  }
  std::error_code write_back(std::chrono::nanoseconds older_than) noexcept override {
    if (lost_.load()) return errc(EIO);
    const int64_t since = oldest_ns_.load();
    if (since == 0 || now_ns() - since < older_than.count()) return {};
    return write_back_all();
  }
  std::chrono::nanoseconds unpersisted_age() const noexcept override {
    const int64_t since = oldest_ns_.load();
    return std::chrono::nanoseconds(since == 0 ? 0 : std::max<int64_t>(1, now_ns() - since));
  }

 private:
  static int64_t now_ns() noexcept { return rpmem::transport::LaneCounters::now_ns(); }
  // A visible write is done: counted, and the oldest one timed.
  void noted() noexcept {
    visible_.fetch_add(1);
    int64_t none = 0;
    oldest_ns_.compare_exchange_strong(none, now_ns());
  }
  bool unpersisted() const noexcept { return synced_.load() < visible_.load(); }
  // Every visible byte noted before this call is durable when it returns 0.
  // The time is cleared first and the count read after: a write noted
  // meanwhile is timed again, and counted below `upto` only if the msync
  // that follows covers it. msync reports the file's writeback errors since
  // its last call, however the pages were dirtied and whoever wrote them
  // back (the kernel's flusher too), and only once: a failure is kept.
  std::error_code write_back_all() noexcept {
    std::lock_guard lock(write_back_mu_);
    if (lost_.load()) return errc(EIO);
    oldest_ns_.store(0);
    const uint64_t upto = visible_.load();
    if (::msync(base_, size_, MS_SYNC) != 0) {
      auto ec = last_errc();
      int64_t none = 0;
      oldest_ns_.compare_exchange_strong(none, now_ns());  // to do again, or lost
      if (synced_.load() < upto) {
        lost_.store(true);
        RPMEM_LOG_ERR(
            "msync of the whole pool failed: %s; visible bytes may be lost: every "
            "later write and persist of the pool fails",
            ec.message().c_str());
      } else {
        RPMEM_LOG_ERR("msync of the whole pool failed: %s", ec.message().c_str());
      }
      return errc(EIO);
    }
    if (synced_.load() < upto) synced_.store(upto);
    return {};
  }
  std::error_code write_parts(size_t offset, const uint8_t *src, size_t len, int flags) noexcept;

  uint8_t *base_;
  size_t size_;
  const std::vector<MappedPart> &parts_;
  std::atomic<uint64_t> visible_{0};   // visible writes noted
  std::atomic<uint64_t> synced_{0};    // of which durable
  std::atomic<int64_t> oldest_ns_{0};  // steady clock of the oldest not durable; 0: none
  std::atomic<bool> lost_{false};      // a write-back of visible bytes failed
  std::mutex write_back_mu_;
};

// Durable and posted writes go through the file, not the mapping: a page
// written through the mapping is write-protected again by its writeback
// and faults on the next store (on ext4 here 2.7-3.3 us for 4 KiB, against
// 2.0 us for a pwritev2), and a durable write is written back at once.
// Visible ones are stores: their pages are written back every half bound
// at most, and a store into a page written since costs 0.3 us. The mapping
// sees what the file gets (one page cache).
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
