// SPDX-License-Identifier: BSD-3-Clause
// The tcp lane server's data path: a lane's request state machine (header,
// payload into the pool, reply) and what completes a request.
#include "common/log.h"
#include "common/transport/tcp/lane_server.h"
#include "common/transport/tcp/lane_server_lane.h"

namespace rpmem::transport::tcp {
namespace {

// Requests served on one lane before the other ready lanes get their turn.
constexpr unsigned kBurst = 64;

}  // namespace

LaneServer::Step LaneServer::ended(Lane &lane, const char *what, std::error_code ec) {
  if (stopping_.load()) return Step::kEnded;
  if (what)
    RPMEM_LOG_ERR("lane %u: %s: %s", lane.number, what, ec.message().c_str());
  else if (ec == std::errc::connection_reset)
    RPMEM_LOG_INFO("lane %u closed by the client", lane.number);
  else
    RPMEM_LOG_WARN("lane %u closed: %s", lane.number, ec.message().c_str());
  return Step::kEnded;
}

LaneServer::Step LaneServer::refuse(Lane &lane, const char *why) {
  fatal_("lane " + std::to_string(lane.number) + ": " + why);
  return Step::kEnded;
}

LaneServer::Step LaneServer::step(Lane &lane, bool &progress) {
  for (unsigned served = 0; served < kBurst;) {
    Step s = Step::kMore;
    switch (lane.state) {
      case Lane::State::kReply:
        s = send_reply(lane, progress);
        break;
      case Lane::State::kHeader:
        if (s = take_header(lane, progress); s != Step::kMore) return s;
        [[fallthrough]];
      case Lane::State::kPayload:
        if (s = take_payload(lane, progress); s == Step::kMore) {
          ++served;
          complete(lane);  // the request is whole: answer it
        }
        break;
    }
    if (s != Step::kMore) return s;
  }
  return Step::kMore;
}

LaneServer::Step LaneServer::send_reply(Lane &lane, bool &progress) {
  if (auto ec = lane.stream->send_nowait(lane.unsent, lane.nunsent)) {
    if (!stopping_.load())
      RPMEM_LOG_INFO("lane %u: reply lost: %s", lane.number, ec.message().c_str());
    return Step::kEnded;
  }
  if (lane.nunsent > 0) return Step::kWaiting;  // the socket is full
  progress = true;
  lane.state = Lane::State::kHeader;
  return Step::kMore;
}

// A request header, checked; the lane then takes its payload.
LaneServer::Step LaneServer::take_header(Lane &lane, bool &progress) {
  if (lane.in.buffered() < proto::kDataRequestSize) {
    size_t got = 0;
    auto ec = lane.in.fill(got);
    progress |= got > 0;
    if (lane.in.buffered() < proto::kDataRequestSize)
      return ec ? ended(lane, nullptr, ec) : Step::kWaiting;
  }
  auto req = proto::decode_data_request({lane.in.data(), proto::kDataRequestSize});
  lane.in.consume(proto::kDataRequestSize);
  progress = true;
  if (!req) return refuse(lane, "malformed data request");
  const bool writes = proto::carries_payload(req->op);
  if (writes || req->op == DataOp::kRead)
    if (const char *why = pool_.refusal(req->offset, req->length, writes)) return refuse(lane, why);
  lane.req = *req;
  // A deep persist is always persistent; a request the session was not
  // granted visible for is too.
  lane.visible = req->op != DataOp::kDeepPersist && pool_.visible(req->flags & proto::kDataVisible);
  if (lane.counters) lane.started_ns = LaneCounters::now_ns();
  lane.dst = pool_.base() + req->offset;
  lane.left = writes ? req->length : 0;
  // Visible payloads are stores into the pool on every medium, counted by
  // made_visible(); only durable and posted ones may go in whole.
  lane.whole = whole_writes_ && writes && !lane.visible && req->length <= kLaneBuffer;
  lane.written.clear();
  lane.state = Lane::State::kPayload;
  return Step::kMore;
}

// The payload, as it comes: whole into the buffer and then one durable or
// posted write of the persister, or straight into the pool (word by word
// for atomic writes). kMore once it is all there.
LaneServer::Step LaneServer::take_payload(Lane &lane, bool &progress) {
  if (lane.whole && lane.left > 0) {
    if (lane.in.buffered() < lane.left) {
      size_t got = 0;
      auto ec = lane.in.fill(got);
      progress |= got > 0;
      if (lane.in.buffered() < lane.left)
        return ec ? ended(lane, "payload lost", ec) : Step::kWaiting;
    }
    const uint8_t *src = lane.in.data();
    lane.written = lane.req.op == DataOp::kFlush
                       ? pool_.write_posted(lane.req.offset, src, lane.left)
                       : pool_.write_durable(lane.req.offset, src, lane.left,
                                             lane.req.op == DataOp::kDeepPersist);
    lane.in.consume(lane.left);
    lane.left = 0;
    progress = true;
  } else if (lane.left > 0) {
    size_t done = 0;
    auto ec = (lane.req.flags & proto::kDataRelaxed)
                  ? lane.in.take_direct(lane.dst, lane.left, done)
                  : lane.in.take_atomic(lane.dst, lane.left, done);
    // APM: durable as it lands, before the next piece comes.
    if (apm_ && done > 0) {
      auto ec2 = pool_.persist(static_cast<size_t>(lane.dst - pool_.base()), done, false);
      if (ec2 && !lane.written) lane.written = ec2;
    }
    lane.dst += done;
    lane.left -= done;
    progress |= done > 0;
    if (lane.left > 0) return ec ? ended(lane, "payload lost", ec) : Step::kWaiting;
  }
  return Step::kMore;
}

void LaneServer::complete(Lane &lane) {
  const proto::DataRequest &req = lane.req;
  proto::DataReply reply{0, req.op, 0};
  lane.state = Lane::State::kHeader;
  if (proto::carries_payload(req.op)) {
    if (req.op == DataOp::kFlush) {  // no reply: made durable later
      if (lane.counters) lane.counters->served(LaneOp::kFlush, req.length, lane.started_ns, false);
      if ((lane.whole || apm_) && lane.written && !lane.flush_error)
        lane.flush_error = lane.written;
      lane.whole = false;
      if (lane.visible && lane.counters) lane.counters->visible(req.length);
      if (req.length == 0 || apm_) return;  // APM: durable already
      if (lane.flushes.full()) lane.flush_pending();
      lane.flushes.add(req.offset, req.length);
      lane.flush_persistent |= !lane.visible;
      if (!lane.dirty) {
        lane.dirty = true;
        dirty_.push_back(&lane);
      }
      return;
    }
    // APM: durable already, unless the persist is deep (pmem_deep_persist).
    std::error_code perr =
        lane.whole || (apm_ && req.op != DataOp::kDeepPersist) ? lane.written
        : lane.visible ? pool_.made_visible(req.offset, req.length)
                       : pool_.persist(req.offset, req.length, req.op == DataOp::kDeepPersist);
    lane.whole = false;
    if (lane.visible && lane.counters) lane.counters->visible(req.length);
    reply.status = static_cast<uint32_t>(perr.value());
  } else if (req.op == DataOp::kDrain) {
    // Visible when the drain asks for it and no flush since the last one
    // asked for more; a persistent drain makes the pool's visible bytes
    // durable too.
    if (lane.visible && !lane.flush_persistent) {
      lane.flush_visible();
    } else {
      lane.flush_pending();
      if (auto ec = pool_.persist_visible(); ec && !lane.flush_error) lane.flush_error = ec;
    }
    reply.status = static_cast<uint32_t>(lane.flush_error.value());
    lane.flush_error.clear();
  } else if (req.op == DataOp::kProbe) {
    // Answered in its turn: a client whose reply was late (proto.h), and
    // whose reply, if TCP lost it, now has this one behind it.
    if (lane.counters) lane.counters->probed();
  } else {  // kRead: the reply carries the bytes
    reply.length = req.length;
  }
  if (lane.counters && req.op != DataOp::kProbe) {
    lane.counters->served(proto::lane_op(req.op), req.length, lane.started_ns, reply.status != 0);
  }
  proto::encode(reply, lane.reply);
  lane.iov[0] = {lane.reply, sizeof(lane.reply)};
  lane.iov[1] = {pool_.base() + req.offset, reply.length};
  lane.unsent = lane.iov;
  lane.nunsent = reply.length ? 2 : 1;
  lane.state = Lane::State::kReply;
}

}  // namespace rpmem::transport::tcp
