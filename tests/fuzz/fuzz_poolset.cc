// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: pool set files (parse_poolset) and part sizes.
#include "common/pool_attr.h"
#include "rpmemd/poolset.h"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  auto set = rpmemd::parse_poolset(text);
  if (set) {
    const auto &s = set.value();
    if (s.parts.empty()) std::abort();
    for (const auto &p : s.parts) {
      // Size 0 is AUTO (a Device DAX's own size, checked when it is opened).
      if ((p.size != 0 && p.size < rpmem::kMinPart) || p.path.empty() || p.path[0] != '/')
        std::abort();
    }
    if (s.single_hdr && s.no_hdrs) std::abort();
    (void)rpmemd::poolset_net_size(s);
    (void)s.header_count();
    (void)s.later_part_map_offset();
  }
  // The first line as a size token.
  (void)rpmemd::parse_poolset_size(text.substr(0, text.find('\n')));
  return 0;
}
