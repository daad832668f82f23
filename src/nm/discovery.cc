#include "nm/discovery.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "chip/network_port.h"
#include "chip/nic.h"
#include "chip/registers.h"

namespace galaxy::nm {

namespace {

// Discovery reads peers in the wide identity format, which names ports and radices up to
// kMaxSwitchPorts (the TH-2 format's 5-bit port field cannot name ports above 31).
using PeerInfo = chip::reg::WidePeer;

// The BFS state; requests complete through callbacks so serial and pipelined share the code.
class Bfs {
 public:
  Bfs(Requester& r, const DiscoveryOptions& o) : req_(r), opt_(o) {}

  Result<DiscoveryResult> run() {
    MgmtPort& port = req_.port();
    Picoseconds start = port.now();
    // The server NIC's packets leave on its first port linked to an NRC (chip/network_port.h):
    // an HCA may be cabled on its second port only. A read past its last port fails.
    std::vector<PeerInfo> peers;  // read in port order until one qualifies or a read fails
    std::optional<Error> unreadable;
    const auto out = chip::network_port(chip::kMaxNicPorts, [&](uint8_t p) {
      if (unreadable) return false;  // a read past the NIC's last port: no more ports
      auto ident =
          port.read_local_register(chip::reg::port_register(p, chip::reg::port::kPeerIdent));
      if (!ident.ok()) {
        unreadable = ident.error();
        return false;
      }
      peers.push_back(chip::reg::decode_wide_peer(static_cast<uint32_t>(*ident >> 32)));
      return peers.back().linked && peers.back().nrc;
    });
    if (peers.empty() && unreadable) return *unreadable;
    // Whether this fabric's chip ids may take 17 bits, as the server NIC's CHIP_ID says; then
    // bit 16 of its NRC's chip id (registers.h PEER_SUMMARY_HIGH).
    if (auto id = port.read_local_register(chip::reg::kChipId); id.ok())
      wide_ids_ = chip::reg::chip_id_wide(*id);
    if (out && wide_ids_) {
      auto high =
          port.read_local_register(static_cast<uint16_t>(chip::reg::kPeerSummaryHigh + *out / 64));
      if (!high.ok()) return high.error();
      peers[*out] = chip::reg::with_high_bit(peers[*out], *out, *high);
    }
    server_ = port.server_chip_id();
    chips_[server_] = {false, 0, {}, 0};
    if (!out)
      return make_error(
          Code::kNotFound, 5030,
          "discovery: no port of the server NIC has an NRC at the other end (link down?)");
    const PeerInfo& first = peers[*out];
    links_.push_back(key(server_, *out, first.chip, first.port));
    MgmtTarget t;
    t.chip_id = first.chip;
    t.type = wire::ChipType::kNrc;
    (void)t.backward.push(first.port);
    visit(t, 0, first.ports);

    RequesterOptions ro = req_.options();
    if (opt_.pipelined) {
      ro.global_window = opt_.global_window;
      ro.per_chip_window = opt_.per_chip_window;
    } else {
      ro.global_window = ro.per_chip_window = 1;
    }
    req_.set_options(ro);
    req_.run();
    result_.elapsed = port.now() - start;
    // Reported unless another, shorter way reached them after all.
    for (const auto& [chip, why] : beyond_)
      if (!chips_.count(chip)) result_.problems.push_back(why);
    build_map();
    return std::move(result_);
  }

 private:
  struct Chip {
    bool nrc = true;
    uint8_t hops = 0;
    MgmtTarget target;
    uint16_t ports = 0;
  };
  using LinkKey = std::tuple<wire::ChipId, uint8_t, wire::ChipId, uint8_t>;
  static LinkKey key(wire::ChipId a, uint8_t pa, wire::ChipId b, uint8_t pb) {
    return std::make_tuple(a, pa, b, pb) < std::make_tuple(b, pb, a, pa) ? LinkKey{a, pa, b, pb}
                                                                         : LinkKey{b, pb, a, pa};
  }

  // A chip found at `port` of chip `from` whose route from the server NIC, or back, would need
  // more hops than a management packet's source route holds (docs/system.md 2.2): it is not reached
  // by a truncated route (which would lead elsewhere) but reported, once.
  void beyond_reach(wire::ChipId chip, wire::ChipId from, uint8_t port) {
    beyond_.emplace(chip, fmt::format("E5031 chip {} (at port {} of chip {}) is not managed: its "
                                      "route from the server NIC or back needs more than {} "
                                      "NRC hops (20 through ports above 31), the most a "
                                      "management packet's source route holds",
                                      chip, port, from, wire::kMaxRouteHops));
  }

  // A newly found NRC: read the peer identity of all its ports, two registers per packet, and
  // on a fabric of wide chip ids bit 16 of their ids (PEER_SUMMARY_HIGH, one register per 64
  // ports; in the packet of the last identity register when it has room). `ports` is the radix
  // the neighbour learnt with the identity. Identities are taken in as their packets arrive, or
  // on a fabric of wide ids once all of the NRC's have.
  void visit(const MgmtTarget& t, uint8_t hops, uint16_t ports) {
    chips_[t.chip_id] = {true, hops, t, ports};
    order_.push_back(t.chip_id);
    std::vector<uint16_t> addrs;
    const unsigned words = (ports + 1u) / 2;
    for (unsigned w = 0; w < words; ++w)
      addrs.push_back(static_cast<uint16_t>(chip::reg::kPeerSummaryWide + w));
    for (unsigned w = 0; wide_ids_ && w * 64 < ports; ++w)
      addrs.push_back(static_cast<uint16_t>(chip::reg::kPeerSummaryHigh + w));
    auto summary = std::make_shared<Summary>();
    summary->values.resize(addrs.size());
    summary->words = words;
    summary->ports = ports;
    for (size_t i = 0; i < addrs.size(); i += 2) {
      MgmtRequest r = i + 1 < addrs.size() ? MgmtRequest::read2(t, addrs[i], addrs[i + 1])
                                           : MgmtRequest::read(t, addrs[i]);
      ++result_.requests;
      ++summary->waiting;
      req_.submit(r, [this, t, hops, i, summary](const MgmtReply& reply) {
        on_summary(t, hops, i, *summary, reply);
      });
    }
  }

  // The registers a visit reads: the identity words, then any PEER_SUMMARY_HIGH words.
  struct Summary {
    std::vector<uint64_t> values;
    unsigned words = 0;
    uint16_t ports = 0;
    unsigned waiting = 0;
  };

  void on_summary(const MgmtTarget& t, uint8_t hops, size_t first, Summary& s,
                  const MgmtReply& reply) {
    --s.waiting;
    if (!reply.status.ok()) {
      ++result_.failed_requests;
      result_.problems.push_back(fmt::format("chip {}: {}", t.chip_id, reply.status.to_string()));
    } else {
      for (uint8_t i = 0; i < reply.response.data.count && first + i < s.values.size(); ++i)
        s.values[first + i] = reply.response.data.value[i];
      if (!wide_ids_) take_peers(t, hops, s, first, std::min<size_t>(first + 2, s.words));
    }
    // A failed read loses only the ports it covered (they read as no peer).
    if (wide_ids_ && s.waiting == 0) take_peers(t, hops, s, 0, s.words);
  }

  // The peers in identity words [first, end) of `s`.
  void take_peers(const MgmtTarget& t, uint8_t hops, const Summary& s, size_t first, size_t end) {
    for (size_t w = first; w < end; ++w) {
      uint64_t v = s.values[w];
      for (int half = 0; half < 2; ++half) {
        uint8_t port = static_cast<uint8_t>(2 * w + half);
        if (port >= s.ports) continue;
        const uint64_t high = wide_ids_ ? s.values[s.words + port / 64] : 0;
        PeerInfo peer = chip::reg::with_high_bit(
            chip::reg::decode_wide_peer(static_cast<uint32_t>(v >> (32 * half))), port, high);
        if (!peer.linked) continue;
        links_.push_back(key(t.chip_id, port, peer.chip, peer.port));
        if (!peer.nrc) {
          if (!chips_.count(peer.chip)) {
            MgmtTarget n;
            n.chip_id = peer.chip;
            n.type = wire::ChipType::kNic;
            n.forward = t.forward;
            n.backward = t.backward;
            if (!n.forward.push(port).ok() || !n.forward.carried()) {
              beyond_reach(peer.chip, t.chip_id, port);
              continue;
            }
            chips_[peer.chip] = {false, static_cast<uint8_t>(hops + 1), n, 0};
          }
          continue;
        }
        if (chips_.count(peer.chip)) continue;  // known NRC: skip
        MgmtTarget n;
        n.chip_id = peer.chip;
        n.type = wire::ChipType::kNrc;
        n.forward = t.forward;
        // Back: out of the new NRC's port towards t, then t's way back.
        bool fits = n.forward.push(port).ok() && n.backward.push(peer.port).ok();
        for (uint8_t h = 0; fits && h < t.backward.hop_num; ++h)
          fits = n.backward.push(t.backward.hops[h]).ok();
        if (!fits || !n.forward.carried() || !n.backward.carried()) {
          beyond_reach(peer.chip, t.chip_id, port);
          continue;
        }
        visit(n, static_cast<uint8_t>(hops + 1), peer.ports);
      }
    }
  }

  void build_map() {
    FabricMap& m = result_.map;
    // Each link was seen from both ends (once from a NIC's NRC): once each, in order.
    std::sort(links_.begin(), links_.end());
    links_.erase(std::unique(links_.begin(), links_.end()), links_.end());
    // Ports per chip: NRCs have the radix; NICs as many as seen in use.
    std::map<wire::ChipId, uint8_t> max_port;
    for (const auto& [a, pa, b, pb] : links_) {
      max_port[a] = std::max(max_port[a], pa);
      max_port[b] = std::max(max_port[b], pb);
    }
    std::vector<wire::ChipId> ids{server_};
    for (wire::ChipId id : order_) ids.push_back(id);
    for (const auto& [id, c] : chips_)
      if (!c.nrc && id != server_) ids.push_back(id);
    for (wire::ChipId id : ids) {
      const Chip& c = chips_[id];
      uint32_t ports = c.nrc ? c.ports : static_cast<uint32_t>(max_port[id]) + 1;
      auto node = m.topology.add_node(c.nrc ? fabric::NodeKind::kNrc : fabric::NodeKind::kNic,
                                      ports, fmt::format("{}{}", c.nrc ? "nrc" : "nic", id));
      m.node_of[id] = *node;
      m.chip_id.push_back(id);
      m.target.push_back(c.target);
      m.hops.push_back(c.hops);
    }
    for (const auto& [a, pa, b, pb] : links_) {
      auto na = m.node_of.find(a), nb = m.node_of.find(b);
      if (na == m.node_of.end() || nb == m.node_of.end()) continue;
      Status s = m.topology.connect({na->second, pa}, {nb->second, pb});
      if (!s.ok())
        result_.problems.push_back(
            fmt::format("link {}:{} - {}:{}: {}", a, pa, b, pb, s.to_string()));
    }
    m.server_node = 0;
  }

  Requester& req_;
  DiscoveryOptions opt_;
  DiscoveryResult result_;
  wire::ChipId server_ = 0;
  bool wide_ids_ = false;  // CHIP_ID [18] of the server NIC: read PEER_SUMMARY_HIGH
  std::map<wire::ChipId, Chip> chips_;
  std::vector<wire::ChipId> order_;             // NRCs in discovery order
  std::vector<LinkKey> links_;                  // as found; sorted and made unique by build_map
  std::map<wire::ChipId, std::string> beyond_;  // chips beyond the source routes' reach, and why
};

}  // namespace

Result<DiscoveryResult> discover(Requester& requester, const DiscoveryOptions& options) {
  Bfs bfs(requester, options);
  return bfs.run();
}

bool same_fabric(const FabricMap& found, const fabric::Topology& plan) {
  return check_cabling(found, plan).empty() && found.num_nodes() == plan.num_nodes();
}

std::vector<CablingIssue> check_cabling(const FabricMap& found, const fabric::Topology& plan) {
  std::vector<CablingIssue> out;
  auto fname = [&](wire::ChipId chip, uint8_t port) {
    return fmt::format(
        "{}:{}", chip < plan.num_nodes() ? plan.name(chip) : fmt::format("chip{}", chip), port);
  };
  // Planned links, by chip id (= plan node id).
  for (uint32_t v = 0; v < plan.num_nodes(); ++v) {
    for (uint8_t p = 0; p < plan.num_ports(v); ++p) {
      auto want = plan.peer({v, p});
      auto it = found.node_of.find(static_cast<wire::ChipId>(v));
      std::optional<fabric::PortRef> got;
      if (it != found.node_of.end() && p < found.topology.num_ports(it->second))
        got = found.topology.peer({it->second, p});
      if (want && (want->node < v || (want->node == v && want->port < p))) continue;  // once
      if (want && !got) {
        out.push_back({CablingIssue::Kind::kMissing, fname(static_cast<wire::ChipId>(v), p),
                       fname(static_cast<wire::ChipId>(want->node), want->port),
                       "planned link not found"});
      } else if (want && got) {
        wire::ChipId gchip = found.chip_id[got->node];
        if (gchip != want->node || got->port != want->port)
          out.push_back({CablingIssue::Kind::kMiswired, fname(static_cast<wire::ChipId>(v), p),
                         fname(static_cast<wire::ChipId>(want->node), want->port),
                         fmt::format("found connected to {} instead", fname(gchip, got->port))});
      }
    }
  }
  // Links found that the plan does not have.
  for (uint32_t n = 0; n < found.num_nodes(); ++n) {
    for (uint8_t p = 0; p < found.topology.num_ports(n); ++p) {
      auto got = found.topology.peer({n, p});
      if (!got || got->node < n) continue;
      wire::ChipId a = found.chip_id[n], b = found.chip_id[got->node];
      bool planned = a < plan.num_nodes() && p < plan.num_ports(a) && plan.peer({a, p});
      if (!planned)
        out.push_back(
            {CablingIssue::Kind::kExtra, fname(a, p), fname(b, got->port), "link not in the plan"});
    }
  }
  return out;
}

}  // namespace galaxy::nm
