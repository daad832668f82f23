// The per-host fabric daemon (`galaxy fabricd`, docs/live.md): owns the host's shared
// segment, runs the chip models of the host's chips for management (the NMA answers from the
// real port counters of the segment), owns the UDP links to the other hosts with the chip link
// layer, and executes the traffic that leaves the host: management packets hop by hop, MPs and
// RDMA whose path crosses a link, completions back to the initiator. Processes on one host
// never need it on their data path.
#pragma once

#include <netinet/in.h>
#include <sys/uio.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/log.h"
#include "base/status.h"
#include "chip/chip.h"
#include "chip/coll.h"
#include "chip/monitor_board.h"
#include "chip/mpq.h"
#include "chip/nic.h"
#include "engine/live/board_server.h"
#include "engine/live/forward.h"
#include "engine/live/items.h"
#include "engine/live/link.h"
#include "engine/live/live_spec.h"
#include "engine/live/nic_host.h"
#include "engine/live/segment.h"
#include "wire/data_packet.h"
#include "wire/flit.h"
#include "wire/rdma_descriptor.h"

namespace galaxy::live {

struct DaemonOptions {
  bool impaired = false;
  ImpairmentConfig impairment;
  uint64_t op_timeout_ns = 5'000'000'000;       // a remote operation with no answer fails then
  uint64_t spin_ns = 50'000;                    // poll this long before sleeping (while a core
                                                // is free: FabricDaemon::spin_pays)
  uint64_t liveness_interval_ns = 100'000'000;  // scan for processes that died
  // Largest frame to another host's daemon, [kMinFrameBytes, kMaxLinkPayload]; 0: by the MTU of
  // the path to each peer host (frame_bytes_for_mtu, link.h).
  uint32_t frame_bytes = 0;
  // A UDP socket already bound to this host's address and port, handed over by whoever started
  // the daemon (as systemd's socket activation does), so no other program can take the port
  // between choosing it and binding it. -1: the daemon binds the address itself.
  int socket_fd = -1;
  // The same for the monitor board's TCP port (the host's port number): a TCP socket already
  // bound to it, which the daemon listens on. -1: the daemon binds it itself.
  int board_fd = -1;
};

struct DaemonStats {
  uint64_t egress_cells = 0;
  uint64_t mgmt_packets = 0;
  uint64_t nma_requests = 0;
  uint64_t items_sent = 0;
  uint64_t items_received = 0;
  uint64_t frames_sent = 0;
  uint64_t udp_errors = 0;
  uint64_t foreign_datagrams = 0;  // from an address that is no link's peer daemon: discarded
  uint64_t directory_queries = 0;  // VP directory questions answered (engine/live/directory.h)
  uint64_t mps_delivered = 0;
  uint64_t mps_refused = 0;
  uint64_t rdma_bytes_written = 0;  // by this host's NICs (chip::Nic::rdma_bytes_written)
  uint64_t ops_timed_out = 0;
  uint64_t dead_processes = 0;
  uint64_t dropped = 0;
  uint64_t completions_held = 0;        // CQ full when they came: delivered later
  uint64_t rdma_backlogged = 0;         // RDMA descriptors that waited for room in the NIC's queue
  uint64_t bists_completed = 0;         // link self-tests of this host's ports that finished
  uint64_t bist_patterns_received = 0;  // test patterns from the far end of a cable, checked
  // Items of processes' direct paths (engine/live/direct.h): arrived there but the daemon's to
  // handle, and sent on over the daemon's links after their direct link failed.
  uint64_t direct_items_arrived = 0;
  uint64_t direct_items_rescued = 0;
};

// Writes a completion into a VP's CQ (also used by libglex for operations it executes itself).
// Returns false when the CQ is full (the daemon keeps such a completion and retries).
bool push_completion(VpSlot& vp, OpCode op, OpStatus status, uint64_t cookie, uint64_t bytes,
                     uint16_t error_id, const char* reason);

// Checks a remote access against a NIC's ATT (docs/system.md 1.1: the target translates and
// checks). On success *entry holds a copy of the entry.
OpStatus check_att(NicSlot& nic, uint64_t mh, uint64_t addr, uint64_t length, uint32_t access,
                   AttEntry* entry, const char** reason);
// One copy between this process and `pid` (cross-memory attach; a plain copy for ourselves).
// write: local -> remote; otherwise remote -> local. Returns kPeerDead if the process is gone.
OpStatus copy_with(int32_t pid, bool write, void* local, uint64_t remote, uint64_t length);

// What an error id of a NIC's completion tells its owner (chip::failure_of, and the ids of this
// engine's memory port and timeouts), with the reason the CQ entry carries: one mapping for the
// daemon's NICs and the same-host path.
struct RdmaFailure {
  OpStatus status;
  const char* reason;
};
RdmaFailure rdma_failure(uint16_t id, OpCode op);
// Why a transfer on a direct link between processes failed (glex/direct_rdma.h): the link gave
// up (its peer is gone), or no answer came within the operation timeout.
inline constexpr uint16_t kErrDirectPeerGone = 6167;
inline constexpr uint16_t kErrDirectNoAnswer = 6168;
// A process's RDMA request as a NIC descriptor (wire/rdma_descriptor.h), its fields checked as
// the network's would be: E4753 malformed, E4738/E4739 a handle the wire cannot carry, E4754 a
// local handle that names no registration.
Status rdma_descriptor(const EgressRdma& d, uint32_t num_chips, wire::RdmaDescriptor* out);
// A process's collective descriptor (an egress cell) as the NIC takes it, every field checked:
// E4763 reserved bits set, E4764 a CP for no VP of a NIC of the fabric, then
// chip::check_coll_descriptor's ids.
Status coll_descriptor(const EgressColl& c, const Segment& seg, chip::CollDescriptor* out);

class FabricDaemon {
  // A packet, item or cell dropped: counted in DaemonStats::dropped and logged with its id
  // (rate-limited per id, base/log.h).
  template <class... A>
  void drop(uint16_t id, fmt::format_string<A...> f, A&&... args) {
    ++stats_.dropped;
    if (log::admit(log::Level::kWarn, id))
      log::write(log::Level::kWarn, id, "dropped: " + fmt::format(f, std::forward<A>(args)...));
  }

 public:
  static Result<std::unique_ptr<FabricDaemon>> start(const LiveFabric& f, int host,
                                                     const DaemonOptions& o);
  ~FabricDaemon();

  // Runs until `stop` becomes true.
  void run(const std::atomic<bool>& stop);
  // One round of work; returns whether anything happened.
  bool poll_once();

  Segment& segment() { return *seg_; }
  DaemonStats stats() const;
  // Cross-host links of this host: (local chip, port) and their link-layer state.
  struct LinkView {
    uint32_t chip;
    uint8_t port;
    uint32_t peer_chip;
    uint8_t peer_port;
    LinkState state;
    LinkStats stats;
    uint32_t link_id;  // carried by every frame of the link (engine/live/link.h)
  };
  std::vector<LinkView> links() const;

  // Untrusted inputs, as the fuzzer and tests give them: a frame payload delivered by the link
  // layer of cross-host link `link` (a sequence of items), and a cell of the egress ring.
  void feed_frame(size_t link, std::span<const uint8_t> payload);
  void feed_egress(const EgressCell& cell) { on_egress(cell); }
  size_t num_links() const { return links_.size(); }
  // The chip model of one of this host's chips (registers, error buffer), or nullptr.
  const chip::Chip* chip_model(uint32_t node) const {
    return node < chips_.size() ? chips_[node].get() : nullptr;
  }

 private:
  // One VC of a cable between hosts: a Link of its own (sequence numbers, window, credits), so
  // that a VC whose receiver cannot take more holds only its own frames (docs/system.md 1.3).
  struct Lane {
    std::unique_ptr<Link> link;
    std::vector<uint8_t> batch;                   // items waiting for the next frame
    std::deque<std::vector<uint8_t>> out_frames;  // full frames waiting for the window
    std::deque<std::vector<uint8_t>> held;  // delivered frames not processed yet (backpressure)
    size_t held_offset = 0;
    uint64_t items_sent = 0;  // packets put on this VC (the port's VCn_TX_PACKETS)
  };
  struct HostLink {
    uint32_t chip = 0;  // local end
    uint8_t port = 0;
    uint32_t peer_chip = 0;
    uint8_t peer_port = 0;
    int peer_host = 0;
    sockaddr_in peer_address{};  // the peer host's daemon
    uint32_t link_id = 0;        // the cable's; VC v's Link carries link_id | v << 24
    uint32_t frame_bytes = 0;    // largest frame payload (DaemonOptions::frame_bytes)
    std::array<Lane, wire::kNumVcs> lanes;
    uint8_t last_vc = 0;  // the data VC whose frame went last (chip::next_vc's turn)
    LinkState last_state = LinkState::kDown;
    // The cable is up while every VC's Link is, down while any is down.
    LinkState state() const;
    // The cable's counters: every VC's frames; the trainings of one (they train together).
    LinkStats stats() const;
  };
  // A descriptor this host's NIC executes for a process: what its completion tells the owner.
  struct NicOp {
    OpCode op = OpCode::kPut;
    uint8_t flags = 0;
    int32_t pid = 0;
    uint64_t cookie = 0;
    uint64_t length = 0;
    uint64_t deadline = 0;            // a check, the timeout after the last change
    std::optional<uint64_t> answers;  // chip::Nic::awaited_answers then
    uint32_t generation = 0;          // the VP's when posted: a reopened VP owes it nothing
    uint16_t trigger = 0;             // CPs an RDMA descriptor waits for (chip/coll.h)
    bool started = false;             // a triggered RDMA descriptor left the NIC's queue
  };
  // A VP whose collectives left state in the NIC (descriptors, a CP count): the VP's generation
  // then. State of an earlier generation (the VP closed, its owner died) is dropped.
  struct CollVp {
    bool active = false;
    uint32_t generation = 0;
  };
  // The host side of a NIC the daemon runs: the segment's registrations and memory.
  struct NicPort {
    std::unique_ptr<SegmentAtt> att;
    std::unique_ptr<SegmentHostMemory> memory;
    std::array<CollVp, kVps> coll{};
    // How the CPs waiting in the chip's MPQ were flagged, in order (chip::MpqEntry keeps
    // neither flags nor increment), as VP << 24 | flags << 16 | increment: the host's MPQ cell
    // carries both.
    std::deque<uint32_t> cps_to_host;
  };

  FabricDaemon(const LiveFabric& f, int host, const DaemonOptions& o);
  Status init();
  Status open_socket();
  Status adopt_socket(const sockaddr_in& want);

  bool drain_egress();
  void on_egress(const EgressCell& cell);
  void start_rdma(const EgressRdma& d);
  void start_coll(const EgressColl& c);
  void on_coll_reset(const EgressCollReset& r);

  // Management packets, hop by hop through the chip models.
  void send_mgmt(uint32_t chip, uint8_t out_port, std::span<const uint8_t> packet);
  void arrive_mgmt(uint32_t chip, uint8_t in_port, std::span<const uint8_t> packet);
  void run_nma(uint32_t chip, std::span<const uint8_t> packet);
  void drain_nma(uint32_t chip);
  // The host's monitor board (chip/monitor_board.h) served on TCP (engine/live/board_server.h).
  void open_board();
  wire::OobResponse execute_oob(const wire::OobRequest& r);
  // After a management or out-of-band write, or a power change: what the chip now holds down,
  // routes or tests, and the reports it queued.
  void chip_changed(uint32_t chip);
  void sync_counters(uint32_t chip);
  void export_routes(uint32_t chip);

  // Link items.
  size_t link_at(uint32_t chip, uint8_t port) const;
  void queue_item(size_t link, ItemType type, uint32_t from_chip, uint8_t from_port,
                  const void* body, size_t body_len, const void* data = nullptr,
                  size_t data_len = 0);
  // Link self-tests (docs/system.md 2.5.6) that BIST_CTRL started at this host's ports: on a cable
  // between hosts, test patterns through the link layer for the duration; what the link layer
  // repaired meanwhile (retransmissions, CRC errors) are the errors. A link inside the host has
  // no wire: it finishes with no flit tested.
  void start_bists(uint32_t chip);
  bool pump_bists(uint64_t now);
  void bist_pattern_arrived(size_t link, uint32_t chip, uint8_t in_port,
                            std::span<const uint8_t> body);
  void bist_end_arrived(size_t link, uint32_t chip, uint8_t in_port, std::span<const uint8_t> body);
  void bist_report_arrived(uint32_t chip, uint8_t in_port, std::span<const uint8_t> body);
  bool process_item(size_t link, std::span<const uint8_t> item);  // false: retry later
  // The link index of items that came from a process's direct path (EgressKind::kArrived).
  static constexpr size_t kNoLink = SIZE_MAX;
  void on_direct_item(EgressKind kind, std::span<const uint8_t> item);
  bool retry_arrived();
  // The items delivered on the cable's VCs, management first; at most `budget` items of the
  // data VCs, so that management arriving meanwhile waits for no more than that.
  bool process_held(size_t link);
  bool process_lane(size_t link, Lane& lane, unsigned* budget);
  bool arrive_data(uint32_t chip, uint8_t in_port, std::span<const uint8_t> bytes);
  bool data_at_nic(uint32_t chip, std::span<const uint8_t> bytes);
  bool deliver_mp(uint32_t nic, const wire::DataPacket& mp);
  // A data packet that stopped where `f` says (no usable output, a link down) is discarded
  // there; an MP is answered with a refusal sent back from that chip (chip/refusal.h).
  void discard_data(const Forwarded& f, std::span<const uint8_t> packet);
  // A packet local chip `chip` sends itself, answering through `in_port`: a NIC takes it at
  // once, an NRC routes it (originate) onto its way.
  void send_from(uint32_t chip, uint8_t in_port, const wire::DataPacket& p);
  // The NICs: descriptors, DMA engines, completions.
  void pump_nic(uint32_t chip);
  bool pump_nics();
  void drain_eq(uint32_t chip);
  // A packet NIC `nic` sends: encoded, routed from its port, counted; false if it found no way.
  bool send_data(uint32_t nic, const wire::DataPacket& p);
  // A completion for a VP whose CQ is full waits here, in order, instead of being lost.
  void complete(uint32_t nic, uint8_t vp, OpCode op, OpStatus status, uint64_t cookie,
                uint64_t bytes, uint16_t error_id, const char* reason);
  bool retry_completions();
  bool mgmt_to_host(uint32_t chip);
  void cp_to_host(uint32_t chip, uint8_t vp, const chip::MpqEntry& e, chip::MpqAdmit admit,
                  MpqCell* cell, uint64_t pos);
  // Collective state of a VP (chip/coll.h): marked when a descriptor is posted or a CP comes
  // (an earlier generation's is dropped first), dropped on request, when the VP closes or its
  // owner dies (scan_liveness).
  void mark_coll(uint32_t chip, uint8_t vp);
  void reset_coll(uint32_t chip, uint8_t vp);
  bool retry_mgmt_to_host();
  bool flush_links(uint64_t now);
  void send_datagram(const HostLink& l, std::span<const uint8_t> datagram);
  void send_frame(const HostLink& l, const Link::Outgoing& f);
  void send_parts(const HostLink& l, iovec* parts, size_t count);
  bool receive_udp(uint64_t now);
  // A VP directory question (engine/live/directory.h), answered to its sender from the segment.
  void answer_directory(std::span<const uint8_t> d, const sockaddr_in& from);
  static bool from_peer(const HostLink& l, const sockaddr_in& from);
  void timers(uint64_t now);
  void scan_liveness();
  void update_link_states();
  void apply_link_controls(uint32_t chip);
  void update_local_link(uint32_t chip, uint8_t port);
  void set_port_link(fabric::PortRef end, bool up);

  LiveFabric fabric_;
  int host_;
  DaemonOptions options_;
  std::unique_ptr<Segment> seg_;
  std::vector<std::unique_ptr<chip::Chip>> chips_;  // per node; null for other hosts' chips
  std::vector<HostLink> links_;
  std::unordered_map<uint64_t, size_t> link_by_port_;  // chip << 8 | port
  std::unordered_map<uint32_t, size_t> link_by_id_;
  std::vector<std::unique_ptr<Impairment>> impairments_;  // per link
  int sock_ = -1;
  int efd_ = -1;  // the doorbell (a datagram socket in the abstract namespace)
  int epfd_ = -1;
  std::unique_ptr<chip::MonitorBoard> board_;  // after chips_: destroyed before them
  std::unique_ptr<BoardServer> board_server_;
  std::vector<NicPort> nic_ports_;  // per node; empty for chips that are not this host's NICs
  std::vector<uint32_t> local_nics_;
  std::unordered_map<uint64_t, NicOp> nic_ops_;  // by (NIC, VP, submission number)
  std::vector<uint8_t> packet_bytes_;
  // The paths data packets take from this host's NICs and into it over links, with the traffic
  // not yet added to the ports' shared counters (PathCounters): flushed whenever the daemon
  // idles, before a chip's counters are read, and every PathCounters::kFlushOps packets a path.
  SendPaths sent_paths_;
  chip::NicPacket nic_packet_;  // a DMA engine's next packet, one reused for all
  ArrivalPaths arrived_paths_;
  void flush_path_counters();
  // Whether polling before sleeping saves anything now (a core is free).
  bool spin_pays(uint64_t now_ns);
  // Work that waits, in order, per VP: a VP's later work waits behind its waiting work; other
  // VPs' does not.
  template <class T>
  class PerVpWaiting {
   public:
    bool empty() const { return by_vp_.empty(); }
    // The VP's waiting work; nullptr when none waits.
    std::deque<T>* find(uint32_t nic, uint8_t vp) {
      auto it = by_vp_.find(key(nic, vp));
      return it == by_vp_.end() ? nullptr : &it->second;
    }
    void push(uint32_t nic, uint8_t vp, T t) { by_vp_[key(nic, vp)].push_back(std::move(t)); }
    // Offers each VP's first waiting work to take(nic, vp, work), in order, while it takes it
    // (returns true); whether any was taken.
    template <class Take>
    bool drain(Take take) {
      bool any = false;
      for (auto it = by_vp_.begin(); it != by_vp_.end();) {
        std::deque<T>& q = it->second;
        const auto nic = static_cast<uint32_t>(it->first >> 8);
        const auto vp = static_cast<uint8_t>(it->first & 0xFF);
        while (!q.empty() && take(nic, vp, q.front())) {
          q.pop_front();
          any = true;
        }
        it = q.empty() ? by_vp_.erase(it) : std::next(it);
      }
      return any;
    }

   private:
    static uint64_t key(uint32_t nic, uint8_t vp) { return uint64_t{nic} << 8 | vp; }
    std::map<uint64_t, std::deque<T>> by_vp_;
  };
  // Completions that found their VP's CQ full.
  struct HeldCompletion {
    uint32_t vp_generation;
    OpCode op;
    OpStatus status;
    uint64_t cookie, bytes;
    uint16_t error_id;
    std::string reason;
  };
  PerVpWaiting<HeldCompletion> held_completions_;
  // RDMA descriptors from the egress ring that found their VP's descriptor queue in the NIC
  // full: they start as the queue drains, so a process that posts faster than the link carries
  // waits instead of failing. Beyond kMaxRdmaBacklog a VP's next one fails busy.
  static constexpr size_t kMaxRdmaBacklog = 65536;
  PerVpWaiting<EgressRdma> rdma_backlog_;
  bool rdma_has_room(const EgressRdma& d) const;
  bool retry_rdma_backlog();
  struct BistRun {
    uint32_t chip = 0;
    uint8_t port = 0;
    size_t link = SIZE_MAX;  // the cable between hosts; SIZE_MAX: a link inside the host
    uint64_t start_ns = 0, end_ns = 0;
    double intensity = 0;  // share of the link's flit rate the patterns may take
    uint64_t sequence = 0;
    uint64_t flits = 0;  // pattern flits handed to the link layer
    bool ended = false;  // the end sent, the far end's report awaited
  };
  std::vector<BistRun> bists_;
  // The receiving end of a test: what arrived since its first pattern, and the link layer's
  // discards on the test's VC then.
  struct BistRx {
    uint64_t patterns = 0, mismatched = 0;
    uint64_t crc_at_start = 0, malformed_at_start = 0;
  };
  std::map<uint64_t, BistRx> bist_rx_;  // by chip << 8 | port (this host's end)
  std::set<uint32_t> mgmt_waiting_;     // NICs whose management packets wait for MPQ room
  std::vector<uint8_t> scratch_;
  uint64_t next_liveness_ = 0;
  // Whether polling before sleeping pays (spin_pays), as last judged and when.
  bool spin_pays_ = true;
  uint64_t spin_judged_ns_ = 0;
  std::deque<std::vector<uint8_t>> arrived_waiting_;  // direct items held for a full MPQ
  uint64_t next_impair_flush_ = 0;
  uint64_t next_op_scan_ = 0;
  DaemonStats stats_;
};

}  // namespace galaxy::live
