// An InfiniBand subnet modelled inside a test, so that the SM, the daemon and the tools built on
// them run in-process with no ibsim: every node's SMA answers directed-route and LID-routed
// Gets and Sets as IBA chapter 14 says (NodeInfo, NodeDescription, SwitchInfo, PortInfo with
// the port state machine of IBA 7.2, LinearForwardingTable), every port's PMA answers
// PortCounters (IBA 16.1.3.5) at its LID, and the test unplugs cables and sets counters as
// ibsim's console does. Every SMA checks M_Keys as IBA 14.2.4 says (ibsim does not): protect
// bits 1-2 refuse Sets without the key, 3 Gets too, 2 hides the key in PortInfo answers; a
// refused SMP is not answered, is counted in M_KeyViolations, starts the lease and sends the
// SM a Bad M_Key trap (256); a lease that runs out clears the protect bits. Built from a
// fabric::Topology (IB port = topology port + 1), so the builders' fabrics serve as subnets; the SM
// is attached at one CA's port 1.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "fabric/topology.h"
#include "ib/smp_port.h"
#include "wire/ib_perf.h"
#include "wire/ib_sa.h"
#include "wire/ib_smp.h"

namespace galaxy::test {

class ModelSubnet final : public ib::SmpPort {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  static constexpr uint16_t kLinearFdbCap = 0xC000;

  ModelSubnet(const fabric::Topology& t, uint32_t sm_node) : sm_(sm_node) {
    nodes_.resize(t.num_nodes());
    for (uint32_t n = 0; n < t.num_nodes(); ++n) {
      Node& node = nodes_[n];
      node.is_switch = !t.is_nic(n);
      node.guid = (node.is_switch ? 0x0002c90200400000ull : 0x0002c90300500000ull) + 0x100 * n;
      node.description = t.name(n);
      node.ports.resize(t.num_ports(n) + 1u);
      for (uint32_t p = 1; p <= t.num_ports(n); ++p)
        if (auto peer = t.peer({n, static_cast<uint8_t>(p - 1)})) {
          node.ports[p].peer = peer->node;
          node.ports[p].peer_port = static_cast<uint8_t>(peer->port + 1);
        }
      for (uint32_t p = 0; p < node.ports.size(); ++p) {
        Port& port = node.ports[p];
        port.info.raw[28] = static_cast<uint8_t>(p);  // LocalPortNum
        port.info.raw[31] = 2;                        // LinkWidthActive 4x
        port.info.raw[35] = 4 << 4;                   // LinkSpeedActive QDR
        port.info.raw[36] = 5 << 4;                   // NeighborMTU 4096
        port.info.raw[41] = 5;                        // MTUCap 4096
        const bool up = port.peer != kNone || (node.is_switch && p == 0);
        port.info.set_phys_state(up ? wire::kPhysLinkUp : 2);  // 2: Polling
        port.info.set_port_state(up ? wire::IbPortState::kInit : wire::IbPortState::kDown);
      }
      if (node.is_switch) {
        node.switch_info.raw[0] = kLinearFdbCap >> 8;
        node.switch_info.raw[1] = kLinearFdbCap & 0xFF;
      }
    }
    local_.ca = "model0";
    local_.port = 1;
    local_.port_guid = nodes_[sm_].guid + 1;
  }

  // ibsim's "Unlink": both ends lose the cable and go Down.
  void unplug(uint32_t node, uint8_t port) {
    Port& a = nodes_[node].ports[port];
    if (a.peer == kNone) return;
    Port& b = nodes_[a.peer].ports[a.peer_port];
    const uint32_t far = a.peer;
    for (Port* p : {&a, &b}) {
      p->peer = kNone;
      p->info.set_phys_state(2);
      p->info.set_port_state(wire::IbPortState::kDown);
    }
    // A switch whose port went down says so in SwitchInfo (IBA 14.2.5.4).
    for (uint32_t n : {node, far})
      if (nodes_[n].is_switch) nodes_[n].switch_info.set_port_state_change(true);
  }
  // Another SM behind CA `node` port 1: the port says IsSM (CapabilityMask, big-endian at byte
  // 20) and answers SMInfo with `info`, or not at all (nullopt: an SM process gone).
  void run_sm(uint32_t node, std::optional<wire::SmInfo> info) {
    wire::PortInfo& pi = nodes_[node].ports[1].info;
    pi.raw[23] |= wire::kCapIsSm;
    nodes_[node].sm = info;
  }
  wire::PortCounters& counters(uint32_t node, uint8_t port) {
    return nodes_[node].ports[port].counters;
  }
  uint8_t port_state(uint32_t node, uint8_t port) const {
    return nodes_[node].ports[port].info.port_state();
  }
  // A switch's LID is its port 0's; a CA port's its own.
  uint16_t lid(uint32_t node, uint8_t port) const {
    return nodes_[node].ports[nodes_[node].is_switch ? 0 : port].info.lid();
  }
  uint64_t guid(uint32_t node) const { return nodes_[node].guid; }
  uint16_t linear_fdb_top(uint32_t node) const { return nodes_[node].switch_info.linear_fdb_top(); }
  // The output port switch `node` holds for `lid` (wire::kLftNoPort: none).
  uint8_t lft(uint32_t node, uint16_t lid) const {
    const auto& t = nodes_[node].lft;
    return lid < t.size() ? t[lid] : wire::kLftNoPort;
  }
  // A packet from CA `node` port `port` to `dlid` through the tables: the (node, port) it is
  // delivered to, or nullopt where it is lost (no entry, a port not ACTIVE, a loop).
  std::optional<std::pair<uint32_t, uint8_t>> deliver(uint32_t node, uint8_t port,
                                                      uint16_t dlid) const {
    const Port* out = &nodes_[node].ports[port];
    for (unsigned hops = 0; hops < 64; ++hops) {
      if (out->peer == kNone || out->info.port_state() != uint8_t(wire::IbPortState::kActive))
        return std::nullopt;
      const uint32_t n = out->peer;
      const uint8_t in = out->peer_port;
      const Node& at = nodes_[n];
      if (!at.is_switch) {
        if (at.ports[in].info.lid() != dlid) return std::nullopt;
        return std::pair{n, in};
      }
      const uint8_t p = lft(n, dlid);
      if (p == 0 && at.ports[0].info.lid() == dlid) return std::pair{n, uint8_t{0}};
      if (p == wire::kLftNoPort || p == 0 || p >= at.ports.size()) return std::nullopt;
      out = &at.ports[p];
    }
    return std::nullopt;
  }

  const ib::LocalPort& local() const override { return local_; }
  Status send(const wire::Smp& smp, uint16_t dlid) override {
    sent_smps++;
    queue_.push_back({smp, std::nullopt, dlid});
    return {};
  }
  Status send_gmp(const wire::Mad& mad, uint16_t dlid) override {
    sent_gmps.emplace_back(mad, dlid);
    queue_.push_back({{}, mad, dlid});
    return {};
  }
  Result<ib::SmpCompletion> receive(int) override {
    if (queue_.empty()) return make_error(Code::kTimeout, 1, "nothing in flight");
    Request r = std::move(queue_.front());
    queue_.pop_front();
    ib::SmpCompletion c;
    if (r.gmp) {
      c.tid = static_cast<uint32_t>(r.gmp->transaction_id);
      c.gmp = answer_gmp(*r.gmp, r.dlid);
    } else {
      c.tid = static_cast<uint32_t>(r.smp.transaction_id);
      c.smp = r.smp;
      // An SMP the SMA discards (a wrong M_Key) is never answered: the transport times out.
      if (!answer_smp(c.smp, r.dlid))
        c.status = make_error(Code::kTimeout, 1, "no answer (discarded by the SMA: M_Key)");
    }
    return c;
  }

  // The SM under test's own SMInfo agent (SmpPort::serve_sm): a request from another SM handed to
  // it, as the port hands those that arrive -> its answer.
  Status serve_sm(ib::SmRequestHandler h) override {
    sm_handler_ = std::move(h);
    return {};
  }
  std::optional<wire::Smp> ask_sm(const wire::Smp& request) {
    return sm_handler_ ? sm_handler_(request) : std::nullopt;
  }
  // The SM's agents of other classes (SmpPort::serve_class): subnet administration.
  Status serve_class(wire::MgmtClass cls, uint8_t, ib::GmpRequestHandler h) override {
    class_handlers_[static_cast<uint8_t>(cls)] = std::move(h);
    return {};
  }
  std::optional<ib::GmpAnswer> ask_class(const wire::Mad& request, ib::GmpSource from = {}) {
    auto& h = class_handlers_[static_cast<uint8_t>(request.mgmt_class)];
    return h ? h(request, from) : std::nullopt;
  }
  // General management packets the SM sent (the SA's Reports among them), with their LID.
  std::vector<std::pair<wire::Mad, uint16_t>> sent_gmps;

  uint64_t sent_smps = 0;
  uint64_t sets = 0;            // Set SMPs answered
  uint64_t bad_mkey_traps = 0;  // traps 256 the SMAs sent the SM
  // The M_Key fields of a port as the SMA holds them (the key itself included).
  const wire::PortInfo& port_info(uint32_t node, uint8_t port) const {
    return nodes_[node].ports[port].info;
  }

 private:
  std::array<ib::GmpRequestHandler, 256> class_handlers_;
  struct Port {
    uint32_t peer = kNone;
    uint8_t peer_port = 0;
    wire::PortInfo info;
    wire::PortCounters counters;
    std::optional<std::chrono::steady_clock::time_point> lease_ends;
  };
  struct Node {
    bool is_switch = false;
    uint64_t guid = 0;
    std::string description;
    std::vector<Port> ports;  // [0 .. NumPorts]
    wire::SwitchInfo switch_info;
    std::vector<uint8_t> lft;
    std::optional<wire::SmInfo> sm;  // an SM's answer to SMInfo (run_sm)
  };
  struct Request {
    wire::Smp smp;
    std::optional<wire::Mad> gmp;
    uint16_t dlid = 0;
  };

  // The (node, port) holding `lid`; kNone when no port does.
  std::pair<uint32_t, uint8_t> holder(uint16_t lid) const {
    for (uint32_t n = 0; n < nodes_.size(); ++n)
      for (uint32_t p = 0; p < nodes_[n].ports.size(); ++p) {
        if (nodes_[n].is_switch && p > 0) break;
        if (!nodes_[n].is_switch && p == 0) continue;
        if (lid != 0 && nodes_[n].ports[p].info.lid() == lid) return {n, static_cast<uint8_t>(p)};
      }
    return {kNone, 0};
  }

  wire::Mad answer_gmp(wire::Mad m, uint16_t dlid) {
    m.method = wire::MadMethod::kGetResp;
    const auto [n, lid_port] = holder(dlid);
    const uint8_t port = m.data[wire::kPerfDataAt + 1];
    if (n == kNone || m.attribute_id != wire::kPerfPortCounters || port >= nodes_[n].ports.size()) {
      m.status = 0x0C;  // unsupported attribute or port
      return m;
    }
    (void)lid_port;
    wire::PortCounters c = nodes_[n].ports[port].counters;
    c.port_select = port;
    wire::encode_port_counters(c, m);
    return m;
  }

  // IBA 14.2.4.2: whether the SMA at `n` (its switch port 0, or the CA port the SMP came in
  // by) takes `r`; false: discarded, counted, the lease started, a trap sent.
  bool m_key_allows(uint32_t n, uint8_t keyed_port, const wire::Smp& r, bool set) {
    Port& port = nodes_[n].ports[keyed_port];
    wire::PortInfo& pi = port.info;
    const uint64_t key = pi.m_key();
    if (key == 0 || r.m_key == key) {
      port.lease_ends.reset();
      return true;
    }
    const uint8_t bits = pi.m_key_protect_bits();
    if (bits == 0 || (!set && bits < 3)) return true;
    const auto now = std::chrono::steady_clock::now();
    if (pi.m_key_lease_period() != 0) {
      if (!port.lease_ends) {
        port.lease_ends = now + std::chrono::seconds(pi.m_key_lease_period());
      } else if (now >= *port.lease_ends) {
        pi.set_m_key_protect_bits(0);
        port.lease_ends.reset();
        return true;
      }
    }
    if (pi.m_key_violations() != 0xFFFF) pi.set_m_key_violations(pi.m_key_violations() + 1);
    // Trap 256 (Bad M_Key, IBA 14.2.5.1) to the SM: the issuer's LID, then the offending
    // SMP's method and attribute in the details.
    if (sm_handler_) {
      wire::Notice notice;
      notice.type = 2;  // security
      notice.producer = nodes_[n].is_switch ? 2 : 1;
      notice.trap_number = 256;
      notice.issuer_lid = nodes_[n].ports[nodes_[n].is_switch ? 0 : keyed_port].info.lid();
      notice.details[2] = static_cast<uint8_t>(set ? wire::MadMethod::kSet : wire::MadMethod::kGet);
      notice.details[4] = static_cast<uint8_t>(r.attribute_id >> 8);
      notice.details[5] = static_cast<uint8_t>(r.attribute_id);
      std::array<uint8_t, wire::kNoticeBytes> raw{};
      encode_notice(notice, raw);
      wire::Smp trap;
      trap.directed = false;
      trap.method = wire::MadMethod::kTrap;
      trap.attribute_id = static_cast<uint16_t>(wire::SmpAttr::kNotice);
      std::copy_n(raw.begin(), trap.data.size(), trap.data.begin());
      ++bad_mkey_traps;
      (void)sm_handler_(trap);
    }
    return false;
  }

  // false: the SMP was discarded (never answered).
  bool answer_smp(wire::Smp& r, uint16_t dlid) {
    const bool set = r.method == wire::MadMethod::kSet;
    r.method = wire::MadMethod::kGetResp;
    r.returning = r.directed;
    uint32_t n = sm_;
    uint8_t in_port = 1;  // the SM's CA port
    if (r.directed) {
      for (unsigned h = 1; h <= r.hop_count; ++h) {
        if (h > 1 && !nodes_[n].is_switch) {  // a directed route does not pass through a CA
          r.status = 0x1C;
          return true;
        }
        const uint8_t out = r.initial_path[h];
        if (out >= nodes_[n].ports.size() || nodes_[n].ports[out].peer == kNone) {
          r.status = 0x1C;
          return true;
        }
        const Port& p = nodes_[n].ports[out];
        n = p.peer;
        in_port = p.peer_port;
      }
    } else {
      std::tie(n, in_port) = holder(dlid);
      if (n == kNone) {
        r.status = 0x1C;
        return true;
      }
      if (nodes_[n].is_switch) in_port = 0;
    }
    Node& node = nodes_[n];
    if (!m_key_allows(n, node.is_switch ? 0 : in_port, r, set)) return false;
    sets += set;
    const uint32_t m = r.attribute_modifier;
    const wire::SmpData in = r.data;
    r.data = {};
    switch (static_cast<wire::SmpAttr>(r.attribute_id)) {
      case wire::SmpAttr::kNodeInfo: {
        wire::NodeInfo ni;
        ni.node_type = static_cast<uint8_t>(node.is_switch ? wire::IbNodeType::kSwitch
                                                           : wire::IbNodeType::kCa);
        ni.num_ports = static_cast<uint8_t>(node.ports.size() - 1);
        ni.system_image_guid = node.guid;
        ni.node_guid = node.guid;
        ni.port_guid = node.is_switch ? node.guid : node.guid + in_port;
        ni.partition_cap = 1;
        ni.local_port_num = in_port;
        ni.vendor_id = 0x2c9;
        r.data = wire::encode_node_info(ni);
        return true;
      }
      case wire::SmpAttr::kNodeDescription:
        std::memcpy(r.data.data(), node.description.data(),
                    std::min<size_t>(node.description.size(), 64));
        return true;
      case wire::SmpAttr::kSwitchInfo:
        if (!node.is_switch) break;
        if (set) {
          wire::SwitchInfo si;
          si.raw = in;
          node.switch_info.set_linear_fdb_top(si.linear_fdb_top());
          if (si.port_state_change()) node.switch_info.set_port_state_change(false);  // 1 clears
        }
        r.data = node.switch_info.raw;
        return true;
      case wire::SmpAttr::kPortInfo: {
        // A CA answers for the port the SMP came in by (IBA 14.2.5.6).
        const uint32_t p = node.is_switch ? m : in_port;
        if (p >= node.ports.size()) break;
        Port& port = node.ports[p];
        if (set) {
          wire::PortInfo want;
          want.raw = in;
          if (!set_port_info(n, p, want)) {
            r.status = 0x1C;
            r.data = port.info.raw;
            return true;
          }
        }
        r.data = port.info.raw;
        // Protect bits 2: the key reads as 0 to an SMP without it.
        const Port& keyed = node.ports[node.is_switch ? 0 : in_port];
        if (keyed.info.m_key_protect_bits() == 2 && r.m_key != keyed.info.m_key())
          std::fill_n(r.data.begin(), 8, uint8_t{0});
        return true;
      }
      case wire::SmpAttr::kSmInfo:
        if (!node.sm) break;
        r.data = wire::encode_sm_info(*node.sm);
        return true;
      case wire::SmpAttr::kLinearForwardingTable: {
        if (!node.is_switch || m * wire::kLftBlockLids >= kLinearFdbCap) break;
        const size_t first = size_t{m} * wire::kLftBlockLids;
        if (set) {
          if (node.lft.size() < first + wire::kLftBlockLids)
            node.lft.resize(first + wire::kLftBlockLids, wire::kLftNoPort);
          std::copy(in.begin(), in.begin() + wire::kLftBlockLids, node.lft.begin() + first);
        }
        for (uint32_t k = 0; k < wire::kLftBlockLids; ++k)
          r.data[k] = first + k < node.lft.size() ? node.lft[first + k] : wire::kLftNoPort;
        return true;
      }
      default:
        break;
    }
    r.status = 0x0C;  // unsupported method or attribute
    return true;
  }

  // LID, MasterSMLID and LMC as written; a state change only along IBA 7.2's arrows (INIT ->
  // ARMED; ARMED -> ACTIVE once the neighbour is ARMED or ACTIVE). false: a refused change.
  bool set_port_info(uint32_t n, uint32_t p, const wire::PortInfo& want) {
    Port& port = nodes_[n].ports[p];
    using S = wire::IbPortState;
    const uint8_t to = want.port_state();
    const uint8_t now = port.info.port_state();
    if (to != uint8_t(S::kNoChange) && to != now) {
      bool ok = false;
      if (to == uint8_t(S::kArmed)) ok = now == uint8_t(S::kInit) && port.peer != kNone;
      if (to == uint8_t(S::kActive) && now == uint8_t(S::kArmed) && port.peer != kNone) {
        const uint8_t peer = nodes_[port.peer].ports[port.peer_port].info.port_state();
        ok = peer == uint8_t(S::kArmed) || peer == uint8_t(S::kActive);
      }
      if (!ok) return false;
    }
    port.info.set_lid(want.lid());
    port.info.set_master_sm_lid(want.master_sm_lid());
    port.info.set_m_key(want.m_key());
    port.info.set_m_key_protect_bits(want.m_key_protect_bits());
    port.info.set_m_key_lease_period(want.m_key_lease_period());
    port.info.set_lmc(want.lmc());
    if (to != uint8_t(S::kNoChange)) port.info.set_port_state(static_cast<S>(to));
    return true;
  }

  uint32_t sm_;
  std::vector<Node> nodes_;
  ib::LocalPort local_;
  std::deque<Request> queue_;
  ib::SmRequestHandler sm_handler_;
};

}  // namespace galaxy::test
