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

constexpr unsigned kTagSlotBits = 12;
static_assert(kMaxTransfers == 1u << kTagSlotBits);

uint16_t tag_of(uint16_t slot, uint8_t generation) {
  return static_cast<uint16_t>(((generation & 0xFu) << kTagSlotBits) | slot);
}

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

// Whether a packet's offset and size are where the transfer's own cutting puts them.
bool placed(const wire::DataExt& x, uint8_t bytes) {
  if (x.length == 0) return x.offset == 0 && bytes == 0;
  return x.offset < x.length && bytes == wire::packet_bytes_at(x.address, x.length, x.offset);
}

// Read request payload layout, bit offsets (wire/data_packet.h kReadRequestBytes).
constexpr size_t kRqLocalAddress = 0;
constexpr size_t kRqLocalKey = 64;
constexpr size_t kRqNotifyKey = 96;
constexpr size_t kRqNotifyAddress = 128;
constexpr size_t kRqNotifyData = 24;  // bytes

}  // namespace

Nic::TxTransfer* Nic::tx_by_tag(uint16_t tag) {
  const size_t slot = tag & (kMaxTransfers - 1);
  if (slot >= tx_.size()) return nullptr;
  TxTransfer& t = tx_[slot];
  if (t.phase == TxTransfer::Phase::kFree || tag_of(0, t.generation) != (tag & 0xF000))
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
  p.head.vc = data_vc(p.head.kind);
  p.head.src_node = chip_id();
  if (Status s = wire::check_data_packet(p); !s.ok()) {  // a field out of range: it never leaves
    discard(std::span<const uint8_t>{}, s.error(), wire::DataDefect::kMalformed);
    return false;
  }
  p.head.length_flits = static_cast<uint16_t>(wire::data_packet_flits(p.head.bytes));
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
    p.head = {};
    p.ext = {};
    p.head.dest_node = d.remote_node;
    p.head.dest_vp = d.remote_vp;
    p.head.src_vp = t.vp;
    p.head.tag = tag_of(slot, t.generation);
    p.head.flags = wire::kDataFlagInTransfer;
    if (d.op == RdmaOp::kRead) {
      p.head.kind = PacketKind::kRdmaReadRequest;
      if (d.completion == Completion::kEvent) p.head.flags |= wire::kDataFlagNotified;
      p.ext = {d.remote_address, d.remote_key, 0, d.length};
      p.head.bytes = static_cast<uint8_t>(wire::kReadRequestBytes);
      put_bits(p.payload, kRqLocalAddress, 64, d.local_address);
      put_bits(p.payload, kRqLocalKey, 32, d.local_key);
      put_bits(p.payload, kRqNotifyKey, 32, d.notify_key);
      put_bits(p.payload, kRqNotifyAddress, 64, d.notify_address);
      std::copy(d.notify_data.begin(), d.notify_data.end(), &p.payload[kRqNotifyData]);
      t.data_done = true;
      t.phase = TxTransfer::Phase::kAwaitResponses;
      tx_active_.pop_front();
      return finish_packet(out, DmaEngine::kLocalRead, 0);
    }
    const bool notice = d.completion != Completion::kNone;
    if (notice) p.head.flags |= wire::kDataFlagNotified;
    if (!t.data_done) {
      const uint64_t n = wire::packet_bytes_at(d.remote_address, d.length, t.sent);
      p.head.kind = d.op == RdmaOp::kImmediate ? PacketKind::kImmediate : PacketKind::kRdmaWrite;
      p.head.bytes = static_cast<uint8_t>(n);
      p.ext = {d.remote_address, d.remote_key, static_cast<uint32_t>(t.sent), d.length};
      uint32_t host_bytes = 0;
      bool starts = false;
      if (d.op == RdmaOp::kImmediate) {
        std::copy_n(d.immediate_data.begin() + t.sent, n, p.payload.begin());
      } else {
        const uint16_t err = read_host(d.local_key, d.local_address + t.sent,
                                       std::span(p.payload).first(n), kAccessNone);
        if (err != 0) {
          tx_active_.pop_front();
          finish_tx(slot, err);
          continue;
        }
        host_bytes = static_cast<uint32_t>(n);
        starts = starts_host_read(t.sent, n);
      }
      t.sent += n;
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
    p.head.bytes = static_cast<uint8_t>(wire::kNotifyDataBytes);
    std::copy(d.notify_data.begin(), d.notify_data.end(), p.payload.begin());
    switch (d.completion) {
      case Completion::kEvent:
        p.head.kind = PacketKind::kEvent;
        p.ext = {d.notify_address, d.notify_key, 0, kEventBytes};
        break;
      case Completion::kTrailingImmediate:
        p.head.kind = PacketKind::kImmediate;
        p.head.flags |= wire::kDataFlagTrailing;
        p.ext = {d.notify_address, d.notify_key, 0, wire::kNotifyDataBytes};
        break;
      case Completion::kTrailingMp:
      case Completion::kNone:
        p.head.kind = PacketKind::kMp;
        p.head.flags |= wire::kDataFlagTrailing;
        break;
    }
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
    const uint64_t n = wire::packet_bytes_at(j.dest, j.length, j.sent);
    DataPacket& p = out.packet;
    p.head = {};
    p.head.kind = PacketKind::kRdmaReadResponse;
    p.head.dest_node = j.requester;
    p.head.dest_vp = j.requester_vp;
    p.head.tag = j.tag;
    p.head.bytes = static_cast<uint8_t>(n);
    p.ext = {j.dest, j.dest_key, static_cast<uint32_t>(j.sent), j.length};
    const uint16_t err =
        read_host(j.source_key, j.source + j.sent, std::span(p.payload).first(n), kAccessRead);
    if (err != 0) {
      send_ack(j.requester, j.requester_vp, j.tag, err, j.sent);
      reads_.pop_front();
      continue;
    }
    const bool starts = starts_host_read(j.sent, n);
    j.sent += n;
    if (j.sent >= j.length) {
      if (j.event) write_event_at(j.notify_key, j.notify_address, j.notify_data);
      reads_.pop_front();
    }
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
  abort_slot(static_cast<uint16_t>(tag & (kMaxTransfers - 1)), error_id);
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
  a.head.kind = PacketKind::kAck;
  a.head.dest_node = dest;
  a.head.dest_vp = dest_vp;
  a.head.tag = tag;
  a.ext.offset = error_id;
  a.ext.length = static_cast<uint32_t>(bytes);
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
  return write_event_checked(*att_table_, key, addr, data,
                             [&](uint32_t k, uint64_t a, std::span<const uint8_t> word) {
                               uint16_t err = write_host(k, a, word, kAccessWrite);
                               return err != 0 ? err : flush_host();  // word 0 before word 1
                             });
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
  const wire::DataHead& h = p.head;
  auto bad = [&](uint16_t id, std::string why) {
    discard(arrived, make_error(Code::kMalformed, id, std::move(why)),
            wire::DataDefect::kMalformed);
    return NicRx::kDiscarded;
  };
  if (!(h.flags & wire::kDataFlagInTransfer))
    return bad(2070, fmt::format("RDMA packet (kind {}) outside a transfer",
                                 static_cast<unsigned>(h.kind)));
  const bool notice = (h.flags & wire::kDataFlagTrailing) || h.kind == PacketKind::kEvent;
  if (!notice && !placed(p.ext, h.bytes))
    return bad(2071, fmt::format("RDMA packet of {} bytes at offset {} of a {}-byte transfer to "
                                 "{:#x} is not where the transfer is cut",
                                 h.bytes, p.ext.offset, p.ext.length, p.ext.address));
  const uint64_t key = (uint64_t{h.src_node} << 16) | h.tag;
  auto it = rx_.find(key);
  if (it == rx_.end()) {
    if (rx_.size() >= kMaxRxTransfers)
      return bad(2072, fmt::format("{} transfers already in progress at this NIC", rx_.size()));
    it = rx_.emplace(key, RxTransfer{}).first;
    it->second.src_vp = h.src_vp;
  }
  RxTransfer& t = it->second;
  if (notice) {
    if (t.has_notice) return bad(2073, fmt::format("second completion notice for tag {}", h.tag));
    t.has_notice = true;
    t.notice = p;
    return rx_count(key, t);
  }
  const uint32_t total = static_cast<uint32_t>(wire::packets_for(p.ext.address, p.ext.length)) +
                         ((h.flags & wire::kDataFlagNotified) ? 1 : 0);
  if (t.total == 0) {
    t.total = total;
    // The whole transfer is checked before any of it is written (docs/system.md 1.1).
    Status st =
        check_rdma_target(*att_table_, RdmaOp::kWrite, p.ext.key, p.ext.address, p.ext.length);
    if (!st.ok()) t.error_id = st.error().id;
  } else if (t.total != total) {
    return bad(2074, fmt::format("packet of tag {} says {} packets, the transfer {}", h.tag, total,
                                 t.total));
  }
  if (t.error_id == 0)
    t.error_id = write_host(p.ext.key, p.ext.address + p.ext.offset, p.data(), kAccessWrite);
  if (t.error_id == 0) {
    t.bytes += h.bytes;
    rdma_bytes_written_ += h.bytes;
  }
  return rx_count(key, t);
}

NicRx Nic::rx_count(uint64_t key, RxTransfer& t) {
  const NicRx result = t.error_id != 0 ? NicRx::kRefused : NicRx::kDelivered;
  if (++t.counted == t.total) rx_finish(key, t);
  return result;
}

void Nic::rx_finish(uint64_t key, RxTransfer& t) {
  uint16_t err = t.error_id;
  if (err == 0) err = flush_host();  // every data byte is written before the notice and the ack
  const auto src = static_cast<wire::ChipId>(key >> 16);
  const uint16_t tag = static_cast<uint16_t>(key);
  if (err == 0 && t.has_notice) {
    const DataPacket& n = t.notice;
    std::array<uint8_t, wire::kNotifyDataBytes> data{};
    std::copy_n(n.payload.begin(), std::min<size_t>(n.head.bytes, data.size()), data.begin());
    switch (n.head.kind) {
      case PacketKind::kEvent:
        err = write_event_at(n.ext.key, n.ext.address, data);
        break;
      case PacketKind::kImmediate:
        err = write_host(n.ext.key, n.ext.address, n.data(), kAccessWrite);
        if (err == 0) err = flush_host();
        if (err == 0) rdma_bytes_written_ += n.data().size();
        break;
      default: {  // the trailing MP, into the target VP's MPQ
        wire::DataHead mh = n.head;
        mh.kind = PacketKind::kMp;
        if (receive_mp(mh, n.data()) == NicRx::kDiscarded) err = 2049;
        break;
      }
    }
  }
  send_ack(src, t.src_vp, tag, err, t.bytes);
  rx_.erase(key);
}

NicRx Nic::rx_read_request(const DataPacket& p, const ArrivedPacket& arrived) {
  const wire::DataHead& h = p.head;
  if (h.bytes != wire::kReadRequestBytes) {
    discard(arrived,
            make_error(Code::kMalformed, 2075,
                       fmt::format("read request of {} bytes, expected {}", h.bytes,
                                   wire::kReadRequestBytes)),
            wire::DataDefect::kMalformed);
    return NicRx::kDiscarded;
  }
  ReadJob j;
  j.requester = h.src_node;
  j.requester_vp = h.src_vp;
  j.tag = h.tag;
  j.source = p.ext.address;
  j.source_key = p.ext.key;
  j.length = p.ext.length;
  j.dest = get_bits(p.payload, kRqLocalAddress, 64);
  j.dest_key = static_cast<uint32_t>(get_bits(p.payload, kRqLocalKey, 32));
  j.event = (h.flags & wire::kDataFlagNotified) != 0;
  j.notify_key = static_cast<uint32_t>(get_bits(p.payload, kRqNotifyKey, 32));
  j.notify_address = get_bits(p.payload, kRqNotifyAddress, 64);
  std::copy_n(&p.payload[kRqNotifyData], wire::kNotifyDataBytes, j.notify_data.begin());
  const RdmaNotify event{j.notify_key, j.notify_address};
  Status st = check_rdma_target(*att_table_, RdmaOp::kRead, j.source_key, j.source, j.length,
                                j.event ? &event : nullptr);
  if (!st.ok()) {
    send_ack(j.requester, j.requester_vp, j.tag, st.error().id, 0);
    return NicRx::kRefused;
  }
  reads_.push_back(j);
  return NicRx::kDelivered;
}

NicRx Nic::rx_response(const DataPacket& p, const ArrivedPacket& arrived) {
  const wire::DataHead& h = p.head;
  TxTransfer* t = tx_by_tag(h.tag);
  if (!t || t->d.op != RdmaOp::kRead || t->phase != TxTransfer::Phase::kAwaitResponses ||
      h.src_node != t->d.remote_node || p.ext.address != t->d.local_address ||
      p.ext.length != t->d.length || !placed(p.ext, h.bytes)) {
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
    finish_tx(static_cast<uint16_t>(h.tag & (kMaxTransfers - 1)), t->error_id);
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
  finish_tx(static_cast<uint16_t>(h.tag & (kMaxTransfers - 1)), err);
  return NicRx::kDelivered;
}

}  // namespace galaxy::chip
