#include "nm/ib_discovery.h"

#include <fmt/format.h>

namespace galaxy::nm {
namespace {

using wire::MadMethod;
using wire::SmpAttr;

std::string path_text(const std::vector<uint8_t>& path) {
  std::string s = "0";
  for (uint8_t p : path) s += fmt::format(",{}", p);
  return s;
}

class Discoverer {
 public:
  Discoverer(IbRequester& requester, IbSubnet& subnet) : rq_(requester), net_(subnet) {}

  void get(SmpAttr attr, uint32_t modifier, const std::vector<uint8_t>& path, IbReplyFn done) {
    auto smp = wire::Smp::directed_request(MadMethod::kGet, attr, modifier, path);
    if (!smp) {
      net_.problems.push_back(smp.error().to_string());
      return;
    }
    rq_.submit(*smp, wire::kPermissiveLid, std::move(done));
  }

  // NodeInfo at the end of `path`, entered from (from_node, from_port) when there is one.
  void probe(std::vector<uint8_t> path, uint32_t from_node, uint8_t from_port) {
    get(SmpAttr::kNodeInfo, 0, path,
        [this, path, from_node, from_port](const Status& s, const wire::Smp& a) {
          on_node_info(s, a, path, from_node, from_port);
        });
  }

  void on_node_info(const Status& s, const wire::Smp& a, const std::vector<uint8_t>& path,
                    uint32_t from_node, uint8_t from_port) {
    if (!s) {
      net_.problems.push_back(
          fmt::format("NodeInfo at directed route {}: {}", path_text(path), s.error().message));
      return;
    }
    auto ni = wire::decode_node_info(a.data);
    if (!ni) {
      net_.problems.push_back(
          fmt::format("NodeInfo at directed route {}: {}", path_text(path), ni.error().message));
      return;
    }
    const uint8_t lp = ni->local_port_num;
    auto [it, added] =
        net_.by_guid.emplace(ni->node_guid, static_cast<uint32_t>(net_.nodes.size()));
    const uint32_t n = it->second;
    if (added) {
      IbNode node;
      node.info = *ni;
      node.path = path;
      node.ports.resize(ni->num_ports + 1u);
      if (node.is_switch()) node.ports[0].guid = ni->port_guid;
      net_.nodes.push_back(std::move(node));
      if (path.empty()) {
        net_.sm_node = n;
        net_.sm_port = lp;
      }
      get(SmpAttr::kNodeDescription, 0, path, [this, n](const Status& st, const wire::Smp& r) {
        if (st) net_.nodes[n].description = wire::decode_node_description(r.data);
      });
      if (net_.nodes[n].is_switch()) {
        get(SmpAttr::kSwitchInfo, 0, path, [this, n](const Status& st, const wire::Smp& r) {
          if (st) net_.nodes[n].switch_info.raw = r.data;
        });
        for (uint32_t p = 0; p <= ni->num_ports; ++p) read_port(n, static_cast<uint8_t>(p), path);
      }
    } else if (net_.nodes[n].info.node_type != ni->node_type) {
      net_.problems.push_back(
          fmt::format("GUID {:#018x} answers as two kinds of node", ni->node_guid));
      return;
    }
    IbNode& node = net_.nodes[n];
    if (lp > node.info.num_ports) {
      net_.problems.push_back(
          fmt::format("{}: entered through port {} of {}", net_.name(n), lp, node.info.num_ports));
      return;
    }
    if (!node.is_switch() && !node.ports[lp].entered) {
      node.ports[lp].entered = true;
      node.ports[lp].guid = ni->port_guid;
      node.ports[lp].path = path;
      read_port(n, lp, path);
    }
    if (from_node != kNoIbNode) link(from_node, from_port, n, lp);
  }

  void read_port(uint32_t n, uint8_t p, const std::vector<uint8_t>& path) {
    get(SmpAttr::kPortInfo, p, path, [this, n, p, path](const Status& st, const wire::Smp& r) {
      if (!st) {
        net_.problems.push_back(
            fmt::format("{} port {}: PortInfo: {}", net_.name(n), p, st.error().message));
        return;
      }
      IbPort& port = net_.nodes[n].ports[p];
      port.known = true;
      port.info.raw = r.data;
      // Another SM behind this port (not the SM's own node): what it says of itself.
      if (!path.empty() && (port.info.capability_mask() & wire::kCapIsSm) &&
          (net_.nodes[n].is_switch() ? p == 0 : true))
        read_sm_info(n, p, path);
      const bool up = port.info.phys_state() == wire::kPhysLinkUp &&
                      port.info.port_state() >= static_cast<uint8_t>(wire::IbPortState::kInit);
      // A switch's linked ports lead on; a CA is left only from the SM's own port (a directed
      // route may not pass through a CA).
      const bool expand = net_.nodes[n].is_switch() ? p != 0 : path.empty();
      if (!up || !expand || port.linked()) return;
      if (path.size() >= wire::kSmpMaxHops) {
        net_.problems.push_back(
            fmt::format("{} port {}: beyond it a directed route would exceed {} hops", net_.name(n),
                        p, wire::kSmpMaxHops));
        return;
      }
      auto next = path;
      next.push_back(p);
      probe(std::move(next), n, p);
    });
  }

  void read_sm_info(uint32_t n, uint8_t p, const std::vector<uint8_t>& path) {
    const size_t k = net_.sms.size();
    IbSmSeen seen;
    seen.port = {n, p};
    seen.lid = net_.nodes[n].ports[p].info.lid();
    net_.sms.push_back(std::move(seen));
    get(SmpAttr::kSmInfo, 0, path, [this, k](const Status& st, const wire::Smp& r) {
      IbSmSeen& sm = net_.sms[k];
      if (!st) {
        sm.error = st.error().message;
        return;
      }
      sm.answered = true;
      sm.info = wire::decode_sm_info(r.data);
    });
  }

  void link(uint32_t a, uint8_t pa, uint32_t b, uint8_t pb) {
    IbPort& x = net_.nodes[a].ports[pa];
    IbPort& y = net_.nodes[b].ports[pb];
    if (x.peer_node == b && x.peer_port == pb) return;  // seen from both ends
    if (x.linked() || y.linked()) {
      net_.problems.push_back(
          fmt::format("{} port {} and {} port {}: a link seen differently "
                      "from its two ends",
                      net_.name(a), pa, net_.name(b), pb));
      return;
    }
    x.peer_node = b;
    x.peer_port = pb;
    y.peer_node = a;
    y.peer_port = pa;
  }

 private:
  IbRequester& rq_;
  IbSubnet& net_;
};

}  // namespace

uint32_t IbSubnet::num_switches() const {
  uint32_t n = 0;
  for (const auto& node : nodes) n += node.is_switch();
  return n;
}

uint32_t IbSubnet::num_ca_ports() const {
  uint32_t n = 0;
  for (const auto& node : nodes)
    if (!node.is_switch())
      for (size_t p = 1; p < node.ports.size(); ++p) n += node.ports[p].entered;
  return n;
}

uint64_t IbSubnet::num_links() const {
  uint64_t n = 0;
  for (const auto& node : nodes)
    for (const auto& p : node.ports) n += p.linked();
  return n / 2;
}

uint16_t IbSubnet::sm_lid() const {
  if (sm_node == kNoIbNode) return 0;
  return nodes[sm_node].ports[nodes[sm_node].is_switch() ? 0 : sm_port].lid;
}

std::string IbSubnet::name(uint32_t node) const {
  const IbNode& n = nodes[node];
  return fmt::format("{}-{:016x} \"{}\"", n.is_switch() ? 'S' : 'H', n.info.node_guid,
                     n.description);
}

Result<IbSubnet> discover_ib(IbRequester& requester) {
  IbSubnet net;
  Discoverer d(requester, net);
  d.probe({}, kNoIbNode, 0);
  if (Status s = requester.run(); !s) return s.error();
  if (net.nodes.empty()) {
    return make_error(Code::kTimeout, 7110,
                      fmt::format("discovery: the SM's own node did not answer NodeInfo{}",
                                  net.problems.empty() ? "" : " (" + net.problems.front() + ")"));
  }
  return net;
}

}  // namespace galaxy::nm
