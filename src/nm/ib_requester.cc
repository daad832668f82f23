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
  queued_.push_back(Pending{smp, dlid, std::move(done), 0, {}, std::nullopt, nullptr});
}

void IbRequester::submit_gmp(const wire::Mad& mad, uint16_t dlid, GmpReplyFn done) {
  Pending p{wire::Smp{}, dlid, nullptr, 0, {}, mad, std::move(done)};
  queued_.push_back(std::move(p));
}

void IbRequester::start(Pending p) {
  const uint32_t tid = next_tid_++;
  if (next_tid_ == 0) next_tid_ = 1;
  p.attempts += 1;
  p.deadline = Clock::now() + std::chrono::milliseconds(options_.deadline_ms);
  stats_.sent += 1;
  Status s;
  if (p.gmp) {
    p.gmp->transaction_id = tid;
    s = port_.send_gmp(*p.gmp, p.dlid);
  } else {
    p.smp.transaction_id = tid;
    if (p.smp.m_key == 0) p.smp.m_key = options_.m_key;
    s = port_.send(p.smp, p.dlid);
  }
  if (!s) {
    stats_.failed += 1;
    if (p.gmp)
      p.gmp_done(s, *p.gmp);
    else
      p.done(s, p.smp);
    return;
  }
  in_flight_.emplace(tid, std::move(p));
}

void IbRequester::finish(uint32_t tid, const Status& status, const ib::SmpCompletion& c) {
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
  // The answer is of the kind asked for: an SMP's to an SMP, a GMP's to a GMP.
  Status s = status;
  if (s && p.gmp.has_value() != c.gmp.has_value())
    s = make_error(Code::kMalformed, 7102,
                   fmt::format("the answer to request {:#x} is {}", tid,
                               c.gmp ? "a GMP, not an SMP" : "an SMP, not a GMP"));
  static const wire::Mad none{};  // what a GMP's owner gets with an error and no answer
  auto done = [&](const Status& st) {
    if (p.gmp)
      p.gmp_done(st, c.gmp ? *c.gmp : none);
    else
      p.done(st, c.smp);
  };
  if (!s) {
    stats_.failed += 1;
    done(s);
    return;
  }
  stats_.answered += 1;
  const uint16_t answer_status = c.gmp ? c.gmp->status : c.smp.status;
  if (answer_status != 0) {
    stats_.error_status += 1;
    done(make_error(
        Code::kUnsupported, 7100,
        p.gmp
            ? fmt::format("class {:#04x} {} (attribute {:#06x}): the agent answered "
                          "status {:#06x}",
                          static_cast<unsigned>(p.gmp->mgmt_class),
                          wire::mad_method_name(p.gmp->method), p.gmp->attribute_id, answer_status)
            : fmt::format("{} {} (modifier {:#x}): the SMA answered {}",
                          wire::mad_method_name(p.smp.method),
                          wire::smp_attr_name(p.smp.attribute_id), p.smp.attribute_modifier,
                          wire::smp_status_text(answer_status))));
    return;
  }
  done(Status{});
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
        finish(c->tid, c->status, *c);
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
      finish(tid,
             make_error(
                 Code::kTimeout, 7101,
                 fmt::format("no answer to request {:#x} within {} ms", tid, options_.deadline_ms)),
             ib::SmpCompletion{});
    }
  }
  return {};
}

}  // namespace galaxy::nm
