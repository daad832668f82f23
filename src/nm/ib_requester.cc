#include "nm/ib_requester.h"

#include <fmt/format.h>

#include <algorithm>

namespace galaxy::nm {

using Clock = std::chrono::steady_clock;

IbRequester::IbRequester(ib::SmpPort& port, IbRequesterOptions options)
    : port_(port), options_(options) {
  if (options_.window == 0) options_.window = 1;
  options_.window = std::min(options_.window, port_.max_in_flight());
}

void IbRequester::submit(const wire::Smp& smp, uint16_t dlid, IbReplyFn done) {
  queued_.push_back(Pending{smp, dlid, std::move(done), 0, {}});
}

void IbRequester::start(Pending p) {
  const uint32_t tid = next_tid_++;
  if (next_tid_ == 0) next_tid_ = 1;
  p.smp.transaction_id = tid;
  p.attempts += 1;
  p.deadline = Clock::now() + std::chrono::milliseconds(options_.deadline_ms);
  stats_.sent += 1;
  Status s = port_.send(p.smp, p.dlid);
  if (!s) {
    stats_.failed += 1;
    p.done(s, p.smp);
    return;
  }
  in_flight_.emplace(tid, std::move(p));
}

void IbRequester::finish(uint32_t tid, const Status& status, const wire::Smp& answer) {
  auto it = in_flight_.find(tid);
  if (it == in_flight_.end()) {
    stats_.stale += 1;
    return;
  }
  Pending p = std::move(it->second);
  in_flight_.erase(it);
  if (!status && status.error().code == Code::kTimeout && p.attempts <= options_.retries) {
    stats_.retries += 1;
    queued_.push_back(std::move(p));
    return;
  }
  if (!status) {
    stats_.failed += 1;
    p.done(status, answer);
    return;
  }
  stats_.answered += 1;
  if (answer.status != 0) {
    stats_.error_status += 1;
    p.done(make_error(Code::kUnsupported, 7100,
                      fmt::format("{} {} (modifier {:#x}): the SMA answered {}",
                                  wire::mad_method_name(p.smp.method),
                                  wire::smp_attr_name(p.smp.attribute_id), p.smp.attribute_modifier,
                                  wire::smp_status_text(answer.status))),
           answer);
    return;
  }
  p.done(Status{}, answer);
}

Status IbRequester::run() {
  auto refill = [this] {
    while (queued_.empty() && source_)
      if (!source_()) source_ = nullptr;
  };
  refill();
  while (!queued_.empty() || !in_flight_.empty()) {
    while (!queued_.empty() && in_flight_.size() < options_.window) {
      Pending p = std::move(queued_.front());
      queued_.pop_front();
      start(std::move(p));
      refill();
    }
    if (in_flight_.empty()) continue;
    // Every answer already waiting is taken before more requests go out.
    for (int wait_ms = 20;; wait_ms = 0) {
      auto c = port_.receive(wait_ms);
      if (c) {
        finish(c->tid, c->status, c->smp);
        continue;
      }
      if (c.error().code != Code::kTimeout) return c.error();
      break;
    }
    // Our own deadline, behind the transport's: an answer lost without a trace.
    const auto now = Clock::now();
    std::vector<uint32_t> late;
    for (const auto& [tid, p] : in_flight_)
      if (p.deadline <= now) late.push_back(tid);
    for (uint32_t tid : late) {
      finish(
          tid,
          make_error(Code::kTimeout, 7101,
                     fmt::format("no answer to SMP {:#x} within {} ms", tid, options_.deadline_ms)),
          wire::Smp{});
    }
  }
  return {};
}

}  // namespace galaxy::nm
