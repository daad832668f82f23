// The NIC's RDMA engine (docs/system.md 1.1): connectionless put, get and immediate RDMA, any byte
// alignment, data cut at the destination's 128-byte boundaries, the three DMA engines, the ATT
// checked at the NIC nearest the memory, completions by event, trailing MP or trailing
// immediate at the target and into the local CQ. Timeless: the engine pulls packets and
// charges time; the target acknowledges every transfer once, so the source completes each
// descriptor exactly once, with success or the target's error id.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "base/bits.h"
#include "chip/event.h"
#include "chip/nic.h"
#include "chip/rdma_rules.h"

namespace galaxy::chip {

using wire::Completion;
using wire::DataPacket;
using wire::PacketKind;
using wire::RdmaOp;

namespace {

static_assert(kMaxTransfers == kRdmaTagSlots);

DescriptorOp op_of(RdmaOp op) {
  switch (op) {
    case RdmaOp::kRead:
      return DescriptorOp::kGet;
    case RdmaOp::kImmediate:
      return DescriptorOp::kImmediate;
    case RdmaOp::kWrite:
      break;
  }
  return DescriptorOp::kPut;
}

// Whether the packet of `n` bytes at `offset` of a stream needs a new 1 KiB host read.
bool starts_host_read(uint64_t offset, uint64_t n) {
  return offset == 0 ||
         (offset + (n ? n - 1 : 0)) / kHostReadChunk != (offset - 1) / kHostReadChunk;
}

}  // namespace

// The NIC's host side as the target of transfers sees it (chip/rdma_transfer.h).
struct Nic::TargetHost {
  Nic& nic;
  const ArrivedPacket& arrived;
  const AttTable& att() const { return *nic.att_table_; }
  uint16_t write(uint32_t key, uint64_t vaddr, std::span<const uint8_t> data, uint32_t access) {
    return nic.write_host(key, vaddr, data, access);
  }
  uint16_t read(uint32_t key, uint64_t vaddr, std::span<uint8_t> out, uint32_t access) {
    return nic.read_host(key, vaddr, out, access);
  }
  uint16_t flush() { return nic.flush_host(); }
  bool mp(const wire::DataHead& h, std::span<const uint8_t> data) {
    return nic.receive_mp(h, data) != NicRx::kDiscarded;
  }
  void ack(wire::ChipId dest, uint8_t vp, uint16_t tag, uint16_t error_id, uint64_t bytes) {
    nic.send_ack(dest, vp, tag, error_id, bytes);
  }
  void discard(const Error& why) { nic.discard(arrived, why, wire::DataDefect::kMalformed); }
  void written(uint64_t bytes) { nic.rdma_bytes_written_ += bytes; }
};

Nic::TxTransfer* Nic::tx_by_tag(uint16_t tag) {
  const size_t slot = rdma_tag_slot(tag);
  if (slot >= tx_.size()) return nullptr;
  TxTransfer& t = tx_[slot];
  if (t.phase == TxTransfer::Phase::kFree || !rdma_tag_generation_is(tag, t.generation))
    return nullptr;
  return &t;
}

std::optional<NicWork> Nic::start_rdma(uint8_t vp, VpState& v, QueuedDescriptor& q, bool& wait) {
  auto d = wire::decode_rdma_descriptor(q.bytes);
  if (d.ok() && d->fen && (!v.in_flight.empty() || v.rdma_in_flight != 0)) {
    wait = true;  // fenced: waits for every earlier descriptor of its VP
    return std::nullopt;
  }
  NicWork w;
  w.vp = vp;
  w.sequence = q.sequence;
  w.op = d.ok() ? op_of(d->op) : DescriptorOp::kPut;
  auto reject = [&](Error e) {
    w.kind = NicWork::Kind::kRejected;
    w.error = std::move(e);
    v.in_flight.push_back({q.sequence, true, w.op});
    return w;
  };
  if (!d.ok()) return reject(d.error());
  if (!host_) return reject(make_error(Code::kUnsupported, 2058, "NIC: no host memory attached"));
  if (Status st = check_rdma_start(*d, *att_table_); !st.ok()) return reject(st.error());
  // The tag table grows as transfers overlap (16, 32, ... kMaxTransfers entries): a NIC of a
  // large model that has a few transfers in flight holds a few entries, not thousands.
  if (tx_free_.empty() && tx_.size() < kMaxTransfers) {
    const size_t old = tx_.size();
    tx_.resize(std::min<size_t>(kMaxTransfers, std::max<size_t>(16, old * 2)));
    for (size_t i = old; i < tx_.size(); ++i) tx_free_.push_back(static_cast<uint16_t>(i));
  }
  if (tx_free_.empty()) {
    wait = true;  // every tag in flight: the descriptor starts when one completes
    return std::nullopt;
  }
  const uint16_t slot = tx_free_.front();
  tx_free_.pop_front();
  TxTransfer& t = tx_[slot];
  t.phase = TxTransfer::Phase::kSending;
  t.vp = vp;
  t.sequence = q.sequence;
  t.d = *d;
  t.sent = 0;
  t.data_done = false;
  t.received = 0;
  t.error_id = 0;
  tx_active_.push_back(slot);
  ++v.rdma_in_flight;
  w.kind = NicWork::Kind::kRdma;
  w.bytes = d->length;
  return w;
}

bool Nic::finish_packet(NicPacket& out, DmaEngine e, uint32_t host_bytes) {
  DataPacket& p = out.packet;
  if (Status s = seal_data_packet(p, chip_id());
      !s.ok()) {  // a field out of range: it never leaves
    discard(std::span<const uint8_t>{}, s.error(), wire::DataDefect::kMalformed);
    return false;
  }
  out.head = p.head;
  out.engine = e;
  out.host_read_bytes = host_bytes;
  return true;
}

std::optional<NicPacket> Nic::make_packet(const DataPacket& p, DmaEngine e, uint32_t host_bytes) {
  std::optional<NicPacket> out(std::in_place);
  out->packet = p;
  if (!finish_packet(*out, e, host_bytes)) out.reset();
  return out;
}

std::vector<wire::Flit> NicPacket::flits() const {
  auto f = wire::encode_data_packet(packet);
  return f.ok() ? std::move(*f) : std::vector<wire::Flit>{};
}

std::optional<NicPacket> Nic::next_packet(DmaEngine e) {
  std::optional<NicPacket> out(std::in_place);
  if (!next_packet(e, *out)) out.reset();
  return out;
}

bool Nic::next_packet(DmaEngine e, NicPacket& out) {
  switch (e) {
    case DmaEngine::kLocalRead:
      return next_local_packet(out);
    case DmaEngine::kRemoteRead:
      return next_response_packet(out);
    case DmaEngine::kWrite:
      break;
  }
  if (acks_.empty()) return false;
  out.packet = acks_.front();
  acks_.pop_front();
  return finish_packet(out, DmaEngine::kWrite, 0);
}

// DMA engine 0: one transfer at a time, in start order (descriptors of a VP stay in order).
// The packet is built in the caller's `out` (one per 128 bytes moved: a busy engine reuses
// one); the payload past the packet's bytes is left as it was (wire/ carries only head.bytes).
bool Nic::next_local_packet(NicPacket& out) {
  while (!tx_active_.empty()) {
    const uint16_t slot = tx_active_.front();
    TxTransfer& t = tx_[slot];
    const wire::RdmaDescriptor& d = t.d;
    out.starts_host_read = false;
    DataPacket& p = out.packet;
    const uint16_t tag = rdma_tag(slot, t.generation);
    if (d.op == RdmaOp::kRead) {
      rdma_read_request_packet(d, t.vp, tag, p);
      t.data_done = true;
      t.phase = TxTransfer::Phase::kAwaitResponses;
      tx_active_.pop_front();
      return finish_packet(out, DmaEngine::kLocalRead, 0);
    }
    const bool notice = d.completion != Completion::kNone;
    if (!t.data_done) {
      const uint64_t at = t.sent;
      const uint16_t err = rdma_put_step(
          d, t.vp, tag, t.sent,
          [&](uint64_t offset, std::span<uint8_t> out) {
            return read_host(d.local_key, d.local_address + offset, out, kAccessNone);
          },
          p);
      if (err != 0) {
        tx_active_.pop_front();
        finish_tx(slot, err);
        continue;
      }
      const uint64_t n = t.sent - at;
      const bool reads = d.op != RdmaOp::kImmediate;  // an immediate's data is the descriptor's
      const uint32_t host_bytes = reads ? static_cast<uint32_t>(n) : 0;
      const bool starts = reads && starts_host_read(at, n);
      if (t.sent >= d.length) {
        t.data_done = true;
        if (!notice) {
          t.phase = TxTransfer::Phase::kAwaitAck;
          tx_active_.pop_front();
        }
      }
      if (!finish_packet(out, DmaEngine::kLocalRead, host_bytes)) return false;
      out.starts_host_read = starts;
      return true;
    }
    // The notice, after the data: the target applies it once every data packet is written.
    rdma_notice_packet(d, t.vp, tag, p);
    t.phase = TxTransfer::Phase::kAwaitAck;
    tx_active_.pop_front();
    return finish_packet(out, DmaEngine::kLocalRead, 0);
  }
  return false;
}

// DMA engine 1: answers remote gets in order, reading our memory.
bool Nic::next_response_packet(NicPacket& out) {  // in `out`, as next_local_packet's
  while (!reads_.empty()) {
    ReadJob& j = reads_.front();
    const uint64_t at = j.sent;
    TargetHost host{*this, ArrivedPacket(std::span<const uint8_t>{})};
    if (!RdmaTarget::answer_step(j, host, out.packet)) {
      reads_.pop_front();
      continue;
    }
    const uint64_t n = j.sent - at;
    const bool starts = starts_host_read(at, n);
    if (j.sent >= j.length) reads_.pop_front();
    if (!finish_packet(out, DmaEngine::kRemoteRead, static_cast<uint32_t>(n))) return false;
    out.starts_host_read = starts;
    return true;
  }
  return false;
}

bool Nic::abort_transfer(uint8_t vp, uint64_t sequence, uint16_t error_id) {
  for (size_t slot = 0; slot < tx_.size(); ++slot) {
    const TxTransfer& t = tx_[slot];
    if (t.phase == TxTransfer::Phase::kFree || t.vp != vp || t.sequence != sequence) continue;
    abort_slot(static_cast<uint16_t>(slot), error_id);
    return true;
  }
  return false;
}

std::optional<uint64_t> Nic::awaited_answers(uint8_t vp, uint64_t sequence) const {
  for (const TxTransfer& t : tx_) {
    if (t.phase == TxTransfer::Phase::kFree || t.vp != vp || t.sequence != sequence) continue;
    if (t.phase == TxTransfer::Phase::kSending) return std::nullopt;
    const auto it = answers_from_.find(t.d.remote_node);
    return it == answers_from_.end() ? 0 : it->second;
  }
  return std::nullopt;
}

bool Nic::abort_transfer_tag(uint16_t tag, uint16_t error_id) {
  if (!tx_by_tag(tag)) return false;
  abort_slot(rdma_tag_slot(tag), error_id);
  return true;
}

void Nic::abort_slot(uint16_t slot, uint16_t error_id) {
  for (size_t i = 0; i < tx_active_.size(); ++i)
    if (tx_active_[i] == slot) {
      tx_active_.erase_at(i);
      break;
    }
  finish_tx(slot, error_id);
}

void Nic::finish_tx(uint16_t slot, uint16_t error_id) {
  TxTransfer& t = tx_[slot];
  VpState& v = vps_[t.vp];
  --v.rdma_in_flight;
  ++v.desc_done;
  const DescriptorOp op = op_of(t.d.op);
  if (error_id == 0 && t.d.op == RdmaOp::kRead) error_id = flush_host();  // the data, then the CQ
  if (error_id != 0) ++v.desc_errors;
  if (completes_locally(t.d.local_cq, error_id != 0)) {
    if (error_id != 0)
      push_event(v, {EventKind::kDescriptorError, t.sequence, error_id, op, 0});
    else
      push_event(v, {EventKind::kDescriptorDone, t.sequence, 0, op, t.d.length});
  }
  t.phase = TxTransfer::Phase::kFree;
  ++t.generation;
  tx_free_.push_back(slot);
}

void Nic::send_ack(wire::ChipId dest, uint8_t dest_vp, uint16_t tag, uint16_t error_id,
                   uint64_t bytes) {
  DataPacket a;
  rdma_ack_packet(dest, dest_vp, tag, error_id, bytes, a);
  acks_.push_back(a);
}

uint16_t Nic::write_host(uint32_t key, uint64_t vaddr, std::span<const uint8_t> data,
                         uint32_t access) {
  if (!host_) return 2058;  // the host went away with transfers in flight
  Status st = att_table_->translate_pieces(key, vaddr, data.size(), access,
                                           [&](uint64_t phys, uint64_t off, uint64_t n) {
                                             return host_->write(phys, data.subspan(off, n));
                                           });
  return st.ok() ? 0 : st.error().id;
}

uint16_t Nic::read_host(uint32_t key, uint64_t vaddr, std::span<uint8_t> out, uint32_t access) {
  if (!host_) return 2058;  // the host went away with transfers in flight
  Status st = att_table_->translate_pieces(key, vaddr, out.size(), access,
                                           [&](uint64_t phys, uint64_t off, uint64_t n) {
                                             return host_->read(phys, out.subspan(off, n));
                                           });
  return st.ok() ? 0 : st.error().id;
}

uint16_t Nic::flush_host() {
  if (!host_) return 2058;
  Status st = host_->flush();
  return st.ok() ? 0 : st.error().id;
}

uint16_t Nic::write_event_at(uint32_t key, uint64_t addr,
                             const std::array<uint8_t, wire::kNotifyDataBytes>& data) {
  TargetHost host{*this, ArrivedPacket(std::span<const uint8_t>{})};
  return RdmaTarget::write_event(host, key, addr, data);
}

NicRx Nic::receive_packet_bytes(std::span<const uint8_t> bytes) {
  DataPacket p;
  if (!check_packet_bytes(bytes, &p)) return NicRx::kDiscarded;
  return receive_checked(p, bytes);
}

bool Nic::check_packet_bytes(std::span<const uint8_t> bytes, DataPacket* out) {
  wire::DataDefect defect = wire::DataDefect::kNone;
  Status s = check_arriving_bytes(chip_id(), bytes, out, &defect);
  if (s.ok()) return true;
  discard(bytes, s.error(), defect);
  return false;
}

std::optional<DataPacket> Nic::check_packet(std::span<const wire::Flit> flits) {
  wire::DataDefect defect = wire::DataDefect::kNone;
  auto p = check_arriving(chip_id(), flits, &defect);
  if (p.ok()) return std::move(*p);
  discard(flits, p.error(), defect);
  return std::nullopt;
}

NicRx Nic::receive_packet(std::span<const wire::Flit> flits) {
  auto p = check_packet(flits);
  if (!p) return NicRx::kDiscarded;
  return receive_checked(*p, flits);
}

NicRx Nic::receive_checked(const DataPacket& packet, const ArrivedPacket& arrived) {
  const DataPacket* p = &packet;
  const wire::DataHead& h = p->head;
  const bool in_transfer = (h.flags & wire::kDataFlagInTransfer) != 0;
  switch (h.kind) {
    case PacketKind::kMp:
      if (!in_transfer) return receive_mp(h, p->data());
      return rx_write(*p, arrived);
    case PacketKind::kCp:
      return rx_cp(*p, arrived);
    case PacketKind::kRdmaWrite:
    case PacketKind::kImmediate:
    case PacketKind::kEvent:
      return rx_write(*p, arrived);
    case PacketKind::kRdmaReadRequest:
      return rx_read_request(*p, arrived);
    case PacketKind::kRdmaReadResponse:
      return rx_response(*p, arrived);
    case PacketKind::kAck:
      return rx_ack(*p, arrived);
  }
  return NicRx::kDiscarded;
}

NicRx Nic::rx_write(const DataPacket& p, const ArrivedPacket& arrived) {
  TargetHost host{*this, arrived};
  switch (target_.write(p, host)) {
    case RdmaRx::kDelivered:
      return NicRx::kDelivered;
    case RdmaRx::kRefused:
      return NicRx::kRefused;
    case RdmaRx::kDiscarded:
      break;
  }
  return NicRx::kDiscarded;
}

NicRx Nic::rx_read_request(const DataPacket& p, const ArrivedPacket& arrived) {
  TargetHost host{*this, arrived};
  std::optional<RdmaReadJob> j = target_.read_request(p, host);
  if (!j) return check_read_request(p).ok() ? NicRx::kRefused : NicRx::kDiscarded;
  reads_.push_back(*j);
  return NicRx::kDelivered;
}

NicRx Nic::rx_response(const DataPacket& p, const ArrivedPacket& arrived) {
  const wire::DataHead& h = p.head;
  TxTransfer* t = tx_by_tag(h.tag);
  if (!t || t->phase != TxTransfer::Phase::kAwaitResponses || !rdma_response_answers(t->d, p)) {
    discard(arrived,
            make_error(Code::kMalformed, 2076,
                       fmt::format("read response (tag {:#x}, from node {}, {} bytes at offset "
                                   "{}) answers no get of this NIC",
                                   h.tag, h.src_node, h.bytes, p.ext.offset)),
            wire::DataDefect::kMalformed);
    return NicRx::kDiscarded;
  }
  ++answers_from_[h.src_node];
  if (t->error_id == 0) {
    t->error_id =
        write_host(t->d.local_key, t->d.local_address + p.ext.offset, p.data(), kAccessNone);
    if (t->error_id == 0) rdma_bytes_written_ += h.bytes;
  }
  if (++t->received == wire::packets_for(t->d.local_address, t->d.length))
    finish_tx(rdma_tag_slot(h.tag), t->error_id);
  return NicRx::kDelivered;
}

NicRx Nic::rx_ack(const DataPacket& p, const ArrivedPacket& arrived) {
  const wire::DataHead& h = p.head;
  if (p.ext.address == kMpRefusedAckAddress) {  // an MP of ours was refused (chip/refusal.h)
    if (h.dest_vp >= kNumVps || p.ext.offset == 0 || p.ext.offset > 0xFFFF) {
      discard(arrived,
              make_error(Code::kMalformed, 2079,
                         fmt::format("MP refusal from node {} names VP {} and error id {}",
                                     h.src_node, h.dest_vp, p.ext.offset)),
              wire::DataDefect::kMalformed);
      return NicRx::kDiscarded;
    }
    VpState& v = vps_[h.dest_vp];
    ++v.mps_refused;
    const DescriptorOp op = h.tag == static_cast<uint16_t>(wire::PacketKind::kCp)
                                ? DescriptorOp::kCp
                                : DescriptorOp::kMp;
    push_event(v, {EventKind::kMpRefused, 0, static_cast<uint16_t>(p.ext.offset), op, 0});
    return NicRx::kDelivered;
  }
  TxTransfer* t = tx_by_tag(h.tag);
  const uint16_t err = static_cast<uint16_t>(p.ext.offset);
  const bool expected = t && h.src_node == t->d.remote_node &&
                        (t->phase == TxTransfer::Phase::kAwaitAck ||
                         (t->phase == TxTransfer::Phase::kAwaitResponses && err != 0));
  if (!expected || p.ext.offset > 0xFFFF) {
    discard(arrived,
            make_error(Code::kMalformed, 2077,
                       fmt::format("ack (tag {:#x}, from node {}) for no transfer of this NIC",
                                   h.tag, h.src_node)),
            wire::DataDefect::kMalformed);
    return NicRx::kDiscarded;
  }
  ++answers_from_[h.src_node];
  finish_tx(rdma_tag_slot(h.tag), err);
  return NicRx::kDelivered;
}

}  // namespace galaxy::chip
