// SPDX-License-Identifier: BSD-3-Clause
// Session tokens beside the pool set files.
#include "rpmemd/session_tokens.h"

#include "common/error.h"
#include "common/random.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace rpmemd::session_tokens {
namespace {

std::string dir_of(const std::string &path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

bool write_all(int fd, const uint8_t *p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

std::string file_for(const std::string &poolset_path) {
  const size_t slash = poolset_path.rfind('/');
  const std::string name =
      slash == std::string::npos ? poolset_path : poolset_path.substr(slash + 1);
  return dir_of(poolset_path) + "/." + name + ".rpmemd-session";
}

std::error_code issue(const std::string &poolset_path, proto::SessionToken &out) noexcept try {
  if (auto ec = rpmem::fill_random(out.data(), out.size())) return ec;
  const std::string file = file_for(poolset_path);
  const std::string tmp = file + ".new";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return rpmem::last_errc();
  const bool ok = write_all(fd, out.data(), out.size()) && ::fsync(fd) == 0;
  const std::error_code ec = ok ? std::error_code{} : rpmem::last_errc();
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), file.c_str()) != 0) {
    const std::error_code err = ec ? ec : rpmem::last_errc();
    ::unlink(tmp.c_str());
    return err;
  }
  const int dfd = ::open(dir_of(file).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
} catch (const std::bad_alloc &) {
  return std::make_error_code(std::errc::not_enough_memory);
}

bool matches(const std::string &poolset_path, const proto::SessionToken &token) noexcept try {
  const int fd = ::open(file_for(poolset_path).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  proto::SessionToken stored{};
  uint8_t extra = 0;
  const bool whole =
      ::read(fd, stored.data(), stored.size()) == static_cast<ssize_t>(stored.size()) &&
      ::read(fd, &extra, 1) == 0;
  ::close(fd);
  return whole && CRYPTO_memcmp(stored.data(), token.data(), token.size()) == 0;
} catch (...) {
  return false;
}

void forget(const std::string &poolset_path) noexcept try {
  ::unlink(file_for(poolset_path).c_str());
} catch (...) {
}

}  // namespace rpmemd::session_tokens
