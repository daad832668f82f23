#include "nm/requester.h"

#include <fmt/format.h>

#include <algorithm>

namespace galaxy::nm {

MgmtRequest MgmtRequest::read(const MgmtTarget& t, uint16_t addr) {
  MgmtRequest r;
  r.target = t;
  r.type = wire::NmpType::kRegReadRequest;
  r.data.count = 1;
  r.data.address[0] = addr;
  return r;
}

MgmtRequest MgmtRequest::sm_info(wire::NmpType type, wire::ChipId nic, uint8_t vp,
                                 const wire::SourceRoute& to, const wire::SourceRoute& back,
                                 uint64_t sm_key, const wire::NmpSmInfo& info) {
  MgmtRequest r;
  r.type = type;
  r.target.chip_id = nic;
  r.target.type = wire::ChipType::kNic;
  r.target.backward = to;
  r.target.forward = back;
  r.dest_vp = vp;
  r.m_key = sm_key;
  r.data.sm = info;
  return r;
}

MgmtRequest MgmtRequest::read2(const MgmtTarget& t, uint16_t a0, uint16_t a1) {
  MgmtRequest r = read(t, a0);
  r.data.count = 2;
  r.data.address[1] = a1;
  return r;
}

MgmtRequest MgmtRequest::write(const MgmtTarget& t, uint16_t addr, uint64_t value) {
  MgmtRequest r = read(t, addr);
  r.type = wire::NmpType::kRegWriteRequest;
  r.data.value[0] = value;
  return r;
}

MgmtRequest MgmtRequest::write2(const MgmtTarget& t, uint16_t a0, uint64_t v0, uint16_t a1,
                                uint64_t v1) {
  MgmtRequest r = write(t, a0, v0);
  r.data.count = 2;
  r.data.address[1] = a1;
  r.data.value[1] = v1;
  return r;
}

Requester::Requester(MgmtPort& port, RequesterOptions options) : port_(port), options_(options) {
  if (options_.global_window == 0) options_.global_window = 1;
  if (options_.per_chip_window == 0) options_.per_chip_window = 1;
}

void Requester::submit(const MgmtRequest& request, ReplyFn done) {
  Pending p;
  p.request = request;
  p.done = std::move(done);
  queue_.push_back(std::move(p));
}

uint16_t Requester::allocate_tid() {
  // 16-bit ids wrap; an id still in flight is skipped so a late response cannot be mistaken
  // for the answer to a newer request (at most 65,535 can be in flight).
  while (in_flight_.count(next_tid_)) ++next_tid_;
  return next_tid_++;
}

bool Requester::try_send(Pending& p) {
  p.tid = allocate_tid();
  p.sent_at = port_.now();
  p.deadline = p.sent_at + options_.timeout;
  ++p.attempts;
  ++stats_.sent;
  // An SMInfo packet's key field is the SM_Key, never a chip's M_Key.
  if (p.request.m_key == 0 && !wire::is_sm_info(p.request.type))
    p.request.m_key = mkey_of(mkey_, p.request.target.chip_id);
  Status s = port_.send(p.request, p.tid);
  if (!s.ok()) {
    MgmtReply r;
    r.status = s;
    r.attempts = p.attempts;
    ++stats_.failed;
    p.done(r);
    return false;
  }
  ++per_chip_[p.request.target.chip_id];
  deadlines_.push_back({p.deadline, p.tid});
  in_flight_.emplace(p.tid, std::move(p));
  return true;
}

void Requester::release(wire::ChipId chip) {
  auto it = per_chip_.find(chip);
  if (it != per_chip_.end() && --it->second == 0) per_chip_.erase(it);
  if (parked_.count(chip)) ready_.push_back(chip);
}

bool Requester::full(wire::ChipId chip) const {
  auto it = per_chip_.find(chip);
  return it != per_chip_.end() && it->second >= options_.per_chip_window;
}

void Requester::issue() {
  // Requests to a chip whose window is full wait in order behind it; others may pass them.
  // Requests not yet looked at go first, as many chips working at once as the window allows;
  // then the parked ones of chips that got room.
  while (in_flight_.size() < options_.global_window) {
    if (!queue_.empty()) {
      Pending p = std::move(queue_.front());
      queue_.pop_front();
      const wire::ChipId chip = p.request.target.chip_id;
      auto it = parked_.find(chip);
      if (it != parked_.end()) {
        it->second.push_back(std::move(p));  // behind its chip's earlier requests
        continue;
      }
      if (full(chip)) {
        parked_[chip].push_back(std::move(p));
        continue;
      }
      try_send(p);
      continue;
    }
    if (ready_.empty()) return;
    const wire::ChipId chip = ready_.front();
    ready_.pop_front();
    auto it = parked_.find(chip);
    if (it == parked_.end()) continue;
    if (full(chip)) continue;
    Pending p = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty())
      parked_.erase(it);
    else
      ready_.push_back(chip);  // more behind it, if the window still has room
    try_send(p);
  }
}

void Requester::complete(uint16_t tid, const MgmtReply& reply) {
  auto it = in_flight_.find(tid);
  Pending p = std::move(it->second);
  in_flight_.erase(it);
  release(p.request.target.chip_id);
  MgmtReply r = reply;
  r.attempts = p.attempts;
  r.latency = port_.now() - p.sent_at;
  if (observer_) observer_(p.request, r);
  p.done(r);
}

void Requester::expire(Picoseconds now) {
  std::vector<uint16_t> late;  // in send order
  while (!deadlines_.empty() && deadlines_.front().first <= now) {
    const auto [deadline, tid] = deadlines_.front();
    deadlines_.pop_front();
    auto it = in_flight_.find(tid);
    if (it != in_flight_.end() && it->second.deadline == deadline) late.push_back(tid);
  }
  for (uint16_t tid : late) {
    auto it = in_flight_.find(tid);
    if (it->second.attempts <= options_.retries) {
      Pending p = std::move(it->second);
      in_flight_.erase(it);
      release(p.request.target.chip_id);
      ++stats_.retries;
      try_send(p);
    } else {
      ++stats_.failed;
      MgmtReply r;
      r.status = make_error(Code::kTimeout, 5000,
                            fmt::format("no answer from chip {} after {} attempts of {} us",
                                        it->second.request.target.chip_id, it->second.attempts,
                                        options_.timeout / kUs));
      complete(tid, r);
    }
  }
}

void Requester::dispatch(const wire::MgmtPacket& packet) {
  if (packet.nmp_type == wire::NmpType::kFaultReport) {
    ++stats_.fault_reports;
    if (fault_handler_) fault_handler_(packet);
    return;
  }
  if (packet.nmp_type == wire::NmpType::kSmInfoGet ||
      packet.nmp_type == wire::NmpType::kSmInfoSet) {
    // Another server asks this one: its SM answers (nm/galaxy_sm.h); without one, nobody here
    // is an SM and the asker times out, as it would at a NIC with no server.
    ++stats_.sm_requests;
    if (sm_handler_) sm_handler_(packet);
    return;
  }
  auto it = in_flight_.find(packet.transaction_id);
  if (it == in_flight_.end() || it->second.request.target.chip_id != packet.src_id) {
    // An unconfigured chip answers with src all-ones; accept it for a request sent to all-ones.
    if (it == in_flight_.end() || !(it->second.request.target.chip_id == wire::kUnconfiguredId)) {
      ++stats_.stale;
      return;
    }
  }
  MgmtReply r;
  r.response = packet;
  if (packet.nmp_type == wire::NmpType::kRegError ||
      packet.nmp_type == wire::NmpType::kEepromError) {
    ++stats_.error_responses;
    r.status =
        make_error(Code::kInvalidArgument, 5001,
                   fmt::format("chip {} refused the request: {} (address 0x{:x})", packet.src_id,
                               wire::nmp_error_name(packet.data.error), packet.data.error_address));
  }
  ++stats_.answered;
  complete(packet.transaction_id, r);
}

void Requester::run() {
  for (;;) {
    issue();
    if (in_flight_.empty()) {
      if (queue_.empty() && parked_.empty()) return;
      // Nothing in flight, so every parked chip has room.
      if (ready_.empty())
        for (const auto& [chip, waiting] : parked_) ready_.push_back(chip);
      continue;
    }
    Picoseconds now = port_.now();
    // The first deadline whose attempt is still in flight (answered ones are skipped here).
    while (!deadlines_.empty()) {
      auto it = in_flight_.find(deadlines_.front().second);
      if (it != in_flight_.end() && it->second.deadline == deadlines_.front().first) break;
      deadlines_.pop_front();
    }
    const Picoseconds next_deadline = deadlines_.empty() ? UINT64_MAX : deadlines_.front().first;
    if (next_deadline <= now) {
      expire(now);
      continue;
    }
    auto packet = port_.receive(next_deadline - now);
    if (packet.ok()) {
      dispatch(*packet);
    } else if (packet.error().code == Code::kIoError) {
      return fail_all(packet.error());
    } else {
      expire(port_.now());
    }
  }
}

void Requester::fail_all(const Error& e) {
  MgmtReply r;
  r.status = e;
  std::vector<uint16_t> tids;
  for (const auto& [tid, p] : in_flight_) tids.push_back(tid);
  for (uint16_t tid : tids) {
    ++stats_.failed;
    complete(tid, r);
  }
  deadlines_.clear();
  std::vector<Pending> waiting;
  auto take = [&](Fifo<Pending>& q) {
    for (; !q.empty(); q.pop_front()) waiting.push_back(std::move(q.front()));
  };
  take(queue_);
  for (auto& [chip, q] : parked_) take(q);
  parked_.clear();
  ready_.clear();
  for (Pending& p : waiting) {
    ++stats_.failed;
    p.done(r);
  }
}

MgmtReply call(Requester& r, const MgmtRequest& q) {
  MgmtReply got;
  r.submit(q, [&](const MgmtReply& reply) { got = reply; });
  r.run();
  return got;
}

void Requester::poll() {
  // Bounded: a stream of packets must not hold the caller forever.
  for (unsigned i = 0; i < 4096; ++i) {
    auto packet = port_.receive(0);
    if (packet.ok()) {
      dispatch(*packet);
    } else if (packet.error().code == Code::kTimeout || packet.error().code == Code::kIoError) {
      return;
    } else {
      ++stats_.malformed;  // taken from the queue, and not trusted
    }
  }
}

void Requester::drain_faults(Picoseconds duration) {
  Picoseconds end = port_.now() + duration;
  while (port_.now() < end) {
    auto packet = port_.receive(end - port_.now());
    if (!packet.ok()) break;
    dispatch(*packet);
  }
}

}  // namespace galaxy::nm
