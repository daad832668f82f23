// The collective algorithms of libglex (docs/glex.md, "Collectives"), written once: each
// member's part of a barrier, broadcast or allreduce over a k-ary tree, in two forms.
//
// * Offloaded (docs/system.md 1.1, "Offloaded collectives"): the descriptors a member posts on its
//   group VP — CPs, CP-triggered CPs and RDMA puts, and a local descriptor whose completion
//   ends the collective (chip/coll.h). Once posted the NICs run the tree with no host.
// * Point-to-point: the steps a host performs itself (receive MPs, combine, send MPs, put), the
//   same tree driven by the host, for comparison.
//
// libglex runs both through its devices (glex/coll.cc); the simulated benchmark
// (glex/coll_bench.cc) runs the same plans at thousands of members.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "chip/coll.h"

namespace galaxy::glex::coll {

enum class Kind : uint8_t { kBarrier, kBcast, kAllreduce };
const char* kind_name(Kind k);

// A k-ary tree over `size` ranks rooted at rank 0. Every collective of a group uses the same
// tree, so the CPs a member receives from each neighbour come in the order of the collectives
// (the NIC's CP counter does not tell collectives apart: docs/system.md 1.1). A broadcast from
// another root first sends its data to rank 0.
struct Tree {
  uint32_t size = 1;
  uint32_t degree = 2;
  std::optional<uint32_t> parent(uint32_t rank) const;
  std::vector<uint32_t> children(uint32_t rank) const;
  uint32_t depth() const;  // levels below the root
};

// The degree that minimises a barrier's modelled time, 2 * depth * (level + degree * child):
// `level_ps` is the time of one level (the network and the NIC or host at both ends), `child_ps`
// what each further child adds at the parent (the NIC's descriptor interval when offloaded, the
// host's send and receive when not). Between 2 and 64.
uint32_t choose_degree(uint32_t size, uint64_t level_ps, uint64_t child_ps);

struct Peer {
  wire::ChipId node = 0;
  uint8_t vp = 0;
};
// Memory a member registered: its key as descriptors carry it, and an address in it.
struct Region {
  uint32_t key = 0;
  uint64_t address = 0;
};

// One member's part of one collective.
struct Member {
  Kind kind = Kind::kBarrier;
  uint32_t rank = 0;
  uint32_t root = 0;  // kBcast
  Tree tree;
  std::span<const Peer> peers;  // every rank's group endpoint
  // kBcast (<= 120 bytes: the root's data) and kAllreduce (this member's vector).
  std::span<const uint8_t> data;
  uint32_t length = 0;  // bytes of the result (kBcast: the message's length)
  chip::CombineOp op = chip::CombineOp::kNone;  // kAllreduce
  Region result;  // where the NIC writes this member's result (<= 120 bytes), if any
  // kBcast longer than 120 bytes, by RDMA: every member's buffer (registered, `length` long);
  // the root's holds the message.
  std::span<const Region> buffers;
};

inline constexpr uint32_t kMaxInlineBytes = chip::kMaxCombineElements * 8;  // 120

// An RDMA put of a large broadcast: from this member's buffer into a child's.
struct Put {
  uint32_t to_rank = 0;
  Peer to;
  Region from, into;
  uint64_t length = 0;
  uint16_t cp_count = 0;
};
struct Posting {
  enum class Kind : uint8_t { kColl, kPut } kind = Kind::kColl;
  chip::CollDescriptor coll;
  Put put;
};

// The offloaded form: what the member posts, in order. The last posting is the local descriptor
// whose completion (notify) ends the collective for this member.
std::vector<Posting> offloaded(const Member& m);

// The point-to-point form: what the member's host does, in order.
struct Step {
  enum class Kind : uint8_t {
    kRecv,  // take `count` MPs of the collective from `from` (any order); allreduce: combine
            // each into the member's vector; broadcast: the data become the member's
    kSend,  // send the member's current data (or nothing) to each of `to`, one MP each
    kPut,   // put the member's buffer into each of `to`'s, then (fenced) an MP to each
  };
  Kind kind = Kind::kRecv;
  std::vector<uint32_t> ranks;  // kRecv: from; kSend, kPut: to
};
std::vector<Step> point_to_point(const Member& m);

}  // namespace galaxy::glex::coll
