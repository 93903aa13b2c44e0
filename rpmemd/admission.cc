// SPDX-License-Identifier: BSD-3-Clause
// The service's caps on connections, handshakes and sessions.
#include "rpmemd/admission.h"

#include <algorithm>

namespace rpmemd {

Admission::Admission(const Config &config)
    : max_handshakes_(config.max_handshakes),
      max_connections_(config.max_connections),
      max_per_address_(config.max_per_address),
      max_sessions_(config.max_sessions),
      max_sessions_per_client_(config.max_sessions_per_client) {}

Admission::Conn *Admission::find(Id id) {
  auto it = std::find_if(conns_.begin(), conns_.end(), [id](const Conn &c) { return c.id == id; });
  return it == conns_.end() ? nullptr : &*it;
}

bool Admission::drop_oldest_handshake(std::vector<Id> &dropped, const std::string *peer,
                                      const std::function<bool(Id)> *spoke) {
  for (bool silent_only : {true, false}) {
    for (Conn &c : conns_) {  // in the order they came
      if (c.in_session || c.dropped || (peer && c.peer != *peer)) continue;
      if (silent_only && !c.spoke && spoke && *spoke && (*spoke)(c.id)) c.spoke = true;
      if (silent_only && c.spoke) continue;
      c.dropped = true;
      ++dropped_conns_;
      if (c.handshake) ++dropped_handshakes_;
      dropped.push_back(c.id);
      return true;
    }
  }
  return false;
}

unsigned Admission::live_from(const std::string &peer) const {
  unsigned n = 0;
  for (const Conn &c : conns_) n += c.handshake && !c.dropped && c.peer == peer;
  return n;
}

void Admission::on_first_bytes(Id id) {
  if (Conn *c = find(id)) c->spoke = true;
}

Admission::Arrival Admission::on_connection(const std::string &peer,
                                            const std::function<bool(Id)> &spoke) {
  Arrival a;
  if (per_address_.count(peer) && live_from(peer) >= max_per_address_)
    drop_oldest_handshake(a.dropped, &peer, &spoke);
  // A dropped connection has lost its descriptor already and holds nothing
  // but its entry until its handler has run: it no longer counts against
  // the caps. (Were it counted, a flood that keeps the loop dropping would
  // fill the caps with them, and the next drop would take the oldest that
  // spoke: the real client in its handshake.)
  if (conns_.size() - dropped_conns_ >= max_connections_ &&
      !drop_oldest_handshake(a.dropped, nullptr, &spoke))
    a.refused = "too many connections (max-connections)";
  if (a.refused) return a;
  if (handshakes_ - dropped_handshakes_ >= max_handshakes_)
    drop_oldest_handshake(a.dropped, nullptr, &spoke);
  return a;
}

Admission::Id Admission::on_handshake_start(const std::string &peer) {
  Conn c;
  c.id = ++next_id_;
  c.peer = peer;
  c.handshake = true;
  ++handshakes_;
  ++per_address_[peer];
  conns_.push_back(std::move(c));
  return next_id_;
}

void Admission::on_handshake_end(Id id) {
  Conn *c = find(id);
  if (!c || !c->handshake) return;
  c->handshake = false;
  --handshakes_;
  if (c->dropped) --dropped_handshakes_;
  if (--per_address_[c->peer] == 0) per_address_.erase(c->peer);
}

Admission::Verdict Admission::on_authenticated(Id id, const std::string &cn, bool has_pool_dir) {
  Verdict v;
  Conn *c = find(id);
  if (!c) return v;
  auto known = per_client_.find(cn);
  const unsigned of_cn = known == per_client_.end() ? 0 : known->second;
  if (cn.empty() || !has_pool_dir)
    v.refused = "has no pool set directory";
  else if (of_cn >= max_sessions_per_client_)
    v.refused = "has too many sessions (max-sessions-per-client)";
  else if (sessions_ >= max_sessions_)
    v.refused = "cannot be served: too many sessions (max-sessions)";
  if (v.refused) return v;
  c->cn = cn;
  c->in_session = true;
  auto &lanes = client_lanes_[cn];
  if (!lanes) lanes = std::make_shared<std::atomic<long>>(0);
  v.client_lanes = lanes;
  ++per_client_[cn];
  ++sessions_;
  return v;
}

void Admission::on_session_end(Id id) {
  Conn *c = find(id);
  if (!c || !c->in_session) return;
  c->in_session = false;
  --sessions_;
  if (--per_client_[c->cn] == 0) {
    per_client_.erase(c->cn);
    client_lanes_.erase(c->cn);
  }
}

void Admission::on_close(Id id) {
  on_handshake_end(id);
  on_session_end(id);
  if (const Conn *c = find(id); c && c->dropped) --dropped_conns_;
  std::erase_if(conns_, [id](const Conn &c) { return c.id == id; });
}

unsigned Admission::strangers_from(const std::string &peer) const {
  auto it = per_address_.find(peer);
  return it == per_address_.end() ? 0 : it->second;
}

unsigned Admission::sessions_of(const std::string &cn) const {
  auto it = per_client_.find(cn);
  return it == per_client_.end() ? 0 : it->second;
}

Admission::LaneCounter Admission::lanes_of(const std::string &cn) const {
  auto it = client_lanes_.find(cn);
  return it == client_lanes_.end() ? nullptr : it->second;
}

}  // namespace rpmemd
