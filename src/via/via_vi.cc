// VIA VIs and completion queues: creation, attributes, destruction, and the CQ's Done and Wait
// (docs/via.md).
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "via/via_internal.h"

namespace galaxy::via {

bool take_entry(via_cq* cq, via_vi** vi, bool* recv) {
  if (cq->entries.empty())
    for (via_vi* v : cq->vis) progress(v);
  if (cq->entries.empty()) return false;
  *vi = cq->entries.front().first;
  *recv = cq->entries.front().second;
  cq->entries.pop_front();
  return true;
}

void free_bounce(via_vi* vi) {
  if (!vi->bounce) return;
  if (vi->bounce_mh) glex_deregister_mem(vi->nic->dev, vi->bounce_mh);
  if (vi->bounce_shared)
    glex_free_mem(vi->nic->dev, vi->bounce);
  else
    std::free(vi->bounce);
  vi->bounce = nullptr;
  vi->bounce_mh = 0;
}

namespace {

bool has(const std::vector<std::unique_ptr<via_ptag>>& v, const via_ptag* p) {
  return std::any_of(v.begin(), v.end(), [&](const auto& x) { return x.get() == p; });
}
bool has(const std::vector<std::unique_ptr<via_cq>>& v, const via_cq* p) {
  return std::any_of(v.begin(), v.end(), [&](const auto& x) { return x.get() == p; });
}

VIP_RETURN check_attributes(Nic* nic, const VIP_VI_ATTRIBUTES* a, const char* call) {
  if (!a) return fail(VIP_INVALID_PARAMETER, fmt::format("E6540 {}: ViAttributes is NULL", call));
  const auto level = a->ReliabilityLevel;
  if (level != VIP_SERVICE_UNRELIABLE && level != VIP_SERVICE_RELIABLE_DELIVERY &&
      level != VIP_SERVICE_RELIABLE_RECEPTION)
    return fail(VIP_INVALID_RELIABILITY_LEVEL,
                fmt::format("E6541 {}: ReliabilityLevel = {} (1, 2 or 4)", call, level));
  if (a->MaxTransferSize == 0 || a->MaxTransferSize > kMaxTransfer)
    return fail(VIP_INVALID_MTU, fmt::format("E6542 {}: MaxTransferSize = {} (1..{})", call,
                                             a->MaxTransferSize, kMaxTransfer));
  if (a->QoS) return fail(VIP_INVALID_QOS, fmt::format("E6543 {}: QoS must be NULL", call));
  if (!has(nic->ptags, a->Ptag))
    return fail(VIP_INVALID_PTAG, fmt::format("E6544 {}: Ptag is not a tag of this NIC", call));
  return VIP_SUCCESS;
}

}  // namespace
}  // namespace galaxy::via

using namespace galaxy::via;

extern "C" {

VIP_RETURN VipCreateVi(VIP_NIC_HANDLE nic, VIP_VI_ATTRIBUTES* attrs, VIP_CQ_HANDLE send_cq,
                       VIP_CQ_HANDLE recv_cq, VIP_VI_HANDLE* out) {
  if (!nic || !out) return fail(VIP_INVALID_PARAMETER, "E6545 VipCreateVi: a handle is NULL");
  std::lock_guard lock(nic->mu);
  if (VIP_RETURN r = check_attributes(nic, attrs, "VipCreateVi"); r != VIP_SUCCESS) return r;
  if ((send_cq && !has(nic->cqs, send_cq)) || (recv_cq && !has(nic->cqs, recv_cq)))
    return fail(VIP_INVALID_PARAMETER, "E6546 VipCreateVi: a CQ is not a CQ of this NIC");
  auto vi = std::make_unique<via_vi>();
  vi->nic = nic;
  glex_ep_attr ea{-1};
  if (glex_ret_t g = glex_create_ep(nic->dev, &ea, &vi->ep); g != GLEX_SUCCESS)
    return fail(VIP_ERROR_RESOURCE, fmt::format("E6547 VipCreateVi: {}", glex_last_error()));
  // The bounce ring: shared memory where the engine has it (a peer on this host puts with one
  // copy), else memory of the process; without one, sends go by MP trains and reads.
  const uint64_t ring = uint64_t{kBounceSlots} * kBounceSlot;
  if (glex_alloc_mem(nic->dev, ring, &vi->bounce) == GLEX_SUCCESS) {
    vi->bounce_shared = true;
  } else {
    vi->bounce = std::aligned_alloc(4096, ring);
  }
  if (vi->bounce &&
      glex_register_mem(nic->dev, vi->bounce, ring, GLEX_MEM_WRITE, &vi->bounce_mh) != GLEX_SUCCESS)
    free_bounce(vi.get());
  vi->attrs = *attrs;
  vi->send_cq = send_cq;
  vi->recv_cq = recv_cq;
  for (via_cq* cq : {send_cq, recv_cq})
    if (cq && std::find(cq->vis.begin(), cq->vis.end(), vi.get()) == cq->vis.end())
      cq->vis.push_back(vi.get());
  ++attrs->Ptag->users;
  *out = vi.get();
  nic->vis.push_back(std::move(vi));
  return VIP_SUCCESS;
}

VIP_RETURN VipDestroyVi(VIP_VI_HANDLE vi) {
  if (!vi) return fail(VIP_INVALID_PARAMETER, "E6548 VipDestroyVi: ViHandle is NULL");
  Nic* nic = vi->nic;
  std::lock_guard lock(nic->mu);
  if (vi->state != VIP_STATE_IDLE)
    return fail(VIP_INVALID_STATE,
                fmt::format("E6549 VipDestroyVi: the VI is {} (disconnect it first)",
                            vi->state == VIP_STATE_ERROR ? "in the error state" : "connected"));
  if (vi->sendq.posted() || vi->recvq.posted())
    return fail(VIP_INVALID_STATE,
                fmt::format("E6550 VipDestroyVi: {} send and {} receive descriptors are still "
                            "queued",
                            vi->sendq.posted(), vi->recvq.posted()));
  drop_notifies(nic, vi, nullptr);
  for (via_cq* cq : {vi->send_cq, vi->recv_cq}) {
    if (!cq) continue;
    std::erase(cq->vis, vi);
    std::erase_if(cq->entries, [&](const auto& e) { return e.first == vi; });
  }
  free_bounce(vi);
  glex_destroy_ep(vi->ep);
  --vi->attrs.Ptag->users;
  std::erase_if(nic->vis, [&](const auto& p) { return p.get() == vi; });
  return VIP_SUCCESS;
}

VIP_RETURN VipQueryVi(VIP_VI_HANDLE vi, VIP_VI_STATE* state, VIP_VI_ATTRIBUTES* attrs,
                      VIP_BOOLEAN* send_empty, VIP_BOOLEAN* recv_empty) {
  if (!vi) return fail(VIP_INVALID_PARAMETER, "E6551 VipQueryVi: ViHandle is NULL");
  std::lock_guard lock(vi->nic->mu);
  progress(vi);
  if (state) *state = vi->state;
  if (attrs) *attrs = vi->attrs;
  if (send_empty) *send_empty = vi->sendq.posted() == 0;
  if (recv_empty) *recv_empty = vi->recvq.posted() == 0;
  return VIP_SUCCESS;
}

VIP_RETURN VipSetViAttributes(VIP_VI_HANDLE vi, VIP_VI_ATTRIBUTES* attrs) {
  if (!vi) return fail(VIP_INVALID_PARAMETER, "E6552 VipSetViAttributes: ViHandle is NULL");
  std::lock_guard lock(vi->nic->mu);
  if (vi->state != VIP_STATE_IDLE)
    return fail(VIP_INVALID_STATE, "E6553 VipSetViAttributes: the VI is not idle");
  if (VIP_RETURN r = check_attributes(vi->nic, attrs, "VipSetViAttributes"); r != VIP_SUCCESS)
    return r;
  --vi->attrs.Ptag->users;
  vi->attrs = *attrs;
  ++vi->attrs.Ptag->users;
  return VIP_SUCCESS;
}

VIP_RETURN VipCreateCQ(VIP_NIC_HANDLE nic, VIP_ULONG count, VIP_CQ_HANDLE* out) {
  if (!nic || !out) return fail(VIP_INVALID_PARAMETER, "E6554 VipCreateCQ: a handle is NULL");
  std::lock_guard lock(nic->mu);
  if (count == 0 || count > kMaxCqEntries)
    return fail(VIP_INVALID_PARAMETER,
                fmt::format("E6555 VipCreateCQ: EntryCount = {} (1..{})", count, kMaxCqEntries));
  if (nic->cqs.size() >= 1024) return fail(VIP_ERROR_RESOURCE, "E6556 VipCreateCQ: 1024 CQs exist");
  nic->cqs.push_back(std::make_unique<via_cq>());
  nic->cqs.back()->nic = nic;
  nic->cqs.back()->capacity = static_cast<uint32_t>(count);
  *out = nic->cqs.back().get();
  return VIP_SUCCESS;
}

VIP_RETURN VipDestroyCQ(VIP_CQ_HANDLE cq) {
  if (!cq) return fail(VIP_INVALID_PARAMETER, "E6557 VipDestroyCQ: CQHandle is NULL");
  Nic* nic = cq->nic;
  std::lock_guard lock(nic->mu);
  if (!cq->vis.empty())
    return fail(VIP_INVALID_STATE,
                fmt::format("E6558 VipDestroyCQ: {} VIs still complete into it", cq->vis.size()));
  drop_notifies(nic, nullptr, cq);
  std::erase_if(nic->cqs, [&](const auto& p) { return p.get() == cq; });
  return VIP_SUCCESS;
}

VIP_RETURN VipResizeCQ(VIP_CQ_HANDLE cq, VIP_ULONG count) {
  if (!cq) return fail(VIP_INVALID_PARAMETER, "E6593 VipResizeCQ: CQHandle is NULL");
  std::lock_guard lock(cq->nic->mu);
  if (count == 0 || count > kMaxCqEntries)
    return fail(VIP_INVALID_PARAMETER,
                fmt::format("E6594 VipResizeCQ: EntryCount = {} (1..{})", count, kMaxCqEntries));
  // Entries already queued stay: a size below them would lose completions.
  if (count < cq->entries.size())
    return fail(VIP_INVALID_PARAMETER,
                fmt::format("E6595 VipResizeCQ: EntryCount = {} is below the {} entries queued",
                            count, cq->entries.size()));
  cq->capacity = static_cast<uint32_t>(count);
  return VIP_SUCCESS;
}

VIP_RETURN VipCQDone(VIP_CQ_HANDLE cq, VIP_VI_HANDLE* vi, VIP_BOOLEAN* recv) {
  if (!cq || !vi || !recv) return fail(VIP_INVALID_PARAMETER, "E6559 VipCQDone: a handle is NULL");
  std::lock_guard lock(cq->nic->mu);
  bool r = false;
  if (!take_entry(cq, vi, &r)) return VIP_NOT_DONE;
  *recv = r ? VIP_TRUE : VIP_FALSE;
  return VIP_SUCCESS;
}

VIP_RETURN VipCQWait(VIP_CQ_HANDLE cq, VIP_ULONG timeout, VIP_VI_HANDLE* vi, VIP_BOOLEAN* recv) {
  if (!cq || !vi || !recv) return fail(VIP_INVALID_PARAMETER, "E6560 VipCQWait: a handle is NULL");
  std::lock_guard lock(cq->nic->mu);
  const uint64_t start = now_ms(cq->nic);
  uint64_t waited = 0;
  for (;;) {
    for (via_vi* v : cq->vis) progress(v);
    if (!cq->entries.empty()) break;
    const uint64_t elapsed = std::max(now_ms(cq->nic) - start, waited);
    if (timeout != VIP_INFINITE && elapsed >= timeout) return VIP_TIMEOUT;
    if (cq->vis.empty()) {
      waited += 1;
      continue;
    }
    // One VI: wait on it. Several: a short wait on each in turn.
    const uint64_t left = timeout == VIP_INFINITE ? 100 : timeout - elapsed;
    const int32_t slice =
        static_cast<int32_t>(std::min<uint64_t>(left, cq->vis.size() == 1 ? 100 : 1));
    bool any = false;
    for (via_vi* v : cq->vis) any = wait_slice(v, slice) || any;
    if (!any) waited += static_cast<uint64_t>(slice) * cq->vis.size();
  }
  bool r = false;
  take_entry(cq, vi, &r);
  *recv = r ? VIP_TRUE : VIP_FALSE;
  return VIP_SUCCESS;
}

}  // extern "C"
