// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: target strings "[user@]host[:port]" and port numbers.
#include "librpmem/target_address.h"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view s(reinterpret_cast<const char *>(data), size);
  auto t = rpmem::parse_target(s);
  if (t) {
    const auto &a = t.value();
    if (a.host.empty()) std::abort();
    (void)a.ssh_destination();
    if (!a.port.empty()) (void)rpmem::port_number(a.port);
  }
  (void)rpmem::port_number(std::string(s));
  return 0;
}
