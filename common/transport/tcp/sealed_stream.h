// SPDX-License-Identifier: BSD-3-Clause
// Sealed data lanes: every message a lane sends is one AES-128-GCM frame
// under a key of that lane and direction, instead of TLS records. The
// cipher is libgcrypt's (VAES and VPCLMUL where the CPU has them): on this
// project's machines it seals 16 B in 0.12 us and 4 KiB in 1.0 us, where
// OpenSSL 3.0's EVP took 0.30 and 1.58 us. Keys come from OpenSSL (HKDF).
//
// Keys. Both ends hold a 32-byte lane master: in service mode exported
// from the control channel's TLS session (SSL_export_keying_material,
// kSealExporterLabel, the session's lane secret as context); in ssh mode
// a random key the daemon sends over the ssh channel. Lane L's key for
// each direction is HKDF-SHA256(master, "rpmem sealed lane" | L | dir).
// No secret crosses a lane in clear: its hello is sealed too.
//
// Frames. u32 length N (little endian, 1..kMaxSealedFrame), N bytes of
// ciphertext, a 16-byte tag; the length is the associated data. The nonce
// is the frame's number under its key (4 zero bytes, then 64 bits, big
// endian), never sent: a replayed, reordered, dropped or altered frame
// does not authenticate, and the first that does not ends the lane.
// Before a key has sealed kSealRotateFrames frames or kSealRotateBytes
// bytes, both ends move to the next one, HKDF-SHA256(key, "next"), on
// their own count; the old key is erased.
//
// The client starts its connection with its lane number (u16, clear) and
// the lane's epoch (u16, clear; protocol minor 6), so that the target knows
// which keys open the hello. Keys of a session of protocol minor 9
// (LaneSeal::nonces) take fresh randomness from both ends of each
// connection: the client's prefix carries a nonce Nc of its own (16 bytes,
// clear), and the target's first bytes are a nonce Nt of its own (16
// bytes, clear) before its first frame. With I = "rpmem sealed lane" | L |
// dir | epoch:
//   the client's hello (its first frame): HKDF-SHA256(master, I | Nc)
//   every later frame, both ways:          HKDF-SHA256(master, I | Nc | Nt)
// Each end's keys hold a nonce it drew itself, so it never seals under a
// key and nonce it used before, whatever a peer replays: a replayed
// connection's refusal is sealed under a key of its own (a new Nt), and
// nothing a client sends after its hello opens on a connection but the one
// it was sealed for. docs/sealed-lanes.md has the schedule.
// Sessions of older clients keep the keys of before: lane L's key for each
// direction HKDF-SHA256(master, "rpmem sealed lane" | L | dir), with the
// epoch appended for epochs above 0; a target never seals a refusal under
// them (it closes the connection instead), since a replay would reproduce
// the keys that sealed its first answer.
#ifndef RPMEM_COMMON_TRANSPORT_TCP_SEALED_STREAM_H
#define RPMEM_COMMON_TRANSPORT_TCP_SEALED_STREAM_H

#include "common/transport/tcp/byte_stream.h"
#include "common/transport/transport.h"

#include <array>
#include <cstdint>
#include <memory>
#include <span>

struct gcry_cipher_handle;

namespace rpmem::transport::tcp {

inline constexpr const char *kSealExporterLabel = "EXPORTER-rpmem-sealed-lanes";

// The clear prefix a client's connection starts with: u16 lane, u16 epoch
// (one u32, little endian), then with LaneSeal::nonces the client's nonce.
inline constexpr size_t kSealedLanePrefix = 4;
inline constexpr size_t kSealNonceSize = 16;
using SealNonce = std::array<uint8_t, kSealNonceSize>;
inline constexpr size_t kSealedHeader = 4;
inline constexpr size_t kSealedTag = 16;
// Plaintext bytes in one frame at most (a full frame: sealed_frame_for()).
inline constexpr size_t kMaxSealedFrame = 64 * 1024;
// A full frame's plaintext on a socket whose TCP segments carry `mss`
// bytes: as much of kMaxSealedFrame as fills whole segments with the frame
// (65463 bytes on loopback, one segment; 65140 for 1448-byte segments, 45
// of them), so that no frame ends in a segment of its own. A frame of
// kMaxSealedFrame took two segments on loopback, the second of 73 bytes:
// one more packet to send and one more receive, per frame. kMaxSealedFrame
// when `mss` is unknown (below kMinSegment) or a frame fits in one segment.
inline constexpr int kMinSegment = 512;
size_t sealed_frame_for(int mss) noexcept;
// Full frames between two readings of the socket's segment size (it grows
// as a connection warms up).
inline constexpr unsigned kSegmentCheckFrames = 64;

// kSealMasterSize, SealMaster, kSealRotateFrames and kSealRotateBytes: in
// transport.h, beside LaneSeal.

enum class SealDirection : uint8_t { kToTarget = 1, kToClient = 2 };

using SealKey = std::array<uint8_t, 16>;
// Lane `lane`'s first key for `dir` at `epoch`, of a connection whose
// client drew `client` and whose target drew `target` (null: without; see
// above). False when OpenSSL fails.
bool derive_lane_key(const SealMaster &master, uint32_t lane, SealDirection dir, SealKey &out,
                     uint16_t epoch = 0, const SealNonce *client = nullptr,
                     const SealNonce *target = nullptr) noexcept;

// One direction's key and frame count: seals or opens frames in order.
class FrameCipher {
 public:
  FrameCipher(const SealKey &key, bool seal, uint64_t rotate_frames = kSealRotateFrames,
              uint64_t rotate_bytes = kSealRotateBytes) noexcept;
  ~FrameCipher();
  FrameCipher(const FrameCipher &) = delete;
  FrameCipher &operator=(const FrameCipher &) = delete;

  bool ok() const noexcept { return hd_ != nullptr; }
  // Seals the `len` bytes of iov[0..n) (len <= kMaxSealedFrame) into
  // `out`: header, ciphertext, tag (len + kSealedHeader + kSealedTag bytes).
  // The plaintext is read from the iovecs once, as it is encrypted. False
  // when libgcrypt fails; the cipher is then of no further use (its nonce
  // may have been used).
  bool seal(const iovec *iov, int n, size_t len, uint8_t *out) noexcept;
  // Opens the whole frame at `frame` (header, ciphertext, tag) into `out`
  // (len - kSealedHeader - kSealedTag bytes), or in place when `out` is
  // null: the plaintext replaces the ciphertext. False when it does not
  // authenticate: what it wrote is cleared, and the cipher is of no further
  // use.
  bool open(uint8_t *frame, size_t len, uint8_t *out = nullptr) noexcept;
  uint64_t frames() const noexcept { return frames_total_; }
  unsigned rotations() const noexcept { return rotations_; }

 private:
  bool set_key() noexcept;
  void disable() noexcept;
  void count(size_t len) noexcept;

  gcry_cipher_handle *hd_ = nullptr;  // libgcrypt's AES-128-GCM, keyed
  SealKey key_;
  const bool seal_;
  const uint64_t rotate_frames_;
  const uint64_t rotate_bytes_;
  uint64_t frames_ = 0;  // under the current key: the next nonce
  uint64_t bytes_ = 0;
  uint64_t frames_total_ = 0;
  unsigned rotations_ = 0;
};

// What a lane's keys are made from, and when they rotate.
using SealKeys = LaneSeal;

// A connected, non-blocking socket carrying sealed frames; owns it.
class SealedStream final : public ByteStream {
 public:
  // Client side of lane `lane` at `epoch`: sends both (and with
  // keys.nonces its nonce: `nonce`, or a new one when null) before its first
  // frame.
  static std::unique_ptr<SealedStream> client(int fd, const SealKeys &keys, uint32_t lane,
                                              uint16_t epoch = 0, const SealNonce *nonce = nullptr);
  // Target side: reads the lane number (below `max_lanes`) first.
  static std::unique_ptr<SealedStream> target(int fd, const SealKeys &keys, uint32_t max_lanes);
  ~SealedStream() override;
  SealedStream(const SealedStream &) = delete;
  SealedStream &operator=(const SealedStream &) = delete;

  int fd() const noexcept override { return fd_; }
  // Authenticated plaintext only. EOF is ECONNRESET (in the middle of a
  // frame too); a frame that does not authenticate, a bad length or a
  // lane number out of range is EPROTO, logged once, and for good.
  std::error_code recv_nowait(void *buf, size_t len, size_t &got) noexcept override;
  // The same; a frame that fits in what is left of `buf` is opened straight
  // into it (cleared again when it does not authenticate).
  std::error_code recv_scratch_nowait(void *buf, size_t len, size_t &got) noexcept override;
  // Seals a full frame of the iovecs (sealed_frame_for()) at a time into the
  // send buffer and sends it; the iovecs advance only past frames the
  // socket took whole, so a call retried with the same iovecs goes on.
  std::error_code send_nowait(iovec *&iov, int &n) noexcept override;
  bool has_buffered_input() const noexcept override;

  // The lane number: the client's own, or the one the target read (-1:
  // not yet).
  int64_t lane() const noexcept { return lane_; }
  // The epoch its keys are of (valid once lane() is).
  uint16_t epoch() const noexcept { return epoch_; }
  // Bytes taken from the socket so far.
  uint64_t bytes_received() const noexcept { return received_; }
  // Bytes that make the client's hello (its prefix, one frame of `len`).
  size_t first_message_size(size_t len) const noexcept {
    return prefix_size() + kSealedHeader + len + kSealedTag;
  }
  // The client's nonce (valid once lane() is, with keys.nonces), and the
  // target's (valid once it came, on the client).
  const SealNonce &client_nonce() const noexcept { return nc_; }
  const SealNonce &target_nonce() const noexcept { return nt_; }

 private:
  SealedStream(int fd, const SealKeys &keys, bool client, uint32_t lane_or_max, uint16_t epoch,
               const SealNonce *nonce);
  size_t prefix_size() const noexcept {
    return kSealedLanePrefix + (keys_.nonces ? kSealNonceSize : 0);
  }
  std::unique_ptr<FrameCipher> cipher(uint32_t lane, SealDirection dir, bool seal, uint16_t epoch,
                                      const SealNonce *target) noexcept;
  bool start_ciphers(uint32_t lane, uint16_t epoch) noexcept;
  // With keys.nonces, once `nt` (the target's nonce) is known: the keys of
  // every frame after the client's hello.
  bool take_target_nonce(const SealNonce &nt) noexcept;
  std::error_code refuse(const char *why) noexcept;
  std::error_code fill() noexcept;
  std::error_code receive(void *buf, size_t len, size_t &got, bool scratch) noexcept;
  size_t full_frame() noexcept;  // sealed_frame_for() this socket's segment size

  const int fd_;
  const SealKeys keys_;
  const bool client_;
  const uint32_t max_lanes_;
  int64_t lane_ = -1;
  uint16_t epoch_ = 0;
  std::unique_ptr<FrameCipher> send_;
  std::unique_ptr<FrameCipher> recv_;
  // keys.nonces: the nonces, and the cipher that takes over after the
  // client's hello (the client's send_, the target's recv_).
  SealNonce nc_{};
  SealNonce nt_{};
  bool nt_known_ = false;
  std::unique_ptr<FrameCipher> after_hello_;
  std::error_code failed_;  // for good
  // Send side: one sealed frame (preceded once by the client's prefix or
  // the target's nonce) and how much of it the socket took.
  std::unique_ptr<uint8_t[]> out_;
  size_t out_len_ = 0;
  size_t out_sent_ = 0;
  size_t out_plain_ = 0;  // its plaintext bytes: the iovecs advance by them when it is sent
  bool prefix_due_;
  size_t full_frame_ = kMaxSealedFrame;
  unsigned mss_due_ = 0;  // full frames until the segment size is read again
  // Receive side: frames as they come; [plain_, plain_end_) is opened
  // plaintext not yet taken, [in_r_, in_w_) raw bytes after it.
  std::unique_ptr<uint8_t[]> in_;
  size_t plain_ = 0, plain_end_ = 0, in_r_ = 0, in_w_ = 0;
  bool eof_ = false;
  bool drained_ = false;  // the last receive took less than it had room for
  uint64_t received_ = 0;
};

}  // namespace rpmem::transport::tcp

#endif  // RPMEM_COMMON_TRANSPORT_TCP_SEALED_STREAM_H
