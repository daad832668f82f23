// Table routing executed by whoever holds the packet (docs/live.md: forwarding on one
// host may be executed by the sender): the NRC route tables and link states of the shared
// segment, the port counters incremented on every port a packet passes.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/live/segment.h"
#include "wire/data_packet.h"

namespace galaxy::live {

struct Forwarded {
  enum class Kind : uint8_t {
    kDelivered,   // at the destination NIC (chip), entered on `port`
    kLeavesHost,  // `chip` (local) sends out of `port` over a link to another host
    kNoRoute,     // the route table of `chip` has no usable port for the destination
    kLinkDown,    // the link out of `chip`/`port` is down
    kMisrouted,   // reached a NIC that is not the destination
    kHopLimit,    // NRC `chip` would pass on a packet that has passed chip::kMaxDataHops NRCs
  };
  Kind kind = Kind::kNoRoute;
  uint32_t chip = 0;
  uint8_t port = 0;
  uint8_t hops = 0;  // NRCs passed on this host's part of the path
  // NRCs passed in all, those before this host included: the head's hop count when the packet
  // leaves the host (kLeavesHost), wire::set_data_hops.
  uint8_t hops_passed = 0;
  // The class of data VCs the packet is in (chip/data_vc.h): where it leaves the host, the one
  // it crosses the link in.
  uint8_t vc_class = 0;
};

// From a local chip out of `out_port` (a NIC sends out of port 0) towards the NIC `dest`.
// With `record`, the counter lines of the ports passed are appended to it instead of being
// incremented (a sender caches its paths and adds its traffic in batches: PathCounters).
// `t` is what passes (wire::transfer_traffic, packet_traffic, kMgmtPacketTraffic).
Forwarded forward(Segment& seg, uint32_t chip, uint8_t out_port, uint32_t dest,
                  const wire::Traffic& t, std::vector<CounterLine*>* record = nullptr);
// A packet that came in over a link from another host at local chip `chip`, port `in_port`,
// having passed `hops_passed` NRCs (its head's hop count), in VC class `vc_class`.
Forwarded forward_arrived(Segment& seg, uint32_t chip, uint8_t in_port, uint32_t dest,
                          const wire::Traffic& t, std::vector<CounterLine*>* record = nullptr,
                          uint8_t hops_passed = 0, uint8_t vc_class = 0);
// A packet local NRC `chip` itself sends (a refusal, chip/refusal.h), routed by the table of
// `in_port`, the port through which it answers.
Forwarded originate(Segment& seg, uint32_t chip, uint8_t in_port, uint32_t dest,
                    const wire::Traffic& t);
// Puts an encoded data packet's flits into the VC of class `vc_class` that its kind takes
// (chip/data_vc.h): the class Forwarded::vc_class names for the link it crosses next.
void set_vc_class(std::span<uint8_t> packet_bytes, uint8_t vc_class);
// Adds traffic to a port's counters (local chips only).
void count_tx(Segment& seg, uint32_t chip, uint8_t port, const wire::Traffic& t,
              std::vector<CounterLine*>* record = nullptr);
void count_rx(Segment& seg, uint32_t chip, uint8_t port, const wire::Traffic& t,
              std::vector<CounterLine*>* record = nullptr);
void add_traffic(CounterLine& line, const wire::Traffic& t);
// A packet local NRC `chip` discarded as it entered on `in_port` (DIRTY_DISCARDS of the port).
void count_discard(Segment& seg, uint32_t chip, uint8_t in_port, const wire::Traffic& t);

// A sender's cached path to one destination and the traffic it has not yet added to the
// shared counters: the counters of a busy path are brought up to date every kFlushOps
// operations and whenever the sender goes idle, instead of 12 atomic additions per packet.
struct PathCounters {
  static constexpr uint32_t kFlushOps = 256;
  uint64_t generation = UINT64_MAX;  // the segment's route_generation it was computed at
  Forwarded result;
  std::vector<CounterLine*> lines;
  wire::Traffic pending;
  uint32_t ops = 0;

  void flush() {
    if (ops == 0) return;
    for (CounterLine* l : lines) add_traffic(*l, pending);
    pending = {};
    ops = 0;
  }
  void add(const wire::Traffic& t) {
    pending += t;
    if (++ops >= kFlushOps) flush();
  }
  // The path again when the segment's routes changed since it was computed (route_generation
  // `g`): `compute(&lines)` forwards with the counter lines recorded and returns the result.
  template <class Compute>
  PathCounters& refresh(uint64_t g, Compute&& compute) {
    if (generation != g) {
      flush();
      lines.clear();
      result = compute(&lines);
      generation = g;
    }
    return *this;
  }
};

// Cached paths by key, each with the traffic not yet added to the shared port counters,
// recomputed when the segment's routes change; bounded whatever peers send (a full table is
// flushed and emptied).
class PathTable {
 public:
  static constexpr size_t kMaxPaths = 4096;
  // Brings the shared counters up to date (when the holder goes idle, before its counters are
  // read, and every PathCounters::kFlushOps packets of a path).
  void flush();

 protected:
  template <class Compute>
  PathCounters& at_key(Segment& seg, uint64_t key, Compute&& compute) {
    if (key != last_key_ || last_ == nullptr) {  // a stream's packets take one path
      if (paths_.size() >= kMaxPaths && !paths_.contains(key)) {
        flush();
        paths_.clear();
      }
      last_ = &paths_[key];  // elements stay where they are when the map grows
      last_key_ = key;
    }
    return last_->refresh(seg.header().route_generation.load(std::memory_order_acquire),
                          std::forward<Compute>(compute));
  }

 private:
  std::unordered_map<uint64_t, PathCounters> paths_;
  uint64_t last_key_ = 0;
  PathCounters* last_ = nullptr;
};

// The paths packets took into this host over links, by where they entered, where they go, the
// NRCs they had passed and their VC class (forward_arrived): a receiver's counterpart of a
// sender's cached paths.
class ArrivalPaths : public PathTable {
 public:
  PathCounters& at(Segment& seg, uint32_t chip, uint8_t in_port, uint32_t dest, uint8_t hops,
                   uint8_t vc_class);
};

// The paths of packets local chips send, by chip, output port and destination (forward).
class SendPaths : public PathTable {
 public:
  PathCounters& at(Segment& seg, uint32_t chip, uint8_t out_port, uint32_t dest);
};

// Whether a cached path's result stands for the packet: it went on or arrived. A packet that
// stops on the way is forwarded again uncached, which counts its discard where it stopped
// (a recorded path counts only the ports passed).
inline bool path_goes_through(const Forwarded& f) {
  return f.kind == Forwarded::Kind::kLeavesHost || f.kind == Forwarded::Kind::kDelivered ||
         f.kind == Forwarded::Kind::kMisrouted;
}

}  // namespace galaxy::live
