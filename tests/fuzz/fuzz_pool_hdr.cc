// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: the pool header checks. The input becomes the header pages of
// a real two-part pool (bytes 0..4095 part 0, 4096..8191 part 1, zero
// padded), which PoolStore::open then maps and checks as rpmemd would; the
// pure header functions see part 0's header too.
#include "rpmemd/pool_hdr.h"
#include "rpmemd/pool_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

namespace {

struct Fixture {
  std::string dir;
  int part[2] = {-1, -1};
  std::unique_ptr<rpmemd::PoolStore> store;

  Fixture() {
    char tmpl[] = "/tmp/rpmem-fuzz-hdr-XXXXXX";
    if (!::mkdtemp(tmpl)) std::abort();
    dir = tmpl;
    std::ofstream(dir + "/p.set") << "PMEMPOOLSET\n2M " << dir << "/p.part0\n2M " << dir
                                  << "/p.part1\n";
    for (int i = 0; i < 2; ++i) {
      std::string path = dir + "/p.part" + std::to_string(i);
      part[i] = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
      if (part[i] < 0 || ::ftruncate(part[i], 2 * 1024 * 1024) != 0) std::abort();
    }
    store = std::make_unique<rpmemd::PoolStore>(dir);
  }
  ~Fixture() {
    for (int i = 0; i < 2; ++i) {
      ::close(part[i]);
      ::unlink((dir + "/p.part" + std::to_string(i)).c_str());
    }
    ::unlink((dir + "/p.set").c_str());
    ::rmdir(dir.c_str());
  }
  Fixture(const Fixture &) = delete;
  Fixture &operator=(const Fixture &) = delete;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static Fixture fx;
  uint8_t page[2][rpmem::kPoolHdrSize] = {};
  std::memcpy(page, data, std::min(size, sizeof(page)));

  rpmemd::PoolHdr h;
  std::memcpy(&h, page[0], sizeof(h));
  (void)rpmemd::checksum_end_offset(h);
  bool valid = rpmemd::checksum_valid(h);
  if (valid != (rpmemd::compute_checksum(h) == h.checksum)) std::abort();
  (void)rpmemd::is_zero(h);
  (void)rpmemd::attr_from_hdr(h);

  for (int i = 0; i < 2; ++i) {
    if (::pwrite(fx.part[i], page[i], sizeof(page[i]), 0) != static_cast<ssize_t>(sizeof(page[i])))
      std::abort();
  }
  std::unique_ptr<rpmemd::MappedPool> pool;
  rpmem::PoolAttr attr;
  auto ec = fx.store->open("p.set", pool, attr);
  if (!ec) {
    if (!pool || pool->size() != 4 * 1024 * 1024 - 4096 || !pool->has_headers()) std::abort();
    // Page 0 passed every check, so its checksum is valid.
    if (!valid) std::abort();
  }
  return 0;
}
