// The shared host segment of a live fabric (docs/live.md; docs/live.md): one POSIX
// shared-memory object per host, created by that host's fabric daemon and mapped by every
// process of the host. It holds what peers must reach without a daemon on the data path:
//   * the wiring of the whole fabric (chip kinds, owners, peers, link state);
//   * the route tables of this host's NRCs, so a sender executes the forwarding itself;
//   * the port counters of this host's chips, incremented by whoever forwards a packet — the
//     management agent reads these very counters;
//   * per NIC: the ATT (registered memory and its keys) and per VP the MPQ and the completion
//     queue, lock-free rings that several processes produce into;
//   * the egress ring to the daemon (management descriptors and traffic for other hosts);
//   * every chip's name, NodeDescription and GUID, so a process names the fabric's NICs as users
//   do.
// No pointers inside: processes map the segment at different addresses.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "chip/port_set.h"
#include "engine/live/items.h"
#include "engine/live/link.h"
#include "engine/live/live_spec.h"
#include "wire/mp.h"

namespace galaxy::live {

inline constexpr uint64_t kSegmentMagic = 0x4753594c4158414bull;
inline constexpr uint32_t kSegmentVersion = 8;
inline constexpr uint32_t kMpqDepth = 1024;
inline constexpr uint32_t kCqDepth = 1024;
inline constexpr uint32_t kEgressDepth = 4096;
inline constexpr uint32_t kAttEntries = 256;
inline constexpr uint32_t kVps = 40;  // chip::kNumVps
inline constexpr uint32_t kNoLocal = UINT32_MAX;
inline constexpr uint32_t kNoChip = UINT32_MAX;

// futex on a 32-bit word in shared memory (not FUTEX_PRIVATE: other processes wait on it).
// timeout_ns < 0: wait forever. Returns false on timeout.
bool futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns);
void futex_wake(std::atomic<uint32_t>* word);
uint64_t monotonic_ns();
// Whether a process exists and is not a zombie (a VP, a registration or a daemon whose owner
// died is reclaimed).
bool process_alive(int32_t pid);
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// How a ring cell says it was published for position `pos` of a ring of Depth cells. This
// primary template serves cells that begin with a 16-bit turn number `seq` (pos + 1 once
// written); MpqCell has its own (below).
template <class Cell, uint32_t Depth>
struct CellTurn {
  static void init(Cell& c, uint32_t index) { c.seq.store(static_cast<uint16_t>(index)); }
  static bool ready(const Cell& c, uint64_t pos) {
    return c.seq.load(std::memory_order_acquire) == static_cast<uint16_t>(pos + 1);
  }
  static void publish(Cell& c, uint64_t pos) {
    c.seq.store(static_cast<uint16_t>(pos + 1), std::memory_order_release);
  }
};

// A bounded multi-producer single-consumer ring of fixed cells. Every cell carries a turn
// (CellTurn) that its producer writes last (a release store): the consumer polls the cell it
// expects and needs no atomic read-modify-write. A producer claims a cell with one CAS on the
// tail and learns whether the cell is free from the consumer's `freed` index, which it reads
// only when its cached bound (`room`, on the tail's line) runs out, so the cell's line moves
// between the cores once for the producer's write and once for the consumer's read, and never
// for a turn check. The consumer hands cells back in batches (kRelease at a time), so producers
// see the ring full up to kRelease - 1 cells early.
// A consumer that found it empty for a while sleeps on `futex` (see wait()).
template <class Cell, uint32_t Depth>
struct MpscRing {
  static_assert((Depth & (Depth - 1)) == 0 && Depth <= 16384, "power of two, 16-bit turns");
  static constexpr uint32_t kRelease = Depth >= 64 ? 16 : 1;
  // Each group on its own 128-byte pair of lines: a core fetching one line may fetch its
  // neighbour too, and must not take the consumer's line from it while the producer writes.
  // Producers' line: the next cell to claim and the bound below which cells are known free.
  alignas(128) std::atomic<uint64_t> tail;
  std::atomic<uint64_t> room;
  // Consumer's line: the next cell to read, and how many it has handed back.
  alignas(128) std::atomic<uint64_t> head;
  std::atomic<uint64_t> freed;
  alignas(128) std::atomic<uint32_t> futex;
  std::atomic<uint32_t> waiters;
  alignas(128) Cell cells[Depth];

  void init() {
    tail.store(0);
    room.store(Depth);
    head.store(0);
    freed.store(0);
    futex.store(0);
    waiters.store(0);
    for (uint32_t i = 0; i < Depth; ++i) CellTurn<Cell, Depth>::init(cells[i], i);
  }
  // Producer: a cell to fill, or nullptr when the ring is full.
  Cell* claim(uint64_t* pos) {
    uint64_t p = tail.load(std::memory_order_relaxed);
    for (;;) {
      if (p >= room.load(std::memory_order_acquire)) {
        // The cached bound ran out: ask the consumer (acquire: its reads of those cells are
        // over before this producer writes them) and share the answer with other producers.
        const uint64_t r = freed.load(std::memory_order_acquire) + Depth;
        uint64_t cur = room.load(std::memory_order_relaxed);
        while (cur < r && !room.compare_exchange_weak(cur, r, std::memory_order_release,
                                                      std::memory_order_relaxed)) {
        }
        if (p >= r) {
          const uint64_t again = tail.load(std::memory_order_relaxed);
          if (again == p) return nullptr;
          p = again;
          continue;
        }
      }
      if (tail.compare_exchange_weak(p, p + 1, std::memory_order_relaxed)) {
        *pos = p;
        return &cells[p & (Depth - 1)];
      }
    }
  }
  // Makes a filled cell visible to the consumer (args: what the cell's CellTurn needs).
  template <class... Args>
  void publish(Cell* c, uint64_t pos, Args... args) {
    CellTurn<Cell, Depth>::publish(*c, pos, args...);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (waiters.load(std::memory_order_relaxed) != 0) {
      futex.fetch_add(1, std::memory_order_release);
      futex_wake(&futex);
    }
  }
  // Consumer: the oldest published cell, or nullptr.
  Cell* peek() {
    uint64_t h = head.load(std::memory_order_relaxed);
    Cell& c = cells[h & (Depth - 1)];
    return CellTurn<Cell, Depth>::ready(c, h) ? &c : nullptr;
  }
  void pop() {
    const uint64_t h = head.load(std::memory_order_relaxed) + 1;
    head.store(h, std::memory_order_relaxed);
    if (h - freed.load(std::memory_order_relaxed) >= kRelease)
      freed.store(h, std::memory_order_release);
  }
  size_t size() const {
    return static_cast<size_t>(tail.load(std::memory_order_relaxed) -
                               head.load(std::memory_order_relaxed));
  }
  // Poll for spin_ns, then block on the futex until a cell is published or deadline_ns passes
  // (UINT64_MAX: no deadline). Returns the cell or nullptr on timeout.
  Cell* wait(uint64_t spin_ns, uint64_t deadline_ns) {
    if (Cell* c = spin(spin_ns, deadline_ns)) return c;
    return sleep(deadline_ns);
  }
  // Polls for about spin_ns (less if deadline_ns comes first); the cell or nullptr.
  Cell* spin(uint64_t spin_ns, uint64_t deadline_ns) {
    // The clock is first read after 64 polls: a message that comes during the read would be
    // seen that much later, and most come within the first polls.
    uint64_t spin_until = 0;
    for (uint32_t i = 0;; ++i) {
      if (Cell* c = peek()) return c;
      if ((i & 7) == 7) cpu_relax();  // a pause on every poll would delay seeing the cell
      if ((i & 63) == 63) {
        const uint64_t now = monotonic_ns();
        if (spin_until == 0) spin_until = now + spin_ns;
        if (now >= spin_until || now >= deadline_ns) return nullptr;
      }
    }
  }
  // Blocks on the futex until a cell is published or deadline_ns passes.
  Cell* sleep(uint64_t deadline_ns) {
    for (;;) {
      uint32_t v = futex.load(std::memory_order_acquire);
      waiters.fetch_add(1, std::memory_order_seq_cst);
      Cell* c = peek();
      if (!c) {
        uint64_t now = monotonic_ns();
        if (now >= deadline_ns) {
          waiters.fetch_sub(1);
          return nullptr;
        }
        int64_t left = deadline_ns == UINT64_MAX ? -1 : static_cast<int64_t>(deadline_ns - now);
        futex_wait(&futex, v, left);
        c = peek();
      }
      waiters.fetch_sub(1, std::memory_order_relaxed);
      if (c) return c;
      if (monotonic_ns() >= deadline_ns) return peek();
    }
  }
};

// One MP in an MPQ: the 128-byte wire MP (wire/mp.h, docs/protocol.md) as the NIC writes it,
// its payload first and then its header as one word whose bits 20-23 hold the ring's lap.
struct MpqCell {
  std::atomic<uint64_t> header;  // wire::mp_word layout
  uint8_t data[wire::kMpPayloadBytes];
};
template <uint32_t Depth>
struct CellTurn<MpqCell, Depth> {
  // Laps count 8..15 and wrap to 8 (the producer is never a lap ahead, so two distinct values
  // would do); a cell not yet written holds lap 0.
  static uint8_t lap(uint64_t pos) { return static_cast<uint8_t>(((pos / Depth) & 7) | 8); }
  static void init(MpqCell& c, uint32_t) { c.header.store(0); }
  static bool ready(const MpqCell& c, uint64_t pos) {
    return wire::mp_word::lap(c.header.load(std::memory_order_acquire)) == lap(pos);
  }
  static void publish(MpqCell& c, uint64_t pos, uint64_t header) {
    c.header.store(wire::mp_word::with_lap(header, lap(pos)), std::memory_order_release);
  }
};
static_assert(sizeof(MpqCell) == 128);

// Local completion (the CQ of docs/system.md 1.1): success or the error of one descriptor.
struct CqCell {
  std::atomic<uint16_t> seq;
  uint8_t op;      // glex op code (glex.h GLEX_OP_*)
  uint8_t status;  // glex_ret_t
  uint16_t error_id;
  uint16_t reserved;
  uint64_t cookie;
  uint64_t bytes;
  char reason[40];
};
static_assert(sizeof(CqCell) == 64);

// Work for the daemon: management descriptors and anything that leaves the host.
inline constexpr uint32_t kEgressBody = 248;
struct EgressCell {
  std::atomic<uint16_t> seq;
  uint8_t kind;
  uint8_t reserved;
  uint32_t length;
  uint8_t body[kEgressBody];
};
static_assert(sizeof(EgressCell) == 256);

using MpqRing = MpscRing<MpqCell, kMpqDepth>;
using CqRing = MpscRing<CqCell, kCqDepth>;
using EgressRing = MpscRing<EgressCell, kEgressDepth>;

// Access rights of registered memory.
inline constexpr uint32_t kAccessRead = 1;
inline constexpr uint32_t kAccessWrite = 2;

// An ATT entry: a registered range of one process's memory (docs/system.md 1.1). `memfd` >= 0 when
// the range lies in memory allocated by glex_alloc_mem: peers on the host map it and copy
// directly; otherwise they use cross-memory attach on `pid`.
struct AttEntry {
  std::atomic<uint32_t> state;  // 0 free, 1 being written, 2 valid
  uint32_t key;
  uint64_t base;
  uint64_t length;
  int32_t pid;
  int32_t memfd;
  uint64_t memfd_base;  // virtual address at which the memfd's offset 0 is mapped in pid
  uint32_t access;
  uint32_t generation;
};

struct VpSlot {
  alignas(64) std::atomic<int32_t> owner_pid;
  std::atomic<uint32_t> open;
  std::atomic<uint32_t> generation;
  std::atomic<uint32_t> outstanding;  // descriptors handed to the daemon, not yet complete
  std::atomic<uint64_t> mps_received;
  // The UDP port on the host's address where the owner receives datagrams of its own (the VP
  // directory answers with it, engine/live/directory.h); 0: none.
  std::atomic<uint32_t> direct_port;
  MpqRing mpq;
  CqRing cq;
};

struct NicSlot {
  alignas(64) uint32_t node;
  std::atomic<uint32_t> att_clock;  // feeds registration keys
  AttEntry att[kAttEntries];
  VpSlot vps[kVps];
};

// One route table entry of the segment: the allowed output ports (chip::PortSet) as words
// the daemon stores and senders load without a lock. On a switch of more than 64 ports a
// sender that reads while the daemon rewrites the entry may see ports 0-63 of one table and
// 64-127 of the other, as a packet may meet a switch whose table management is reloading.
struct RouteCell {
  std::atomic<uint64_t> w[chip::PortSet::kWords];
  chip::PortSet load() const {
    return chip::PortSet::from_words(w[0].load(std::memory_order_relaxed),
                                     w[1].load(std::memory_order_relaxed));
  }
  void store(const chip::PortSet& s) {
    for (unsigned i = 0; i < chip::PortSet::kWords; ++i)
      w[i].store(s.word(i), std::memory_order_relaxed);
  }
};

struct alignas(64) CounterLine {
  std::atomic<uint64_t> packets;
  std::atomic<uint64_t> bytes;
  std::atomic<uint64_t> flits;
  std::atomic<uint64_t> discards;
};
struct PortCounters {
  CounterLine tx;
  CounterLine rx;
  // Packets that left on each VC over a link to another host from a process's direct path
  // (engine/live/direct.h); the daemon adds those its own link carried (VCn_TX_PACKETS).
  alignas(64) std::atomic<uint64_t> direct_vc_tx[8];
  // What the link layers of processes' direct links over this port repaired: frames sent again
  // and frames that arrived corrupt (the daemon adds its own link's to RETRANSMISSIONS and
  // CRC_ERRORS).
  std::atomic<uint64_t> direct_retransmissions;
  std::atomic<uint64_t> direct_crc_errors;
};

struct ChipInfo {
  uint8_t type;  // wire::ChipType
  uint8_t num_ports;
  uint16_t host;
  uint32_t local;     // index among this host's chips (routes, counters), kNoLocal if remote
  uint32_t nic_slot;  // index among this host's NICs, kNoLocal otherwise
};

struct PeerInfo {
  uint32_t chip;  // kNoChip when the port is not linked
  uint8_t port;
  std::atomic<uint8_t> up;
  uint8_t crosses_hosts;
  std::atomic<uint8_t> vc_rule;  // the port's VC rule (chip/data_vc.h), as its NRC holds it
};

// A chip as users name it (fabric::Topology::resolve): its name, NodeDescription and GUID, the
// text in the segment's name region after the per-chip entries.
struct ChipName {
  uint64_t guid;  // 0: none
  uint64_t text;  // offset of the name, then the description, from the name region's start
  uint32_t name_len;
  uint32_t description_len;
};

// Where a host's fabric daemon receives (the fabric spec's address and port): a process asks it
// for the socket of a VP's owner there (the VP directory, engine/live/directory.h).
struct HostAddress {
  uint32_t ip;  // IPv4, network byte order; 0 when the spec gives no IPv4 address
  uint16_t port;
  uint16_t reserved;
};

struct SegHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t host_index;
  uint64_t total_size;
  uint64_t epoch;  // random per creation: a restarted daemon is a new segment
  char fabric[32];
  char host[32];
  uint32_t num_hosts;
  uint32_t num_chips;
  uint32_t max_ports;
  uint32_t num_local;
  uint32_t num_local_nics;
  uint32_t host_ip;  // the host's IPv4 address of the fabric spec, network byte order
  uint64_t off_chips, off_peers, off_routes, off_counters, off_nics, off_egress, off_names;
  uint64_t off_hosts;  // num_hosts HostAddress
  // The impairment the daemon applies to what it sends over links (its --impair), which the
  // processes of the host apply to their own datagrams too (docs/live.md "The direct path").
  uint32_t impaired;
  uint32_t reserved0;
  ImpairmentConfig impairment;
  std::atomic<int32_t> daemon_pid;
  std::atomic<uint32_t> ready;
  // Own cache lines: senders read route_generation on every operation, the daemon writes
  // daemon_sleeping whenever it naps.
  alignas(64) std::atomic<uint32_t> daemon_sleeping;
  // Bumped when the daemon rewrites a route table or a link changes state.
  alignas(64) std::atomic<uint64_t> route_generation;
};

class Segment {
 public:
  // The daemon: creates (replacing a stale segment whose daemon is gone) and initialises.
  static Result<std::unique_ptr<Segment>> create(const LiveFabric& f, int host);
  // Every other process of the host.
  static Result<std::unique_ptr<Segment>> attach(const std::string& fabric,
                                                 const std::string& host);
  static std::string shm_name(const std::string& fabric, const std::string& host);
  ~Segment();

  SegHeader& header() { return *reinterpret_cast<SegHeader*>(base_); }
  const SegHeader& header() const { return *reinterpret_cast<const SegHeader*>(base_); }
  uint32_t num_chips() const { return header().num_chips; }
  uint32_t max_ports() const { return header().max_ports; }
  uint32_t host_index() const { return header().host_index; }
  const ChipInfo& chip(uint32_t node) const { return at<ChipInfo>(header().off_chips)[node]; }
  PeerInfo& peer(uint32_t node, uint32_t port) {
    return at<PeerInfo>(header().off_peers)[size_t{node} * max_ports() + port];
  }
  // Route table row of a local NRC's input port: per destination chip id, allowed output ports.
  RouteCell* route_row(uint32_t local, uint32_t in_port) {
    return at<RouteCell>(header().off_routes) +
           (size_t{local} * max_ports() + in_port) * num_chips();
  }
  PortCounters& counters(uint32_t local, uint32_t port) {
    return at<PortCounters>(header().off_counters)[size_t{local} * max_ports() + port];
  }
  NicSlot& nic_slot(uint32_t slot) { return at<NicSlot>(header().off_nics)[slot]; }
  NicSlot* nic_of(uint32_t node) {
    if (node >= num_chips()) return nullptr;
    uint32_t s = chip(node).nic_slot;
    return s == kNoLocal ? nullptr : &nic_slot(s);
  }
  bool is_local(uint32_t node) const { return node < num_chips() && chip(node).local != kNoLocal; }
  EgressRing& egress() { return *at<EgressRing>(header().off_egress); }
  // Queues work for the daemon (a cell of `kind` with `len` bytes of body, at most kEgressBody)
  // and wakes it if it sleeps; false when the ring is full. *at: the cell's position.
  bool post_egress(EgressKind kind, const void* body, size_t len, uint64_t* at = nullptr);
  const HostAddress& host_address(uint32_t host) const {
    return at<HostAddress>(header().off_hosts)[host];
  }
  // The fabric's chips as users name them: a topology of the chips alone (kind, ports, name,
  // NodeDescription, GUID; no links), whose resolve() finds a chip by any of its names.
  fabric::Topology chip_names() const;
  // Whether every link from this host's chips to another host has come up.
  bool cross_host_links_up();
  // The links from this host's chips to chips of the hosts `to_host` flags (by host index), and
  // how many of them are up at this end.
  struct LinkTally {
    uint32_t up = 0;
    uint32_t total = 0;
  };
  LinkTally links_to(const std::vector<bool>& to_host);
  // Wakes the daemon if it sleeps (after publishing into the egress ring): a datagram to its
  // doorbell, a Unix socket in the abstract namespace that the daemon's epoll watches.
  void kick_daemon();
  std::string doorbell_name() const;

 private:
  Segment(void* base, size_t size, std::string name, bool owner)
      : base_(static_cast<uint8_t*>(base)), size_(size), name_(std::move(name)), owner_(owner) {}
  template <class T>
  T* at(uint64_t off) const {
    return reinterpret_cast<T*>(base_ + off);
  }
  uint8_t* base_;
  size_t size_;
  std::string name_;
  bool owner_;
  int doorbell_fd_ = -1;  // clients: a socket to ring the daemon's doorbell
};

}  // namespace galaxy::live
