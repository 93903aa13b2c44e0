// SPDX-License-Identifier: BSD-3-Clause
// choose_persister(): the one place where rpmemd tells media apart.
#include "rpmemd/persister.h"

#include "rpmemd/pool_cxl.h"

#include <libpmem.h>

#include <algorithm>

namespace rpmemd {

rpmem::Result<std::unique_ptr<Persister>> choose_persister(uint8_t *base, size_t size,
                                                           const std::vector<MappedPart> &parts) {
  auto all = [&](auto pred) {
    return !parts.empty() && std::all_of(parts.begin(), parts.end(), pred);
  };
  const auto is_device = [](const MappedPart &p) { return p.device.has_value(); };
  const bool devdax = all(is_device);
  if (!devdax && std::any_of(parts.begin(), parts.end(), is_device))
    return rpmem::Error{rpmem::errc(EINVAL), "either all the parts must be Device DAX or none"};
  const bool cxl = all([](const MappedPart &p) { return p.nd_provider == kNdProviderCxl; });
  if (devdax) return cxl ? make_cxl_devdax_persister(base) : make_devdax_persister(base, parts);
  const bool map_sync = all([](const MappedPart &p) { return p.map_sync; });
  if (map_sync && cxl) return make_cxl_fsdax_persister(base, size);
  if (map_sync || pmem_is_pmem(base, size) != 0) return make_fsdax_persister(base, size);
  if (all([](const MappedPart &p) { return p.in_ram; })) return make_ram_persister(base);
  return make_page_cache_persister(base, size, parts);
}

}  // namespace rpmemd
