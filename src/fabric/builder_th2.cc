// The TH-2 fabric, docs/system.md 2.7. The paper gives the external port counts of each switch but
// not the wiring inside a 6-NRC switch; the choice made here and its reasoning are in
// docs/topologies.md ("th2").
#include <fmt/format.h>

#include "fabric/builder_util.h"
#include "fabric/builders.h"

namespace galaxy::fabric {

namespace {

constexpr uint32_t kNrcPorts = 24;  // TH-2 NRC, docs/system.md 1.2
constexpr uint32_t kMaxCabinets = 143;
constexpr uint32_t kChassisPerCabinet = 4;
constexpr uint32_t kNicsPerEdge = 8;
constexpr uint32_t kEdgesPerSwitch = 4;  // NRC0-3 of a bottom or root switch
constexpr uint32_t kNrcsPerSwitch = 6;   // plus the two middles NRC4, NRC5
constexpr uint32_t kUplinksPerEdge = 5;
constexpr uint32_t kCabinetsPerGroup = 3;
constexpr uint32_t kLeavesPerGroup = 20;
constexpr uint32_t kLeafDown = 12;
constexpr uint32_t kLeafUp = 12;
constexpr uint32_t kGroupsPerLeafCabinet = 3;
constexpr uint32_t kMaxGroups = 48;
constexpr uint32_t kRootSwitches = kLeavesPerGroup * kLeafUp;  // 240
constexpr uint32_t kRootSwitchesPerCabinet = 30;
constexpr uint32_t kRootEdgeExternal = 12;
constexpr uint32_t kRootLinksPerMiddle = 6;
// Cabinet numbers: compute cabinets first, then the 16 leaf and 8 root cabinets, fixed so that a
// cabinet keeps its number when a smaller model is built.
constexpr int32_t kFirstLeafCabinet = kMaxCabinets;
constexpr int32_t kFirstRootCabinet = kFirstLeafCabinet + kMaxGroups / kGroupsPerLeafCabinet;

// Bottom-switch edge NRC ports.
constexpr uint32_t kEdgeUplinkPort = 8;    // 8..12
constexpr uint32_t kEdgeMiddle4Port = 13;  // 13..17
constexpr uint32_t kEdgeMiddle5Port = 18;  // 18..22

}  // namespace

Result<Topology> build_th2(const Spec& spec) {
  GALAXY_TRY(spec.check_known({"cabinets"}));
  if (!spec.positional.empty())
    return make_error(
        Code::kInvalidArgument, 3200,
        fmt::format("th2: unexpected positional parameter '{}'", spec.positional.front()));
  auto cabinets_r = spec.get_int("cabinets", kMaxCabinets, 1, kMaxCabinets);
  GALAXY_TRY(cabinets_r);
  const uint32_t cabinets = static_cast<uint32_t>(*cabinets_r);
  const uint32_t bottoms = cabinets * kChassisPerCabinet;
  const uint32_t groups = (cabinets + kCabinetsPerGroup - 1) / kCabinetsPerGroup;
  const uint32_t nics = bottoms * kEdgesPerSwitch * kNicsPerEdge;
  const uint32_t nrcs =
      bottoms * kNrcsPerSwitch + groups * kLeavesPerGroup + kRootSwitches * kNrcsPerSwitch;
  detail::TopologyWriter w(nics + nrcs, nics + nrcs * kNrcPorts);

  // NICs first and in bottom-switch order: the 32 NICs under one bottom switch get contiguous
  // NIC indices, so route tables compress into ranges.
  for (uint32_t b = 0; b < bottoms; ++b)
    for (uint32_t e = 0; e < kEdgesPerSwitch; ++e)
      for (uint32_t k = 0; k < kNicsPerEdge; ++k) {
        uint32_t index = (b * kEdgesPerSwitch + e) * kNicsPerEdge + k;
        w.node(NodeKind::kNic, 1, fmt::format("nic{:05}", index),
               Location{static_cast<int32_t>(b / kChassisPerCabinet),
                        static_cast<int32_t>(b % kChassisPerCabinet), static_cast<int32_t>(b),
                        static_cast<int32_t>(e), "nic"},
               0);
      }

  // Bottom switches: NRC0-3 edges carry 8 NICs and 5 uplinks each; NRC4/NRC5 middles join
  // every edge to every other edge with 5 parallel links, giving 20 internal links per middle.
  std::vector<uint32_t> bottom_edge(bottoms * kEdgesPerSwitch);
  for (uint32_t b = 0; b < bottoms; ++b) {
    uint32_t nrc[kNrcsPerSwitch];
    int32_t cabinet = static_cast<int32_t>(b / kChassisPerCabinet);
    int32_t chassis = static_cast<int32_t>(b % kChassisPerCabinet);
    for (uint32_t i = 0; i < kNrcsPerSwitch; ++i)
      nrc[i] = w.node(NodeKind::kNrc, kNrcPorts,
                      fmt::format("cab{:03}/ch{}/bsw/nrc{}", cabinet, chassis, i),
                      Location{cabinet, chassis, static_cast<int32_t>(b), static_cast<int32_t>(i),
                               i < kEdgesPerSwitch ? "bottom-edge" : "bottom-middle"},
                      1);
    for (uint32_t e = 0; e < kEdgesPerSwitch; ++e) {
      bottom_edge[b * kEdgesPerSwitch + e] = nrc[e];
      for (uint32_t k = 0; k < kNicsPerEdge; ++k)
        w.link(nrc[e], k, (b * kEdgesPerSwitch + e) * kNicsPerEdge + k, 0);
      for (uint32_t k = 0; k < kUplinksPerEdge; ++k) {
        w.link(nrc[e], kEdgeMiddle4Port + k, nrc[4], e * kUplinksPerEdge + k);
        w.link(nrc[e], kEdgeMiddle5Port + k, nrc[5], e * kUplinksPerEdge + k);
      }
    }
  }

  // Leaf switches: group g serves compute cabinets 3g..3g+2; leaf i of a group takes, on down
  // port d, bottom switch d of the group (d = 4 * cabinet-in-group + chassis) through uplink
  // i % 5 of edge i / 5.
  std::vector<uint32_t> leaf(groups * kLeavesPerGroup);
  for (uint32_t g = 0; g < groups; ++g) {
    int32_t cabinet = kFirstLeafCabinet + static_cast<int32_t>(g / kGroupsPerLeafCabinet);
    int32_t slot = static_cast<int32_t>(g % kGroupsPerLeafCabinet);
    for (uint32_t i = 0; i < kLeavesPerGroup; ++i) {
      uint32_t id = w.node(
          NodeKind::kNrc, kNrcPorts, fmt::format("cab{:03}/grp{}/leaf{:02}", cabinet, slot, i),
          Location{cabinet, slot, static_cast<int32_t>(g * kLeavesPerGroup + i), -1, "leaf"}, 2);
      leaf[g * kLeavesPerGroup + i] = id;
      for (uint32_t d = 0; d < kLeafDown; ++d) {
        uint32_t b = g * kCabinetsPerGroup * kChassisPerCabinet + d;
        if (b >= bottoms) break;
        uint32_t e = i / kUplinksPerEdge;
        w.link(id, d, bottom_edge[b * kEdgesPerSwitch + e], kEdgeUplinkPort + i % kUplinksPerEdge);
      }
    }
  }

  // Root switches: r = 12 i + j takes uplink j of leaf i of every group; group g lands on edge
  // g / 12, port g % 12. Edges reach each other through the two middles, 6 links each.
  for (uint32_t r = 0; r < kRootSwitches; ++r) {
    int32_t cabinet = kFirstRootCabinet + static_cast<int32_t>(r / kRootSwitchesPerCabinet);
    uint32_t in_cabinet = r % kRootSwitchesPerCabinet;
    uint32_t nrc[kNrcsPerSwitch];
    for (uint32_t k = 0; k < kNrcsPerSwitch; ++k)
      nrc[k] = w.node(NodeKind::kNrc, kNrcPorts,
                      fmt::format("cab{:03}/rsw{:02}/nrc{}", cabinet, in_cabinet, k),
                      Location{cabinet, -1, static_cast<int32_t>(r), static_cast<int32_t>(k),
                               k < kEdgesPerSwitch ? "root-edge" : "root-middle"},
                      3);
    for (uint32_t e = 0; e < kEdgesPerSwitch; ++e)
      for (uint32_t k = 0; k < kRootLinksPerMiddle; ++k) {
        w.link(nrc[e], kRootEdgeExternal + k, nrc[4], e * kRootLinksPerMiddle + k);
        w.link(nrc[e], kRootEdgeExternal + kRootLinksPerMiddle + k, nrc[5],
               e * kRootLinksPerMiddle + k);
      }
    uint32_t i = r / kLeafUp;
    uint32_t j = r % kLeafUp;
    for (uint32_t g = 0; g < groups; ++g)
      w.link(leaf[g * kLeavesPerGroup + i], kLeafDown + j, nrc[g / kRootEdgeExternal],
             g % kRootEdgeExternal);
  }
  return w.finish();
}

}  // namespace galaxy::fabric
