// SPDX-License-Identifier: BSD-3-Clause
// Bad blocks of a pool set part, from sysfs and FIEMAP.
#include "rpmemd/pool_badblocks.h"

#include "common/error.h"

#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace rpmemd {

namespace {

using rpmem::errc;

constexpr uint64_t kSector = 512;

struct Range {
  uint64_t begin, end;  // bytes, [begin, end)
};

// The file's extents, physical byte ranges on its block device.
std::error_code file_extents(int fd, std::vector<Range> &out) {
  constexpr unsigned kBatch = 64;
  std::vector<uint8_t> buf(sizeof(fiemap) + kBatch * sizeof(fiemap_extent));
  uint64_t start = 0;
  for (;;) {
    std::fill(buf.begin(), buf.end(), 0);
    auto *fm = reinterpret_cast<fiemap *>(buf.data());
    fm->fm_start = start;
    fm->fm_length = FIEMAP_MAX_OFFSET - start;
    fm->fm_flags = FIEMAP_FLAG_SYNC;
    fm->fm_extent_count = kBatch;
    if (::ioctl(fd, FS_IOC_FIEMAP, fm) != 0) return errc(errno);
    if (fm->fm_mapped_extents == 0) return {};
    for (unsigned i = 0; i < fm->fm_mapped_extents; ++i) {
      const fiemap_extent &e = fm->fm_extents[i];
      out.push_back({e.fe_physical, e.fe_physical + e.fe_length});
      start = e.fe_logical + e.fe_length;
      if (e.fe_flags & FIEMAP_EXTENT_LAST) return {};
    }
  }
}

}  // namespace

std::error_code count_bad_blocks(int fd, size_t &count, const std::string &sysfs_root) noexcept
    try {
  count = 0;
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errc(errno);
  const std::string dev = sysfs_root + "/dev/block/" + std::to_string(major(st.st_dev)) + ":" +
                          std::to_string(minor(st.st_dev));
  char *real = ::realpath(dev.c_str(), nullptr);
  if (real == nullptr) return {};  // no block device (tmpfs, NFS...): no pmem bad blocks
  std::string disk(real);
  std::free(real);
  const std::string name = disk.substr(disk.rfind('/') + 1);
  if (name.rfind("pmem", 0) != 0) return {};  // not a pmem namespace

  uint64_t part_start = 0;  // sectors, for a partition of the namespace
  if (std::ifstream part(disk + "/partition"); part) {
    std::ifstream(disk + "/start") >> part_start;
    disk.resize(disk.rfind('/'));
  }
  std::ifstream list(disk + "/badblocks");
  if (!list) return errc(EIO);
  std::vector<Range> bad;
  uint64_t sector = 0, n = 0;
  while (list >> sector >> n) bad.push_back({sector * kSector, (sector + n) * kSector});
  if (!list.eof()) return errc(EIO);
  if (bad.empty()) return {};

  std::vector<Range> extents;
  if (auto ec = file_extents(fd, extents)) return ec;
  for (const Range &b : bad) {
    for (const Range &e : extents) {
      const uint64_t begin = e.begin + part_start * kSector, end = e.end + part_start * kSector;
      if (b.begin < end && begin < b.end) {
        ++count;
        break;
      }
    }
  }
  return {};
} catch (const std::bad_alloc &) {
  return errc(ENOMEM);
}

}  // namespace rpmemd
