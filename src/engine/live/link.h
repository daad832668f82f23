// The chip link layer carried over UDP between hosts (docs/system.md 1.3; docs/live.md):
// 16-bit CRC, 32-bit sequence numbers, selective-repeat sliding-window retransmission and
// credit-based flow control, so loss on the wire never loses a payload the link accepted.
//
// Link is a single-threaded, transport-independent state machine: the daemon feeds it received
// datagrams (on_datagram), payloads to send (send), the clock (on_timer at next_deadline_ns),
// and after EVERY call drains pop_outgoing (datagrams to put on the wire) and pop_delivered.
// A new Link has next_deadline_ns() == 0: its first on_timer call starts the handshake.
//
// Frame (network byte order), 50 bytes of overhead:
//   0 magic u16 0x474C ("GL")      2 version u8 (1)        3 type u8 (1 data, 2 ack, 3 handshake)
//   4 flags u16 (bit 0 reply-requested: handshake and ack only; bit 1 disabled: handshake
//     only; other bits zero)
//   6 payload_length u16           8 link_id u32           12 seq u32
//   16 ack u32: every frame below it was received       20 credits u32: frames from ack on
//   24 sack u64: bit i set = frame ack+1+i received     32 epoch u64 (sender's incarnation)
//   40 peer_epoch u64 (the receiver's incarnation as the sender knows it, 0 if unknown)
//   48 payload                      48+payload_length crc u16 (CRC-16/CCITT-FALSE of all before)
// Every frame piggybacks ack, sack and credits; an ack frame is a data frame without payload.
//
// Design choices:
// * Handshake: each Link incarnation has a 64-bit epoch (LinkConfig::epoch, else the realtime
//   clock in ns, so a restarted peer has a larger one). A handshake frame carries both epochs;
//   the link is Up once the peer's frames echo our epoch (any valid frame confirms, so a lost
//   final handshake only costs one data or keepalive frame). A link not Up sends a handshake
//   every handshake_interval_ns with reply-requested set. `handshakes` counts transitions to Up.
// * Sequence numbers of a direction are chosen by its receiver: a handshake carries the
//   sender's ack (its next expected seq) and the peer numbers its frames from there. A Link
//   that meets a new peer epoch therefore keeps its receive numbering and its delivered but
//   unpopped payloads, drops only out-of-order frames from the old incarnation, and renumbers
//   its own unacknowledged frames from the new peer's ack and sends them again: across a peer
//   restart delivery is at-least-once (the dead peer may have taken a payload whose ack was
//   lost), never lossy. Frames carrying an old epoch are refused (stats.stale_frames).
// * A different peer epoch is accepted only if it is larger than the known one or the link is
//   Down, so a late handshake of the dead incarnation cannot reset the link again; a peer whose
//   clock stepped back is accepted after dead_after_ns of silence.
// * Credits: the receiver buffers frames in [first unpopped, first unpopped + rx_credits); each
//   frame advertises the room left from `ack`. The sender never sends a new frame beyond the
//   largest limit seen. Popping a quarter of rx_credits since the last advertisement sends a
//   window update; a credit-starved sender with nothing in flight probes (an ack with
//   reply-requested) with exponential backoff, so a lost window update cannot stall the link.
// * Retransmission: per-frame timers kept in one list ordered by last transmission, RTO from
//   SRTT/RTTVAR (RFC 6298, Karn's rule), clamped to [rto_min_ns, rto_max_ns], doubled once per
//   round of timeouts. Fast retransmit of a hole in the sack once 3 frames transmitted after it
//   are received (transmission order, so a lost retransmission is found the same way, and at
//   most once per round trip). While the peer reports a hole, a timed-out frame more than 64
//   beyond the cumulative ack (out of the sack's reach) restarts its timer instead of being
//   resent. No congestion control: the window is the only limit.
// * Down (dead_after_ns of silence) stops data and acks and resumes handshakes; all frames are
//   kept and resent once the link is Up again.
// * Disabled (set_disabled, the port's PORT_CTRL "force link down"): the link goes Down at
//   once, refuses data and acks, and answers every handshake, and sends one every
//   handshake_interval_ns, with the disabled flag. A peer that receives a disabled handshake goes
//   Down too and stays there (it keeps its handshakes going) until a handshake without the flag
//   arrives, so both ends of the cable agree within one frame, and training resumes as soon as
//   the disabling end is enabled again. Frames are kept as for any Down.
// * One credit pool per Link: the daemon runs one Link per VC on every cable (per-VC credits,
//   docs/system.md 1.3), each with a link id of its own (docs/live.md).
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace galaxy::live {

inline constexpr uint16_t kLinkMagic = 0x474C;
inline constexpr uint8_t kLinkVersion = 1;
inline constexpr size_t kLinkHeaderBytes = 48;
inline constexpr size_t kLinkCrcBytes = 2;
inline constexpr size_t kLinkFrameOverhead = kLinkHeaderBytes + kLinkCrcBytes;
// A UDP datagram over IPv4 carries at most 65507 bytes.
inline constexpr size_t kMaxLinkPayload = 65507 - kLinkFrameOverhead;

// The items a frame between two daemons carries, at most: `fabricd --frame-bytes`
// (DaemonOptions::frame_bytes), or by default frame_bytes_for_mtu of the path to the peer.
// A system call and a frame header per 32 KiB (about 250 data packets) instead of per 8 KiB:
// 1 MiB puts between hosts 256 -> 280-300 MB/s over loopback on a 2-core machine
// (bench/RESULTS.md); 64 KiB frames measured the same, and each lost frame costs its whole
// payload again.
inline constexpr uint32_t kMaxDefaultFrameBytes = 32768;
// A frame is one UDP datagram, and by default one IP packet: a datagram larger than the path's
// MTU travels as IP fragments, one lost fragment loses it, and the incomplete ones hold the
// kernel's reassembly memory until it refuses every fragment for a while. A lossy two-host fabric
// over 1,500-byte veth links lost its links so, in test runs with frames of six fragments and of
// 23. Over loopback (64 KiB MTU) and jumbo frames the 32 KiB frame is still one packet.
inline constexpr uint32_t kMaxFragmentsPerFrame = 1;
// The smallest frame still holds the largest item (a link self-test's pattern of 1,000 bytes
// with its heads, items.h), and fits a path of IPv6's minimum MTU (1,280 bytes).
inline constexpr uint32_t kMinFrameBytes = 1200;
// The default frame size over a path of `mtu` bytes (IPv4, UDP): the most that fits in
// kMaxFragmentsPerFrame packets, within [kMinFrameBytes, kMaxDefaultFrameBytes].
uint32_t frame_bytes_for_mtu(uint32_t mtu);
// The MTU of the kernel's route to `peer` (IP_MTU of a socket connected to it); 0 if unknown.
uint32_t path_mtu(const sockaddr_in& peer);
inline constexpr uint32_t kAssumedMtu = 1500;  // Ethernet's, where the route's cannot be read

// Bounds window and rx_credits so that every live sequence number is within 2^31 of another.
inline constexpr uint32_t kMaxLinkWindow = 1u << 20;
inline constexpr uint16_t kLinkFlagReplyRequested = 1;
inline constexpr uint16_t kLinkFlagDisabled = 2;

enum class LinkFrameType : uint8_t { kData = 1, kAck = 2, kHandshake = 3 };
std::string_view link_frame_type_name(LinkFrameType t);

struct LinkFrame {
  LinkFrameType type = LinkFrameType::kData;
  uint16_t flags = 0;
  uint32_t link_id = 0;
  uint32_t seq = 0;
  uint32_t ack = 0;
  uint32_t credits = 0;
  uint64_t sack = 0;
  uint64_t epoch = 0;
  uint64_t peer_epoch = 0;
  std::span<const uint8_t> payload;  // into the decoded bytes
};

// Checks, in order: length >= 50, CRC (so any corruption reads as a CRC error), magic, version,
// type, flags, payload_length against the datagram, no payload outside data frames, epoch != 0,
// peer_epoch != 0 outside handshakes, credits <= kMaxLinkWindow.
Result<LinkFrame> decode_link_frame(std::span<const uint8_t> bytes);
// As above, and refuses a frame whose link_id is not expected_link_id.
Result<LinkFrame> decode_link_frame(std::span<const uint8_t> bytes, uint32_t expected_link_id);
// Replaces *out with the frame (payload_length from f.payload.size(), CRC computed).
void encode_link_frame(const LinkFrame& f, std::vector<uint8_t>* out);

struct LinkConfig {
  uint32_t link_id = 0;           // both ends use the same id; frames with another id are refused
  uint32_t window = 256;          // max unacknowledged frames in flight
  uint32_t max_payload = 8192;    // bytes per frame payload
  uint64_t rto_min_ns = 500'000;  // RTO follows SRTT/RTTVAR, clamped to [rto_min_ns, rto_max_ns]
  uint64_t rto_max_ns = 50'000'000;
  uint32_t rx_credits = 256;       // frames the receiver can buffer, advertised in every frame
  uint64_t ack_delay_ns = 50'000;  // delayed ack; out-of-order and duplicates are acked at once
  uint32_t ack_every = 32;         // ...and an ack at least every this many in-order frames
  uint64_t dead_after_ns = 2'000'000'000;      // no frame from the peer for this long -> kDown
  uint64_t keepalive_ns = 0;                   // idle time before a keepalive; 0: dead_after_ns / 4
  uint64_t handshake_interval_ns = 5'000'000;  // handshake retry period while not Up
  uint32_t initial_seq = 0;  // first seq this end expects to receive (tests use it for wrap)
  uint64_t epoch = 0;        // this incarnation's epoch; 0: the realtime clock in ns
  // Going down because either end closed it is routine (links between processes, which close
  // with them): logged at debug level instead of info. A peer that stops answering is a warning
  // either way.
  bool closing_is_routine = false;
};

// Errors name the field and value: window or rx_credits outside [1, 2^20], max_payload above
// kMaxLinkPayload, rto_min_ns 0 or above rto_max_ns, dead_after_ns or handshake_interval_ns 0.
Status check_link_config(const LinkConfig& c);

struct LinkStats {
  uint64_t frames_sent = 0;         // data frames put on the wire, retransmissions included
  uint64_t frames_received = 0;     // valid data frames of the current peer, duplicates included
  uint64_t payload_bytes_sent = 0;  // first transmissions only
  uint64_t payload_bytes_delivered = 0;  // handed to the user by pop_delivered
  uint64_t payloads_delivered = 0;
  uint64_t retransmissions = 0;   // data frames put on the wire again
  uint64_t fast_retransmits = 0;  // retransmissions triggered by the sack
  uint64_t timeouts = 0;          // retransmissions triggered by the RTO
  uint64_t crc_errors = 0;
  uint64_t duplicates = 0;       // data frames already received
  uint64_t out_of_order = 0;     // data frames buffered behind a hole
  uint64_t malformed = 0;        // decode errors other than CRC
  uint64_t foreign_link = 0;     // frames for another link_id
  uint64_t stale_frames = 0;     // frames of another incarnation of either end
  uint64_t bad_acks = 0;         // acks of frames never sent
  uint64_t credit_overruns = 0;  // data frames beyond the advertised credits, dropped
  uint64_t acks_sent = 0;        // ack frames (acks, window updates, keepalives, probes)
  uint64_t acks_received = 0;
  uint64_t handshake_frames_sent = 0;
  uint64_t handshake_frames_received = 0;
  uint64_t handshakes = 0;     // transitions to Up
  uint64_t link_downs = 0;     // transitions to Down
  uint64_t peer_restarts = 0;  // new peer epochs after the first

  // Retransmissions per million data frames sent.
  uint64_t retrans_rate_ppm() const {
    return frames_sent == 0 ? 0 : retransmissions * 1'000'000 / frames_sent;
  }
  // Adds another Link's counts (a cable's links, one per VC, as one port's counters).
  LinkStats& operator+=(const LinkStats& o);
};

enum class LinkState : uint8_t { kDown, kTraining, kUp };
std::string_view link_state_name(LinkState s);

class Link {
 public:
  // An invalid config (check_link_config) is clamped into range.
  explicit Link(const LinkConfig& c);

  // Accepts a copy of payload when the window and the peer's credits allow; otherwise
  // kResourceExhausted (retry after on_datagram/on_timer made room; can_send() tells without
  // formatting an error message, so the hot path should ask it first). Payload above
  // max_payload: kInvalidArgument. Accepted payloads wait while the link is not Up.
  Status send(std::span<const uint8_t> payload, uint64_t now_ns);
  // The same taking the payload's buffer instead of a copy of it (a sender's whole frame); on
  // success *payload holds a buffer the link no longer needs, on error it is untouched.
  Status send(std::vector<uint8_t>* payload, uint64_t now_ns);
  bool can_send() const;

  // One received datagram, possibly corrupt, truncated, duplicated, reordered or for another
  // link: bad ones are counted in stats() and dropped.
  void on_datagram(std::span<const uint8_t> bytes, uint64_t now_ns);

  // In-order, exactly-once payloads of the peer. pop_delivered swaps the payload into *out (no
  // copy; the link keeps out's old buffer for reuse, so reusing *out allocates nothing).
  bool pop_delivered(std::vector<uint8_t>* out);
  // Zero-copy variant: the next payload (empty span if none; check has_delivered()), valid
  // until the next call on this Link; release_delivered() consumes it.
  bool has_delivered() const { return pop_seq_ != rcv_nxt_; }
  std::span<const uint8_t> peek_delivered() const;
  void release_delivered();

  // Copies of the payloads accepted and not yet acknowledged, oldest first (a user that gives
  // the link up hands them to another path).
  void unacknowledged(std::vector<std::vector<uint8_t>>* out) const;

  // The next datagram to put on the wire, in three parts the caller sends as one (sendmsg): the
  // payload is not copied, and stays valid until the next call on this Link.
  struct Outgoing {
    std::array<uint8_t, kLinkHeaderBytes> header;
    std::span<const uint8_t> payload;
    std::array<uint8_t, kLinkCrcBytes> crc;
    size_t size() const { return header.size() + payload.size() + crc.size(); }
    void copy_to(std::vector<uint8_t>* out) const;  // the datagram in one buffer
  };
  bool pop_outgoing(Outgoing* out);
  // The same in one buffer (replaces *out; reuses its capacity).
  bool pop_outgoing(std::vector<uint8_t>* out);

  void on_timer(uint64_t now_ns);  // retransmissions, delayed acks, keepalives, handshakes, death
  uint64_t next_deadline_ns() const;  // UINT64_MAX if nothing is pending

  LinkState state() const { return state_; }
  // This end holds the link down (and tells the peer) while disabled.
  void set_disabled(bool disabled, uint64_t now_ns);
  bool disabled() const { return disabled_; }
  bool peer_disabled() const { return peer_disabled_; }  // the peer's last handshake said so
  const LinkStats& stats() const { return stats_; }
  const LinkConfig& config() const { return cfg_; }
  size_t in_flight() const { return snd_nxt_ - snd_una_; }  // accepted, not yet acknowledged
  size_t delivered_pending() const { return rcv_nxt_ - pop_seq_; }
  uint64_t epoch() const { return epoch_; }
  uint64_t peer_epoch() const { return peer_epoch_; }
  uint32_t next_send_seq() const { return snd_nxt_; }
  uint32_t next_receive_seq() const { return rcv_nxt_; }
  uint64_t srtt_ns() const { return srtt_ns_; }  // 0 before the first sample
  uint64_t rto_ns() const;                       // current RTO, backoff included

 private:
  struct TxSlot {
    std::vector<uint8_t> payload;
    uint64_t last_tx_ns = 0;
    uint64_t tx_order = 0;  // transmission number of the last (re)transmission
    uint32_t seq = 0;
    uint32_t tx_count = 0;
    int32_t prev = -1;  // retransmission-timer list, ordered by last_tx_ns
    int32_t next = -1;
    bool in_timer_list = false;
    bool sacked = false;
    bool queued = false;         // in outq_
    bool retransmitted = false;  // Karn: no RTT sample from it
  };
  struct RxSlot {
    std::vector<uint8_t> payload;
    bool present = false;
  };

  void touch(uint64_t now_ns) {
    if (now_ns > now_) now_ = now_ns;
  }
  void handle_handshake(const LinkFrame& f);
  void process_ack(uint32_t ack, uint64_t sack, uint32_t credits);
  void process_data(const LinkFrame& f);
  void become_up();
  enum class DownBy : uint8_t { kNoAnswer, kPeer, kThisEnd };
  void go_down(DownBy by);
  void rebase_sender(uint32_t base, uint32_t credits);
  void drop_out_of_order();
  void flush_new();
  // send's checks (size, window, credits), then its queueing of the payload put in the slot.
  Status admit(size_t bytes, uint64_t now_ns);
  void queue_admitted();
  void retransmit(uint32_t index);
  void rtt_sample(uint64_t sample_ns);
  uint64_t build_sack() const;
  uint32_t advertised_credits() const { return pop_seq_ + cfg_.rx_credits - rcv_nxt_; }
  void encode_control(LinkFrameType type, uint16_t flags, Outgoing* out);
  void arm_probe();
  void encode_data(const TxSlot& slot, Outgoing* out);
  void write_header(uint8_t* p, LinkFrameType type, uint16_t flags, size_t payload_length,
                    uint32_t seq);
  void after_ack_info_sent();
  void timer_list_remove(uint32_t index);
  void timer_list_append(uint32_t index);
  void outq_push(uint32_t seq);
  void window_update_check();

  LinkConfig cfg_;
  LinkStats stats_;
  LinkState state_ = LinkState::kTraining;
  uint64_t epoch_ = 0;
  uint64_t peer_epoch_ = 0;  // 0: no peer yet
  uint64_t now_ = 0;         // latest time seen

  // Sender: [snd_una_, snd_tx_) sent at least once, [snd_tx_, snd_nxt_) accepted, never sent.
  std::vector<TxSlot> tx_;
  uint32_t tx_mask_ = 0;
  uint32_t snd_una_ = 0;
  uint32_t snd_tx_ = 0;
  uint32_t snd_nxt_ = 0;
  uint32_t credit_limit_ = 0;  // first seq the peer has no room for
  int32_t timer_head_ = -1;
  int32_t timer_tail_ = -1;
  uint64_t tx_order_ = 0;         // transmissions so far
  uint64_t delivered_order_ = 0;  // latest transmission known received
  bool peer_has_holes_ = false;   // the newest ack carried a sack
  std::vector<uint32_t> outq_;    // ring of seqs to (re)transmit
  size_t outq_head_ = 0;
  size_t outq_size_ = 0;

  // RTO (RFC 6298)
  uint64_t srtt_ns_ = 0;
  uint64_t rttvar_ns_ = 0;
  uint64_t rto_base_ns_ = 0;
  uint32_t backoff_ = 0;
  uint64_t backoff_round_ns_ = 0;  // frames last sent before this do not back off again

  // Receiver: [pop_seq_, rcv_nxt_) delivered and not popped; out-of-order frames above.
  std::vector<RxSlot> rx_;
  uint32_t rx_mask_ = 0;
  uint32_t pop_seq_ = 0;
  uint32_t rcv_nxt_ = 0;
  uint32_t ooo_count_ = 0;
  uint32_t unacked_in_order_ = 0;
  uint32_t last_advertised_limit_ = 0;

  bool ack_now_ = false;
  bool probe_now_ = false;
  bool hs_pending_ = false;
  bool credit_starved_ = false;  // a send was refused for lack of credits
  bool disabled_ = false;
  bool peer_disabled_ = false;
  uint64_t ack_deadline_ns_ = UINT64_MAX;
  uint64_t probe_deadline_ns_ = UINT64_MAX;
  uint64_t probe_interval_ns_ = 0;
  uint64_t hs_deadline_ns_ = 0;
  uint64_t last_rx_ns_ = 0;
  uint64_t last_tx_ns_ = 0;
  uint64_t keepalive_ns_ = 0;
};

// Impairment of outgoing datagrams, for tests and the daemon's --impair option; deterministic
// for a seed.
struct ImpairmentConfig {
  double drop = 0;
  double duplicate = 0;
  double reorder = 0;
  double corrupt = 0;
  uint64_t seed = 1;
  // The same impairment seeded for one link of one end (`end` tells the ends apart), so that no
  // two links drop the same frames.
  ImpairmentConfig for_link(uint32_t link_id, uint64_t end) const {
    ImpairmentConfig c = *this;
    c.seed = seed * 1000003 + uint64_t{link_id} * 2 + end;
    return c;
  }
};

// "drop=0.05,dup=0.01,reorder=0.02,corrupt=0.01,seed=7" (any subset; "" or "none": no
// impairment). Probabilities in [0, 1); errors name the bad key or value.
Result<ImpairmentConfig> parse_impairment(std::string_view spec);

class Impairment {
 public:
  struct Stats {
    uint64_t datagrams = 0;  // given to apply
    uint64_t dropped = 0;
    uint64_t duplicated = 0;
    uint64_t reordered = 0;  // held back behind the next datagram
    uint64_t corrupted = 0;  // one random bit flipped
  };

  explicit Impairment(const ImpairmentConfig& c);
  // Appends to *to_send the datagrams to transmit now: none (dropped or held back), the
  // datagram, its duplicate, and a datagram held back earlier, which thus goes out after it.
  void apply(std::vector<uint8_t> datagram, std::vector<std::vector<uint8_t>>* to_send);
  // Appends the held-back datagram, if any.
  void flush(std::vector<std::vector<uint8_t>>* to_send);
  const Stats& stats() const { return stats_; }
  const ImpairmentConfig& config() const { return cfg_; }

 private:
  double uniform();
  uint64_t next();

  ImpairmentConfig cfg_;
  Stats stats_;
  uint64_t state_;
  std::vector<uint8_t> held_;
  bool has_held_ = false;
};

}  // namespace galaxy::live
