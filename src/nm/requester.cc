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
  in_flight_.emplace(p.tid, std::move(p));
  return true;
}

void Requester::issue() {
  // Requests to a chip whose window is full wait in order behind it; others may pass them.
  size_t n = queue_.size();
  for (size_t i = 0; i < n && in_flight_.size() < options_.global_window; ++i) {
    Pending p = std::move(queue_.front());
    queue_.pop_front();
    if (per_chip_[p.request.target.chip_id] >= options_.per_chip_window) {
      queue_.push_back(std::move(p));
      continue;
    }
    try_send(p);
  }
}

void Requester::complete(uint16_t tid, const MgmtReply& reply) {
  auto it = in_flight_.find(tid);
  Pending p = std::move(it->second);
  in_flight_.erase(it);
  if (--per_chip_[p.request.target.chip_id] == 0) per_chip_.erase(p.request.target.chip_id);
  MgmtReply r = reply;
  r.attempts = p.attempts;
  r.latency = port_.now() - p.sent_at;
  if (observer_) observer_(p.request, r);
  p.done(r);
}

void Requester::expire(Picoseconds now) {
  std::vector<uint16_t> late;
  for (const auto& [tid, p] : in_flight_)
    if (p.deadline <= now) late.push_back(tid);
  std::sort(late.begin(), late.end());
  for (uint16_t tid : late) {
    auto it = in_flight_.find(tid);
    if (it->second.attempts <= options_.retries) {
      Pending p = std::move(it->second);
      in_flight_.erase(it);
      if (--per_chip_[p.request.target.chip_id] == 0) per_chip_.erase(p.request.target.chip_id);
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
      if (queue_.empty()) return;
      continue;
    }
    Picoseconds now = port_.now();
    Picoseconds next_deadline = UINT64_MAX;
    for (const auto& [tid, p] : in_flight_) next_deadline = std::min(next_deadline, p.deadline);
    if (next_deadline <= now) {
      expire(now);
      continue;
    }
    auto packet = port_.receive(next_deadline - now);
    if (packet.ok()) {
      dispatch(*packet);
    } else {
      expire(port_.now());
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
