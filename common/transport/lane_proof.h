// SPDX-License-Identifier: BSD-3-Clause
// How a lane connection proves that it belongs to its session, on every
// provider (the tcp lane hello, the verbs connect request): the claim's 32
// proof bytes.
//
// From protocol minor 9 (proto::kMinorProofs) they are a fresh nonce and a
// MAC over it, the lane, its epoch and the lane count, keyed by the
// session's secret (HMAC-SHA256, truncated):
//   nonce (16 random bytes) | HMAC-SHA256(secret, "rpmem lane claim" |
//     u32 lane | u16 epoch | u32 nlanes | nonce)[0..16)
// The secret itself never crosses the wire: whoever records a connection
// learns a claim for that lane and epoch only, which the target admits
// once, and cannot make one for another epoch (a MAC of 128 bits).
// Before minor 9 the proof is the secret itself, in clear on cleartext
// lanes: such a claim is admitted at epoch 0 only (lane_admission.h).
#ifndef RPMEM_COMMON_TRANSPORT_LANE_PROOF_H
#define RPMEM_COMMON_TRANSPORT_LANE_PROOF_H

#include "common/proto.h"

#include <cstdint>
#include <system_error>

namespace rpmem::transport {

inline constexpr size_t kClaimNonceSize = 16;
inline constexpr size_t kClaimMacSize = 16;
static_assert(kClaimNonceSize + kClaimMacSize == proto::kSecretSize);

struct ClaimFields {
  uint32_t lane = 0;
  uint16_t epoch = 0;
  uint32_t nlanes = 0;
};

// The proof a client sends for `f`: with `mac`, a new nonce and its MAC
// (the error of the random source or of OpenSSL when there is none);
// without, the secret itself (a daemon older than minor 9).
std::error_code prove(const proto::Secret &secret, const ClaimFields &f, bool mac,
                      proto::Secret &out) noexcept;

// Whether `proof` proves `secret` for `f` (constant time in what it
// compares): a MAC of its nonce with `mac`, else the secret itself.
bool proves(const proto::Secret &secret, const ClaimFields &f, bool mac,
            const proto::Secret &proof) noexcept;

// Constant time: how many leading bytes match does not show in the time.
bool secrets_equal(const proto::Secret &a, const proto::Secret &b) noexcept;

}  // namespace rpmem::transport

#endif  // RPMEM_COMMON_TRANSPORT_LANE_PROOF_H
