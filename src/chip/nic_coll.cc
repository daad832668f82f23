// The NIC's collective engine (chip/coll.h; docs/system.md 1.1, "Offloaded collectives"): CP
// counters, CP-triggered descriptors, CPs written into the MPQ, data replaced and combined.
#include <fmt/format.h>

#include <algorithm>

#include "chip/nic.h"

namespace galaxy::chip {

using wire::DataPacket;
using wire::PacketKind;

Status Nic::post_coll(uint8_t vp, const CollDescriptor& d) {
  GALAXY_TRY(check_vp(vp));
  GALAXY_TRY(check_coll_descriptor(d));
  GALAXY_TRY(check_room(vp, 2114));
  QueuedDescriptor q{QueuedDescriptor::Kind::kColl, false, vps_[vp].next_sequence++, {}};
  q.notify = d.notify;
  q.trigger = d.trigger;
  q.coll = d;
  queue(vp, std::move(q));
  return {};
}

void Nic::reset_coll(uint8_t vp) {
  if (vp >= kNumVps) return;
  VpState& v = vps_[vp];
  // Queued collective descriptors go; others (management, MPs, RDMA) stay and run.
  Fifo<QueuedDescriptor> keep;
  while (!v.dq.empty()) {
    if (v.dq.front().kind != QueuedDescriptor::Kind::kColl && v.dq.front().trigger == 0)
      keep.push_back(std::move(v.dq.front()));
    v.dq.pop_front();
  }
  v.dq = std::move(keep);
  v.cp_counter = 0;
  v.waits_cp = false;
  v.cp_latch.clear();
  v.acc_valid = v.group_data_valid = v.group_acc_valid = false;
  if (v.dq.empty())
    dq_busy_ &= ~(uint64_t{1} << vp);
  else
    dq_busy_ |= uint64_t{1} << vp;
}

bool Nic::head_may_start(uint8_t vp, VpState& v) {
  if (v.local_in_flight > 0) return false;  // the engine kicks the NIC when it completes
  QueuedDescriptor& d = v.dq.front();
  if (d.trigger == 0) return true;
  if (v.cp_counter < d.trigger) {
    v.waits_cp = true;  // out of the round-robin until a CP comes (rx_cp)
    dq_busy_ &= ~(uint64_t{1} << vp);
    return false;
  }
  // The trigger fires: the counter drops by its count, and what the CPs brought is released to
  // this descriptor and the untriggered ones behind it: the oldest replacing CP's data when it
  // takes CP data (a triggered RDMA always does: the CPs behind it forward them), the
  // accumulator when it combines. A trigger that takes neither leaves them for the one that
  // will (a broadcast's data may arrive before the barrier ahead of it has fired).
  v.cp_counter -= d.trigger;
  d.trigger = 0;
  v.waits_cp = false;
  ++v.triggered;
  const bool coll = d.kind == QueuedDescriptor::Kind::kColl;
  if (!coll || d.coll.data_from == CollData::kCp) {
    v.group_data_valid = !v.cp_latch.empty();
    if (v.group_data_valid) {
      v.group_data = v.cp_latch.front();
      v.cp_latch.pop_front();
    }
  }
  if (coll && d.coll.data_from == CollData::kCombined) {
    v.group_acc_valid = v.acc_valid;
    v.group_acc = v.acc;
    v.acc_valid = false;
  }
  return true;
}

std::optional<NicWork> Nic::start_coll(uint8_t vp, VpState& v, QueuedDescriptor& q) {
  const CollDescriptor& d = q.coll;
  NicWork w;
  w.vp = vp;
  w.sequence = q.sequence;
  // The data it starts with (chip/coll.h CollData).
  CpData data;
  data.length = d.length;
  data.data = d.data;
  if (d.data_from == CollData::kCp && v.group_data_valid) {
    if (d.kind == CollDescriptor::Kind::kLocal && v.group_data.length != d.length) {
      w.kind = NicWork::Kind::kRejected;
      w.op = DescriptorOp::kLocal;
      w.error = make_error(Code::kInvalidArgument, 2119,
                           fmt::format("collective: {} bytes arrived where this member posted "
                                       "length = {}",
                                       v.group_data.length, d.length));
      v.in_flight.push_back({q.sequence, true, DescriptorOp::kLocal});
      return w;
    }
    data = v.group_data;
  } else if (d.data_from == CollData::kCombined && v.group_acc_valid) {
    combine(d.op, std::span(data.data).first(std::min(data.length, v.group_acc.length)),
            std::span(v.group_acc.data).first(v.group_acc.length));
  }
  if (d.kind == CollDescriptor::Kind::kLocal) {
    w.kind = NicWork::Kind::kLocal;
    w.op = DescriptorOp::kLocal;
    uint16_t err = 0;
    if (data.length > 0) {
      err = write_host(d.key, d.address, std::span(data.data).first(data.length), kAccessWrite);
      if (err == 0) err = flush_host();
    }
    if (err != 0) {
      w.kind = NicWork::Kind::kRejected;
      w.error = make_error(Code::kPermissionDenied, 2115,
                           fmt::format("collective local write of {} bytes at {:#x} (key {:#x}) "
                                       "refused: E{}",
                                       data.length, d.address, d.key, err));
      v.in_flight.push_back({q.sequence, true, w.op});
      return w;
    }
    std::copy(data.data.begin(), data.data.end(), w.mp_data.begin());
    ++v.local_in_flight;
    v.in_flight.push_back({q.sequence, d.notify, w.op});
    return w;
  }
  // A CP: a special MP (docs/system.md 1.1) whose head carries the increment and flags and whose
  // extension carries the combining operation. An MP: an ordinary one, its data perhaps a CP's.
  w.kind = NicWork::Kind::kMp;
  w.op = DescriptorOp::kCp;
  DataPacket p;
  const bool cp = d.kind == CollDescriptor::Kind::kCp;
  p.head.kind = cp ? PacketKind::kCp : PacketKind::kMp;
  p.head.dest_node = d.dest_node;
  p.head.dest_vp = d.dest_vp;
  p.head.src_vp = vp;
  p.head.tag = cp ? d.increment : 0;
  p.head.flags = cp ? d.cp_flags : static_cast<uint8_t>(d.cp_flags & wire::kDataFlagInterrupt);
  p.head.bytes = data.length;
  p.ext.key = cp ? static_cast<uint32_t>(d.cp_op) : 0;
  std::copy(data.data.begin(), data.data.end(), p.payload.begin());
  w.packet = make_packet(p, DmaEngine::kLocalRead, d.data_from == CollData::kOwn ? data.length : 0);
  if (!w.packet) {
    w.kind = NicWork::Kind::kRejected;
    w.error =
        make_error(Code::kMalformed, 2116,
                   fmt::format("CP to node {} vp {} could not be encoded", d.dest_node, d.dest_vp));
    v.in_flight.push_back({q.sequence, true, w.op});
    return w;
  }
  w.head = w.packet->head;
  std::copy(data.data.begin(), data.data.end(), w.mp_data.begin());
  v.in_flight.push_back({q.sequence, d.notify, w.op});
  return w;
}

NicRx Nic::rx_cp(const DataPacket& p, const ArrivedPacket& arrived) {
  const wire::DataHead& h = p.head;
  auto f = cp_fields(p);
  if (!f.ok()) {
    discard(arrived, f.error(), wire::DataDefect::kMalformed);
    return NicRx::kDiscarded;
  }
  if (h.dest_vp >= kNumVps) {
    discard(arrived,
            make_error(Code::kNotFound, 2117,
                       fmt::format("CP for vp {} reached NIC {}, which has {} VPs", h.dest_vp,
                                   chip_id(), kNumVps)),
            wire::DataDefect::kMalformed);
    return NicRx::kDiscarded;
  }
  VpState& v = vps_[h.dest_vp];
  if ((f->flags & kCpFlagReplace) && v.cp_latch.size() >= kCpLatchDepth) {
    ++v.cps_discarded;
    discard(arrived,
            make_error(Code::kResourceExhausted, 2118,
                       fmt::format("CP from node {} vp {} for vp {}: {} CPs' data already wait "
                                   "for a triggered descriptor",
                                   h.src_node, h.src_vp, h.dest_vp, kCpLatchDepth)),
            wire::DataDefect::kNone);
    return NicRx::kDiscarded;
  }
  ++v.cps_received;
  if (f->op != CombineOp::kNone) {
    if (!v.acc_valid) {
      v.acc.length = h.bytes;
      std::copy(p.payload.begin(), p.payload.begin() + h.bytes, v.acc.data.begin());
      v.acc_valid = true;
    } else {
      combine(f->op, std::span(v.acc.data).first(std::min(v.acc.length, h.bytes)), p.data());
    }
  }
  if (f->flags & kCpFlagReplace) {
    CpData c;
    c.length = h.bytes;
    std::copy(p.payload.begin(), p.payload.begin() + h.bytes, c.data.begin());
    v.cp_latch.push_back(c);
  }
  v.cp_counter += f->increment;
  if (v.waits_cp) {  // the head descriptor looks at the counter again (next_work)
    v.waits_cp = false;
    if (!v.dq.empty()) dq_busy_ |= uint64_t{1} << h.dest_vp;
  }
  if (!(f->flags & kCpFlagToMpq)) return NicRx::kDelivered;
  MpqEntry e;
  e.kind = PacketKind::kCp;
  e.src_node = h.src_node;
  e.src_vp = h.src_vp;
  e.length = h.bytes;
  std::copy(p.payload.begin(), p.payload.begin() + h.bytes, e.data.begin());
  if (f->flags & kCpFlagInterrupt) ++interrupts_;
  return enqueue(v, e);
}

}  // namespace galaxy::chip
