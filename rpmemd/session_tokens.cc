// SPDX-License-Identifier: BSD-3-Clause
// Session tokens beside the pool set files.
#include "rpmemd/session_tokens.h"

#include "common/error.h"
#include "common/random.h"
#include "common/wire.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <optional>

namespace rpmemd::session_tokens {
namespace {

// The file: u32 magic, u32 flags (kHasProved, kAhead), the token, the token the
// last reopen proved (zero without kHasProved), u32 parts, then each part's
// u64 device, u64 inode and u64 birth time (ns). A file of kTokenSize bytes alone is a token of
// an older rpmemd (no proved token, parts unknown).
constexpr uint32_t kMagic = 0x32544d52;  // "RMT2"
constexpr uint32_t kHasProved = 1;
constexpr uint32_t kAhead = 2;  // the session may run ahead of the pool
constexpr size_t kHead = 4 + 4 + 2 * proto::kTokenSize + 4;
constexpr uint32_t kMaxParts = 65536;
constexpr size_t kPartSize = 24;

struct Record {
  bool ahead = false;
  proto::SessionToken token{};
  std::optional<proto::SessionToken> proved;
  std::optional<std::vector<FileId>> parts;  // nullopt: an older rpmemd's file
};

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

proto::Bytes encode(const Record &r) {
  const auto &parts = *r.parts;
  proto::Bytes b(kHead + kPartSize * parts.size());
  uint8_t *p = b.data();
  rpmem::wire::store_le(p, kMagic, 4);
  rpmem::wire::store_le(p + 4, (r.proved ? kHasProved : 0) | (r.ahead ? kAhead : 0), 4);
  std::copy(r.token.begin(), r.token.end(), p + 8);
  if (r.proved) std::copy(r.proved->begin(), r.proved->end(), p + 8 + proto::kTokenSize);
  rpmem::wire::store_le(p + 8 + 2 * proto::kTokenSize, parts.size(), 4);
  p += kHead;
  for (const FileId &id : parts) {
    rpmem::wire::store_le(p, id.dev, 8);
    rpmem::wire::store_le(p + 8, id.ino, 8);
    rpmem::wire::store_le(p + 16, id.born_ns, 8);
    p += kPartSize;
  }
  return b;
}

std::optional<Record> decode(const proto::Bytes &b) {
  Record r;
  if (b.size() == proto::kTokenSize) {
    std::copy(b.begin(), b.end(), r.token.begin());
    return r;
  }
  if (b.size() < kHead || rpmem::wire::load_le(b.data(), 4) != kMagic) return std::nullopt;
  const uint64_t flags = rpmem::wire::load_le(b.data() + 4, 4);
  const uint64_t n = rpmem::wire::load_le(b.data() + 8 + 2 * proto::kTokenSize, 4);
  if ((flags & ~uint64_t{kHasProved | kAhead}) != 0 || n > kMaxParts ||
      b.size() != kHead + kPartSize * n)
    return std::nullopt;
  r.ahead = (flags & kAhead) != 0;
  std::copy_n(b.begin() + 8, proto::kTokenSize, r.token.begin());
  if (flags & kHasProved) {
    r.proved.emplace();
    std::copy_n(b.begin() + 8 + proto::kTokenSize, proto::kTokenSize, r.proved->begin());
  }
  r.parts.emplace();
  for (uint64_t i = 0; i < n; ++i) {
    const uint8_t *p = b.data() + kHead + kPartSize * i;
    r.parts->push_back({rpmem::wire::load_le(p, 8), rpmem::wire::load_le(p + 8, 8),
                        rpmem::wire::load_le(p + 16, 8)});
  }
  return r;
}

// The record in the token file, if it is rpmemd's own: a regular file of
// this process's user, not a link, of a length that makes a record.
std::optional<Record> read_record(const std::string &file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  proto::Bytes b;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
      static_cast<uint64_t>(st.st_size) <= kHead + kPartSize * uint64_t{kMaxParts}) {
    b.resize(static_cast<size_t>(st.st_size) + 1);  // one more: a file that grew shows
    const ssize_t n = ::pread(fd, b.data(), b.size(), 0);
    b.resize(n < 0 ? 0 : static_cast<size_t>(n));
  }
  ::close(fd);
  return decode(b);
}

}  // namespace

std::string file_for(const std::string &poolset_path) {
  const size_t slash = poolset_path.rfind('/');
  const std::string name =
      slash == std::string::npos ? poolset_path : poolset_path.substr(slash + 1);
  return dir_of(poolset_path) + "/." + name + ".rpmemd-session";
}

std::error_code issue(const std::string &poolset_path, const std::vector<FileId> &parts,
                      const proto::SessionToken *proved, bool ahead,
                      proto::SessionToken &out) noexcept try {
  if (auto ec = rpmem::fill_random(out.data(), out.size())) return ec;
  Record r;
  r.ahead = ahead;
  r.token = out;
  if (proved) r.proved = *proved;
  r.parts = parts;
  const proto::Bytes bytes = encode(r);
  // A name nobody can guess, made here and nowhere else (O_EXCL): a file
  // planted in the pool set directory is never written through or kept.
  uint8_t salt[8];
  if (auto ec = rpmem::fill_random(salt, sizeof(salt))) return ec;
  char suffix[2 * sizeof(salt) + 1];
  for (size_t i = 0; i < sizeof(salt); ++i) std::snprintf(suffix + 2 * i, 3, "%02x", salt[i]);
  const std::string file = file_for(poolset_path);
  const std::string tmp = file + "." + suffix;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return rpmem::last_errc();
  const bool ok =
      ::fchmod(fd, 0600) == 0 && write_all(fd, bytes.data(), bytes.size()) && ::fsync(fd) == 0;
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

Verdict check(const std::string &poolset_path, const proto::SessionToken &token,
              const std::vector<FileId> &parts) noexcept try {
  const std::optional<Record> r = read_record(file_for(poolset_path));
  if (!r) return Verdict::kStale;
  const bool latest = CRYPTO_memcmp(r->token.data(), token.data(), token.size()) == 0;
  const bool proved =
      r->proved && CRYPTO_memcmp(r->proved->data(), token.data(), token.size()) == 0;
  if (!latest && !proved) return Verdict::kStale;
  if (r->parts && *r->parts != parts) return Verdict::kReplaced;
  return Verdict::kMatches;
} catch (...) {
  return Verdict::kStale;
}

bool runs_ahead(const std::string &poolset_path) noexcept try {
  const std::optional<Record> r = read_record(file_for(poolset_path));
  return r && r->ahead;
} catch (...) {
  return false;
}

void forget(const std::string &poolset_path) noexcept try {
  ::unlink(file_for(poolset_path).c_str());
} catch (...) {
}

}  // namespace rpmemd::session_tokens
