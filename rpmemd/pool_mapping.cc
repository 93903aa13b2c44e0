// SPDX-License-Identifier: BSD-3-Clause
// PoolMapping: open/create and lock the parts, map them contiguously and
// choose their persister, remove them (headers: pool_mapping_headers.cc).
#include "rpmemd/pool_mapping.h"

#include "common/error.h"
#include "common/log.h"
#include "rpmemd/pool_badblocks.h"
#include "rpmemd/pool_cxl.h"
#include "rpmemd/pool_device_dax.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace rpmemd {
namespace {

using rpmem::errc;
using rpmem::last_errc;
using rpmem::PoolAttr;

constexpr size_t kHdrSize = rpmem::kPoolHdrSize;
constexpr uint64_t kPageMask = ~uint64_t{4096 - 1};
// The mapping starts on a 2 MiB boundary so that DAX can use huge pages.
constexpr size_t kMapAlign = 2 * 1024 * 1024;
constexpr mode_t kPartMode = 0666;  // rpmemd's mode for created parts

// Reads exactly n bytes at offset; EIO on a short read.
std::error_code pread_all(int fd, void *buf, size_t n, off_t off) {
  auto *p = static_cast<uint8_t *>(buf);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, n, off);
    if (r < 0) {
      if (errno == EINTR) continue;
      return last_errc();
    }
    if (r == 0) return errc(EIO);
    p += r;
    n -= static_cast<size_t>(r);
    off += r;
  }
  return {};
}

// Tells whether the file system can map this file with MAP_SYNC, without
// touching the reserved range (a failed MAP_FIXED attempt may already have
// unmapped it on older kernels).
bool supports_map_sync(int fd) {
  void *probe =
      ::mmap(nullptr, kHdrSize, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE | MAP_SYNC, fd, 0);
  if (probe == MAP_FAILED) return false;
  ::munmap(probe, kHdrSize);
  return true;
}

// fsync of a file just created and of the directory that names it.
std::error_code sync_new_file(int fd, const std::string &path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == 0 ? "/" : path.substr(0, slash);
  std::error_code ec;
  if (::fsync(fd) != 0) ec = last_errc();
  int dfd = ec ? -1 : ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (!ec && (dfd < 0 || ::fsync(dfd) != 0)) ec = last_errc();
  if (dfd >= 0) ::close(dfd);
  if (ec) RPMEM_LOG_ERR("cannot make part '%s' durable: %s", path.c_str(), ec.message().c_str());
  return ec;
}

// errno as the error of `part`, logged: "cannot <what> part '<path>': ...".
std::error_code part_error(const char *what, const MappedPart &part) {
  std::error_code ec = last_errc();
  RPMEM_LOG_ERR("cannot %s part '%s': %s", what, part.path.c_str(), ec.message().c_str());
  return ec;
}

// Opens the part (unless it is open already) and locks it (flock
// LOCK_EX|LOCK_NB: EWOULDBLOCK when another open file description has it).
std::error_code open_locked(MappedPart &part) {
  if (part.fd < 0) part.fd = ::open(part.path.c_str(), O_RDWR | O_CLOEXEC);
  if (part.fd < 0) return part_error("open", part);
  if (::flock(part.fd, LOCK_EX | LOCK_NB) != 0) return part_error("lock", part);
  return {};
}

}  // namespace

PoolMapping::PoolMapping(PoolSet set) : set_(std::move(set)) {
  parts_.reserve(set_.parts.size());
  // What each part is was decided when the set was loaded.
  for (const auto &p : set_.parts)
    parts_.push_back(Part{.path = p.path, .size = p.size, .device = p.device, .nd_provider = {}});
}

PoolMapping::~PoolMapping() {
  if (base_ != nullptr && persister_) persister_->sync_all();
  unmap();
  close_fds();
}

std::error_code PoolMapping::open_part(Part &part, bool create, bool check_hdr_zero) noexcept {
  if (part.device) {
    // The whole device, sized by the pool set (resolve_device_dax checked
    // it); nothing to create. Its header is checked once it is mapped.
    return open_locked(part);
  }
  if (create) {
    part.fd = ::open(part.path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (part.fd >= 0) {
      part.created = true;
    } else if (errno != EEXIST) {
      return part_error("create", part);
    }
  }
  if (auto ec = open_locked(part)) return ec;
  if (part.created) {
    if (::fchmod(part.fd, kPartMode) != 0) return last_errc();
    int r = ::posix_fallocate(part.fd, 0, static_cast<off_t>(part.size));
    if (r != 0) {
      RPMEM_LOG_ERR("cannot allocate %llu bytes for part '%s': %s",
                    static_cast<unsigned long long>(part.size), part.path.c_str(),
                    errc(r).message().c_str());
      return errc(r);
    }
    // The new file, its size and its name are durable before the first
    // persist into it is acknowledged, whatever the power does next.
    return sync_new_file(part.fd, part.path);
  }
  struct stat st {};
  if (::fstat(part.fd, &st) != 0) return last_errc();
  if (!S_ISREG(st.st_mode)) {
    RPMEM_LOG_ERR("part '%s' is not a regular file", part.path.c_str());
    return errc(EINVAL);
  }
  if (static_cast<uint64_t>(st.st_size) != part.size) {
    RPMEM_LOG_ERR("size of part '%s' (%lld) does not match the pool set (%llu)", part.path.c_str(),
                  static_cast<long long>(st.st_size), static_cast<unsigned long long>(part.size));
    return errc(EINVAL);
  }
  if (check_hdr_zero) {
    uint8_t buf[kHdrSize];
    if (auto ec = pread_all(part.fd, buf, sizeof(buf), 0)) return ec;
    if (!is_zero_bytes(buf, sizeof(buf))) {
      RPMEM_LOG_ERR("non-empty file detected: '%s'", part.path.c_str());
      return errc(EEXIST);
    }
  }
  return {};
}

std::error_code PoolMapping::open_parts(bool create) noexcept {
  const size_t nhdrs = set_.header_count();
  for (size_t i = 0; i < parts_.size(); ++i)
    if (auto ec = open_part(parts_[i], create, create && i < nhdrs)) return ec;
  return {};
}

std::error_code PoolMapping::map() noexcept {
  const uint64_t later_off = set_.later_part_map_offset();
  std::vector<size_t> lens;
  size_t total = 0;
  for (size_t i = 0; i < parts_.size(); ++i) {
    uint64_t off = i == 0 ? 0 : later_off;
    lens.push_back(static_cast<size_t>((parts_[i].size & kPageMask) - off));
    total += lens.back();
  }

  // Reserve an aligned range, then map every part over it with MAP_FIXED:
  // on a 2 MiB boundary, or a device DAX's own alignment when it is larger.
  size_t align = kMapAlign;
  for (const Part &part : parts_)
    if (part.device) align = std::max<size_t>(align, part.device->align);
  size_t resv_len = total + align;
  void *resv =
      ::mmap(nullptr, resv_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (resv == MAP_FAILED) return last_errc();
  auto start = reinterpret_cast<uintptr_t>(resv);
  uintptr_t aligned = (start + align - 1) & ~uintptr_t{align - 1};
  if (aligned > start) ::munmap(resv, aligned - start);
  size_t tail = (start + resv_len) - (aligned + total);
  if (tail > 0) ::munmap(reinterpret_cast<void *>(aligned + total), tail);
  base_ = reinterpret_cast<uint8_t *>(aligned);
  size_ = total;

  uint8_t *addr = base_;
  for (size_t i = 0; i < parts_.size(); ++i) {
    Part &part = parts_[i];
    off_t off = i == 0 ? 0 : static_cast<off_t>(later_off);
    part.map_sync = supports_map_sync(part.fd);
    int flags = part.map_sync ? (MAP_SHARED_VALIDATE | MAP_SYNC) : MAP_SHARED;
    void *p = ::mmap(addr, lens[i], PROT_READ | PROT_WRITE, flags | MAP_FIXED, part.fd, off);
    if (p == MAP_FAILED) {
      std::error_code ec = last_errc();
      RPMEM_LOG_ERR("cannot map part '%s': %s", part.path.c_str(), ec.message().c_str());
      unmap();
      return ec;
    }
    part.map_start = static_cast<size_t>(addr - base_);
    part.map_len = lens[i];
    part.file_off = off;
    addr += lens[i];
    struct statfs fs {};  // a device DAX is on devtmpfs, and not in RAM
    part.in_ram =
        !part.device && ::fstatfs(part.fd, &fs) == 0 &&
        (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC || fs.f_type == HUGETLBFS_MAGIC);
    // Persistent memory: on which nvdimm bus (CXL or an NVDIMM's).
    if (part.map_sync || part.device) part.nd_provider = nd_bus_provider_of(part.fd);
  }
  try {
    auto chosen = choose_persister(base_, size_, parts_);
    if (!chosen) {
      RPMEM_LOG_ERR("%s", chosen.error().message.c_str());
      unmap();
      return chosen.error().code;
    }
    persister_ = std::move(chosen.value());
  } catch (const std::bad_alloc &) {
    unmap();
    return errc(ENOMEM);
  }
  return {};
}

std::error_code PoolMapping::check_bad_blocks() const noexcept {
  for (const Part &part : parts_) {
    size_t count = 0;
    if (auto ec = count_bad_blocks(part.fd, count)) {
      RPMEM_LOG_ERR("cannot check part '%s' for bad blocks: %s", part.path.c_str(),
                    ec.message().c_str());
      return errc(EIO);
    }
    if (count > 0) {
      RPMEM_LOG_ERR("part '%s' contains %zu bad block(s); run 'pmempool sync --bad-blocks'",
                    part.path.c_str(), count);
      return errc(EIO);
    }
  }
  return {};
}

std::error_code PoolMapping::persist(size_t offset, size_t len, bool deep) noexcept {
  if (offset > size_ || len > size_ - offset) return errc(EINVAL);
  return persister_->persist(offset, len, deep);
}

std::error_code PoolMapping::remove_parts() noexcept {
  unmap();
  std::error_code first;
  for (auto &part : parts_) {
    if (auto ec = remove_part(part.path, part.device, false); ec && !first) {
      first = ec;
      RPMEM_LOG_ERR("cannot remove part '%s': %s", part.path.c_str(), first.message().c_str());
    }
  }
  close_fds();
  return first;
}

std::vector<FileId> PoolMapping::part_ids() const {
  std::vector<FileId> ids;
  ids.reserve(parts_.size());
  for (const auto &part : parts_) {
    struct statx st {};
    FileId id;
    if (part.fd >= 0 && ::statx(part.fd, "", AT_EMPTY_PATH, STATX_INO | STATX_BTIME, &st) == 0) {
      id.dev = uint64_t{st.stx_dev_major} << 32 | st.stx_dev_minor;
      id.ino = st.stx_ino;
      if (st.stx_mask & STATX_BTIME)
        id.born_ns =
            static_cast<uint64_t>(st.stx_btime.tv_sec) * 1000000000u + st.stx_btime.tv_nsec;
    }
    ids.push_back(id);
  }
  return ids;
}

void PoolMapping::discard() noexcept {
  unmap();
  for (auto &part : parts_) {
    if (part.created) ::unlink(part.path.c_str());
    part.created = false;
  }
  close_fds();
}

void PoolMapping::unmap() noexcept {
  if (base_ != nullptr) ::munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
}

void PoolMapping::close_fds() noexcept {
  for (auto &part : parts_) {
    if (part.fd >= 0) ::close(part.fd);
    part.fd = -1;
  }
}

}  // namespace rpmemd
