// SPDX-License-Identifier: BSD-3-Clause
// SealedStream: sealed frames on a socket, with the clear prefix and nonces
// that key each connection; the keys and the frame cipher are
// sealed_cipher.cc's.
#include "common/transport/tcp/sealed_stream.h"

#include "common/error.h"
#include "common/log.h"
#include "common/random.h"
#include "common/wire.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
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

}  // namespace

SealedStream::SealedStream(int fd, const SealKeys &keys, bool client, uint32_t lane_or_max,
                           uint16_t epoch, const SealNonce *nonce)
    : fd_(fd),
      keys_(keys),
      client_(client),
      max_lanes_(client ? 0 : lane_or_max),
      out_(new (std::nothrow) uint8_t[kSealedLanePrefix + kSealNonceSize + kMaxFrameBytes]),
      prefix_due_(client || keys.nonces),
      in_(new (std::nothrow) uint8_t[kInBuffer]) {
  if (!out_ || !in_) failed_ = errc(ENOMEM);
  if (client && keys_.nonces && !failed_) {
    if (nonce)
      nc_ = *nonce;
    else if (auto ec = fill_random(nc_.data(), nc_.size()))
      failed_ = ec;
  }
  if (client && !failed_ && !start_ciphers(lane_or_max, epoch)) failed_ = errc(EPROTO);
}

SealedStream::~SealedStream() {
  if (in_) OPENSSL_cleanse(in_.get(), kInBuffer);
  ::close(fd_);
}

std::unique_ptr<SealedStream> SealedStream::client(int fd, const SealKeys &keys, uint32_t lane,
                                                   uint16_t epoch, const SealNonce *nonce) {
  return std::unique_ptr<SealedStream>(new SealedStream(fd, keys, true, lane, epoch, nonce));
}

std::unique_ptr<SealedStream> SealedStream::target(int fd, const SealKeys &keys,
                                                   uint32_t max_lanes) {
  return std::unique_ptr<SealedStream>(new SealedStream(fd, keys, false, max_lanes, 0, nullptr));
}

std::unique_ptr<FrameCipher> SealedStream::cipher(uint32_t lane, SealDirection dir, bool seal,
                                                  uint16_t epoch,
                                                  const SealNonce *target) noexcept {
  SealKey key;
  std::unique_ptr<FrameCipher> c;
  if (derive_lane_key(keys_.master, lane, dir, key, epoch, keys_.nonces ? &nc_ : nullptr, target))
    c.reset(new (std::nothrow) FrameCipher(key, seal, keys_.rotate_frames, keys_.rotate_bytes));
  OPENSSL_cleanse(key.data(), key.size());
  if (c && !c->ok()) c.reset();
  return c;
}

bool SealedStream::start_ciphers(uint32_t lane, uint16_t epoch) noexcept {
  lane_ = lane;
  epoch_ = epoch;
  const SealDirection up = SealDirection::kToTarget, down = SealDirection::kToClient;
  if (!keys_.nonces) {
    send_ = cipher(lane, client_ ? up : down, true, epoch, nullptr);
    recv_ = cipher(lane, client_ ? down : up, false, epoch, nullptr);
  } else if (client_) {  // the hello's key; the rest once the target's nonce is here
    send_ = cipher(lane, up, true, epoch, nullptr);
    recv_.reset();
    return send_ != nullptr;
  } else {  // the client's hello under its key, everything else under both nonces
    if (fill_random(nt_.data(), nt_.size())) return false;
    nt_known_ = true;
    recv_ = cipher(lane, up, false, epoch, nullptr);
    send_ = cipher(lane, down, true, epoch, &nt_);
    after_hello_ = cipher(lane, up, false, epoch, &nt_);
    if (!after_hello_) return false;
  }
  return send_ && recv_;
}

bool SealedStream::take_target_nonce(const SealNonce &nt) noexcept {
  nt_ = nt;
  nt_known_ = true;
  recv_ = cipher(static_cast<uint32_t>(lane_), SealDirection::kToClient, false, epoch_, &nt_);
  after_hello_ = cipher(static_cast<uint32_t>(lane_), SealDirection::kToTarget, true, epoch_, &nt_);
  return recv_ && after_hello_;
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
  size_t at = in_r_;
  size_t raw = in_w_ - in_r_;
  if (lane_ < 0) return raw >= prefix_size();
  if (client_ && keys_.nonces && !nt_known_) {  // the target's nonce comes first
    if (raw < kSealNonceSize) return false;
    at += kSealNonceSize;
    raw -= kSealNonceSize;
  }
  if (raw < kSealedHeader) return false;
  return raw >= kSealedHeader + load_le32(in_.get() + at) + kSealedTag;
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
      if (raw >= prefix_size()) {
        const uint32_t word = load_le32(in_.get() + in_r_);
        const uint32_t lane = word & proto::kMaxLaneNumber;
        if (lane >= max_lanes_) return refuse("its lane number is not one of the session's");
        if (keys_.nonces)
          std::memcpy(nc_.data(), in_.get() + in_r_ + kSealedLanePrefix, nc_.size());
        if (!start_ciphers(lane, static_cast<uint16_t>(word >> 16)))
          return refuse("its keys could not be made");
        in_r_ += prefix_size();
        plain_ = plain_end_ = in_r_;
        continue;
      }
    } else if (client_ && keys_.nonces && !nt_known_) {
      if (raw >= kSealNonceSize) {
        SealNonce nt;
        std::memcpy(nt.data(), in_.get() + in_r_, nt.size());
        if (!take_target_nonce(nt)) return refuse("its keys could not be made");
        in_r_ += kSealNonceSize;
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
        if (after_hello_ && !client_) recv_ = std::move(after_hello_);  // the hello was frame 0
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
        if (client_) {
          store_le32(out_.get(), static_cast<uint32_t>(lane_) | uint32_t{epoch_} << 16);
          off = kSealedLanePrefix;
        }
        if (keys_.nonces) {
          std::memcpy(out_.get() + off, (client_ ? nc_ : nt_).data(), kSealNonceSize);
          off += kSealNonceSize;
        }
      } else if (client_ && keys_.nonces && send_->frames() > 0 && !nt_known_) {
        return refuse("a frame after the hello before the target's nonce");
      }
      if (client_ && after_hello_ && send_->frames() > 0) send_ = std::move(after_hello_);
      if (!send_) return refuse("its keys could not be made");
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
