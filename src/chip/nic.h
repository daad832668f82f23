// The network interface chip (docs/system.md 1.1, 2.4): 40 virtual ports — VPs 0-7 PIO type with
// on-chip hardware descriptor queues (HDQ), VPs 8-39 DMA type with software descriptor queues
// (SDQ) in host memory — each with an MP receive queue (MPQ) and an event queue (EQ).
// Descriptors of one VP execute in order (a fenced one waits for its predecessors to
// complete); VPs are served round-robin. Management descriptors are accepted only on SDQs.
// Timeless: the engine asks for the next descriptor, charges time, and reports completion.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/fifo.h"
#include "chip/att.h"
#include "chip/chip.h"
#include "chip/coll.h"
#include "chip/data_vc.h"
#include "chip/host_memory.h"
#include "chip/nic_arrival.h"
#include "chip/rdma_transfer.h"
#include "chip/refusal.h"
#include "wire/data_packet.h"
#include "wire/mgmt.h"
#include "wire/mp.h"
#include "wire/rdma_descriptor.h"

namespace galaxy::chip {

inline constexpr uint8_t kNumVps = 40;
inline constexpr uint8_t kPioVps = 8;
inline constexpr size_t kHdqDepth = 512;  // on-chip queue depth (TH-1A: 512 x 64 bit)
inline constexpr size_t kDefaultSdqDepth = 4096;
inline constexpr size_t kDefaultMpqDepth = 1024;
inline constexpr size_t kDefaultEqDepth = 1024;
inline constexpr size_t kMpPayloadBytes = wire::kMpPayloadBytes;
inline constexpr uint16_t kMaxNicPorts = 4;

// Whether chip models can stand for node `node` (`name`) of a topology: a NIC has 1 to
// kMaxNicPorts ports, an NRC 2 to kMaxSwitchPorts. A topology may hold wider InfiniBand nodes
// (fabric::kMaxTopologyPorts) to show and check them; every engine refuses them through this.
Status check_model_ports(bool nic, uint32_t ports, uint32_t node, const std::string& name);

inline bool is_pio_vp(uint8_t vp) {
  return vp < kPioVps;
}

// How many descriptors VP `vp`'s queue holds: an on-chip HDQ or an SDQ in host memory.
inline size_t dq_depth(uint8_t vp) {
  return is_pio_vp(vp) ? kHdqDepth : kDefaultSdqDepth;
}

// CPs whose data wait for the descriptor they replace (docs/system.md 1.1), per VP; one more is
// discarded (counted, and its collective times out at its hosts).
inline constexpr size_t kCpLatchDepth = 64;

// Transfers a NIC has started and not yet seen completed (tags in flight).
inline constexpr uint16_t kMaxTransfers = 4096;
// Host memory is read in 1 KiB requests into an 8 KiB receive FIFO (docs/system.md 1.1).
inline constexpr uint64_t kHostReadChunk = 1024;
inline constexpr uint64_t kHostReadFifo = 8192;

// The three DMA engines (docs/system.md 1.1).
enum class DmaEngine : uint8_t {
  kLocalRead = 0,   // reads host memory for puts (and issues gets' requests)
  kRemoteRead = 1,  // reads host memory answering remote gets
  kWrite = 2,       // every write into host memory, interrupts, and the acks that follow
};
inline constexpr uint8_t kDmaEngines = 3;

// A packet the NIC puts on its network port (wire/data_packet.h), checked to encode: each engine
// encodes it as it carries packets (the simulator as flits, the live engine straight into link
// bytes).
struct NicPacket {
  wire::DataPacket packet;
  wire::DataHead head;  // as it goes (routing reads dest_node); length_flits set
  // Its flits (what wire::encode_data_packet gives).
  std::vector<wire::Flit> flits() const;
  DmaEngine engine = DmaEngine::kLocalRead;
  uint32_t host_read_bytes = 0;   // read from host memory for it
  bool starts_host_read = false;  // begins a new 1 KiB host read request
};

// One 128-byte MP in an MPQ: 8-byte header fields + 120 bytes of data. A management response
// arrives as an MP whose data is the 100-byte management packet (docs/system.md 2.4 flow 4).
struct MpqEntry {
  wire::PacketKind kind = wire::PacketKind::kMp;
  bool management = false;
  wire::ChipId src_node = 0;
  uint8_t src_vp = 0;
  uint8_t length = 0;  // valid bytes of data
  std::array<uint8_t, kMpPayloadBytes> data{};
};

// kMpRefused: an MP this VP sent was refused on its way or at its target (chip/refusal.h); it
// names no descriptor (sequence 0): its descriptor completed when the MP left.
enum class EventKind : uint8_t { kDescriptorDone = 0, kDescriptorError = 1, kMpRefused = 2 };
enum class DescriptorOp : uint8_t { kMgmt, kMp, kPut, kGet, kImmediate, kCp, kLocal };
struct EqEntry {
  EventKind kind = EventKind::kDescriptorDone;
  uint64_t sequence = 0;  // the descriptor's submission number on its VP
  uint16_t error_id = 0;  // stable error id when kind is kDescriptorError
  DescriptorOp op = DescriptorOp::kMgmt;
  uint64_t bytes = 0;  // RDMA: bytes transferred
};

// Whether a finished descriptor writes a completion into its owner's CQ (EQ): always when it
// failed, on success only when it asked (an RDMA descriptor's local_cq, an MP's notify).
constexpr bool completes_locally(bool asked, bool failed) {
  return failed || asked;
}

// What a failed descriptor's error id means to its owner (the status of its completion): the
// ATT's refusals (chip/att.cc, E2060-E2069) are access errors, an absent target VP is
// unreachable, anything else is an error of the descriptor. Engines add their own ids.
enum class Failure : uint8_t { kDescriptor, kAccess, kUnreachable };
Failure failure_of(uint16_t error_id);

// What the NIC executes next, handed to the engine.
struct NicWork {
  // kRdma: the transfer is started; its packets come from next_packet(), its completion from
  // the NIC itself (an ack or the last read response), never from complete().
  // kMp also carries a CP (op kCp; head.kind kCp). kLocal: a collective's local descriptor
  // (chip/coll.h): its data are written; the engine completes it once the host memory write is
  // done (and the VP's later descriptors wait for that).
  enum class Kind : uint8_t { kMgmtRequest, kMp, kRdma, kRejected, kLocal };
  Kind kind = Kind::kMgmtRequest;
  uint8_t vp = 0;
  uint64_t sequence = 0;
  wire::MgmtPacketBytes mgmt{};  // kMgmtRequest: the packet to send on port 0
  wire::DataHead head;           // kMp
  std::array<uint8_t, kMpPayloadBytes> mp_data{};
  DescriptorOp op = DescriptorOp::kMgmt;
  uint64_t bytes = 0;               // kRdma: the transfer's length
  std::optional<NicPacket> packet;  // kMp: the MP as it goes on the wire
  Error error;                      // kRejected: why (the descriptor completes with an error event)
};

// kWaiting: the MPQ is full; the MP waits in the NIC's input, in order, and enters the MPQ as
// the host polls it (chip/mpq.h: never dropped, never overwritten).
// kRefused: an RDMA packet the ATT refused; nothing was written, the source learns it by an ack.
enum class NicRx : uint8_t { kDelivered, kToNma, kDiscarded, kWaiting, kRefused };

class Nic : public Chip {
 public:
  // TH-2 NICs have one network port; an InfiniBand HCA loaded from ibnetdiscover may have more.
  explicit Nic(uint16_t num_ports = 1);
  // The port the NIC's packets (data and management) leave on (chip/network_port.h); port 0
  // while none qualifies (a packet sent then meets a link that is down, as on a one-port NIC).
  uint8_t network_port() const;
  Nic(const Nic&) = delete;  // att_table_ may point at att_
  Nic& operator=(const Nic&) = delete;

  // Host side. Errors name the field: unknown VP, full queue, management on a PIO VP.
  Status post_mgmt(uint8_t vp, std::span<const uint8_t> descriptor);
  // fence: start after every earlier descriptor of the VP completed; notify: write a completion
  // event when the MP is out (errors always write one).
  Status post_mp(uint8_t vp, wire::ChipId dest_node, uint8_t dest_vp, std::span<const uint8_t> data,
                 bool fence = false, bool notify = false);
  // An RDMA descriptor in wire form (wire/rdma_descriptor.h), fetched and checked when it
  // starts: a malformed one completes with an error event.
  // A descriptor with a cp_count waits for the VP's CP counter (chip/coll.h).
  Status post_rdma(uint8_t vp, std::span<const uint8_t> descriptor);
  // A descriptor of the collective engine (chip/coll.h), checked here.
  Status post_coll(uint8_t vp, const CollDescriptor& d);
  uint64_t cp_counter(uint8_t vp) const { return vps_[vp].cp_counter; }
  // Whether the descriptor at the head of `vp`'s queue waits for CPs.
  bool waits_for_cp(uint8_t vp) const { return vps_[vp].waits_cp; }
  // Drops what a VP's collectives left behind (counter, latched data, accumulator, queued
  // descriptors) when its owner closes it or gives a collective up; later CPs count anew.
  void reset_coll(uint8_t vp);
  std::optional<MpqEntry> poll_mpq(uint8_t vp);
  std::optional<EqEntry> poll_eq(uint8_t vp);
  size_t mpq_count(uint8_t vp) const { return vps_[vp].mpq.size(); }
  size_t eq_count(uint8_t vp) const { return vps_[vp].eq.size(); }
  size_t eq_waiting(uint8_t vp) const { return vps_[vp].eq_waiting.size(); }
  // Bit v: VP v's EQ holds an entry (an engine finds the VPs to poll without asking each).
  uint64_t eq_busy() const { return eq_busy_; }
  // The submission number the next descriptor posted on `vp` gets (EqEntry::sequence).
  uint64_t next_sequence(uint8_t vp) const { return vps_[vp].next_sequence; }
  // Descriptors of `vp` posted and not yet complete (queued, executing, or awaiting an ack).
  size_t outstanding(uint8_t vp) const {
    const VpState& v = vps_[vp];
    return v.dq.size() + v.in_flight.size() + v.rdma_in_flight;
  }
  size_t mpq_waiting(uint8_t vp) const { return vps_[vp].waiting.size(); }
  void set_mpq_depth(uint8_t vp, size_t depth) { vps_[vp].mpq_depth = depth; }

  // Engine side: the next descriptor in round-robin order whose VP is not blocked by a fence.
  std::optional<NicWork> next_work();
  // Completion of a descriptor handed out by next_work (in order within its VP).
  void complete(uint8_t vp, bool ok, uint16_t error_id = 0);
  bool has_work() const;
  // Whether `vp`'s descriptor queue (HDQ or SDQ) takes one more descriptor; false for no VP.
  bool has_room(uint8_t vp) const;

  // A management packet arrived from the network on port 0.
  NicRx receive_mgmt(std::span<const uint8_t> packet);
  // A table-routed MP arrived.
  NicRx receive_mp(const wire::DataHead& head, std::span<const uint8_t> data);
  // A data packet as it crossed a link, encoded flits of wire::kFlitBytes each: decoded by
  // wire/ (a flit that does not decode makes the packet dirty), then receive_packet.
  NicRx receive_packet_bytes(std::span<const uint8_t> bytes);
  // Its decoding and checks alone (chip/nic_arrival.h), into *out; false if the packet was
  // dirty: discarded into the error buffer and counted.
  bool check_packet_bytes(std::span<const uint8_t> bytes, wire::DataPacket* out);
  // The receive-side checks alone (decode, destination, VP); a dirty packet is discarded into
  // the error buffer and counted. For an engine that writes MPs into an MPQ it keeps itself.
  std::optional<wire::DataPacket> check_packet(std::span<const wire::Flit> flits);
  // A data packet arrived from the network, as flits: checked (docs/system.md 1.1: a dirty packet
  // is discarded into the error buffer before anything reaches host memory), then delivered.
  NicRx receive_packet(std::span<const wire::Flit> flits);
  // What receive_packet does with a packet check_packet passed.
  NicRx receive_checked(const wire::DataPacket& p, const ArrivedPacket& arrived);
  // The next packet DMA engine `e` puts on the network, if it has one.
  std::optional<NicPacket> next_packet(DmaEngine e);
  // The same into `out` (a busy engine's caller reuses one packet): false if there is none.
  bool next_packet(DmaEngine e, NicPacket& out);
  bool has_packets() const { return !tx_active_.empty() || !reads_.empty() || !acks_.empty(); }

  // Host memory, as the engine supplies it, and the ATT in front of it: the NIC's own table
  // unless the engine supplies one (the live engine's registrations live in its segment).
  void attach_host_memory(HostMemory* m) { host_ = m; }
  void attach_att(const AttTable* t) { att_table_ = t ? t : &att_; }
  Att& att() { return att_; }
  const Att& att() const { return att_; }

  // Ends a transfer the NIC started on `vp` (submission `sequence`) with `error_id`, as if
  // its target had refused it: the engine's answer to a target that never answers (a host or
  // daemon gone). Its late packets then match no transfer and are discarded. Returns whether
  // such a transfer was in flight.
  bool abort_transfer(uint8_t vp, uint64_t sequence, uint16_t error_id);
  // Whether the transfer the NIC started on `vp` (submission `sequence`) waits for its target
  // (every packet of it out), and if so the count of answers (acks, read responses) this NIC
  // has had from that target. An engine times a transfer out only while this stays the same:
  // one queued behind others on a slow host, or whose target answers the transfers before it,
  // is moving (as a reliable connection's timer restarts on every answer).
  std::optional<uint64_t> awaited_answers(uint8_t vp, uint64_t sequence) const;
  // The same for the transfer a packet of this NIC's names by its tag (a packet the engine could
  // not route from the source: nothing of the transfer can arrive).
  bool abort_transfer_tag(uint16_t tag, uint16_t error_id);

  uint64_t interrupts() const { return interrupts_; }
  // Payload bytes of RDMA writes, immediates and read responses this NIC wrote into host memory
  // (events and MPs not included).
  uint64_t rdma_bytes_written() const { return rdma_bytes_written_; }
  // The error buffer: the last dirty packet and why (docs/system.md 1.1).
  struct ErrorBuffer {
    bool valid = false;
    uint8_t reason = 0;  // wire error code of the rejected packet
    uint16_t error_id = 0;
    wire::DataDefect defect = wire::DataDefect::kNone;  // data packets: which dirty kind
    std::array<uint8_t, 8 * reg::kErrBufWords> bytes{};
  };
  const ErrorBuffer& error_buffer() const { return error_buffer_; }
  // Dirty data packets discarded, by kind (docs/system.md 1.1).
  uint64_t dirty_packets(wire::DataDefect d) const { return dirty_[static_cast<size_t>(d)]; }

 protected:
  RegAccess read_specific(uint16_t addr) override;
  wire::NmpError check_specific(uint16_t addr, uint64_t value) const override;

 private:
  struct QueuedDescriptor {
    enum class Kind : uint8_t { kMgmt, kMp, kRdma, kColl };
    QueuedDescriptor(Kind k, bool fen, uint64_t seq, std::vector<uint8_t> b, wire::ChipId node = 0,
                     uint8_t vp = 0, bool notify_ = false)
        : kind(k),
          fence(fen),
          sequence(seq),
          bytes(std::move(b)),
          dest_node(node),
          dest_vp(vp),
          notify(notify_) {}
    Kind kind;
    bool fence = false;
    uint64_t sequence = 0;
    std::vector<uint8_t> bytes;  // management: the 64-byte descriptor; MP: the data
    wire::ChipId dest_node = 0;
    uint8_t dest_vp = 0;
    bool notify = false;   // MP: a completion event when it is out
    uint16_t trigger = 0;  // CPs it waits for at the head (RDMA: its cp_count; kColl)
    CollDescriptor coll;   // kColl
  };
  struct CpData {
    uint8_t length = 0;
    std::array<uint8_t, kMpPayloadBytes> data{};
  };
  struct VpState {
    Fifo<QueuedDescriptor> dq;
    struct InFlight {
      uint64_t sequence;
      bool notify;  // write a completion event (Lint, or always for MPs' errors)
      DescriptorOp op;
    };
    Fifo<InFlight> in_flight;     // handed to the engine, not yet complete
    uint32_t rdma_in_flight = 0;  // started transfers, completed by the NIC itself
    uint64_t next_sequence = 0;
    Fifo<MpqEntry> mpq;
    Fifo<MpqEntry> waiting;  // arrived while the MPQ was full (chip/mpq.h)
    size_t mpq_depth = kDefaultMpqDepth;
    Fifo<EqEntry> eq;
    // Completions that found the EQ full: written as the host polls, in order, never dropped
    // (the NIC's completion writes stall behind a full queue, as MPs do behind a full MPQ).
    Fifo<EqEntry> eq_waiting;
    uint64_t desc_done = 0;
    uint64_t mp_received = 0;
    uint64_t mpq_full = 0;  // MPs that found the MPQ full and waited (MPQ_FULL register)
    uint64_t desc_errors = 0;
    uint64_t mps_refused = 0;  // refusals of this VP's MPs (chip/refusal.h; MP_REFUSED register)
    uint64_t cp_counter = 0;
    uint64_t cps_received = 0;
    uint64_t triggered = 0;
    uint64_t cps_discarded = 0;
    bool waits_cp = false;         // the head descriptor waits for CPs (not in dq_busy_)
    uint32_t local_in_flight = 0;  // kLocal descriptors handed out: later ones wait
    Fifo<CpData> cp_latch;         // data of replacing CPs, oldest first
    CpData acc;                    // combined data of CPs since the last trigger
    bool acc_valid = false;
    CpData group_data;  // what the last trigger released: a replacing CP's data
    bool group_data_valid = false;
    CpData group_acc;  // ... and the accumulator
    bool group_acc_valid = false;
    uint8_t index = 0;  // which VP
  };
  // The VPs' state, made when a VP is first used. A VP holds about 700 bytes, so 40 made with
  // every NIC would cost 28 KiB per NIC (half a gigabyte for TH-2's 18,304), where most VPs of a
  // large model are never used. Reading a VP never used gives its state at power-on.
  class VpTable {
   public:
    VpState& operator[](size_t vp) {
      std::unique_ptr<VpState>& v = vps_[vp];
      if (!v) {
        v = std::make_unique<VpState>();
        v->index = static_cast<uint8_t>(vp);
      }
      return *v;
    }
    const VpState& operator[](size_t vp) const { return vps_[vp] ? *vps_[vp] : unused(); }
    static constexpr size_t size() { return kNumVps; }

   private:
    static const VpState& unused() {
      static const VpState v;
      return v;
    }
    std::array<std::unique_ptr<VpState>, kNumVps> vps_;
  };
  // A transfer this NIC started (source side), by tag.
  struct TxTransfer {
    enum class Phase : uint8_t { kFree, kSending, kAwaitAck, kAwaitResponses };
    Phase phase = Phase::kFree;
    uint8_t generation = 0;
    uint8_t vp = 0;
    uint64_t sequence = 0;
    wire::RdmaDescriptor d;
    uint64_t sent = 0;       // bytes packetised
    bool data_done = false;  // every data packet (or the read request) is out
    uint64_t received = 0;   // get: packets of the response written
    uint16_t error_id = 0;   // get: the first failure writing the response
  };
  using ReadJob = RdmaReadJob;
  struct TargetHost;  // the NIC's host side as RdmaTarget uses it
  Status check_vp(uint8_t vp) const;
  // Room in `vp`'s descriptor queue (HDQ or SDQ); the error carries `error_id`.
  Status check_room(uint8_t vp, uint16_t error_id) const;
  void queue(uint8_t vp, QueuedDescriptor q);
  // The head of `vp`'s queue may start: false when it waits for CPs (then it leaves dq_busy_
  // until a CP comes); a trigger that is reached fires here.
  bool head_may_start(uint8_t vp, VpState& v);
  std::optional<NicWork> start_coll(uint8_t vp, VpState& v, QueuedDescriptor& q);
  NicRx rx_cp(const wire::DataPacket& p, const ArrivedPacket& arrived);
  std::optional<NicWork> start_rdma(uint8_t vp, VpState& v, QueuedDescriptor& q, bool& wait);
  std::optional<NicPacket> make_packet(const wire::DataPacket& p, DmaEngine e, uint32_t host_bytes);
  // Completes a packet built in `out.packet` (its VC, source, length); false, discarded, if a
  // field is out of range.
  bool finish_packet(NicPacket& out, DmaEngine e, uint32_t host_bytes);
  bool next_local_packet(NicPacket& out);
  bool next_response_packet(NicPacket& out);
  void finish_tx(uint16_t slot, uint16_t error_id);
  void abort_slot(uint16_t slot, uint16_t error_id);
  void send_ack(wire::ChipId dest, uint8_t dest_vp, uint16_t tag, uint16_t error_id,
                uint64_t bytes);
  NicRx rx_write(const wire::DataPacket& p, const ArrivedPacket& arrived);
  NicRx rx_response(const wire::DataPacket& p, const ArrivedPacket& arrived);
  NicRx rx_read_request(const wire::DataPacket& p, const ArrivedPacket& arrived);
  NicRx rx_ack(const wire::DataPacket& p, const ArrivedPacket& arrived);
  uint16_t write_event_at(uint32_t key, uint64_t addr,
                          const std::array<uint8_t, wire::kNotifyDataBytes>& data);
  uint16_t write_host(uint32_t key, uint64_t vaddr, std::span<const uint8_t> data, uint32_t access);
  uint16_t read_host(uint32_t key, uint64_t vaddr, std::span<uint8_t> out, uint32_t access);
  uint16_t flush_host();
  TxTransfer* tx_by_tag(uint16_t tag);
  void discard(std::span<const uint8_t> packet, const Error& why,
               wire::DataDefect defect = wire::DataDefect::kNone);
  void discard(std::span<const wire::Flit> flits, const Error& why, wire::DataDefect defect);
  void discard(const ArrivedPacket& arrived, const Error& why, wire::DataDefect defect);
  void push_event(VpState& v, EqEntry e);
  NicRx enqueue(VpState& v, const MpqEntry& e);

  VpTable vps_;
  Att att_;
  const AttTable* att_table_ = &att_;
  HostMemory* host_ = nullptr;
  std::vector<TxTransfer> tx_;  // sized at the first RDMA: most NICs of a large model do none
  Fifo<uint16_t> tx_free_;
  Fifo<uint16_t> tx_active_;  // DMA engine 0's work, in start order
  Fifo<ReadJob> reads_;       // DMA engine 1's work
  Fifo<wire::DataPacket> acks_;
  RdmaTarget target_;                                        // transfers this NIC receives
  std::unordered_map<wire::ChipId, uint64_t> answers_from_;  // acks and read responses, by node
  uint8_t rr_next_ = 0;
  static_assert(kNumVps <= 64);
  uint64_t dq_busy_ = 0;
  uint64_t eq_busy_ = 0;  // bit v: VP v's EQ is not empty  // bit v: VP v has a descriptor queued
                          // (next_work skips the others)
  uint64_t interrupts_ = 0;
  uint64_t rdma_bytes_written_ = 0;
  ErrorBuffer error_buffer_;
  std::array<uint64_t, 7> dirty_{};
};

}  // namespace galaxy::chip
