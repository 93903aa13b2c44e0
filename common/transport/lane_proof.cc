// SPDX-License-Identifier: BSD-3-Clause
// A lane claim's proof of the session secret: made by the client, checked by
// the target.
#include "common/transport/lane_proof.h"

#include "common/error.h"
#include "common/random.h"
#include "common/wire.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>

namespace rpmem::transport {
namespace {

constexpr char kClaimLabel[] = "rpmem lane claim";

// The claim's MAC over `nonce`, kClaimMacSize bytes into `out`.
bool claim_mac(const proto::Secret &secret, const ClaimFields &f, const uint8_t *nonce,
               uint8_t *out) noexcept {
  uint8_t msg[sizeof(kClaimLabel) - 1 + 4 + 2 + 4 + kClaimNonceSize];
  uint8_t *p = msg;
  std::memcpy(p, kClaimLabel, sizeof(kClaimLabel) - 1);
  p += sizeof(kClaimLabel) - 1;
  wire::store_le(p, f.lane, 4);
  wire::store_le(p + 4, f.epoch, 2);
  wire::store_le(p + 6, f.nlanes, 4);
  std::memcpy(p + 10, nonce, kClaimNonceSize);
  uint8_t full[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  const bool ok = HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), msg,
                       sizeof(msg), full, &len) != nullptr &&
                  len >= kClaimMacSize;
  if (ok) std::memcpy(out, full, kClaimMacSize);
  OPENSSL_cleanse(full, sizeof(full));
  return ok;
}

}  // namespace

bool secrets_equal(const proto::Secret &a, const proto::Secret &b) noexcept {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::error_code prove(const proto::Secret &secret, const ClaimFields &f, bool mac,
                      proto::Secret &out) noexcept {
  if (!mac) {
    out = secret;
    return {};
  }
  if (auto ec = fill_random(out.data(), kClaimNonceSize)) return ec;
  if (!claim_mac(secret, f, out.data(), out.data() + kClaimNonceSize)) return errc(EPROTO);
  return {};
}

bool proves(const proto::Secret &secret, const ClaimFields &f, bool mac,
            const proto::Secret &proof) noexcept {
  if (!mac) return secrets_equal(secret, proof);
  uint8_t expected[kClaimMacSize];
  if (!claim_mac(secret, f, proof.data(), expected)) return false;
  const bool ok = CRYPTO_memcmp(expected, proof.data() + kClaimNonceSize, kClaimMacSize) == 0;
  OPENSSL_cleanse(expected, sizeof(expected));
  return ok;
}

}  // namespace rpmem::transport
