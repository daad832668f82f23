// The packets of an RDMA transfer and the target's handling of them (docs/system.md 1.1), written
// once for every NIC end that runs transfers packet by packet: chip::Nic (both engines), and a
// live process that sends and receives transfers on its direct links to other hosts
// (glex/direct_rdma.h). The initiator cuts a put at the destination's 128-byte boundaries, sends
// its notice after the data, and completes on the target's one ack; a get is one read request
// answered by response packets. The target checks the whole transfer before any byte is written,
// applies the notice once every data packet is written, and acknowledges once.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>

#include "base/bits.h"
#include "base/status.h"
#include "chip/att.h"
#include "chip/event.h"
#include "chip/rdma_rules.h"
#include "wire/data_packet.h"
#include "wire/rdma_descriptor.h"

namespace galaxy::chip {

// Transfers an end tracks as a target at once (packets of a transfer may arrive in any order).
inline constexpr size_t kMaxRxTransfers = 65536;

// A transfer's tag (wire::DataHead::tag): the initiator's slot for it in the low 12 bits and the
// slot's generation in the top 4, so that a late packet of a slot's earlier transfer matches no
// transfer of it.
inline constexpr unsigned kRdmaTagSlotBits = 12;
inline constexpr uint16_t kRdmaTagSlots = 1u << kRdmaTagSlotBits;
inline constexpr uint16_t rdma_tag(uint16_t slot, uint8_t generation) {
  return static_cast<uint16_t>(((generation & 0xFu) << kRdmaTagSlotBits) | slot);
}
inline constexpr uint16_t rdma_tag_slot(uint16_t tag) {
  return tag & (kRdmaTagSlots - 1);
}
inline constexpr bool rdma_tag_generation_is(uint16_t tag, uint8_t generation) {
  return (tag >> kRdmaTagSlotBits) == (generation & 0xFu);
}

// Whether a packet's offset and size are where the transfer's own cutting puts them.
inline bool rdma_placed(const wire::DataExt& x, uint8_t bytes) {
  if (x.length == 0) return x.offset == 0 && bytes == 0;
  return x.offset < x.length && bytes == wire::packet_bytes_at(x.address, x.length, x.offset);
}

// A run: the packets of a transfer that follow one packet at once, carried with it in one item
// of a direct link (glex/direct_rdma.h) as their payload alone. The packet ends at a 128-byte
// boundary of the destination (or the transfer's end), so the packets after it are whole
// 128-byte blocks but the transfer's last: the payload's byte count says how many there are.
//
// The bytes of the run that follows a packet ending `next` bytes into a transfer of `length`,
// with at most `room` bytes of room: whole packets only.
constexpr uint64_t rdma_run_bytes(uint64_t length, uint64_t next, uint64_t room) {
  const uint64_t whole = room / wire::kDataPacketBytes * wire::kDataPacketBytes;
  return next >= length ? 0 : std::min(length - next, whole);
}
// Whether `bytes` of run may follow placed packet `x` of `first` bytes: within the transfer,
// ending where a packet ends.
inline bool rdma_run_placed(const wire::DataExt& x, uint8_t first, uint64_t bytes) {
  if (bytes == 0) return true;
  const uint64_t next = uint64_t{x.offset} + first;
  return next + bytes <= x.length &&
         (next + bytes == x.length || (x.address + next + bytes) % wire::kDataPacketBytes == 0) &&
         (x.address + next) % wire::kDataPacketBytes == 0;
}
// The packets of a placed run of `bytes` that follows packet `x` of `first` bytes.
inline uint64_t rdma_run_packets(const wire::DataExt& x, uint8_t first, uint64_t bytes) {
  return bytes == 0 ? 0 : wire::packets_for(x.address + x.offset + first, bytes);
}
// What packet `p` and the run of `bytes` after it count on the ports they pass.
inline wire::Traffic rdma_run_traffic(const wire::DataPacket& p, uint64_t bytes) {
  wire::Traffic t = wire::packet_traffic(p.head.bytes);
  if (bytes != 0) t += wire::transfer_traffic(p.ext.address + p.ext.offset + p.head.bytes, bytes);
  return t;
}

// The initiator's packets. Each sets the head and extension of `p` (the caller's payload past
// what it writes is left as it was); the caller then seals it (seal_data_packet).
//
// The data packet that starts `sent` bytes into put or immediate `d`; returns its byte count,
// whose payload the caller supplies (an immediate's from the descriptor: rdma_immediate_bytes).
uint64_t rdma_data_packet(const wire::RdmaDescriptor& d, uint8_t src_vp, uint16_t tag,
                          uint64_t sent, wire::DataPacket& p);
// The notice that follows a put's or immediate's data (d.completion != kNone).
void rdma_notice_packet(const wire::RdmaDescriptor& d, uint8_t src_vp, uint16_t tag,
                        wire::DataPacket& p);
// One step of DMA engine 0 cutting put or immediate `d`: the data packet `sent` bytes in, into
// `p`, its payload the descriptor's immediate data or read from the source through
// read(offset, out) (0 or the read's error id), and with room in `run` the run after it read too
// (*run_bytes). Returns 0, `sent` moved past what was cut, or the read's failure (nothing moves).
template <class Read>
uint16_t rdma_put_step(const wire::RdmaDescriptor& d, uint8_t src_vp, uint16_t tag, uint64_t& sent,
                       Read&& read, wire::DataPacket& p, std::span<uint8_t> run = {},
                       uint64_t* run_bytes = nullptr) {
  const uint64_t n = rdma_data_packet(d, src_vp, tag, sent, p);
  uint64_t m = 0;
  if (d.op == wire::RdmaOp::kImmediate) {
    std::copy_n(d.immediate_data.begin() + sent, n, p.payload.begin());
  } else {
    m = rdma_run_bytes(d.length, sent + n, run.size());
    uint16_t err = read(sent, std::span<uint8_t>(p.payload).first(n));
    if (err == 0 && m != 0) err = read(sent + n, run.first(m));
    if (err != 0) return err;
  }
  if (run_bytes) *run_bytes = m;
  sent += n + m;
  return 0;
}
// A get's one read request.
void rdma_read_request_packet(const wire::RdmaDescriptor& d, uint8_t src_vp, uint16_t tag,
                              wire::DataPacket& p);
// The target's one answer to a transfer (or a get's refusal): `error_id` 0 or why it failed.
void rdma_ack_packet(wire::ChipId dest, uint8_t dest_vp, uint16_t tag, uint16_t error_id,
                     uint64_t bytes, wire::DataPacket& p);
// A packet's VC, source and length, then its fields checked (wire::check_data_packet).
Status seal_data_packet(wire::DataPacket& p, wire::ChipId src);

// A remote get being answered: what its read request said.
struct RdmaReadJob {
  wire::ChipId requester = 0;
  uint8_t requester_vp = 0;
  uint16_t tag = 0;
  uint64_t source = 0;  // the target's address
  uint32_t source_key = 0;
  uint64_t dest = 0;  // the requester's address
  uint32_t dest_key = 0;
  uint32_t length = 0;
  uint64_t sent = 0;
  bool event = false;
  uint64_t notify_address = 0;
  uint32_t notify_key = 0;
  std::array<uint8_t, wire::kNotifyDataBytes> notify_data{};
};
// The response packet at job.sent (its payload the caller reads from source + sent); returns its
// byte count.
uint64_t rdma_response_packet(const RdmaReadJob& j, wire::DataPacket& p);
// Whether response `p`, and the run of `more` bytes after it, answer get `d` (its source,
// address, length and cut); the tag is the caller's to match.
bool rdma_response_answers(const wire::RdmaDescriptor& d, const wire::DataPacket& p,
                           uint64_t more = 0);

enum class RdmaRx : uint8_t {
  kDelivered,  // taken (written, or counted towards its transfer)
  kRefused,    // part of a transfer the target refused: nothing written, the ack says why
  kDiscarded,  // malformed: Host::discard said why
};

// The target's side. `Host` supplies, each returning 0 or the error id of a failure:
//   const AttTable& att();
//   uint16_t write(uint32_t key, uint64_t vaddr, std::span<const uint8_t> data, uint32_t access);
//   uint16_t read(uint32_t key, uint64_t vaddr, std::span<uint8_t> out, uint32_t access);
//   uint16_t flush();                       // every write visible before anyone is told
//   bool mp(const wire::DataHead& h, std::span<const uint8_t> data);  // a trailing MP; false:
//                                                                     // not delivered
//   void ack(wire::ChipId dest, uint8_t dest_vp, uint16_t tag, uint16_t error_id, uint64_t bytes);
//   void discard(const Error& why);         // a malformed packet, into the error buffer
//   void written(uint64_t bytes);           // RDMA payload bytes written into host memory
class RdmaTarget {
 public:
  // A put's, immediate's or event's packet, or a trailing notice; with `more`, the payload of
  // the run of a put's packets that follow it (written as they are, counted as packets).
  template <class Host>
  RdmaRx write(const wire::DataPacket& p, Host& host, std::span<const uint8_t> more = {});
  // A read request, decoded and checked: the job to answer, or nothing (refused: acked; or
  // malformed: discarded).
  template <class Host>
  std::optional<RdmaReadJob> read_request(const wire::DataPacket& p, Host& host);
  // The event a get's target writes once it has read everything.
  template <class Host>
  static uint16_t write_event(Host& host, uint32_t key, uint64_t address,
                              const std::array<uint8_t, wire::kNotifyDataBytes>& data);
  // One step of DMA engine 1 answering get `j`: the response at j.sent, its payload read from
  // the target's memory through Host::read(key, vaddr, out, access), into `p` (true; j moves on,
  // and once everything is read the get's event is written); or a read that fails, which ends
  // the get with an ack naming the failure (false). The caller seals and sends `p`. With room in
  // `more`, the run of responses after `p` that fits is read into it too (*more_bytes).
  template <class Host>
  static bool answer_step(RdmaReadJob& j, Host& host, wire::DataPacket& p,
                          std::span<uint8_t> more = {}, uint64_t* more_bytes = nullptr);
  size_t in_progress() const { return rx_.size(); }

 private:
  struct Transfer {
    uint8_t src_vp = 0;
    uint32_t counted = 0;
    uint32_t total = 0;  // 0 until a data packet says
    uint16_t error_id = 0;
    uint64_t bytes = 0;
    bool has_notice = false;
    wire::DataPacket notice;
  };
  template <class Host>
  RdmaRx count(uint64_t key, Transfer& t, Host& host, uint64_t packets = 1);
  template <class Host>
  void finish(uint64_t key, Transfer& t, Host& host);

  std::unordered_map<uint64_t, Transfer> rx_;  // by (source node, tag)
};

// Why a read request is malformed (E2075), or 0.
Status check_read_request(const wire::DataPacket& p);
// A read request's fields.
RdmaReadJob read_job_of(const wire::DataPacket& p);

template <class Host>
uint16_t RdmaTarget::write_event(Host& host, uint32_t key, uint64_t address,
                                 const std::array<uint8_t, wire::kNotifyDataBytes>& data) {
  return write_event_checked(host.att(), key, address, data,
                             [&](uint32_t k, uint64_t a, std::span<const uint8_t> word) {
                               uint16_t err = host.write(k, a, word, kAccessWrite);
                               return err != 0 ? err : host.flush();  // word 0 before word 1
                             });
}

template <class Host>
bool RdmaTarget::answer_step(RdmaReadJob& j, Host& host, wire::DataPacket& p,
                             std::span<uint8_t> more, uint64_t* more_bytes) {
  const uint64_t n = rdma_response_packet(j, p);
  const uint64_t m = rdma_run_bytes(j.length, j.sent + n, more.size());
  uint16_t err =
      host.read(j.source_key, j.source + j.sent, std::span(p.payload).first(n), kAccessRead);
  if (err == 0 && m != 0)
    err = host.read(j.source_key, j.source + j.sent + n, more.first(m), kAccessRead);
  if (err != 0) {
    host.ack(j.requester, j.requester_vp, j.tag, err, j.sent);
    return false;
  }
  if (more_bytes) *more_bytes = m;
  j.sent += n + m;
  if (j.sent >= j.length && j.event)
    (void)write_event(host, j.notify_key, j.notify_address, j.notify_data);
  return true;
}

template <class Host>
RdmaRx RdmaTarget::write(const wire::DataPacket& p, Host& host, std::span<const uint8_t> more) {
  const wire::DataHead& h = p.head;
  auto bad = [&](uint16_t id, std::string why) {
    host.discard(make_error(Code::kMalformed, id, std::move(why)));
    return RdmaRx::kDiscarded;
  };
  if (!(h.flags & wire::kDataFlagInTransfer))
    return bad(2070, fmt::format("RDMA packet (kind {}) outside a transfer",
                                 static_cast<unsigned>(h.kind)));
  const bool notice = (h.flags & wire::kDataFlagTrailing) || h.kind == wire::PacketKind::kEvent;
  if (!notice && !rdma_placed(p.ext, h.bytes))
    return bad(2071, fmt::format("RDMA packet of {} bytes at offset {} of a {}-byte transfer to "
                                 "{:#x} is not where the transfer is cut",
                                 h.bytes, p.ext.offset, p.ext.length, p.ext.address));
  if (!more.empty() && (notice || h.kind != wire::PacketKind::kRdmaWrite ||
                        !rdma_run_placed(p.ext, h.bytes, more.size())))
    return bad(2080, fmt::format("a run of {} bytes after the RDMA packet at offset {} of a "
                                 "{}-byte transfer to {:#x} is not where the transfer is cut",
                                 more.size(), p.ext.offset, p.ext.length, p.ext.address));
  const uint64_t key = (uint64_t{h.src_node} << 16) | h.tag;
  auto it = rx_.find(key);
  if (it == rx_.end()) {
    if (rx_.size() >= kMaxRxTransfers)
      return bad(2072, fmt::format("{} transfers already in progress at this NIC", rx_.size()));
    it = rx_.emplace(key, Transfer{}).first;
    it->second.src_vp = h.src_vp;
  }
  Transfer& t = it->second;
  if (notice) {
    if (t.has_notice) return bad(2073, fmt::format("second completion notice for tag {}", h.tag));
    t.has_notice = true;
    t.notice = p;
    return count(key, t, host);
  }
  const uint32_t total = static_cast<uint32_t>(wire::packets_for(p.ext.address, p.ext.length)) +
                         ((h.flags & wire::kDataFlagNotified) ? 1 : 0);
  if (t.total == 0) {
    t.total = total;
    // The whole transfer is checked before any of it is written (docs/system.md 1.1).
    Status st =
        check_rdma_target(host.att(), wire::RdmaOp::kWrite, p.ext.key, p.ext.address, p.ext.length);
    if (!st.ok()) t.error_id = st.error().id;
  } else if (t.total != total) {
    return bad(2074, fmt::format("packet of tag {} says {} packets, the transfer {}", h.tag, total,
                                 t.total));
  }
  const uint64_t run = rdma_run_packets(p.ext, h.bytes, more.size());
  if (t.counted + 1 + run > t.total)
    return bad(2081, fmt::format("a run of {} packets after packet {} of tag {} passes the "
                                 "transfer's {} packets",
                                 run, t.counted, h.tag, t.total));
  if (t.error_id == 0)
    t.error_id = host.write(p.ext.key, p.ext.address + p.ext.offset, p.data(), kAccessWrite);
  if (t.error_id == 0 && !more.empty())
    t.error_id = host.write(p.ext.key, p.ext.address + p.ext.offset + h.bytes, more, kAccessWrite);
  if (t.error_id == 0) {
    t.bytes += h.bytes + more.size();
    host.written(h.bytes + more.size());
  }
  return count(key, t, host, 1 + run);
}

template <class Host>
RdmaRx RdmaTarget::count(uint64_t key, Transfer& t, Host& host, uint64_t packets) {
  const RdmaRx result = t.error_id != 0 ? RdmaRx::kRefused : RdmaRx::kDelivered;
  t.counted += static_cast<uint32_t>(packets);
  if (t.counted == t.total) finish(key, t, host);
  return result;
}

template <class Host>
void RdmaTarget::finish(uint64_t key, Transfer& t, Host& host) {
  uint16_t err = t.error_id;
  if (err == 0) err = host.flush();  // every data byte is written before the notice and the ack
  const auto src = static_cast<wire::ChipId>(key >> 16);
  const uint16_t tag = static_cast<uint16_t>(key);
  if (err == 0 && t.has_notice) {
    const wire::DataPacket& n = t.notice;
    std::array<uint8_t, wire::kNotifyDataBytes> data{};
    std::copy_n(n.payload.begin(), std::min<size_t>(n.head.bytes, data.size()), data.begin());
    switch (n.head.kind) {
      case wire::PacketKind::kEvent:
        err = write_event(host, n.ext.key, n.ext.address, data);
        break;
      case wire::PacketKind::kImmediate:
        err = host.write(n.ext.key, n.ext.address, n.data(), kAccessWrite);
        if (err == 0) err = host.flush();
        if (err == 0) host.written(n.data().size());
        break;
      default: {  // the trailing MP, into the target VP's MPQ
        wire::DataHead mh = n.head;
        mh.kind = wire::PacketKind::kMp;
        if (!host.mp(mh, n.data())) err = 2049;
        break;
      }
    }
  }
  const uint64_t bytes = t.bytes;
  const uint8_t src_vp = t.src_vp;
  rx_.erase(key);
  host.ack(src, src_vp, tag, err, bytes);
}

template <class Host>
std::optional<RdmaReadJob> RdmaTarget::read_request(const wire::DataPacket& p, Host& host) {
  if (Status st = check_read_request(p); !st.ok()) {
    host.discard(st.error());
    return std::nullopt;
  }
  RdmaReadJob j = read_job_of(p);
  const RdmaNotify event{j.notify_key, j.notify_address};
  Status st = check_rdma_target(host.att(), wire::RdmaOp::kRead, j.source_key, j.source, j.length,
                                j.event ? &event : nullptr);
  if (!st.ok()) {
    host.ack(j.requester, j.requester_vp, j.tag, st.error().id, 0);
    return std::nullopt;
  }
  return j;
}

}  // namespace galaxy::chip
