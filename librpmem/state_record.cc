// SPDX-License-Identifier: BSD-3-Clause
// StateRecord: a pool's record in the client's state directory, as text
// ("key value" lines after a first line that names the format).
#include "librpmem/state_record.h"

#include "common/error.h"
#include "common/random.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace rpmem {
namespace {

constexpr char kFormat[] = "rpmem pool record 1";

std::string hex(const uint8_t *p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[p[i] >> 4];
    out += kDigits[p[i] & 15];
  }
  return out;
}

bool unhex(const std::string &s, uint8_t *out, size_t n) {
  if (s.size() != 2 * n) return false;
  for (size_t i = 0; i < n; ++i) {
    unsigned v = 0;
    if (std::sscanf(s.c_str() + 2 * i, "%2x", &v) != 1) return false;
    out[i] = static_cast<uint8_t>(v);
  }
  return true;
}

// The record's name: a digest of the target and the pool set.
std::string name_of(const std::string &target, const std::string &pool_set) {
  const std::string key = target + '\0' + pool_set;
  uint8_t md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (EVP_Digest(key.data(), key.size(), md, &len, EVP_sha256(), nullptr) != 1) len = 0;
  return hex(md, std::min(len, 16u));
}

// mkdir -p, mode 0700 for what it makes.
std::error_code make_dirs(const std::string &dir) {
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at != dir.size() && dir[at] != '/') continue;
    const std::string part = dir.substr(0, at);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return last_errc();
  }
  return {};
}

bool write_all(int fd, const std::string &s) {
  for (size_t done = 0; done < s.size();) {
    const ssize_t w = ::write(fd, s.data() + done, s.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

StateRecord::StateRecord(std::string dir, const std::string &target, const std::string &pool_set)
    : dir_(std::move(dir)) {
  const std::string name = dir_ + "/" + name_of(target, pool_set);
  record_ = name + ".pool";
  map_ = name + ".map";
}

std::optional<PoolRecord> StateRecord::load() const {
  std::ifstream in(record_);
  std::string line;
  if (!in || !std::getline(in, line) || line != kFormat) return std::nullopt;
  PoolRecord r;
  bool token = false;
  while (std::getline(in, line)) {
    const size_t sp = line.find(' ');
    const std::string key = line.substr(0, sp),
                      value = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (key == "target")
      r.target = value;
    else if (key == "pool_set")
      r.pool_set = value;
    else if (key == "pool_size")
      r.pool_size = std::strtoull(value.c_str(), nullptr, 10);
    else if (key == "token")
      token = unhex(value, r.token.data(), r.token.size());
    else if (key == "boot_id")
      r.boot_id = value;
    else if (key == "saved")
      r.saved = value == "1";
    else if (key == "behind_since")
      r.behind_since_s = std::strtoull(value.c_str(), nullptr, 10);
  }
  if (!token || r.target.empty() || r.pool_set.empty() || r.pool_size == 0) return std::nullopt;
  return r;
}

std::error_code StateRecord::make_dir() const { return make_dirs(dir_); }

std::error_code StateRecord::save(const PoolRecord &r) const {
  if (auto ec = make_dirs(dir_)) return ec;
  std::ostringstream o;
  o << kFormat << "\ntarget " << r.target << "\npool_set " << r.pool_set << "\npool_size "
    << r.pool_size << "\ntoken " << hex(r.token.data(), r.token.size()) << "\nboot_id " << r.boot_id
    << "\nsaved " << (r.saved ? 1 : 0) << "\nbehind_since " << r.behind_since_s << "\n";
  uint8_t salt[8];
  if (auto ec = fill_random(salt, sizeof(salt))) return ec;
  const std::string tmp = record_ + "." + hex(salt, sizeof(salt));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return last_errc();
  const bool ok = write_all(fd, o.str()) && ::fsync(fd) == 0;
  const std::error_code ec = ok ? std::error_code{} : last_errc();
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), record_.c_str()) != 0) {
    const std::error_code err = ec ? ec : last_errc();
    ::unlink(tmp.c_str());
    return err;
  }
  const int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

void StateRecord::remove() const noexcept {
  ::unlink(map_.c_str());
  drop_record();
}

void StateRecord::drop_record() const noexcept {
  ::unlink(record_.c_str());
  const int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::string current_boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

bool map_trusted(const PoolRecord &r) {
  return r.saved || (!r.boot_id.empty() && r.boot_id == current_boot_id());
}

}  // namespace rpmem
