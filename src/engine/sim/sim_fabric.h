// The simulated engine: the chip models of chip/ instantiated for every node of a topology,
// driven in simulated time (docs/simulation.md). Links serialise flits at
// lanes x lane rate, add link latency and the receiving chip's input pipeline. Every packet
// holds room in the input buffer it entered (chip::Damq) until it leaves that chip, and starts
// on a link only while the sender's credits say it fits whole in the peer's buffer (virtual
// cut-through: a data packet moves on through an NRC as soon as its head has arrived); each
// output serves management (VC3) first, then the data VCs in turn (chip::VcState::arbitrate).
// Under a flow-level background load management packets also wait non-preemptively for the
// residual of a modelled data packet already on the wire.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/fifo.h"
#include "chip/monitor_board.h"
#include "chip/nic.h"
#include "chip/nrc.h"
#include "engine/sim/calibration.h"
#include "engine/sim/host_memory.h"
#include "engine/sim/simulator.h"
#include "fabric/topology.h"

namespace galaxy::sim {

struct SimOptions {
  uint64_t seed = 1;
  // Program every chip's EEPROM with its id (node id) before power-on, as the factory would.
  bool program_chip_ids = true;
  // Chip v's id is first_chip_id + v: a fabric numbered from elsewhere, as a site's ids may be
  // (management finds the ids it is given). The host-side entry points below (post_mp,
  // post_rdma, the glex sim device) name NICs by node, which is their id only from 0.
  uint32_t first_chip_id = 0;
};

struct SimStats {
  uint64_t mgmt_packets_sent = 0;  // packets put on links (every hop counts)
  uint64_t data_packets_sent = 0;
  uint64_t data_packets_received = 0;  // data packets a NIC took in (not discarded)
  uint64_t packets_dropped = 0;        // no peer, link down, misrouted, dirty
  // Data packets a chip could not pass on (chip/refusal.h): no usable output at an NRC, or the
  // sending NIC's port down; an MP's sender was sent a refusal.
  uint64_t data_discarded = 0;
  uint64_t mp_refusals = 0;
  uint64_t mgmt_waits_behind_data = 0;
  Time mgmt_wait_time = 0;  // total residual waiting of management packets behind data
  uint64_t mpq_deliveries = 0;
  uint64_t mpq_waits = 0;        // MPs that found the MPQ full and waited in the NIC's input
  uint64_t retransmissions = 0;  // link-level resends after corrupted flits
  uint64_t bists_completed = 0;
  // Credits (chip/damq.h): packets that waited at an output for the peer's buffer, and
  // violations (a packet arriving at a buffer without room, a credit returned twice), which a
  // correct sender never causes; tests assert there are none.
  uint64_t credit_stalls = 0;
  uint64_t credit_violations = 0;
  uint64_t credits_returned = 0;
};

class SimFabric final : private EventHandler {
 public:
  static Result<std::unique_ptr<SimFabric>> create(const fabric::Topology& topology,
                                                   const Timing& timing,
                                                   const SimOptions& options = {});
  ~SimFabric();

  Simulator& sim() { return sim_; }
  const fabric::Topology& topology() const { return topo_; }
  const Timing& timing() const { return timing_; }
  chip::Chip& chip(uint32_t node) { return *chips_[node]; }
  chip::Nic& nic(uint32_t node);
  chip::Nrc& nrc(uint32_t node);

  // Host side of a NIC: post a management descriptor or an MP on a VP; the engine runs the NIC.
  Status post_mgmt(uint32_t nic_node, uint8_t vp, const wire::MgmtDescriptor& d);
  // Table-routed data carry the destination NIC's chip id (route tables are indexed by it).
  Status post_mp(uint32_t nic_node, uint8_t vp, wire::ChipId dest_chip, uint8_t dest_vp,
                 std::span<const uint8_t> data, bool fence = false, bool notify = false);
  // RDMA (chip/nic.h): the descriptor in its wire form goes through the NIC's queue; the NIC's
  // DMA engines read and write the host memory below, registered in its ATT.
  Status post_rdma(uint32_t nic_node, uint8_t vp, const wire::RdmaDescriptor& d);
  // A descriptor of the NIC's collective engine (chip/coll.h).
  Status post_coll(uint32_t nic_node, uint8_t vp, const chip::CollDescriptor& d);
  Result<uint32_t> register_memory(uint32_t nic_node, uint64_t vaddr, uint64_t length,
                                   uint32_t access);
  // The host's own accesses to its registered memory (no time passes).
  Status write_memory(uint32_t nic_node, uint32_t key, uint64_t vaddr,
                      std::span<const uint8_t> data);
  Status read_memory(uint32_t nic_node, uint32_t key, uint64_t vaddr, std::span<uint8_t> out);
  // A data packet arrives at `at` as these flits, as from the link (faults, tests).
  Status inject_data(fabric::PortRef at, std::span<const wire::Flit> flits);
  // Called when an MP (a management response or fault report included) is visible in an MPQ.
  using MpqListener = std::function<void(uint32_t nic_node, uint8_t vp)>;
  void set_mpq_listener(MpqListener l) { mpq_listener_ = std::move(l); }
  // Called when a collective's local descriptor (chip/coll.h) completed on (node, vp): its
  // data and completion event are in host memory.
  void set_local_listener(MpqListener l) { local_listener_ = std::move(l); }

  // Cuts (false) or mends (true) the cable of a link. The link is up while its cable carries
  // signal and neither port holds it down (PORT_CTRL bit 1, written by management); both ends
  // change together and the chips raise their fault reports.
  Status set_link(fabric::PortRef end, bool up);

  // Link errors: each flit sent on `out` is corrupted with this probability; the receiver
  // counts a CRC error, the sender retransmits (sliding window), the packet is never lost.
  void set_flit_error_rate(fabric::PortRef out, double rate) {
    outputs_[output_index(out)].flit_error_rate = rate;
  }

  // The out-of-band path (chip/monitor_board.h): the monitor board of the chassis holding
  // r.chip (fabric/chassis.h) executes the request. The request reaches the board after half
  // the board's round trip (Timing::oob_board_overhead), its I2C bus takes the time the board
  // reports, and the answer comes back after the other half; the fabric runs meanwhile. Errors
  // of the board are answers (error_id); E2206 a chip the fabric does not have.
  // The request and the answer cross the management network as the board protocol's frames
  // (wire/oob.h), as on a live fabric: a frame the board cannot decode is refused with the
  // decoder's id.
  Result<std::array<uint8_t, wire::kOobResponseBytes>> oob(std::span<const uint8_t> request);

  // Flow-level background load (engine/sim/load.h): utilisation of every directed output.
  void set_utilisation(std::vector<float> per_output);
  float utilisation(fabric::PortRef out) const { return outputs_[output_index(out)].util; }
  uint32_t num_outputs() const { return static_cast<uint32_t>(outputs_.size()); }
  uint32_t output_index(fabric::PortRef p) const { return port_base_[p.node] + p.port; }

  // Shortest-path source routes from a NIC to any chip (an oracle for tests and tools; the
  // management server learns its own routes by discovery). first: forward, second: backward.
  Result<std::pair<wire::SourceRoute, wire::SourceRoute>> shortest_routes(uint32_t from_nic,
                                                                          uint32_t to_node) const;

  const SimStats& stats() const { return stats_; }
  size_t memory_bytes_estimate() const;

 private:
  SimFabric(const fabric::Topology& topology, const Timing& timing, const SimOptions& options);
  Status power_on(const SimOptions& options);

  // The head flit, which every hop decodes, shares the first cache line with the fields
  // every hop reads.
  struct Packet {
    bool mgmt = true;
    uint8_t vp = 0;
    uint8_t nflits = 0;     // data: flits in use
    uint8_t in_port = 0;    // the port it last arrived on (an NRC answers a discard through it)
    uint8_t vc = 0;         // its virtual channel on the link it crosses (management: VC3)
    uint8_t held_vc = 0;    // the VC whose room it holds in held_node's buffer (an NRC may
                            // send it on in another class, chip/data_vc.h)
    uint16_t epoch = 0;     // the link's training epoch when it was sent (stale: lost with it)
    bool injected = false;  // put on a link by inject_data: no sender took credits for it
    uint32_t held_node = fabric::kNoNode;  // holds room in this chip's buffer of in_port
    std::array<wire::Flit, wire::kMaxDataPacketFlits> flits{};  // data, as on the link
    wire::MgmtPacketBytes bytes{};
  };
  // Packets live in fixed chunks, so that the pool grows without moving what it holds.
  static constexpr uint32_t kPacketChunk = 4096;
  static constexpr uint32_t kPacketChunkMask = kPacketChunk - 1;
  Packet& packet(uint32_t slot) {
    return packet_chunks_[slot / kPacketChunk][slot & kPacketChunkMask];
  }
  unsigned flits_of(const Packet& p) const { return p.mgmt ? wire::kMgmtPacketFlits : p.nflits; }
  // The flow-level load's traffic in a chip's port counters (TX/RX_FLITS, TX/RX_PACKETS):
  // utilisation x link flit rate x time since the chip was last accounted, added just before
  // its NMA reads registers, so a status scan sees the load it is meant to model.
  void account_background(uint32_t node);

  // A packet waiting for an output, with what sending it needs to know of it.
  struct Waiting {
    uint32_t slot = 0;
    uint8_t flits = 0;
    uint8_t vc = 0;
  };
  struct Output {
    Time busy_until = 0;
    uint32_t peer_node = fabric::kNoNode;  // the other end of the link (the topology's)
    uint8_t peer_port = 0;
    bool free_event_pending = false;
    uint8_t last_vc = 0;           // the data VC served last (the arbitration's turn)
    uint16_t epoch = 0;            // raised at both ends whenever the link goes down or up
    uint32_t queued_data = 0;      // data packets waiting here
    bool engines_waiting = false;  // a NIC's DMA engines stopped for a full transmit FIFO
    bool stalled = false;          // packets wait here and none has the peer's room
    float util = 0;
    double flit_error_rate = 0;
    bool bist_scheduled = false;
    bool cable_cut = false;  // set_link(false): no signal whatever the ports want
    std::array<Fifo<Waiting>, chip::kNumVcs> queue;  // per VC, in arrival order
    bool waiting() const { return queued_data > 0 || !queue[chip::kMgmtVc].empty(); }
  };
  enum EventKind : uint8_t {
    kArrive,
    kNmaDone,
    kNicKick,
    kNicSent,
    kMpqDeliver,
    kLocalDone,  // a collective's local descriptor has written host memory (port = VP)
    kOutputFree,
    kBistDone,
    kEngineKick,  // a DMA engine may have work (port = engine)
    kEngineDone,  // a DMA engine has read its packet; it goes out (port = engine)
    kCredit,      // room in the peer's buffer comes back to output (node, port)
  };
  // A NIC's DMA engines stop taking packets while its 8 KiB FIFO of host reads (chip/nic.h)
  // holds as many full data packets waiting for its port, and go on as the port sends them.
  static constexpr uint32_t kNicTxFifoPackets = chip::kHostReadFifo / wire::kDataPacketBytes;

  void handle(Time now, uint64_t a, uint64_t b) override;
  void schedule(Time at, EventKind kind, uint64_t a, uint64_t node, uint64_t port = 0) {
    sim_.schedule_at(at, this, a, (uint64_t{kind} << 56) | (node << 8) | port);
  }
  uint32_t alloc_packet();
  // Frees a slot; a packet still in a chip's input buffer leaves it now (release_input).
  void free_packet(uint32_t slot) {
    Packet& p = packet(slot);
    if (p.held_node != fabric::kNoNode) release_input(slot, sim_.now());
    p.injected = false;
    free_packets_.push_back(slot);
  }
  // The packet leaves the input buffer it holds room in; the credit reaches the sender one link
  // latency after `at`.
  void release_input(uint32_t slot, Time at);
  void transmit(uint32_t node, uint8_t port, uint32_t slot);
  // Starts the next packet the output's arbitration grants, if the link is free.
  void try_start(uint32_t node, uint8_t port);
  void start_transmission(uint32_t node, uint8_t port, Waiting w);
  void on_credit(uint32_t node, uint8_t port, uint64_t credit);
  void on_arrive(uint32_t slot, uint32_t node, uint8_t in_port);
  void run_nma(uint32_t slot, uint32_t node);
  void drain_nma(uint32_t node);
  void schedule_bists(uint32_t node);
  void apply_link_controls(uint32_t node);
  std::vector<std::unique_ptr<chip::MonitorBoard>> boards_;  // built at the first oob()
  std::vector<uint32_t> board_of_;
  void update_link(fabric::PortRef end);
  void finish_bist(uint32_t node, uint8_t port);
  void kick_nic(uint32_t node);
  void on_nic_kick(uint32_t node);
  void pump_engine(uint32_t node, chip::DmaEngine e, bool streaming);
  void deliver_data(uint32_t slot, uint32_t node);
  // A data packet chip `node` cannot pass on, refused with `error_id`: discarded, and an MP
  // answered with a refusal (chip/refusal.h) that the chip sends back towards the MP's sender.
  void discard_data(uint32_t slot, uint32_t node, uint16_t error_id);
  uint32_t packet_of(const chip::NicPacket& p);
  Status check_nic(uint32_t node, uint16_t id) const;
  Result<SimHostMemory*> host_memory(uint32_t nic_node);

  Simulator sim_;
  fabric::Topology topo_;
  Timing timing_;
  std::vector<std::unique_ptr<chip::Chip>> chips_;
  std::vector<uint32_t> port_base_;
  std::vector<Output> outputs_;
  std::vector<std::unique_ptr<Packet[]>> packet_chunks_;
  uint32_t packets_allocated_ = 0;
  std::vector<uint32_t> free_packets_;
  std::vector<uint8_t> nic_busy_;
  std::vector<std::array<uint8_t, chip::kDmaEngines>> engine_busy_;
  std::unordered_map<uint32_t, std::unique_ptr<SimHostMemory>> memory_;  // by NIC node
  std::vector<Time> nma_busy_until_;    // an NMA serves one request at a time
  std::vector<Time> background_until_;  // per node: load accounted up to here
  bool background_load_ = false;
  MpqListener mpq_listener_;
  MpqListener local_listener_;
  SimStats stats_;
  Time data_packet_time_ = 0;
};

}  // namespace galaxy::sim
