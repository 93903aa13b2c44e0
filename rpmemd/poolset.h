// SPDX-License-Identifier: BSD-3-Clause
// PoolSet: a parsed poolset(5) file of a remote pool (one replica, local parts).
//
// Accepted syntax (PMDK's util_poolset_parse, restricted to what rpmemd takes):
//   line 1      exactly "PMEMPOOLSET"
//   part line   "<size> <absolute path>", size as PMDK's util_parse_size:
//               digits, optionally followed by B, K/M/G/T/P (powers of 1024),
//               KiB/MiB/GiB/TiB/PiB (powers of 1024) or kB/MB/GB/TB/PB
//               (powers of 1000)
//   options     "OPTION SINGLEHDR" / "OPTION NOHDRS" (one or more per line,
//               mutually exclusive)
//   comments    '#' to the end of any line; blank lines; CRLF line ends
//   AUTO        a part's size: a device DAX's own (size 0 here, resolved
//               by resolve_device_dax when the set is loaded)
// Refused (EINVAL, with a message): REPLICA lines (a remote pool set has one
// replica), relative paths, extra
// tokens, unknown options, no parts, a part smaller than rpmem::kMinPart, a
// size that overflows 64 bits.
#ifndef RPMEMD_POOLSET_H
#define RPMEMD_POOLSET_H

#include "common/error.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rpmemd {

// A device DAX (/dev/daxX.Y): the whole device is the part, nothing is
// created or unlinked.
struct DeviceDax {
  uint64_t size = 0;   // bytes of the device
  uint64_t align = 0;  // its mapping alignment (4 KiB, 2 MiB, 1 GiB)
  // Its NVDIMM region's deep_flush file (writing 1 flushes the memory
  // controller's write queues); empty when the region has none: stores made
  // persistent with pmem_persist() are then as deep as the platform takes
  // them.
  std::string deep_flush;
};

struct PoolSetPart {
  uint64_t size = 0;  // configured file size in bytes (>= rpmem::kMinPart); 0: AUTO
  std::string path;   // absolute path, as written in the file
  // What the part is, decided once when the set is loaded
  // (resolve_device_dax): a device DAX, or (nullopt) a file.
  std::optional<DeviceDax> device;
};

struct PoolSet {
  std::vector<PoolSetPart> parts;  // never empty after a successful parse
  bool single_hdr = false;         // OPTION SINGLEHDR: a header in part 0 only
  bool no_hdrs = false;            // OPTION NOHDRS: no header at all

  // Number of parts that carry a pool_hdr: all, 1 (SINGLEHDR) or 0 (NOHDRS).
  size_t header_count() const noexcept;
  // File offset at which parts 1..n are mapped: 4096 by default (their
  // header is not addressable), 0 with SINGLEHDR or NOHDRS.
  uint64_t later_part_map_offset() const noexcept;
};

// Largest pool set file the store reads; a bigger one is refused (EINVAL).
inline constexpr size_t kMaxPoolSetFileSize = 1024 * 1024;

// Parses one size token ("8M", "2097152", "1GiB", "3kB"). EINVAL on a bad
// format, an unknown suffix, zero, or overflow.
rpmem::Result<uint64_t> parse_poolset_size(std::string_view token);

// Parses the text of a pool set file. Errors: EINVAL with a message naming
// the line.
rpmem::Result<PoolSet> parse_poolset(std::string_view text);

// Net pool size: sum of the part sizes rounded down to 4096, minus 4096 for
// every header but the first (all parts by default, none with SINGLEHDR);
// with NOHDRS simply the sum of the rounded sizes.
uint64_t poolset_net_size(const PoolSet &set) noexcept;

}  // namespace rpmemd

#endif  // RPMEMD_POOLSET_H
