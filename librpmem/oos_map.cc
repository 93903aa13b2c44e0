// SPDX-License-Identifier: BSD-3-Clause
// OosMap: a bitmap of a pool's pages, in a shared file mapping or memory.
#include "librpmem/oos_map.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <bit>

namespace rpmem {
namespace {

constexpr uint64_t kAll = ~uint64_t{0};

// The bits of word `w` that pages [first, end) cover.
uint64_t bits_of(uint64_t w, uint64_t first, uint64_t end) {
  const uint64_t lo = std::max(first, w * 64), hi = std::min(end, w * 64 + 64);
  if (lo >= hi) return 0;
  const uint64_t n = hi - lo;
  return (n == 64 ? kAll : ((uint64_t{1} << n) - 1)) << (lo - w * 64);
}

}  // namespace

Result<std::unique_ptr<OosMap>> OosMap::open(const std::string &path, uint64_t pool_size,
                                             bool create) {
  const uint64_t pages = (pool_size + kPage - 1) / kPage;
  const size_t bytes = static_cast<size_t>((pages + 63) / 64 * 8);
  void *m = nullptr;
  if (path.empty()) {
    m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  } else {
    const int fd = ::open(path.c_str(),
                          O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT | O_TRUNC : 0), 0600);
    if (fd < 0) return Error{last_errc(), "cannot open the out-of-sync map '" + path + "'"};
    struct stat st {};
    bool ok = ::fstat(fd, &st) == 0;
    if (ok && create)
      ok = ::ftruncate(fd, static_cast<off_t>(bytes)) == 0 && ::fsync(fd) == 0;
    else if (ok)
      ok = static_cast<uint64_t>(st.st_size) == bytes;
    if (ok) m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const std::error_code ec = ok ? std::error_code{} : last_errc();
    ::close(fd);
    if (!ok)
      return Error{ec ? ec : errc(EINVAL), "the out-of-sync map '" + path + "' is not this pool's"};
  }
  if (m == MAP_FAILED) return Error{last_errc(), "cannot map the out-of-sync map"};
  return std::unique_ptr<OosMap>(
      new OosMap(static_cast<uint64_t *>(m), bytes, pages, !path.empty()));
}

OosMap::~OosMap() { ::munmap(words_, bytes_); }

void OosMap::mark_pages(uint64_t first, uint64_t count) noexcept {
  const uint64_t end = std::min(first + count, pages_);
  for (uint64_t w = first / 64; w * 64 < end; ++w)
    std::atomic_ref<uint64_t>(words_[w]).fetch_or(bits_of(w, first, end),
                                                  std::memory_order_seq_cst);
}

void OosMap::mark(uint64_t offset, uint64_t length) noexcept {
  if (length == 0) return;
  mark_pages(offset / kPage, (offset + length - 1) / kPage - offset / kPage + 1);
}

void OosMap::mark_all() noexcept { mark_pages(0, pages_); }

void OosMap::clear(uint64_t first, uint64_t count) noexcept {
  const uint64_t end = std::min(first + count, pages_);
  for (uint64_t w = first / 64; w * 64 < end; ++w)
    std::atomic_ref<uint64_t>(words_[w]).fetch_and(~bits_of(w, first, end),
                                                   std::memory_order_seq_cst);
}

bool OosMap::test(uint64_t page) const noexcept {
  const uint64_t word =
      std::atomic_ref<uint64_t>(words_[page / 64]).load(std::memory_order_seq_cst);
  return (word >> (page % 64)) & 1;
}

bool OosMap::any(uint64_t first, uint64_t count) const noexcept {
  const uint64_t end = std::min(first + count, pages_);
  for (uint64_t w = first / 64; w * 64 < end; ++w)
    if (std::atomic_ref<uint64_t>(words_[w]).load(std::memory_order_seq_cst) &
        bits_of(w, first, end))
      return true;
  return false;
}

bool OosMap::next(uint64_t from, uint64_t most, uint64_t &first, uint64_t &count) const noexcept {
  uint64_t p = from;
  while (p < pages_) {
    const uint64_t word =
        std::atomic_ref<uint64_t>(words_[p / 64]).load(std::memory_order_seq_cst) >> (p % 64);
    if (word == 0) {
      p = (p / 64 + 1) * 64;
      continue;
    }
    p += static_cast<uint64_t>(std::countr_zero(word));
    break;
  }
  if (p >= pages_) return false;
  first = p;
  count = 0;
  while (p < pages_ && count < most && test(p)) {
    ++p;
    ++count;
  }
  return true;
}

uint64_t OosMap::count() const noexcept {
  uint64_t n = 0;
  for (size_t w = 0; w < bytes_ / 8; ++w)
    n += static_cast<uint64_t>(
        std::popcount(std::atomic_ref<uint64_t>(words_[w]).load(std::memory_order_seq_cst)));
  return n;
}

std::error_code OosMap::sync() noexcept {
  if (!file_) return {};
  return ::msync(words_, bytes_, MS_SYNC) == 0 ? std::error_code{} : last_errc();
}

}  // namespace rpmem
