#include "engine/live/link.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/log.h"
#include "wire/crc16.h"

namespace galaxy::live {
namespace {

// Sequence numbers are compared modulo 2^32 (RFC 1982 style).
inline int32_t seq_diff(uint32_t a, uint32_t b) {
  return static_cast<int32_t>(a - b);
}

// A hole is lost once this many later frames are known received (TCP's duplicate-ack threshold),
// so reordering by a frame or two does not cause retransmissions.
constexpr int kDupThresh = 3;
constexpr uint32_t kMaxBackoff = 16;

inline void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void put32(uint8_t* p, uint32_t v) {
  put16(p, static_cast<uint16_t>(v >> 16));
  put16(p + 2, static_cast<uint16_t>(v));
}
inline void put64(uint8_t* p, uint64_t v) {
  put32(p, static_cast<uint32_t>(v >> 32));
  put32(p + 4, static_cast<uint32_t>(v));
}
inline uint16_t get16(const uint8_t* p) {
  return static_cast<uint16_t>((p[0] << 8) | p[1]);
}
inline uint32_t get32(const uint8_t* p) {
  return (static_cast<uint32_t>(get16(p)) << 16) | get16(p + 2);
}
inline uint64_t get64(const uint8_t* p) {
  return (static_cast<uint64_t>(get32(p)) << 32) | get32(p + 4);
}

uint32_t ring_size(uint32_t n) {
  return std::bit_ceil(std::max<uint32_t>(n, 1));
}

void seal(uint8_t* frame, size_t length_without_crc) {
  uint16_t crc = wire::crc16(std::span<const uint8_t>(frame, length_without_crc));
  put16(frame + length_without_crc, crc);
}

uint64_t default_epoch() {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::system_clock::now().time_since_epoch())
                .count();
  return ns > 0 ? static_cast<uint64_t>(ns) : 1;
}

}  // namespace

uint32_t path_mtu(const sockaddr_in& peer) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  int mtu = 0;
  socklen_t len = sizeof mtu;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&peer), sizeof peer) != 0 ||
      getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &len) != 0)
    mtu = 0;
  close(fd);
  return mtu > 0 ? static_cast<uint32_t>(mtu) : 0;
}

uint32_t frame_bytes_for_mtu(uint32_t mtu) {
  constexpr uint32_t kIpHeader = 20, kUdpHeader = 8;
  // Every fragment but the last carries a multiple of 8 bytes of the datagram (the offsets
  // count eighths).
  const uint64_t packet = mtu > kIpHeader ? mtu - kIpHeader : 0;
  const uint64_t datagram = packet / 8 * 8 * (kMaxFragmentsPerFrame - 1) + packet;
  const uint64_t payload =
      datagram > kUdpHeader + kLinkFrameOverhead ? datagram - kUdpHeader - kLinkFrameOverhead : 0;
  return static_cast<uint32_t>(std::clamp<uint64_t>(
      payload, kMinFrameBytes, std::min<uint64_t>(kMaxDefaultFrameBytes, kMaxLinkPayload)));
}

std::string_view link_frame_type_name(LinkFrameType t) {
  switch (t) {
    case LinkFrameType::kData:
      return "data";
    case LinkFrameType::kAck:
      return "ack";
    case LinkFrameType::kHandshake:
      return "handshake";
  }
  return "?";
}

LinkStats& LinkStats::operator+=(const LinkStats& o) {
  frames_sent += o.frames_sent;
  frames_received += o.frames_received;
  payload_bytes_sent += o.payload_bytes_sent;
  payload_bytes_delivered += o.payload_bytes_delivered;
  payloads_delivered += o.payloads_delivered;
  retransmissions += o.retransmissions;
  fast_retransmits += o.fast_retransmits;
  timeouts += o.timeouts;
  crc_errors += o.crc_errors;
  duplicates += o.duplicates;
  out_of_order += o.out_of_order;
  malformed += o.malformed;
  foreign_link += o.foreign_link;
  stale_frames += o.stale_frames;
  bad_acks += o.bad_acks;
  credit_overruns += o.credit_overruns;
  acks_sent += o.acks_sent;
  acks_received += o.acks_received;
  handshake_frames_sent += o.handshake_frames_sent;
  handshake_frames_received += o.handshake_frames_received;
  handshakes += o.handshakes;
  link_downs += o.link_downs;
  peer_restarts += o.peer_restarts;
  return *this;
}

std::string_view link_state_name(LinkState s) {
  switch (s) {
    case LinkState::kDown:
      return "down";
    case LinkState::kTraining:
      return "training";
    case LinkState::kUp:
      return "up";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// Frame codec

Result<LinkFrame> decode_link_frame(std::span<const uint8_t> bytes) {
  if (bytes.size() < kLinkFrameOverhead)
    return make_error(Code::kMalformed, 4600,
                      fmt::format("link frame length = {} is shorter than the {}-byte header "
                                  "and CRC",
                                  bytes.size(), kLinkFrameOverhead));
  const uint8_t* p = bytes.data();
  size_t body = bytes.size() - kLinkCrcBytes;
  uint16_t crc = get16(p + body);
  uint16_t computed = wire::crc16(bytes.first(body));
  if (crc != computed)
    return make_error(
        Code::kCrcMismatch, 4607,
        fmt::format("link frame crc = {:#06x} but the frame's CRC-16 is {:#06x}", crc, computed));
  uint16_t magic = get16(p);
  if (magic != kLinkMagic)
    return make_error(
        Code::kMalformed, 4601,
        fmt::format("link frame magic = {:#06x}, expected {:#06x}", magic, kLinkMagic));
  if (p[2] != kLinkVersion)
    return make_error(
        Code::kUnsupported, 4602,
        fmt::format("link frame version = {}, only {} is supported", p[2], kLinkVersion));
  uint8_t type = p[3];
  if (type < static_cast<uint8_t>(LinkFrameType::kData) ||
      type > static_cast<uint8_t>(LinkFrameType::kHandshake))
    return make_error(Code::kMalformed, 4603,
                      fmt::format("link frame type = {} (1 data, 2 ack, 3 handshake)", type));
  LinkFrame f;
  f.type = static_cast<LinkFrameType>(type);
  f.flags = get16(p + 4);
  uint16_t allowed = f.type == LinkFrameType::kData ? 0
                     : f.type == LinkFrameType::kHandshake
                         ? kLinkFlagReplyRequested | kLinkFlagDisabled
                         : kLinkFlagReplyRequested;
  if (f.flags & ~allowed)
    return make_error(Code::kMalformed, 4604,
                      fmt::format("link frame flags = {:#06x} has bits outside {:#06x} in a {} "
                                  "frame",
                                  f.flags, allowed, link_frame_type_name(f.type)));
  uint16_t payload_length = get16(p + 6);
  if (payload_length != body - kLinkHeaderBytes)
    return make_error(Code::kMalformed, 4605,
                      fmt::format("link frame payload_length = {} but the datagram carries {} "
                                  "payload bytes",
                                  payload_length, body - kLinkHeaderBytes));
  if (payload_length != 0 && f.type != LinkFrameType::kData)
    return make_error(Code::kMalformed, 4606,
                      fmt::format("link frame payload_length = {} in a {} frame, which has none",
                                  payload_length, link_frame_type_name(f.type)));
  f.link_id = get32(p + 8);
  f.seq = get32(p + 12);
  f.ack = get32(p + 16);
  f.credits = get32(p + 20);
  f.sack = get64(p + 24);
  f.epoch = get64(p + 32);
  f.peer_epoch = get64(p + 40);
  if (f.epoch == 0)
    return make_error(Code::kMalformed, 4609, "link frame epoch = 0; a sender's epoch is nonzero");
  if (f.peer_epoch == 0 && f.type != LinkFrameType::kHandshake)
    return make_error(Code::kMalformed, 4610,
                      fmt::format("link frame peer_epoch = 0 in a {} frame; only a handshake "
                                  "may not know its peer",
                                  link_frame_type_name(f.type)));
  if (f.credits > kMaxLinkWindow)
    return make_error(
        Code::kMalformed, 4611,
        fmt::format("link frame credits = {} exceeds the maximum {}", f.credits, kMaxLinkWindow));
  f.payload = bytes.subspan(kLinkHeaderBytes, payload_length);
  return f;
}

Result<LinkFrame> decode_link_frame(std::span<const uint8_t> bytes, uint32_t expected_link_id) {
  auto f = decode_link_frame(bytes);
  if (f.ok() && f->link_id != expected_link_id)
    return make_error(
        Code::kInvalidArgument, 4608,
        fmt::format("link frame link_id = {} but this link is {}", f->link_id, expected_link_id));
  return f;
}

void encode_link_frame(const LinkFrame& f, std::vector<uint8_t>* out) {
  out->resize(kLinkFrameOverhead + f.payload.size());
  uint8_t* p = out->data();
  put16(p, kLinkMagic);
  p[2] = kLinkVersion;
  p[3] = static_cast<uint8_t>(f.type);
  put16(p + 4, f.flags);
  put16(p + 6, static_cast<uint16_t>(f.payload.size()));
  put32(p + 8, f.link_id);
  put32(p + 12, f.seq);
  put32(p + 16, f.ack);
  put32(p + 20, f.credits);
  put64(p + 24, f.sack);
  put64(p + 32, f.epoch);
  put64(p + 40, f.peer_epoch);
  if (!f.payload.empty()) std::memcpy(p + kLinkHeaderBytes, f.payload.data(), f.payload.size());
  seal(p, kLinkHeaderBytes + f.payload.size());
}

Status check_link_config(const LinkConfig& c) {
  if (c.window < 1 || c.window > kMaxLinkWindow)
    return make_error(Code::kOutOfRange, 4630,
                      fmt::format("link window = {} is outside [1, {}]", c.window, kMaxLinkWindow));
  if (c.rx_credits < 1 || c.rx_credits > kMaxLinkWindow)
    return make_error(
        Code::kOutOfRange, 4631,
        fmt::format("link rx_credits = {} is outside [1, {}]", c.rx_credits, kMaxLinkWindow));
  if (c.max_payload > kMaxLinkPayload)
    return make_error(Code::kOutOfRange, 4632,
                      fmt::format("link max_payload = {} exceeds {} (a UDP datagram)",
                                  c.max_payload, kMaxLinkPayload));
  if (c.rto_min_ns == 0 || c.rto_min_ns > c.rto_max_ns)
    return make_error(Code::kOutOfRange, 4633,
                      fmt::format("link rto_min_ns = {} must be in [1, rto_max_ns = {}]",
                                  c.rto_min_ns, c.rto_max_ns));
  if (c.dead_after_ns == 0)
    return make_error(Code::kOutOfRange, 4634, "link dead_after_ns = 0 must be positive");
  if (c.handshake_interval_ns == 0)
    return make_error(Code::kOutOfRange, 4635, "link handshake_interval_ns = 0 must be positive");
  return {};
}

// ---------------------------------------------------------------------------------------------
// Link

Link::Link(const LinkConfig& c) : cfg_(c) {
  cfg_.window = std::clamp<uint32_t>(cfg_.window, 1, kMaxLinkWindow);
  cfg_.rx_credits = std::clamp<uint32_t>(cfg_.rx_credits, 1, kMaxLinkWindow);
  cfg_.max_payload = std::min<uint32_t>(cfg_.max_payload, kMaxLinkPayload);
  cfg_.rto_min_ns = std::max<uint64_t>(cfg_.rto_min_ns, 1);
  cfg_.rto_max_ns = std::max(cfg_.rto_max_ns, cfg_.rto_min_ns);
  cfg_.dead_after_ns = std::max<uint64_t>(cfg_.dead_after_ns, 1);
  cfg_.handshake_interval_ns = std::max<uint64_t>(cfg_.handshake_interval_ns, 1);
  cfg_.ack_every = std::max<uint32_t>(cfg_.ack_every, 1);
  keepalive_ns_ =
      cfg_.keepalive_ns != 0 ? cfg_.keepalive_ns : std::max<uint64_t>(cfg_.dead_after_ns / 4, 1);
  epoch_ = cfg_.epoch != 0 ? cfg_.epoch : default_epoch();

  tx_.resize(ring_size(cfg_.window));
  tx_mask_ = static_cast<uint32_t>(tx_.size() - 1);
  rx_.resize(ring_size(cfg_.rx_credits));
  rx_mask_ = static_cast<uint32_t>(rx_.size() - 1);
  outq_.resize(tx_.size());

  // Until a handshake tells us the peer's expectation there is no credit: credit_limit_ ==
  // snd_nxt_ refuses every send.
  snd_una_ = snd_tx_ = snd_nxt_ = credit_limit_ = cfg_.initial_seq;
  pop_seq_ = rcv_nxt_ = cfg_.initial_seq;
  last_advertised_limit_ = pop_seq_ + cfg_.rx_credits;
  // No RTT sample yet: start at ten times the floor (RFC 6298 starts at 1 s).
  rto_base_ns_ = std::clamp(cfg_.rto_min_ns * 10, cfg_.rto_min_ns, cfg_.rto_max_ns);
  probe_interval_ns_ = rto_base_ns_;
}

uint64_t Link::rto_ns() const {
  uint64_t r = rto_base_ns_;
  for (uint32_t i = 0; i < backoff_ && r < cfg_.rto_max_ns; ++i) r <<= 1;
  return std::min(r, cfg_.rto_max_ns);
}

bool Link::can_send() const {
  return in_flight() < cfg_.window && seq_diff(snd_nxt_, credit_limit_) < 0;
}

Status Link::send(std::span<const uint8_t> payload, uint64_t now_ns) {
  GALAXY_TRY(admit(payload.size(), now_ns));
  tx_[snd_nxt_ & tx_mask_].payload.assign(payload.begin(), payload.end());
  queue_admitted();
  return {};
}

Status Link::send(std::vector<uint8_t>* payload, uint64_t now_ns) {
  GALAXY_TRY(admit(payload->size(), now_ns));
  tx_[snd_nxt_ & tx_mask_].payload.swap(*payload);
  payload->clear();
  queue_admitted();
  return {};
}

Status Link::admit(size_t bytes, uint64_t now_ns) {
  touch(now_ns);
  if (bytes > cfg_.max_payload)
    return make_error(Code::kInvalidArgument, 4612,
                      fmt::format("link {} payload of {} bytes exceeds max_payload = {}",
                                  cfg_.link_id, bytes, cfg_.max_payload));
  if (in_flight() >= cfg_.window)
    return make_error(
        Code::kResourceExhausted, 4613,
        fmt::format("link {} window full: {} frames in flight", cfg_.link_id, in_flight()));
  if (seq_diff(snd_nxt_, credit_limit_) >= 0) {
    arm_probe();
    return make_error(Code::kResourceExhausted, 4614,
                      fmt::format("link {} peer has no credits ({} frames in flight, state {})",
                                  cfg_.link_id, in_flight(), link_state_name(state_)));
  }
  return {};
}

void Link::queue_admitted() {
  TxSlot& slot = tx_[snd_nxt_ & tx_mask_];
  slot.seq = snd_nxt_;
  slot.tx_count = 0;
  slot.sacked = false;
  slot.queued = false;
  slot.retransmitted = false;
  ++snd_nxt_;
  flush_new();
  if (seq_diff(snd_nxt_, credit_limit_) >= 0) arm_probe();
}

void Link::flush_new() {
  if (state_ != LinkState::kUp) return;
  while (snd_tx_ != snd_nxt_ && seq_diff(snd_tx_, credit_limit_) < 0) {
    uint32_t index = snd_tx_ & tx_mask_;
    TxSlot& slot = tx_[index];
    slot.last_tx_ns = now_;
    slot.tx_order = ++tx_order_;
    timer_list_append(index);
    slot.queued = true;
    outq_push(snd_tx_);
    ++snd_tx_;
  }
  if (snd_tx_ != snd_nxt_) arm_probe();
}

void Link::arm_probe() {
  if (credit_starved_) return;
  credit_starved_ = true;
  probe_interval_ns_ = rto_ns();
  probe_deadline_ns_ = now_ + probe_interval_ns_;
}

void Link::outq_push(uint32_t seq) {
  if (outq_size_ == outq_.size()) {
    // Stale entries of frames acked before they were popped can exceed the window.
    std::vector<uint32_t> bigger(outq_.size() * 2);
    for (size_t i = 0; i < outq_size_; ++i)
      bigger[i] = outq_[(outq_head_ + i) & (outq_.size() - 1)];
    outq_.swap(bigger);
    outq_head_ = 0;
  }
  outq_[(outq_head_ + outq_size_) & (outq_.size() - 1)] = seq;
  ++outq_size_;
}

void Link::timer_list_remove(uint32_t index) {
  TxSlot& s = tx_[index];
  if (!s.in_timer_list) return;
  if (s.prev >= 0)
    tx_[s.prev].next = s.next;
  else
    timer_head_ = s.next;
  if (s.next >= 0)
    tx_[s.next].prev = s.prev;
  else
    timer_tail_ = s.prev;
  s.prev = s.next = -1;
  s.in_timer_list = false;
}

void Link::timer_list_append(uint32_t index) {
  timer_list_remove(index);
  TxSlot& s = tx_[index];
  s.prev = timer_tail_;
  s.next = -1;
  if (timer_tail_ >= 0)
    tx_[timer_tail_].next = static_cast<int32_t>(index);
  else
    timer_head_ = static_cast<int32_t>(index);
  timer_tail_ = static_cast<int32_t>(index);
  s.in_timer_list = true;
}

void Link::retransmit(uint32_t index) {
  TxSlot& slot = tx_[index];
  slot.last_tx_ns = now_;
  slot.tx_order = ++tx_order_;
  slot.retransmitted = true;
  timer_list_append(index);
  if (!slot.queued) {
    slot.queued = true;
    outq_push(slot.seq);
  }
}

void Link::rtt_sample(uint64_t r) {
  if (srtt_ns_ == 0) {
    srtt_ns_ = std::max<uint64_t>(r, 1);
    rttvar_ns_ = r / 2;
  } else {
    uint64_t err = r > srtt_ns_ ? r - srtt_ns_ : srtt_ns_ - r;
    rttvar_ns_ = (3 * rttvar_ns_ + err) / 4;
    srtt_ns_ = std::max<uint64_t>((7 * srtt_ns_ + r) / 8, 1);
  }
  rto_base_ns_ = std::clamp(srtt_ns_ + 4 * rttvar_ns_, cfg_.rto_min_ns, cfg_.rto_max_ns);
}

void Link::process_ack(uint32_t ack, uint64_t sack, uint32_t credits) {
  if (seq_diff(ack, snd_tx_) > 0) {
    ++stats_.bad_acks;
    log::warn(4830, "link {}: dropped an ack of {} beyond the last sent {}", cfg_.link_id, ack,
              snd_tx_);
    return;
  }
  uint32_t limit = ack + credits;
  bool opened = false;
  if (seq_diff(limit, credit_limit_) > 0) {
    credit_limit_ = limit;
    opened = true;
  }
  if (seq_diff(ack, snd_una_) >= 0) {  // older acks (reordered) carry nothing new
    uint64_t sample = 0;
    bool progress = snd_una_ != ack;
    while (snd_una_ != ack) {
      uint32_t index = snd_una_ & tx_mask_;
      TxSlot& slot = tx_[index];
      if (!slot.sacked) {
        if (!slot.retransmitted) sample = now_ - slot.last_tx_ns + 1;
        delivered_order_ = std::max(delivered_order_, slot.tx_order);
      }
      timer_list_remove(index);
      slot.queued = false;
      slot.sacked = false;
      ++snd_una_;
    }
    for (uint64_t bits = sack; bits != 0; bits &= bits - 1) {
      uint32_t seq = ack + 1 + static_cast<uint32_t>(std::countr_zero(bits));
      if (seq_diff(seq, snd_tx_) >= 0) break;  // never sent: ignore the rest
      uint32_t index = seq & tx_mask_;
      TxSlot& slot = tx_[index];
      if (slot.sacked) continue;
      if (!slot.retransmitted) sample = now_ - slot.last_tx_ns + 1;
      delivered_order_ = std::max(delivered_order_, slot.tx_order);
      slot.sacked = true;
      timer_list_remove(index);
    }
    peer_has_holes_ = sack != 0;
    // Fast retransmit: a hole the sack shows (or the frame at the cumulative ack) is lost once
    // kDupThresh frames transmitted after its last transmission have been received. Counting
    // in transmission order rather than seq order also detects a lost retransmission, and
    // limits a frame to one fast retransmission per round trip: the later frames must make
    // the trip first.
    auto maybe_fast_retransmit = [&](uint32_t seq) {
      if (seq_diff(seq, snd_tx_) >= 0) return;
      uint32_t index = seq & tx_mask_;
      TxSlot& slot = tx_[index];
      if (slot.sacked || slot.queued || slot.tx_order + kDupThresh > delivered_order_) return;
      ++stats_.fast_retransmits;
      retransmit(index);
    };
    maybe_fast_retransmit(ack);
    if (sack != 0) {
      int highest = 63 - std::countl_zero(sack);
      uint64_t holes = ~sack & ((uint64_t{1} << highest) - 1);
      for (; holes != 0; holes &= holes - 1)
        maybe_fast_retransmit(ack + 1 + static_cast<uint32_t>(std::countr_zero(holes)));
    }
    if (sample != 0) rtt_sample(sample - 1);
    if (progress) backoff_ = 0;
  }
  if (opened) {
    credit_starved_ = false;
    probe_deadline_ns_ = UINT64_MAX;
    flush_new();
  }
}

uint64_t Link::build_sack() const {
  if (ooo_count_ == 0) return 0;
  uint64_t sack = 0;
  for (uint32_t i = 0; i < 64; ++i) {
    uint32_t seq = rcv_nxt_ + 1 + i;
    if (static_cast<uint32_t>(seq - pop_seq_) >= cfg_.rx_credits) break;
    if (rx_[seq & rx_mask_].present) sack |= uint64_t{1} << i;
  }
  return sack;
}

void Link::process_data(const LinkFrame& f) {
  ++stats_.frames_received;
  int32_t ahead = seq_diff(f.seq, rcv_nxt_);
  if (ahead < 0) {
    ++stats_.duplicates;
    log::line(log::Level::kDebug, 4832, "link {}: dropped frame {}, a duplicate", cfg_.link_id,
              f.seq);
    ack_now_ = true;
    return;
  }
  if (static_cast<uint32_t>(f.seq - pop_seq_) >= cfg_.rx_credits) {
    ++stats_.credit_overruns;
    log::warn(4831, "link {}: dropped frame {} beyond the {} credits given (the sender resends)",
              cfg_.link_id, f.seq, cfg_.rx_credits);
    ack_now_ = true;
    return;
  }
  RxSlot& slot = rx_[f.seq & rx_mask_];
  if (slot.present) {
    ++stats_.duplicates;
    log::line(log::Level::kDebug, 4838, "link {}: dropped frame {}, a duplicate", cfg_.link_id,
              f.seq);
    ack_now_ = true;
    return;
  }
  slot.payload.assign(f.payload.begin(), f.payload.end());
  slot.present = true;
  if (ahead > 0) {
    ++stats_.out_of_order;
    ++ooo_count_;
    ack_now_ = true;
    return;
  }
  ++rcv_nxt_;
  ++unacked_in_order_;
  bool filled_hole = false;
  while (ooo_count_ != 0 && rx_[rcv_nxt_ & rx_mask_].present &&
         static_cast<uint32_t>(rcv_nxt_ - pop_seq_) < cfg_.rx_credits) {
    ++rcv_nxt_;
    --ooo_count_;
    filled_hole = true;
  }
  if (filled_hole || unacked_in_order_ >= cfg_.ack_every) {
    ack_now_ = true;
  } else if (ack_deadline_ns_ == UINT64_MAX) {
    ack_deadline_ns_ = now_ + cfg_.ack_delay_ns;
  }
}

void Link::drop_out_of_order() {
  for (uint32_t seq = rcv_nxt_ + 1; ooo_count_ != 0 && seq - pop_seq_ < cfg_.rx_credits; ++seq) {
    RxSlot& slot = rx_[seq & rx_mask_];
    if (slot.present) {
      slot.present = false;
      --ooo_count_;
    }
  }
  ooo_count_ = 0;
}

void Link::rebase_sender(uint32_t base, uint32_t credits) {
  uint32_t n = snd_nxt_ - snd_una_;
  if (n != 0 && base != snd_una_) {
    std::vector<std::vector<uint8_t>> payloads(n);
    for (uint32_t i = 0; i < n; ++i) payloads[i].swap(tx_[(snd_una_ + i) & tx_mask_].payload);
    for (uint32_t i = 0; i < n; ++i) tx_[(base + i) & tx_mask_].payload.swap(payloads[i]);
  }
  for (TxSlot& slot : tx_) {
    slot.prev = slot.next = -1;
    slot.in_timer_list = slot.sacked = slot.queued = slot.retransmitted = false;
    slot.tx_count = 0;
  }
  for (uint32_t i = 0; i < n; ++i) tx_[(base + i) & tx_mask_].seq = base + i;
  timer_head_ = timer_tail_ = -1;
  outq_head_ = outq_size_ = 0;
  snd_una_ = snd_tx_ = base;
  snd_nxt_ = base + n;
  credit_limit_ = base + credits;
  credit_starved_ = false;
  probe_deadline_ns_ = UINT64_MAX;
  backoff_ = 0;
  peer_has_holes_ = false;
}

void Link::become_up() {
  state_ = LinkState::kUp;
  ++stats_.handshakes;
  backoff_ = 0;
  last_tx_ns_ = now_;
  flush_new();
}

void Link::go_down(DownBy by) {
  state_ = LinkState::kDown;
  ++stats_.link_downs;
  const log::Level closed = cfg_.closing_is_routine ? log::Level::kDebug : log::Level::kInfo;
  switch (by) {
    case DownBy::kNoAnswer:
      log::warn(4833, "link {}: down (no answer from the peer)", cfg_.link_id);
      break;
    case DownBy::kPeer:
      log::line(closed, 4833, "link {}: down (the peer took it down)", cfg_.link_id);
      break;
    case DownBy::kThisEnd:
      log::line(closed, 4833, "link {}: down (taken down at this end)", cfg_.link_id);
      break;
  }
  ack_now_ = probe_now_ = false;
  ack_deadline_ns_ = UINT64_MAX;
  hs_deadline_ns_ = now_;
}

void Link::set_disabled(bool disabled, uint64_t now_ns) {
  touch(now_ns);
  if (disabled == disabled_) return;
  disabled_ = disabled;
  if (disabled && state_ != LinkState::kDown) go_down(DownBy::kThisEnd);
  if (!disabled && state_ == LinkState::kDown) state_ = LinkState::kTraining;
  hs_pending_ = true;  // tell the peer now
}

void Link::handle_handshake(const LinkFrame& f) {
  ++stats_.handshake_frames_received;
  if (disabled_) {
    // Held down here: every handshake is answered with ours, which says so.
    last_rx_ns_ = now_;
    hs_pending_ = true;
    return;
  }
  if (f.flags & kLinkFlagDisabled) {
    // The peer holds the link down: Down until its handshakes stop saying so. Its epoch is
    // learnt by the handshake that enables the link again.
    last_rx_ns_ = now_;
    peer_disabled_ = true;
    if (state_ != LinkState::kDown) go_down(DownBy::kPeer);
    return;
  }
  peer_disabled_ = false;
  bool new_peer = false;
  if (f.epoch != peer_epoch_) {
    if (peer_epoch_ != 0 && f.epoch < peer_epoch_ && state_ != LinkState::kDown) {
      ++stats_.stale_frames;
      log::warn(4834, "link {}: dropped a frame of an earlier incarnation of the peer",
                cfg_.link_id);
      return;
    }
    if (peer_epoch_ != 0) {
      ++stats_.peer_restarts;
      log::warn(4835, "link {}: the peer restarted", cfg_.link_id);
      drop_out_of_order();
      ack_now_ = probe_now_ = false;
      ack_deadline_ns_ = UINT64_MAX;
      unacked_in_order_ = 0;
    }
    peer_epoch_ = f.epoch;
    new_peer = true;
    rebase_sender(f.ack, f.credits);
    if (state_ == LinkState::kUp) state_ = LinkState::kTraining;
  }
  last_rx_ns_ = now_;
  if (state_ == LinkState::kDown) state_ = LinkState::kTraining;
  if (f.peer_epoch == epoch_) {
    if (!new_peer) process_ack(f.ack, 0, f.credits);
    if (state_ != LinkState::kUp) become_up();
  } else if (state_ == LinkState::kUp) {
    state_ = LinkState::kTraining;  // the peer lost track of us
  }
  if ((f.flags & kLinkFlagReplyRequested) || state_ != LinkState::kUp) hs_pending_ = true;
}

void Link::on_datagram(std::span<const uint8_t> bytes, uint64_t now_ns) {
  touch(now_ns);
  auto decoded = decode_link_frame(bytes);
  if (!decoded.ok()) {
    if (decoded.error().code == Code::kCrcMismatch)
      ++stats_.crc_errors;
    else
      ++stats_.malformed;
    log::warn(decoded.error().id, "link {}: dropped a frame of {} bytes: {}", cfg_.link_id,
              bytes.size(), decoded.error().message);
    return;
  }
  const LinkFrame& f = *decoded;
  if (f.link_id != cfg_.link_id) {
    ++stats_.foreign_link;
    log::warn(4836, "link {}: dropped a frame of link {}", cfg_.link_id, f.link_id);
    return;
  }
  if (f.type == LinkFrameType::kHandshake) {
    handle_handshake(f);
    return;
  }
  if (disabled_ || peer_disabled_ || peer_epoch_ == 0 || f.epoch != peer_epoch_ ||
      f.peer_epoch != epoch_) {
    ++stats_.stale_frames;
    log::warn(4837, "link {}: dropped a frame from outside the current pairing of its ends",
              cfg_.link_id);
    return;
  }
  last_rx_ns_ = now_;
  if (state_ != LinkState::kUp) become_up();
  process_ack(f.ack, f.sack, f.credits);
  if (f.type == LinkFrameType::kData) {
    process_data(f);
  } else {
    ++stats_.acks_received;
    if (f.flags & kLinkFlagReplyRequested) ack_now_ = true;
  }
}

void Link::window_update_check() {
  uint32_t limit = pop_seq_ + cfg_.rx_credits;
  if (state_ == LinkState::kUp &&
      limit - last_advertised_limit_ >= std::max<uint32_t>(cfg_.rx_credits / 4, 1))
    ack_now_ = true;
}

bool Link::pop_delivered(std::vector<uint8_t>* out) {
  if (pop_seq_ == rcv_nxt_) return false;
  RxSlot& slot = rx_[pop_seq_ & rx_mask_];
  out->swap(slot.payload);
  slot.payload.clear();
  slot.present = false;
  ++pop_seq_;
  ++stats_.payloads_delivered;
  stats_.payload_bytes_delivered += out->size();
  window_update_check();
  return true;
}

std::span<const uint8_t> Link::peek_delivered() const {
  if (pop_seq_ == rcv_nxt_) return {};
  return rx_[pop_seq_ & rx_mask_].payload;
}

void Link::release_delivered() {
  if (pop_seq_ == rcv_nxt_) return;
  RxSlot& slot = rx_[pop_seq_ & rx_mask_];
  ++stats_.payloads_delivered;
  stats_.payload_bytes_delivered += slot.payload.size();
  slot.payload.clear();
  slot.present = false;
  ++pop_seq_;
  window_update_check();
}

void Link::write_header(uint8_t* p, LinkFrameType type, uint16_t flags, size_t payload_length,
                        uint32_t seq) {
  put16(p, kLinkMagic);
  p[2] = kLinkVersion;
  p[3] = static_cast<uint8_t>(type);
  put16(p + 4, flags);
  put16(p + 6, static_cast<uint16_t>(payload_length));
  put32(p + 8, cfg_.link_id);
  put32(p + 12, seq);
  put32(p + 16, rcv_nxt_);
  put32(p + 20, advertised_credits());
  put64(p + 24, build_sack());
  put64(p + 32, epoch_);
  put64(p + 40, peer_epoch_);
}

void Link::after_ack_info_sent() {
  ack_now_ = false;
  ack_deadline_ns_ = UINT64_MAX;
  unacked_in_order_ = 0;
  last_advertised_limit_ = pop_seq_ + cfg_.rx_credits;
  last_tx_ns_ = now_;
}

void Link::encode_control(LinkFrameType type, uint16_t flags, Outgoing* out) {
  write_header(out->header.data(), type, flags, 0, snd_nxt_);
  out->payload = {};
  put16(out->crc.data(), wire::crc16(out->header));
  // The peer reads only ack and credits of a handshake, so an owed ack stays owed.
  if (type == LinkFrameType::kHandshake)
    last_tx_ns_ = now_;
  else
    after_ack_info_sent();
}

void Link::encode_data(const TxSlot& slot, Outgoing* out) {
  write_header(out->header.data(), LinkFrameType::kData, 0, slot.payload.size(), slot.seq);
  out->payload = slot.payload;
  put16(out->crc.data(), wire::crc16(out->payload, wire::crc16(out->header)));
  after_ack_info_sent();
}

void Link::Outgoing::copy_to(std::vector<uint8_t>* out) const {
  out->resize(size());
  uint8_t* p = out->data();
  std::memcpy(p, header.data(), header.size());
  if (!payload.empty()) std::memcpy(p + header.size(), payload.data(), payload.size());
  std::memcpy(p + header.size() + payload.size(), crc.data(), crc.size());
}

void Link::unacknowledged(std::vector<std::vector<uint8_t>>* out) const {
  out->clear();
  for (uint32_t seq = snd_una_; seq != snd_nxt_; ++seq) out->push_back(tx_[seq & tx_mask_].payload);
}

bool Link::pop_outgoing(std::vector<uint8_t>* out) {
  Outgoing o;
  if (!pop_outgoing(&o)) return false;
  o.copy_to(out);
  return true;
}

bool Link::pop_outgoing(Outgoing* out) {
  if (hs_pending_) {
    hs_pending_ = false;
    hs_deadline_ns_ = now_ + cfg_.handshake_interval_ns;
    uint16_t flags = disabled_                  ? kLinkFlagDisabled
                     : state_ != LinkState::kUp ? kLinkFlagReplyRequested
                                                : 0;
    encode_control(LinkFrameType::kHandshake, flags, out);
    ++stats_.handshake_frames_sent;
    return true;
  }
  if (state_ != LinkState::kUp) return false;
  while (outq_size_ != 0) {
    uint32_t seq = outq_[outq_head_];
    outq_head_ = (outq_head_ + 1) & (outq_.size() - 1);
    --outq_size_;
    TxSlot& slot = tx_[seq & tx_mask_];
    if (!slot.queued || slot.seq != seq) continue;
    slot.queued = false;
    if (seq_diff(seq, snd_una_) < 0 || slot.sacked) continue;
    if (slot.tx_count == 0) {
      stats_.payload_bytes_sent += slot.payload.size();
    } else {
      ++stats_.retransmissions;
    }
    ++slot.tx_count;
    ++stats_.frames_sent;
    encode_data(slot, out);
    return true;
  }
  if (ack_now_ || probe_now_) {
    uint16_t flags = probe_now_ ? kLinkFlagReplyRequested : 0;
    probe_now_ = false;
    encode_control(LinkFrameType::kAck, flags, out);
    ++stats_.acks_sent;
    return true;
  }
  return false;
}

void Link::on_timer(uint64_t now_ns) {
  touch(now_ns);
  if (state_ != LinkState::kDown && peer_epoch_ != 0 && now_ - last_rx_ns_ >= cfg_.dead_after_ns)
    go_down(DownBy::kNoAnswer);
  if (state_ != LinkState::kUp) {
    if (now_ >= hs_deadline_ns_) {
      hs_pending_ = true;
      hs_deadline_ns_ = now_ + cfg_.handshake_interval_ns;
    }
    return;
  }
  uint64_t rto = rto_ns();
  bool expired = false;
  bool back_off = false;
  while (timer_head_ >= 0) {
    uint32_t index = static_cast<uint32_t>(timer_head_);
    TxSlot& slot = tx_[index];
    if (slot.last_tx_ns + rto > now_) break;
    if (peer_has_holes_ && seq_diff(slot.seq, snd_una_) > 64) {
      // Beyond the sack's reach while the peer reports a hole: most likely received, and the
      // sack will tell once the hole is repaired. Restart its timer instead of resending.
      slot.last_tx_ns = now_;
      timer_list_append(index);
      continue;
    }
    // A frame sent again after the last backoff timed out again: back off once more. Frames
    // of the round that already backed off do not double the RTO again.
    if (slot.last_tx_ns >= backoff_round_ns_) back_off = true;
    expired = true;
    ++stats_.timeouts;
    retransmit(index);
  }
  if (expired && back_off) {
    if (backoff_ < kMaxBackoff) ++backoff_;
    backoff_round_ns_ = now_;
  }
  if (ack_deadline_ns_ <= now_) ack_now_ = true;
  if (now_ - last_tx_ns_ >= keepalive_ns_) ack_now_ = true;
  if (credit_starved_ && probe_deadline_ns_ <= now_) {
    // While frames are in flight their acks bring credits; probe only an idle, starved sender.
    if (timer_head_ < 0) {
      probe_now_ = true;
      probe_interval_ns_ = std::min(probe_interval_ns_ * 2, cfg_.rto_max_ns);
    }
    probe_deadline_ns_ = now_ + probe_interval_ns_;
  }
}

uint64_t Link::next_deadline_ns() const {
  if (state_ != LinkState::kUp) {
    uint64_t d = hs_deadline_ns_;
    if (state_ == LinkState::kTraining && peer_epoch_ != 0)
      d = std::min(d, last_rx_ns_ + cfg_.dead_after_ns);
    return d;
  }
  uint64_t d = std::min({last_rx_ns_ + cfg_.dead_after_ns, last_tx_ns_ + keepalive_ns_,
                         ack_deadline_ns_, probe_deadline_ns_});
  if (timer_head_ >= 0) d = std::min(d, tx_[timer_head_].last_tx_ns + rto_ns());
  return d;
}

// ---------------------------------------------------------------------------------------------
// Impairment

Result<ImpairmentConfig> parse_impairment(std::string_view spec) {
  ImpairmentConfig c;
  if (spec.empty() || spec == "none") return c;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    std::string_view item = spec.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      return make_error(Code::kInvalidArgument, 4640,
                        fmt::format("impairment '{}': item '{}' is not key=value", spec, item));
    std::string key(item.substr(0, eq));
    std::string value(item.substr(eq + 1));
    if (key == "seed") {
      char* end = nullptr;
      unsigned long long v = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || end != value.c_str() + value.size() || value[0] == '-')
        return make_error(Code::kInvalidArgument, 4641,
                          fmt::format("impairment seed = '{}' is not an unsigned integer", value));
      c.seed = v;
    } else {
      double* target = key == "drop"                        ? &c.drop
                       : key == "dup" || key == "duplicate" ? &c.duplicate
                       : key == "reorder"                   ? &c.reorder
                       : key == "corrupt"                   ? &c.corrupt
                                                            : nullptr;
      if (target == nullptr)
        return make_error(Code::kInvalidArgument, 4642,
                          fmt::format("impairment key '{}' is unknown (drop, dup, reorder, "
                                      "corrupt, seed)",
                                      key));
      char* end = nullptr;
      double v = std::strtod(value.c_str(), &end);
      if (value.empty() || end != value.c_str() + value.size())
        return make_error(Code::kInvalidArgument, 4643,
                          fmt::format("impairment {} = '{}' is not a number", key, value));
      if (!(v >= 0.0 && v < 1.0))
        return make_error(Code::kOutOfRange, 4644,
                          fmt::format("impairment {} = {} is outside [0, 1)", key, value));
      *target = v;
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return c;
}

Impairment::Impairment(const ImpairmentConfig& c) : cfg_(c), state_(c.seed) {}

// splitmix64: small, fast and deterministic for a seed.
uint64_t Impairment::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Impairment::uniform() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

void Impairment::apply(std::vector<uint8_t> datagram, std::vector<std::vector<uint8_t>>* to_send) {
  ++stats_.datagrams;
  if (cfg_.drop > 0 && uniform() < cfg_.drop) {
    ++stats_.dropped;
    return;
  }
  if (cfg_.corrupt > 0 && uniform() < cfg_.corrupt && !datagram.empty()) {
    uint64_t bit = next() % (datagram.size() * 8);
    datagram[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    ++stats_.corrupted;
  }
  if (cfg_.reorder > 0 && !has_held_ && uniform() < cfg_.reorder) {
    held_ = std::move(datagram);
    has_held_ = true;
    ++stats_.reordered;
    return;
  }
  bool dup = cfg_.duplicate > 0 && uniform() < cfg_.duplicate;
  if (dup) {
    ++stats_.duplicated;
    to_send->push_back(datagram);
  }
  to_send->push_back(std::move(datagram));
  flush(to_send);
}

void Impairment::flush(std::vector<std::vector<uint8_t>>* to_send) {
  if (!has_held_) return;
  has_held_ = false;
  to_send->push_back(std::move(held_));
  held_.clear();
}

}  // namespace galaxy::live
