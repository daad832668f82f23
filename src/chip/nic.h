// The network interface chip (SYSTEM.md 1.1, 2.4): 40 virtual ports — VPs 0-7 PIO type with
// on-chip hardware descriptor queues (HDQ), VPs 8-39 DMA type with software descriptor queues
// (SDQ) in host memory — each with an MP receive queue (MPQ) and an event queue (EQ).
// Descriptors of one VP execute in order (a fenced one waits for its predecessors to
// complete); VPs are served round-robin. Management descriptors are accepted only on SDQs.
// Timeless: the engine asks for the next descriptor, charges time, and reports completion.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/fifo.h"
#include "chip/chip.h"
#include "wire/data_packet.h"
#include "wire/mgmt.h"
#include "wire/mp.h"

namespace galaxy::chip {

inline constexpr uint8_t kNumVps = 40;
inline constexpr uint8_t kPioVps = 8;
inline constexpr size_t kHdqDepth = 512;  // on-chip queue depth (TH-1A: 512 x 64 bit)
inline constexpr size_t kDefaultSdqDepth = 4096;
inline constexpr size_t kDefaultMpqDepth = 1024;
inline constexpr size_t kDefaultEqDepth = 1024;
inline constexpr size_t kMpPayloadBytes = wire::kMpPayloadBytes;
inline constexpr uint16_t kMaxNicPorts = 4;

inline bool is_pio_vp(uint8_t vp) {
  return vp < kPioVps;
}

// One 128-byte MP in an MPQ: 8-byte header fields + 120 bytes of data. A management response
// arrives as an MP whose data is the 100-byte management packet (SYSTEM.md 2.4 flow 4).
struct MpqEntry {
  wire::PacketKind kind = wire::PacketKind::kMp;
  bool management = false;
  uint16_t src_node = 0;
  uint8_t src_vp = 0;
  uint8_t length = 0;  // valid bytes of data
  std::array<uint8_t, kMpPayloadBytes> data{};
};

enum class EventKind : uint8_t { kDescriptorDone = 0, kDescriptorError = 1 };
struct EqEntry {
  EventKind kind = EventKind::kDescriptorDone;
  uint64_t sequence = 0;  // the descriptor's submission number on its VP
  uint16_t error_id = 0;  // stable error id when kind is kDescriptorError
};

// What the NIC executes next, handed to the engine.
struct NicWork {
  enum class Kind : uint8_t { kMgmtRequest, kMp, kRejected };
  Kind kind = Kind::kMgmtRequest;
  uint8_t vp = 0;
  uint64_t sequence = 0;
  wire::MgmtPacketBytes mgmt{};  // kMgmtRequest: the packet to send on port 0
  wire::DataHead head;           // kMp
  std::array<uint8_t, kMpPayloadBytes> mp_data{};
  Error error;  // kRejected: why (the descriptor completes with an error event)
};

// kWaiting: the MPQ is full; the MP waits in the NIC's input, in order, and enters the MPQ as
// the host polls it (chip/mpq.h: never dropped, never overwritten).
enum class NicRx : uint8_t { kDelivered, kToNma, kDiscarded, kWaiting };

class Nic : public Chip {
 public:
  // TH-2 NICs have one network port; an InfiniBand HCA loaded from ibnetdiscover may have more.
  explicit Nic(uint16_t num_ports = 1);

  // Host side. Errors name the field: unknown VP, full queue, management on a PIO VP.
  Status post_mgmt(uint8_t vp, std::span<const uint8_t> descriptor);
  Status post_mp(uint8_t vp, uint16_t dest_node, uint8_t dest_vp, std::span<const uint8_t> data,
                 bool fence = false);
  std::optional<MpqEntry> poll_mpq(uint8_t vp);
  std::optional<EqEntry> poll_eq(uint8_t vp);
  size_t mpq_count(uint8_t vp) const { return vps_[vp].mpq.size(); }
  size_t mpq_waiting(uint8_t vp) const { return vps_[vp].waiting.size(); }
  void set_mpq_depth(uint8_t vp, size_t depth) { vps_[vp].mpq_depth = depth; }

  // Engine side: the next descriptor in round-robin order whose VP is not blocked by a fence.
  std::optional<NicWork> next_work();
  // Completion of a descriptor handed out by next_work (in order within its VP).
  void complete(uint8_t vp, bool ok, uint16_t error_id = 0);
  bool has_work() const;

  // A management packet arrived from the network on port 0.
  NicRx receive_mgmt(std::span<const uint8_t> packet);
  // A table-routed MP arrived.
  NicRx receive_mp(const wire::DataHead& head, std::span<const uint8_t> data);

  uint64_t interrupts() const { return interrupts_; }
  // The error buffer: the last dirty packet and why (SYSTEM.md 1.1).
  struct ErrorBuffer {
    bool valid = false;
    uint8_t reason = 0;  // wire error code of the rejected packet
    uint16_t error_id = 0;
    std::array<uint8_t, 8 * reg::kErrBufWords> bytes{};
  };
  const ErrorBuffer& error_buffer() const { return error_buffer_; }

 protected:
  RegAccess read_specific(uint16_t addr) override;
  wire::NmpError check_specific(uint16_t addr, uint64_t value) const override;

 private:
  struct QueuedDescriptor {
    enum class Kind : uint8_t { kMgmt, kMp } kind;
    bool fence = false;
    uint64_t sequence = 0;
    std::vector<uint8_t> bytes;  // management: the 64-byte descriptor; MP: the data
    uint16_t dest_node = 0;
    uint8_t dest_vp = 0;
  };
  struct VpState {
    Fifo<QueuedDescriptor> dq;
    struct InFlight {
      uint64_t sequence;
      bool notify;  // write a completion event (Lint, or always for MPs' errors)
    };
    Fifo<InFlight> in_flight;  // handed to the engine, not yet complete
    uint64_t next_sequence = 0;
    Fifo<MpqEntry> mpq;
    Fifo<MpqEntry> waiting;  // arrived while the MPQ was full (chip/mpq.h)
    size_t mpq_depth = kDefaultMpqDepth;
    Fifo<EqEntry> eq;
    uint64_t desc_done = 0;
    uint64_t mp_received = 0;
    uint64_t mpq_full = 0;  // MPs that found the MPQ full and waited (MPQ_FULL register)
    uint64_t desc_errors = 0;
    uint64_t cp_counter = 0;
  };
  Status check_vp(uint8_t vp) const;
  void discard(std::span<const uint8_t> packet, const Error& why);
  void push_event(VpState& v, EqEntry e);
  NicRx enqueue(VpState& v, const MpqEntry& e);

  std::array<VpState, kNumVps> vps_;
  uint8_t rr_next_ = 0;
  uint64_t interrupts_ = 0;
  ErrorBuffer error_buffer_;
};

}  // namespace galaxy::chip
