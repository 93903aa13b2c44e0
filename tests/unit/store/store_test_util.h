// SPDX-License-Identifier: BSD-3-Clause
// Helpers for the pool store tests: a temporary directory and file access.
#ifndef RPMEM_TESTS_UNIT_STORE_STORE_TEST_UTIL_H
#define RPMEM_TESTS_UNIT_STORE_STORE_TEST_UTIL_H

#include "common/pool_attr.h"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace rpmemd::test {

inline constexpr size_t kMiB = 1024 * 1024;

// A fresh directory under /tmp, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/rpmem-store-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  const std::string &path() const { return path_; }
  std::string operator/(const std::string &name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void write_file(const std::string &path, const std::string &text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + path);
}

inline std::vector<uint8_t> read_bytes(const std::string &path, size_t off, size_t len) {
  std::ifstream f(path, std::ios::binary);
  f.seekg(static_cast<std::streamoff>(off));
  std::vector<uint8_t> buf(len);
  f.read(reinterpret_cast<char *>(buf.data()), static_cast<std::streamsize>(len));
  if (!f) throw std::runtime_error("cannot read " + path);
  return buf;
}

inline bool exists(const std::string &path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

inline uint64_t file_size(const std::string &path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_size);
}

// Attributes such as libpmemobj 1.12 sends for a new pool (signature
// "PMEMOBJ", major 6, compat CHECK_BAD_BLOCKS, incompat CKSUM_2K|SDS);
// everything else left for the target to generate.
inline rpmem::PoolAttr obj_like_attr() {
  rpmem::PoolAttr a;
  std::memcpy(a.signature.data(), "PMEMOBJ", 8);
  a.major = 6;
  a.compat_features = 0x1;
  a.incompat_features = 0x6;
  return a;
}

// The UUIDs and the user flags of `a` as counting bytes: the k-th of
// poolset_uuid, uuid, next_uuid, prev_uuid, user_flags from first + k * step.
inline void fill_ids(rpmem::PoolAttr &a, uint8_t first, uint8_t step) {
  std::array<uint8_t, 16> *fields[] = {&a.poolset_uuid, &a.uuid, &a.next_uuid, &a.prev_uuid,
                                       &a.user_flags};
  for (size_t k = 0; k < std::size(fields); ++k)
    for (size_t i = 0; i < 16; ++i) (*fields[k])[i] = static_cast<uint8_t>(first + k * step + i);
}

// Attributes with every field set: the 8 bytes of `signature`, `major`, the
// compat, incompat and ro_compat features, and fill_ids(first, step).
inline rpmem::PoolAttr full_attr(const char *signature, uint32_t major,
                                 const std::array<uint32_t, 3> &features, uint8_t first,
                                 uint8_t step) {
  rpmem::PoolAttr a;
  std::memcpy(a.signature.data(), signature, 8);
  a.major = major;
  a.compat_features = features[0];
  a.incompat_features = features[1];
  a.ro_compat_features = features[2];
  fill_ids(a, first, step);
  return a;
}

}  // namespace rpmemd::test

#endif  // RPMEM_TESTS_UNIT_STORE_STORE_TEST_UTIL_H
