// SPDX-License-Identifier: BSD-3-Clause
// Sealed data lanes: the lane keys (HKDF with OpenSSL), the frame cipher
// (AES-128-GCM with libgcrypt) and SealedStream's framing.
#include "common/transport/tcp/sealed_stream.h"

#include "common/error.h"
#include "common/log.h"
#include "common/wire.h"

#include <gcrypt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rpmem::transport::tcp {
namespace {

constexpr size_t kMaxFrameBytes = kSealedHeader + kMaxSealedFrame + kSealedTag;
// Raw receive buffer: a whole frame and most of the next.
constexpr size_t kInBuffer = 2 * kMaxFrameBytes;

using wire::load_le32;
using wire::store_le32;

// HKDF-SHA256 without salt.
bool hkdf(const uint8_t *key, size_t key_len, const uint8_t *info, size_t info_len, uint8_t *out,
          size_t out_len) noexcept {
  static EVP_KDF *const kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  if (!kdf) return false;
  EVP_KDF_CTX *ctx = EVP_KDF_CTX_new(kdf);
  if (!ctx) return false;
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<uint8_t *>(key), key_len),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, const_cast<uint8_t *>(info), info_len),
      OSSL_PARAM_construct_end()};
  const bool ok = EVP_KDF_derive(ctx, out, out_len, params) == 1;
  EVP_KDF_CTX_free(ctx);
  return ok;
}

constexpr char kLaneInfo[] = "rpmem sealed lane";
constexpr char kNextInfo[] = "rpmem sealed lane next key";

}  // namespace

size_t sealed_frame_for(int mss) noexcept {
  if (mss < kMinSegment || static_cast<size_t>(mss) >= kMaxFrameBytes) return kMaxSealedFrame;
  const size_t seg = static_cast<size_t>(mss);
  return kMaxFrameBytes / seg * seg - kSealedHeader - kSealedTag;
}

bool derive_lane_key(const SealMaster &master, uint32_t lane, SealDirection dir, SealKey &out,
                     uint16_t epoch) noexcept {
  // Epoch 0: "rpmem sealed lane" | L | dir, as before epochs; later ones
  // add the epoch (u16).
  uint8_t info[sizeof(kLaneInfo) - 1 + 5 + 2];
  std::memcpy(info, kLaneInfo, sizeof(kLaneInfo) - 1);
  store_le32(info + sizeof(kLaneInfo) - 1, lane);
  info[sizeof(kLaneInfo) - 1 + 4] = static_cast<uint8_t>(dir);
  wire::store_le(info + sizeof(kLaneInfo) - 1 + 5, epoch, 2);
  const size_t len = epoch == 0 ? sizeof(info) - 2 : sizeof(info);
  return hkdf(master.data(), master.size(), info, len, out.data(), out.size());
}

namespace {

// libgcrypt is ready for use in this process: its version is checked once
// (the step a library takes; the program's own set-up, if it has one, is
// left to it).
bool gcrypt_ready() noexcept {
  static const bool ready = gcry_check_version(GCRYPT_VERSION) != nullptr;
  return ready;
}

}  // namespace

FrameCipher::FrameCipher(const SealKey &key, bool seal, uint64_t rotate_frames,
                         uint64_t rotate_bytes) noexcept
    : key_(key),
      seal_(seal),
      rotate_frames_(std::max<uint64_t>(rotate_frames, 1)),
      rotate_bytes_(std::max<uint64_t>(rotate_bytes, 1)) {
  if (!gcrypt_ready() || gcry_cipher_open(&hd_, GCRY_CIPHER_AES128, GCRY_CIPHER_MODE_GCM, 0) != 0) {
    hd_ = nullptr;
    return;
  }
  if (!set_key()) disable();
}

FrameCipher::~FrameCipher() {
  disable();
  OPENSSL_cleanse(key_.data(), key_.size());
}

// The key schedule is made here, once per key; each frame sets only its
// nonce.
bool FrameCipher::set_key() noexcept {
  return gcry_cipher_setkey(hd_, key_.data(), key_.size()) == 0;
}

// For good: ok() is false from now on, and every seal or open fails. The
// handle's memory (the key schedule) is wiped as it is closed.
void FrameCipher::disable() noexcept {
  if (hd_) gcry_cipher_close(hd_);
  hd_ = nullptr;
}

void FrameCipher::count(size_t len) noexcept {
  ++frames_;
  ++frames_total_;
  bytes_ += len;
  if (frames_ < rotate_frames_ && bytes_ < rotate_bytes_) return;
  SealKey next;
  if (!hkdf(key_.data(), key_.size(), reinterpret_cast<const uint8_t *>(kNextInfo),
            sizeof(kNextInfo) - 1, next.data(), next.size())) {
    disable();  // no frame goes out under a worn key
    return;
  }
  key_ = next;
  OPENSSL_cleanse(next.data(), next.size());
  frames_ = bytes_ = 0;
  ++rotations_;
  if (!set_key()) disable();
}

namespace {

void nonce_of(uint64_t n, uint8_t (&iv)[12]) {
  std::memset(iv, 0, 4);
  for (int i = 0; i < 8; ++i) iv[4 + i] = static_cast<uint8_t>(n >> (56 - 8 * i));
}

}  // namespace

bool FrameCipher::seal(const iovec *iov, int n, size_t len, uint8_t *out) noexcept {
  if (!hd_ || !seal_ || len == 0 || len > kMaxSealedFrame) return false;
  uint8_t iv[12];
  nonce_of(frames_, iv);
  store_le32(out, static_cast<uint32_t>(len));
  bool ok = gcry_cipher_setiv(hd_, iv, sizeof(iv)) == 0 &&
            gcry_cipher_authenticate(hd_, out, kSealedHeader) == 0;
  uint8_t *p = out + kSealedHeader;
  size_t left = len;
  for (int i = 0; ok && i < n && left > 0; ++i) {
    const size_t take = std::min(iov[i].iov_len, left);
    if (take == 0) continue;
    if (take == left) ok = gcry_cipher_final(hd_) == 0;  // the last piece follows
    ok = ok && gcry_cipher_encrypt(hd_, p, take, iov[i].iov_base, take) == 0;
    p += take;
    left -= take;
  }
  ok = ok && left == 0 && gcry_cipher_gettag(hd_, p, kSealedTag) == 0;
  if (!ok) {
    // A seal that failed half way has used its nonce: the cipher ends, so
    // that no other plaintext is ever sealed under it.
    disable();
    return false;
  }
  count(len);
  return true;
}

bool FrameCipher::open(uint8_t *frame, size_t len, uint8_t *out) noexcept {
  if (!hd_ || seal_ || len <= kSealedHeader + kSealedTag) return false;
  const size_t n = len - kSealedHeader - kSealedTag;
  if (load_le32(frame) != n) return false;
  uint8_t iv[12];
  nonce_of(frames_, iv);
  const uint8_t *const c = frame + kSealedHeader;
  uint8_t *const p = out ? out : frame + kSealedHeader;
  const bool ok =
      gcry_cipher_setiv(hd_, iv, sizeof(iv)) == 0 &&
      gcry_cipher_authenticate(hd_, frame, kSealedHeader) == 0 && gcry_cipher_final(hd_) == 0 &&
      (out ? gcry_cipher_decrypt(hd_, p, n, c, n) : gcry_cipher_decrypt(hd_, p, n, nullptr, 0)) ==
          0 &&
      gcry_cipher_checktag(hd_, c + n, kSealedTag) == 0;
  if (!ok) {
    OPENSSL_cleanse(p, n);  // no unauthenticated byte is left to read
    disable();
    return false;
  }
  count(n);
  return true;
}

SealedStream::SealedStream(int fd, const SealKeys &keys, bool client, uint32_t lane_or_max,
                           uint16_t epoch)
    : fd_(fd),
      keys_(keys),
      client_(client),
      max_lanes_(client ? 0 : lane_or_max),
      out_(new (std::nothrow) uint8_t[kSealedLanePrefix + kMaxFrameBytes]),
      prefix_due_(client),
      in_(new (std::nothrow) uint8_t[kInBuffer]) {
  if (!out_ || !in_) failed_ = errc(ENOMEM);
  if (client && !failed_ && !start_ciphers(lane_or_max, epoch)) failed_ = errc(EPROTO);
}

SealedStream::~SealedStream() {
  if (in_) OPENSSL_cleanse(in_.get(), kInBuffer);
  ::close(fd_);
}

std::unique_ptr<SealedStream> SealedStream::client(int fd, const SealKeys &keys, uint32_t lane,
                                                   uint16_t epoch) {
  return std::unique_ptr<SealedStream>(new SealedStream(fd, keys, true, lane, epoch));
}

std::unique_ptr<SealedStream> SealedStream::target(int fd, const SealKeys &keys,
                                                   uint32_t max_lanes) {
  return std::unique_ptr<SealedStream>(new SealedStream(fd, keys, false, max_lanes, 0));
}

bool SealedStream::start_ciphers(uint32_t lane, uint16_t epoch) noexcept {
  SealKey up, down;  // towards the target, towards the client
  const bool ok = derive_lane_key(keys_.master, lane, SealDirection::kToTarget, up, epoch) &&
                  derive_lane_key(keys_.master, lane, SealDirection::kToClient, down, epoch);
  if (ok) {
    send_ = std::unique_ptr<FrameCipher>(new (std::nothrow) FrameCipher(
        client_ ? up : down, true, keys_.rotate_frames, keys_.rotate_bytes));
    recv_ = std::unique_ptr<FrameCipher>(new (std::nothrow) FrameCipher(
        client_ ? down : up, false, keys_.rotate_frames, keys_.rotate_bytes));
  }
  OPENSSL_cleanse(up.data(), up.size());
  OPENSSL_cleanse(down.data(), down.size());
  if (!ok || !send_ || !recv_ || !send_->ok() || !recv_->ok()) return false;
  lane_ = lane;
  epoch_ = epoch;
  return true;
}

std::error_code SealedStream::refuse(const char *why) noexcept {
  if (!failed_) {
    RPMEM_LOG_WARN("sealed lane %lld: %s; the lane ends", static_cast<long long>(lane_), why);
    failed_ = errc(EPROTO);
  }
  return failed_;
}

bool SealedStream::has_buffered_input() const noexcept {
  if (plain_ < plain_end_) return true;
  const size_t raw = in_w_ - in_r_;
  if (lane_ < 0) return raw >= kSealedLanePrefix;
  if (raw < kSealedHeader) return false;
  return raw >= kSealedHeader + load_le32(in_.get() + in_r_) + kSealedTag;
}

// Reads what the socket has into the raw buffer.
std::error_code SealedStream::fill() noexcept {
  if (in_r_ > 0) {  // the opened plaintext before in_r_ is all taken
    std::memmove(in_.get(), in_.get() + in_r_, in_w_ - in_r_);
    in_w_ -= in_r_;
    in_r_ = plain_ = plain_end_ = 0;
  }
  for (;;) {
    const ssize_t n = ::recv(fd_, in_.get() + in_w_, kInBuffer - in_w_, MSG_DONTWAIT);
    if (n > 0) {
      drained_ = static_cast<size_t>(n) < kInBuffer - in_w_;
      in_w_ += static_cast<size_t>(n);
      received_ += static_cast<uint64_t>(n);
      return {};
    }
    if (n == 0) {
      eof_ = true;
      return {};
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return errc(EAGAIN);
    return io_error(errno);
  }
}

std::error_code SealedStream::recv_nowait(void *buf, size_t len, size_t &got) noexcept {
  return receive(buf, len, got, false);
}

std::error_code SealedStream::recv_scratch_nowait(void *buf, size_t len, size_t &got) noexcept {
  return receive(buf, len, got, true);
}

std::error_code SealedStream::receive(void *buf, size_t len, size_t &got, bool scratch) noexcept {
  got = 0;
  if (failed_) return failed_;
  auto *dst = static_cast<uint8_t *>(buf);
  for (;;) {
    if (plain_ < plain_end_) {
      const size_t take = std::min(len - got, plain_end_ - plain_);
      std::memcpy(dst + got, in_.get() + plain_, take);
      plain_ += take;
      got += take;
      if (got == len) return {};
    }
    const size_t raw = in_w_ - in_r_;
    if (lane_ < 0) {
      if (raw >= kSealedLanePrefix) {
        const uint32_t word = load_le32(in_.get() + in_r_);
        const uint32_t lane = word & proto::kMaxLaneNumber;
        if (lane >= max_lanes_) return refuse("its lane number is not one of the session's");
        if (!start_ciphers(lane, static_cast<uint16_t>(word >> 16)))
          return refuse("its keys could not be made");
        in_r_ += kSealedLanePrefix;
        plain_ = plain_end_ = in_r_;
        continue;
      }
    } else if (raw >= kSealedHeader) {
      const uint32_t n = load_le32(in_.get() + in_r_);
      if (n == 0 || n > kMaxSealedFrame) return refuse("a frame of an impossible length came");
      const size_t total = kSealedHeader + n + kSealedTag;
      if (raw >= total) {
        // Into the caller's scratch memory when the whole frame fits there
        // (one pass over the bytes instead of two), else in place.
        uint8_t *const out = scratch && n <= len - got ? dst + got : nullptr;
        if (!recv_->open(in_.get() + in_r_, total, out))
          return refuse(
              "a frame did not authenticate (another key, replayed, reordered, dropped or "
              "altered)");
        in_r_ += total;
        if (out) {
          plain_ = plain_end_ = in_r_;
          got += n;
          if (got == len) return {};
        } else {
          plain_ = in_r_ - kSealedTag - n;
          plain_end_ = plain_ + n;
        }
        continue;
      }
    }
    if (eof_) return got > 0 ? std::error_code{} : errc(ECONNRESET);
    // What the socket had is all here: another receive would find it
    // empty (one system call more per message); what comes later makes
    // the socket readable.
    if (got > 0 && drained_) return {};
    const std::error_code ec = fill();
    if (ec.value() == EAGAIN) return {};
    if (ec) return got > 0 ? std::error_code{} : ec;
  }
}

size_t SealedStream::full_frame() noexcept {
  if (mss_due_ == 0) {
    int mss = 0;
    socklen_t len = sizeof(mss);
    if (::getsockopt(fd_, IPPROTO_TCP, TCP_MAXSEG, &mss, &len) != 0) mss = 0;
    full_frame_ = sealed_frame_for(mss);
    mss_due_ = kSegmentCheckFrames;
  }
  --mss_due_;
  return full_frame_;
}

std::error_code SealedStream::send_nowait(iovec *&iov, int &n) noexcept {
  if (failed_) return failed_;
  for (;;) {
    if (out_len_ == 0) {
      while (n > 0 && iov[0].iov_len == 0) advance(iov, n, 0);
      if (n == 0) return {};
      size_t len = 0;
      for (int i = 0; i < n && len < kMaxSealedFrame; ++i)
        len += std::min(iov[i].iov_len, kMaxSealedFrame - len);
      if (len == kMaxSealedFrame) len = full_frame();
      size_t off = 0;
      if (prefix_due_) {
        store_le32(out_.get(), static_cast<uint32_t>(lane_) | uint32_t{epoch_} << 16);
        off = kSealedLanePrefix;
      }
      if (!send_->seal(iov, n, len, out_.get() + off)) {
        failed_ = errc(EPROTO);
        RPMEM_LOG_ERR("sealed lane %lld: sealing failed", static_cast<long long>(lane_));
        return failed_;
      }
      out_len_ = off + kSealedHeader + len + kSealedTag;
      out_sent_ = 0;
      out_plain_ = len;
    }
    // Each frame goes out whole, not corked behind the next (MSG_MORE kept
    // a frame's last bytes, its tag among them, until the next frame was
    // sealed): the target opens frame k while frame k+1 is sealed.
    const ssize_t w =
        ::send(fd_, out_.get() + out_sent_, out_len_ - out_sent_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return {};
      return io_error(errno);
    }
    out_sent_ += static_cast<size_t>(w);
    if (out_sent_ < out_len_) continue;
    prefix_due_ = false;
    out_len_ = 0;
    advance(iov, n, out_plain_);
  }
}

}  // namespace rpmem::transport::tcp
