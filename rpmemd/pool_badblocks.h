// SPDX-License-Identifier: BSD-3-Clause
// Bad blocks of a pool set part: PMDK's CHECK_BAD_BLOCKS feature (compat
// 0x1) as its rpmemd handled it -- a pool whose parts lie on known bad pmem
// blocks is neither created nor opened (EIO).
//
// A part on an ordinary file system has no pmem bad blocks. A part on an
// fsdax pmem namespace (a block device named pmem*) has the bad sectors that
// the kernel lists in sysfs (<sysfs>/dev/block/MAJ:MIN/badblocks, of the
// whole disk for a partition; the same list libndctl reads); those that fall
// inside the file's extents (FIEMAP) count.
#ifndef RPMEMD_POOL_BADBLOCKS_H
#define RPMEMD_POOL_BADBLOCKS_H

#include <cstddef>
#include <string>
#include <system_error>

namespace rpmemd {

// Number of bad-block ranges of the pmem device under the file open as fd
// that overlap the file's extents; 0 for a file that is not on pmem.
// Errors: errno of fstat/ioctl(FS_IOC_FIEMAP) (a file on pmem whose extents
// cannot be read), EIO on an unreadable badblocks list. sysfs_root is for
// tests. Thread-safe.
std::error_code count_bad_blocks(int fd, size_t &count,
                                 const std::string &sysfs_root = "/sys") noexcept;

}  // namespace rpmemd

#endif  // RPMEMD_POOL_BADBLOCKS_H
