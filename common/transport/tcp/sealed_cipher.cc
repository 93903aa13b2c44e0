// SPDX-License-Identifier: BSD-3-Clause
// Sealed lanes' cryptography: the lane keys (HKDF with OpenSSL) and the
// frame cipher (AES-128-GCM with libgcrypt); SealedStream's framing is in
// sealed_stream.cc.
#include "common/transport/tcp/sealed_stream.h"
#include "common/wire.h"

#include <gcrypt.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

#include <algorithm>
#include <cstring>

namespace rpmem::transport::tcp {
namespace {

constexpr size_t kMaxFrameBytes = kSealedHeader + kMaxSealedFrame + kSealedTag;

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
                     uint16_t epoch, const SealNonce *client, const SealNonce *target) noexcept {
  // Without nonces: "rpmem sealed lane" | L | dir at epoch 0, as before
  // epochs, and the epoch (u16) appended above 0. With them: always the
  // epoch, then Nc, then Nt.
  constexpr size_t kBase = sizeof(kLaneInfo) - 1 + 5;
  uint8_t info[kBase + 2 + 2 * kSealNonceSize];
  std::memcpy(info, kLaneInfo, sizeof(kLaneInfo) - 1);
  store_le32(info + sizeof(kLaneInfo) - 1, lane);
  info[sizeof(kLaneInfo) - 1 + 4] = static_cast<uint8_t>(dir);
  wire::store_le(info + kBase, epoch, 2);
  size_t len = client || epoch != 0 ? kBase + 2 : kBase;
  for (const SealNonce *n : {client, client ? target : nullptr}) {
    if (!n) break;
    std::memcpy(info + len, n->data(), n->size());
    len += n->size();
  }
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

}  // namespace rpmem::transport::tcp
