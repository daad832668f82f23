#include "chip/nic.h"

#include <fmt/format.h>

#include <algorithm>

#include "chip/mpq.h"
#include "chip/network_port.h"
#include "chip/nma.h"
#include "wire/mp.h"

namespace galaxy::chip {

using wire::NmpError;

Failure failure_of(uint16_t error_id) {
  if (error_id >= 2060 && error_id <= 2069) return Failure::kAccess;
  if (error_id == 2051 || error_id == 2056 || error_id == kErrNoUsableRoute ||
      error_id == kErrNicPortDown || error_id == kErrHopLimit)
    return Failure::kUnreachable;
  return Failure::kDescriptor;
}

Nic::Nic(uint16_t num_ports) : Chip(wire::ChipType::kNic, num_ports, reg::kNicAddressSpace) {}

Status check_model_ports(bool nic, uint32_t ports, uint32_t node, const std::string& name) {
  if (nic && (ports < 1 || ports > kMaxNicPorts))
    return make_error(Code::kOutOfRange, 4208,
                      fmt::format("NIC {} ({}) has {} ports; a NIC model has 1 to {}", node, name,
                                  ports, kMaxNicPorts));
  if (!nic && (ports < 2 || ports > kMaxSwitchPorts))
    return make_error(Code::kOutOfRange, 4201,
                      fmt::format("NRC {} ({}) has {} ports; an NRC model has 2 to {}", node, name,
                                  ports, kMaxSwitchPorts));
  return {};
}

uint8_t Nic::network_port() const {
  return chip::network_port(
             num_ports(),
             [&](uint8_t p) { return port_usable(p) && port(p).peer.type == wire::ChipType::kNrc; })
      .value_or(0);
}

Status Nic::check_vp(uint8_t vp) const {
  if (vp >= kNumVps)
    return make_error(Code::kOutOfRange, 2040,
                      fmt::format("vp = {} exceeds the {} virtual ports", vp, kNumVps));
  return {};
}

bool Nic::has_room(uint8_t vp) const {
  return vp < vps_.size() && vps_[vp].dq.size() < dq_depth(vp);
}

Status Nic::check_room(uint8_t vp, uint16_t error_id) const {
  const size_t depth = dq_depth(vp);
  if (has_room(vp)) return {};
  return make_error(
      Code::kResourceExhausted, error_id,
      fmt::format("vp {} {} full ({} descriptors)", vp, is_pio_vp(vp) ? "HDQ" : "SDQ", depth));
}

// A descriptor joins its VP's queue; the VP is served unless its head waits for CPs.
void Nic::queue(uint8_t vp, QueuedDescriptor q) {
  VpState& v = vps_[vp];
  v.dq.push_back(std::move(q));
  if (!v.waits_cp) dq_busy_ |= uint64_t{1} << vp;
}

Status Nic::post_mgmt(uint8_t vp, std::span<const uint8_t> descriptor) {
  GALAXY_TRY(check_vp(vp));
  // Management always goes through SDQs, never the scarce HDQs (docs/system.md 2.2).
  if (is_pio_vp(vp))
    return make_error(Code::kInvalidArgument, 2041,
                      fmt::format("vp = {} is a PIO VP: management descriptors go only to SDQs "
                                  "(VPs {}-{})",
                                  vp, kPioVps, kNumVps - 1));
  if (descriptor.size() != wire::kMgmtDescriptorBytes &&
      descriptor.size() != wire::kMgmtWideDescriptorBytes)
    return make_error(
        Code::kMalformed, 2042,
        fmt::format("management descriptor length = {}, expected {} or {} (wide)",
                    descriptor.size(), wire::kMgmtDescriptorBytes, wire::kMgmtWideDescriptorBytes));
  GALAXY_TRY(check_room(vp, 2043));  // a DMA VP: its SDQ
  VpState& v = vps_[vp];
  QueuedDescriptor d{QueuedDescriptor::Kind::kMgmt,
                     false,
                     v.next_sequence++,
                     std::vector<uint8_t>(descriptor.begin(), descriptor.end()),
                     0,
                     0};
  queue(vp, std::move(d));
  return {};
}

Status Nic::post_mp(uint8_t vp, wire::ChipId dest_node, uint8_t dest_vp,
                    std::span<const uint8_t> data, bool fence, bool notify) {
  GALAXY_TRY(check_vp(vp));
  if (dest_vp >= kNumVps)
    return make_error(Code::kOutOfRange, 2044,
                      fmt::format("dest_vp = {} exceeds the {} virtual ports", dest_vp, kNumVps));
  if (data.size() > kMpPayloadBytes)
    return make_error(
        Code::kOutOfRange, 2045,
        fmt::format("MP data length = {} exceeds {} bytes", data.size(), kMpPayloadBytes));
  GALAXY_TRY(check_room(vp, 2046));
  VpState& v = vps_[vp];
  queue(vp, QueuedDescriptor(QueuedDescriptor::Kind::kMp, fence, v.next_sequence++,
                             std::vector<uint8_t>(data.begin(), data.end()), dest_node, dest_vp,
                             notify));
  return {};
}

Status Nic::post_rdma(uint8_t vp, std::span<const uint8_t> descriptor) {
  GALAXY_TRY(check_vp(vp));
  auto size = wire::peek_rdma_descriptor_size(descriptor);
  if (!size.ok()) return size.error();
  if (descriptor.size() != *size)
    return make_error(Code::kMalformed, 2053,
                      fmt::format("RDMA descriptor length = {}, its first 64 bytes say {}",
                                  descriptor.size(), *size));
  GALAXY_TRY(check_room(vp, 2054));
  VpState& v = vps_[vp];
  QueuedDescriptor q{QueuedDescriptor::Kind::kRdma,
                     false,
                     v.next_sequence++,
                     std::vector<uint8_t>(descriptor.begin(), descriptor.end()),
                     0,
                     0};
  q.trigger = wire::peek_rdma_cp_count(q.bytes);  // the NIC takes the trigger (chip/coll.h)
  wire::clear_rdma_cp_count(q.bytes);
  queue(vp, std::move(q));
  return {};
}

bool Nic::has_work() const {
  return dq_busy_ != 0;
}

std::optional<NicWork> Nic::next_work() {
  for (uint8_t i = 0; i < kNumVps; ++i) {
    uint8_t vp = static_cast<uint8_t>((rr_next_ + i) % kNumVps);
    if (!(dq_busy_ >> vp & 1)) continue;  // no descriptor queued: skip without touching it
    VpState& v = vps_[vp];
    if (!head_may_start(vp, v)) continue;
    QueuedDescriptor& d = v.dq.front();
    if (d.kind == QueuedDescriptor::Kind::kColl) {
      if (d.coll.fence && (!v.in_flight.empty() || v.rdma_in_flight != 0)) continue;
      auto w = start_coll(vp, v, d);
      v.dq.pop_front();
      if (v.dq.empty()) dq_busy_ &= ~(uint64_t{1} << vp);
      rr_next_ = static_cast<uint8_t>((vp + 1) % kNumVps);
      return w;
    }
    if (d.kind == QueuedDescriptor::Kind::kRdma) {
      bool wait = false;
      auto w = start_rdma(vp, v, d, wait);
      if (wait) continue;
      v.dq.pop_front();
      if (v.dq.empty()) dq_busy_ &= ~(uint64_t{1} << vp);
      rr_next_ = static_cast<uint8_t>((vp + 1) % kNumVps);
      return w;
    }
    NicWork w;
    w.vp = vp;
    w.sequence = d.sequence;
    bool notify = false;
    if (d.kind == QueuedDescriptor::Kind::kMgmt) {
      // The SDQ descriptor is fetched and checked here (docs/system.md 2.4 flow 1).
      auto desc = wire::decode_mgmt_descriptor(d.bytes);
      if (desc.ok() && desc->fen && (!v.in_flight.empty() || v.rdma_in_flight != 0))
        continue;  // fenced: wait
      if (!desc.ok()) {
        w.kind = NicWork::Kind::kRejected;
        w.error = desc.error();
        notify = true;
      } else {
        wire::MgmtPacket p;
        p.dest_id = desc->dest_id;
        p.dest_type = desc->dest_type;
        p.src_id = chip_id();
        p.src_type = wire::ChipType::kNic;
        p.dest_vp = desc->dest_vp;
        p.src_vp = vp;
        p.lint = desc->lint;
        p.rint = desc->rint;
        p.transaction_id = desc->transaction_id;
        p.forward_route = desc->forward_route;
        p.backward_route = desc->backward_route;
        p.nmp_type = desc->nmp_type;
        p.m_key = desc->m_key;
        p.data = desc->data;
        auto bytes = wire::encode_mgmt_packet(p);
        if (!bytes.ok() || !wire::host_may_send(desc->nmp_type) || desc->rt_type != 1) {
          w.kind = NicWork::Kind::kRejected;
          w.error =
              !bytes.ok()
                  ? bytes.error()
                  : make_error(Code::kMalformed, 2047,
                               fmt::format("management descriptor: nmp_type = "
                                           "{} / rt_type = {} is neither a request nor SMInfo "
                                           "with source routing",
                                           wire::nmp_type_name(desc->nmp_type), desc->rt_type));
          notify = true;
        } else {
          w.kind = NicWork::Kind::kMgmtRequest;
          w.mgmt = *bytes;
          notify = desc->lint;
        }
      }
    } else {
      if (d.fence && (!v.in_flight.empty() || v.rdma_in_flight != 0)) continue;
      w.kind = NicWork::Kind::kMp;
      w.op = DescriptorOp::kMp;
      w.head.kind = wire::PacketKind::kMp;
      w.head.dest_node = d.dest_node;
      w.head.dest_vp = d.dest_vp;
      w.head.src_node = chip_id();
      w.head.src_vp = vp;
      w.head.bytes = static_cast<uint8_t>(d.bytes.size());
      w.head.length_flits = static_cast<uint16_t>(wire::data_packet_flits(d.bytes.size()));
      std::copy(d.bytes.begin(), d.bytes.end(), w.mp_data.begin());
      w.head.vc = data_vc(wire::PacketKind::kMp);
      wire::DataPacket p;
      p.head = w.head;
      std::copy(d.bytes.begin(), d.bytes.end(), p.payload.begin());
      w.packet = make_packet(p, DmaEngine::kLocalRead, static_cast<uint32_t>(d.bytes.size()));
      notify = d.notify;
    }
    v.in_flight.push_back({d.sequence, notify, w.op});
    v.dq.pop_front();
    if (v.dq.empty()) dq_busy_ &= ~(uint64_t{1} << vp);
    rr_next_ = static_cast<uint8_t>((vp + 1) % kNumVps);
    return w;
  }
  return std::nullopt;
}

void Nic::push_event(VpState& v, EqEntry e) {
  if (v.eq.size() < kDefaultEqDepth && v.eq_waiting.empty())
    v.eq.push_back(e);
  else
    v.eq_waiting.push_back(e);
  eq_busy_ |= uint64_t{1} << v.index;
  ++interrupts_;
}

void Nic::complete(uint8_t vp, bool ok, uint16_t error_id) {
  VpState& v = vps_[vp];
  if (v.in_flight.empty()) return;
  auto f = v.in_flight.front();
  v.in_flight.pop_front();
  if (f.op == DescriptorOp::kLocal && v.local_in_flight > 0) --v.local_in_flight;
  ++v.desc_done;
  if (!ok) ++v.desc_errors;
  if (!completes_locally(f.notify, !ok)) return;
  if (!ok)
    push_event(v, {EventKind::kDescriptorError, f.sequence, error_id, f.op, 0});
  else
    push_event(v, {EventKind::kDescriptorDone, f.sequence, 0, f.op, 0});
}

void Nic::discard(std::span<const wire::Flit> flits, const Error& why, wire::DataDefect defect) {
  std::array<uint8_t, 8 * reg::kErrBufWords> bytes{};
  size_t n = 0;
  for (const wire::Flit& f : flits) {
    const wire::FlitBytes b = wire::encode_flit(f);
    const size_t k = std::min(b.size(), bytes.size() - n);
    std::copy_n(b.begin(), k, bytes.begin() + n);
    n += k;
    if (n == bytes.size()) break;
  }
  discard(std::span(bytes).first(n), why, defect);
}

void Nic::discard(const ArrivedPacket& arrived, const Error& why, wire::DataDefect defect) {
  if (arrived.bytes.empty())
    discard(arrived.flits, why, defect);
  else
    discard(arrived.bytes, why, defect);
}

void Nic::discard(std::span<const uint8_t> packet, const Error& why, wire::DataDefect defect) {
  count_dirty(0);
  ++dirty_[static_cast<size_t>(defect)];
  error_buffer_.valid = true;
  error_buffer_.reason = static_cast<uint8_t>(why.code);
  error_buffer_.error_id = why.id;
  error_buffer_.defect = defect;
  error_buffer_.bytes.fill(0);
  std::copy_n(packet.begin(), std::min(packet.size(), error_buffer_.bytes.size()),
              error_buffer_.bytes.begin());
  raise_fault(FaultCode::kDirtyPacket, 0, why.id);
}

NicRx Nic::receive_mgmt(std::span<const uint8_t> packet) {
  auto p = wire::decode_mgmt_packet(packet);
  if (!p.ok()) {
    discard(packet, p.error());
    return NicRx::kDiscarded;
  }
  if (wire::is_request(p->nmp_type)) return NicRx::kToNma;
  bool for_me = p->dest_type == wire::ChipType::kNic &&
                (p->dest_id == wire::kUnconfiguredId || p->dest_id == chip_id());
  if (!for_me || p->dest_vp >= kNumVps) {
    discard(packet, make_error(Code::kNotFound, 2048,
                               fmt::format("management packet for chip {} vp {} reached NIC {}",
                                           p->dest_id, p->dest_vp, chip_id())));
    return NicRx::kDiscarded;
  }
  MpqEntry e;
  e.management = true;
  e.src_node = p->src_id;
  e.src_vp = p->src_vp;
  e.length = static_cast<uint8_t>(packet.size());
  std::copy(packet.begin(), packet.end(), e.data.begin());
  if (p->rint) ++interrupts_;
  return enqueue(vps_[p->dest_vp], e);
}

NicRx Nic::receive_mp(const wire::DataHead& head, std::span<const uint8_t> data) {
  if (head.dest_vp >= kNumVps || data.size() > kMpPayloadBytes || head.dest_node != chip_id()) {
    discard(
        data,
        make_error(Code::kNotFound, 2049,
                   fmt::format("MP for node {} vp {} ({} bytes) reached NIC {}", head.dest_node,
                               head.dest_vp, data.size(), chip_id())),
        head.dest_node != chip_id() ? wire::DataDefect::kMisrouted : wire::DataDefect::kMalformed);
    return NicRx::kDiscarded;
  }
  MpqEntry e;
  e.kind = head.kind;
  e.src_node = head.src_node;
  e.src_vp = head.src_vp;
  e.length = static_cast<uint8_t>(data.size());
  std::copy(data.begin(), data.end(), e.data.begin());
  return enqueue(vps_[head.dest_vp], e);
}

// The host side of a simulated VP is always open and its owner alive: a full MPQ makes the MP
// wait (chip/mpq.h), behind any that already wait.
NicRx Nic::enqueue(VpState& v, const MpqEntry& e) {
  const bool room = v.mpq.size() < v.mpq_depth && v.waiting.empty();
  if (mpq_admit(true, room, [] { return true; }) == MpqAdmit::kWait) {
    ++v.mpq_full;
    v.waiting.push_back(e);
    return NicRx::kWaiting;
  }
  v.mpq.push_back(e);
  ++v.mp_received;
  return NicRx::kDelivered;
}

std::optional<MpqEntry> Nic::poll_mpq(uint8_t vp) {
  if (vp >= kNumVps || vps_[vp].mpq.empty()) return std::nullopt;
  VpState& v = vps_[vp];
  MpqEntry e = v.mpq.front();
  v.mpq.pop_front();
  if (!v.waiting.empty() && v.mpq.size() < v.mpq_depth) {  // the oldest waiting one goes in
    v.mpq.push_back(v.waiting.front());
    v.waiting.pop_front();
    ++v.mp_received;
  }
  return e;
}

std::optional<EqEntry> Nic::poll_eq(uint8_t vp) {
  if (vp >= kNumVps || vps_[vp].eq.empty()) return std::nullopt;
  VpState& v = vps_[vp];
  EqEntry e = v.eq.front();
  v.eq.pop_front();
  if (!v.eq_waiting.empty()) {
    v.eq.push_back(v.eq_waiting.front());
    v.eq_waiting.pop_front();
  }
  if (v.eq.empty()) eq_busy_ &= ~(uint64_t{1} << vp);
  return e;
}

RegAccess Nic::read_specific(uint16_t addr) {
  if (addr >= reg::kVpBase && addr < reg::kVpBase + kNumVps * reg::kVpStride) {
    uint32_t rel = addr - reg::kVpBase;
    const VpState& v = vps_[rel / reg::kVpStride];
    uint8_t vp = static_cast<uint8_t>(rel / reg::kVpStride);
    switch (rel % reg::kVpStride) {
      case reg::vp::kCtrl:
        return {NmpError::kNone, (is_pio_vp(vp) ? 0u : 1u) |
                                     (v.in_flight.empty() && v.rdma_in_flight == 0 ? 0u : 2u)};
      case reg::vp::kDqDepth:
        return {NmpError::kNone, v.dq.size()};
      case reg::vp::kMpqCount:
        return {NmpError::kNone, v.mpq.size()};
      case reg::vp::kEqCount:
        return {NmpError::kNone, v.eq.size()};
      case reg::vp::kCpCounter:
        return {NmpError::kNone, v.cp_counter};
      case reg::vp::kDescDone:
        return {NmpError::kNone, v.desc_done};
      case reg::vp::kMpReceived:
        return {NmpError::kNone, v.mp_received};
      case reg::vp::kMpqFull:
        return {NmpError::kNone, v.mpq_full};
      case reg::vp::kDescErrors:
        return {NmpError::kNone, v.desc_errors};
      case reg::vp::kMpRefused:
        return {NmpError::kNone, v.mps_refused};
      case reg::vp::kCpReceived:
        return {NmpError::kNone, v.cps_received};
      case reg::vp::kTriggered:
        return {NmpError::kNone, v.triggered};
      case reg::vp::kCpDiscarded:
        return {NmpError::kNone, v.cps_discarded};
      default:
        return {NmpError::kAddressOutOfRange, 0};
    }
  }
  if (addr == reg::kErrBufStatus)
    return {NmpError::kNone, (error_buffer_.valid ? 1u : 0u) |
                                 (uint64_t{error_buffer_.reason} << 8) |
                                 (uint64_t{error_buffer_.error_id} << 16) |
                                 (uint64_t{static_cast<uint8_t>(error_buffer_.defect)} << 32)};
  if (addr >= reg::kErrBufData && addr < reg::kErrBufData + reg::kErrBufWords) {
    size_t off = size_t{static_cast<uint16_t>(addr - reg::kErrBufData)} * 8;
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{error_buffer_.bytes[off + i]} << (8 * i);
    return {NmpError::kNone, v};
  }
  return {NmpError::kAddressOutOfRange, 0};
}

NmpError Nic::check_specific(uint16_t addr, uint64_t) const {
  bool vp_block = addr >= reg::kVpBase && addr < reg::kVpBase + kNumVps * reg::kVpStride &&
                  (addr - reg::kVpBase) % reg::kVpStride < reg::vp::kEnd;
  bool errbuf = addr >= reg::kErrBufStatus && addr < reg::kErrBufData + reg::kErrBufWords;
  return vp_block || errbuf ? NmpError::kReadOnly : NmpError::kAddressOutOfRange;
}

}  // namespace galaxy::chip
