// k-ary fat tree with K-port switches and N levels (Al-Fares et al. for N = 3); the recursive
// construction is spelled out in docs/topologies.md ("fattree").
#include <fmt/format.h>

#include <vector>

#include "fabric/builder_util.h"
#include "fabric/builders.h"

namespace galaxy::fabric {

namespace {

constexpr uint64_t kMaxNodes = uint64_t{1} << 22;

struct FatTree {
  detail::TopologyWriter& w;
  uint32_t k;
  uint32_t half;
  uint32_t levels;
  uint32_t switches_made = 0;
  uint32_t nics_made = 0;

  uint32_t make_nic(uint32_t edge_switch_index) {
    uint32_t n = nics_made++;
    return w.node(NodeKind::kNic, 1, fmt::format("nic{:05}", n),
                  Location{-1, -1, static_cast<int32_t>(edge_switch_index), -1, "nic"}, 0);
  }

  const char* role(uint32_t level) const {
    if (level == levels) return "core";
    return level == 1 ? "edge" : "aggregation";
  }

  uint32_t make_switch(uint32_t level) {
    uint32_t n = switches_made++;
    return w.node(NodeKind::kNrc, k, fmt::format("l{}/sw{:05}", level, n),
                  Location{-1, -1, static_cast<int32_t>(n), -1, role(level)},
                  static_cast<uint8_t>(level));
  }

  // A level-L block (L < levels): half^(L-1) switches at each level 1..L and half^L hosts.
  // Returns its level-L switches; switch s has up ports half..k-1 still free.
  std::vector<uint32_t> block(uint32_t level) {
    if (level == 1) {
      uint32_t index = switches_made;
      uint32_t sw = make_switch(1);
      for (uint32_t p = 0; p < half; ++p) w.link(sw, p, make_nic(index), 0);
      return {sw};
    }
    std::vector<std::vector<uint32_t>> sub(half);
    for (auto& s : sub) s = block(level - 1);
    return join(sub, level, half);
  }

  // Switch (j, u) at `level` (index j * half + u) takes, on down port b, switch j of sub-block b
  // through that switch's up port half + u.
  std::vector<uint32_t> join(const std::vector<std::vector<uint32_t>>& sub, uint32_t level,
                             uint32_t down_ports) {
    size_t width = sub.front().size();
    std::vector<uint32_t> top;
    top.reserve(width * half);
    for (size_t j = 0; j < width; ++j)
      for (uint32_t u = 0; u < half; ++u) {
        uint32_t sw = make_switch(level);
        top.push_back(sw);
        for (uint32_t b = 0; b < down_ports; ++b) w.link(sw, b, sub[b][j], half + u);
      }
    return top;
  }
};

}  // namespace

Result<Topology> build_fattree(const Spec& spec) {
  GALAXY_TRY(spec.check_known({"k", "levels"}));
  if (!spec.positional.empty())
    return make_error(
        Code::kInvalidArgument, 3300,
        fmt::format("fattree: unexpected positional parameter '{}'", spec.positional.front()));
  auto k_r = spec.get_int("k", 4, 4, kMaxPorts);
  GALAXY_TRY(k_r);
  auto levels_r = spec.get_int("levels", 3, 1, 8);
  GALAXY_TRY(levels_r);
  const uint32_t k = static_cast<uint32_t>(*k_r);
  const uint32_t levels = static_cast<uint32_t>(*levels_r);
  if (k % 2 != 0)
    return make_error(Code::kInvalidArgument, 3301,
                      fmt::format("fattree: k = {} must be even (half the ports go up)", k));
  const uint32_t half = k / 2;
  uint64_t per_level = 1;  // half^(levels-1)
  for (uint32_t i = 1; i < levels; ++i) per_level *= half;
  uint64_t hosts = 2 * per_level * half;
  uint64_t switches = 2 * per_level * (levels - 1) + per_level;
  if (hosts + switches > kMaxNodes)
    return make_error(Code::kOutOfRange, 3302,
                      fmt::format("fattree: k = {}, levels = {} gives {} nodes, more than {}", k,
                                  levels, hosts + switches, kMaxNodes));
  detail::TopologyWriter w(static_cast<uint32_t>(hosts + switches),
                           static_cast<uint32_t>(hosts + switches * k));
  FatTree tree{w, k, half, levels};
  if (levels == 1) {
    uint32_t sw = tree.make_switch(1);
    for (uint32_t p = 0; p < k; ++p) w.link(sw, p, tree.make_nic(0), 0);
  } else {
    // The top level joins K blocks of level N-1 and uses all K ports downwards.
    std::vector<std::vector<uint32_t>> sub(k);
    for (auto& s : sub) s = tree.block(levels - 1);
    tree.join(sub, levels, k);
  }
  return w.finish();
}

}  // namespace galaxy::fabric
