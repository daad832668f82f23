// VIA notification (VipSendNotify, VipRecvNotify, VipCQNotify): a thread of the provider per NIC,
// started by the first call, answers each in the order asked once its queue or CQ has a
// completion, and calls the handler without the NIC's lock (a handler may call VIA).
#include <fmt/format.h>

#include <chrono>

#include "via/via_internal.h"

namespace galaxy::via {
namespace {

struct Answer {
  Notify n;
  via_vi* vi;
  VIP_DESCRIPTOR* d;  // a VI queue's
  bool recv;          // a CQ entry's
};

// The first notification that can be answered now, taken off with what answers it.
std::optional<Answer> next_answer(Nic* nic) {
  for (auto it = nic->notifies.begin(); it != nic->notifies.end(); ++it) {
    const Notify n = *it;
    if (n.cq) {
      via_vi* vi = nullptr;
      bool recv = false;
      if (!take_entry(n.cq, &vi, &recv)) continue;
      nic->notifies.erase(it);
      return Answer{n, vi, nullptr, recv};
    }
    progress(n.vi);
    VIP_DESCRIPTOR* d = nullptr;
    if (take_completed(n.vi, &d, n.recv) == VIP_NOT_DONE) continue;
    nic->notifies.erase(it);
    return Answer{n, n.vi, d, n.recv};
  }
  return std::nullopt;
}

// Set on the notifier's own thread when a handler closes the NIC: the NIC is gone on return.
thread_local bool closed_by_handler = false;

void run_notifier(Nic* nic) {
  std::unique_lock lock(nic->mu);
  while (!nic->notifier_stop) {
    if (std::optional<Answer> a = next_answer(nic)) {
      lock.unlock();
      if (a->n.cq)
        a->n.on_entry(a->n.context, static_cast<via_nic*>(nic), a->vi,
                      a->recv ? VIP_TRUE : VIP_FALSE);
      else
        a->n.on_descriptor(a->n.context, static_cast<via_nic*>(nic), a->vi, a->d);
      if (closed_by_handler) return void(lock.release());
      lock.lock();
      continue;
    }
    if (nic->notifies.empty()) {
      nic->notify_cv.wait(lock, [&] { return nic->notifier_stop || !nic->notifies.empty(); });
      continue;
    }
    // Nothing yet: a short wait on a VI asked about (the lock held, as a Wait call holds it),
    // then the lock is let go for the program's own calls.
    const Notify& n = nic->notifies.front();
    via_vi* v = n.cq ? (n.cq->vis.empty() ? nullptr : n.cq->vis.front()) : n.vi;
    if (v) (void)wait_slice(v, 1);
    lock.unlock();
    if (v)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    lock.lock();
  }
}

VIP_RETURN ask(Nic* nic, Notify n) {
  std::lock_guard lock(nic->mu);
  nic->notifies.push_back(n);
  if (!nic->notifier.joinable()) nic->notifier = std::thread(run_notifier, nic);
  nic->notify_cv.notify_all();
  return VIP_SUCCESS;
}

VIP_RETURN vi_notify(VIP_VI_HANDLE vi, VIP_PVOID context, VIP_VI_NOTIFY_HANDLER handler,
                     bool recv) {
  if (!vi || !handler)
    return fail(VIP_INVALID_PARAMETER, fmt::format("E6598 {}: ViHandle or Handler is NULL",
                                                   recv ? "VipRecvNotify" : "VipSendNotify"));
  Notify n;
  n.vi = vi;
  n.recv = recv;
  n.context = context;
  n.on_descriptor = handler;
  return ask(vi->nic, n);
}

}  // namespace

void stop_notifier(Nic* nic) {
  {
    std::lock_guard lock(nic->mu);
    nic->notifier_stop = true;
    nic->notifies.clear();
    nic->notify_cv.notify_all();
  }
  if (!nic->notifier.joinable()) return;
  if (nic->notifier.get_id() == std::this_thread::get_id()) {
    nic->notifier.detach();  // closed from a handler: the thread ends when it returns
    closed_by_handler = true;
  } else {
    nic->notifier.join();
  }
}

void drop_notifies(Nic* nic, const via_vi* vi, const via_cq* cq) {
  std::erase_if(nic->notifies,
                [&](const Notify& n) { return (vi && n.vi == vi) || (cq && n.cq == cq); });
}

}  // namespace galaxy::via

using namespace galaxy::via;

extern "C" {

VIP_RETURN VipSendNotify(VIP_VI_HANDLE vi, VIP_PVOID context, VIP_VI_NOTIFY_HANDLER handler) {
  return vi_notify(vi, context, handler, false);
}

VIP_RETURN VipRecvNotify(VIP_VI_HANDLE vi, VIP_PVOID context, VIP_VI_NOTIFY_HANDLER handler) {
  return vi_notify(vi, context, handler, true);
}

VIP_RETURN VipCQNotify(VIP_CQ_HANDLE cq, VIP_PVOID context, VIP_CQ_NOTIFY_HANDLER handler) {
  if (!cq || !handler)
    return fail(VIP_INVALID_PARAMETER, "E6599 VipCQNotify: CQHandle or Handler is NULL");
  Notify n;
  n.cq = cq;
  n.context = context;
  n.on_entry = handler;
  return ask(cq->nic, n);
}

}  // extern "C"
