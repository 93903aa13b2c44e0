// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: control-channel frames. The input is a stream of frames as
// either side reads them: each header through decode_frame_header, each
// payload through every payload decoder. A decoded message must encode
// back to a frame that decodes to the same message.
#include "common/proto.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

using namespace rpmem::proto;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void round_trip(const Bytes &frame, MsgType type) {
  auto h = decode_frame_header(std::span(frame).first(kFrameHeaderSize));
  check(h && h->type == type && h->size == frame.size() - kFrameHeaderSize);
}

void payload(std::span<const uint8_t> p) {
  if (auto m = decode_hello(p)) {
    Bytes f = encode(*m);
    round_trip(f, MsgType::kHello);
    auto again = decode_hello(std::span(f).subspan(kFrameHeaderSize));
    check(again && again->status == m->status && again->transports == m->transports);
  }
  for (MsgType t : {MsgType::kCreate, MsgType::kOpen}) {
    if (auto m = decode_pool_request(p)) {
      Bytes f = encode(t, *m);
      round_trip(f, t);
      auto again = decode_pool_request(std::span(f).subspan(kFrameHeaderSize));
      check(again && again->pool_set == m->pool_set && again->nlanes == m->nlanes &&
            again->pool_size == m->pool_size);
      check(m->pool_set.size() <= kMaxPoolSetName);
    }
  }
  if (auto m = decode_pool_response(p)) {
    Bytes f = encode(*m);
    round_trip(f, MsgType::kPoolResp);
    auto again = decode_pool_response(std::span(f).subspan(kFrameHeaderSize));
    check(again && again->port == m->port && again->secret == m->secret &&
          again->provider_data == m->provider_data);
    check(m->provider_data.size() <= kMaxProviderData);
    check(static_cast<uint32_t>(m->status) < static_cast<uint32_t>(Status::kCount));
    check(status_message(m->status) != nullptr);
    check(status_to_errno(m->status) >= 0);
  }
  if (auto m = decode_set_attr(p)) {
    Bytes f = encode(*m);
    round_trip(f, MsgType::kSetAttr);
  }
  if (auto m = decode_close(p)) {
    Bytes f = encode(*m);
    round_trip(f, MsgType::kClose);
  }
  if (auto m = decode_status_response(p)) {
    Bytes f = encode(MsgType::kCloseResp, *m);
    round_trip(f, MsgType::kCloseResp);
  }
  if (p.size() >= kPoolAttrWireSize) {
    rpmem::PoolAttr a = decode_attr(p.data());
    uint8_t out[kPoolAttrWireSize];
    encode_attr(a, out);
    check(std::memcmp(out, p.data(), kPoolAttrWireSize) == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::span<const uint8_t> in(data, size);
  while (in.size() >= kFrameHeaderSize) {
    auto h = decode_frame_header(in.first(kFrameHeaderSize));
    in = in.subspan(kFrameHeaderSize);
    if (!h) {
      // A reader gives up here; still exercise the payload decoders on the rest.
      payload(in);
      return 0;
    }
    check(h->size <= kMaxControlPayload);
    if (h->size > in.size()) {  // truncated frame
      payload(in);
      return 0;
    }
    payload(in.first(h->size));
    in = in.subspan(h->size);
  }
  return 0;
}
