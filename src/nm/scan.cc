#include "nm/scan.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <unordered_map>

#include "chip/registers.h"

namespace galaxy::nm {

const std::array<StatusRegisterInfo, kStatusRegisters>& status_registers() {
  // docs/registers.md, per-port block offsets 0x01-0x0A; every register is 64 bits.
  static const std::array<StatusRegisterInfo, kStatusRegisters> kInfo{{
      {"PEER_IDENT", 1, false, 64},
      {"LINK_STATE", 1, false, 64},
      {"HANDSHAKES", 1, true, 64},
      {"RETRANSMISSIONS", 1, true, 64},
      {"RETRANS_RATE", 1, false, 64},
      {"CRC_ERRORS", 1, true, 64},
      {"TX_FLITS", 2, true, 64},
      {"RX_FLITS", 2, true, 64},
      {"DIRTY_DISCARDS", 2, true, 64},
      {"TX_PACKETS", 2, true, 64},
  }};
  return kInfo;
}

double ScanResult::management_gbps() const {
  if (elapsed == 0) return 0;
  return management_bits() / (static_cast<double>(elapsed) / kSec) / 1e9;
}

uint64_t counter_delta(uint64_t prev, uint64_t cur, unsigned width_bits) {
  uint64_t mask = width_bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << width_bits) - 1;
  return (cur - prev) & mask;
}

namespace {

// One request: `count` consecutive entries of the grade-ordered register list of a port.
struct Read {
  uint32_t chip = 0;  // index into ScanResult::chips
  uint8_t port = 0;   // kEnvironment: the chip's TEMPERATURE and VOLTAGE
  uint8_t first = 0;  // position in the grade order
  uint8_t count = 0;
};

constexpr uint8_t kEnvironment = 0xFF;  // no port has this number (kMaxSwitchPorts <= 128)

// Register indices ordered by grade (stable), the order a port's registers are read in.
std::array<uint8_t, kStatusRegisters> grade_order() {
  std::array<uint8_t, kStatusRegisters> order{};
  for (uint8_t i = 0; i < kStatusRegisters; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [](uint8_t a, uint8_t b) {
    return status_registers()[a].grade < status_registers()[b].grade;
  });
  return order;
}

bool scanned(const FabricMap& map, uint32_t v, const ScanOptions& o) {
  if (v == map.server_node || v < o.first_node || v >= o.end_node) return false;
  if (o.only_node != fabric::kNoNode) return v == o.only_node;
  if (o.include && !o.include(v)) return false;
  return !map.topology.is_nic(v) || o.include_nics;
}

}  // namespace

Shortfall shortfall(const FabricMap& map, const fabric::Topology& plan) {
  Shortfall out;
  for (uint32_t c = 0; c < plan.num_nodes(); ++c) {
    auto it = map.node_of.find(static_cast<wire::ChipId>(c));
    if (it == map.node_of.end()) {
      out.unreached.push_back(static_cast<uint16_t>(c));
      continue;
    }
    const uint32_t node = it->second;
    for (uint32_t p = 0; p < plan.num_ports(c); ++p) {
      const fabric::PortRef end{c, static_cast<uint8_t>(p)};
      auto want = plan.peer(end);
      if (!want) continue;
      if (p < map.topology.num_ports(node) && map.topology.peer({node, end.port})) continue;
      // Both ends reached and both without a peer: one link, listed at its lower end.
      auto other = map.node_of.find(static_cast<wire::ChipId>(want->node));
      if (other != map.node_of.end() && (want->node < c || (want->node == c && want->port < p)) &&
          !(want->port < map.topology.num_ports(other->second) &&
            map.topology.peer({other->second, want->port})))
        continue;
      out.links_down.push_back({end, *want});
    }
  }
  return out;
}

namespace {
// The map nodes a scan with `o` may read: its batch's range.
std::pair<uint32_t, uint32_t> node_range(const FabricMap& map, const ScanOptions& o) {
  const uint32_t end = std::min(o.end_node, map.num_nodes());
  return {std::min(o.first_node, end), end};
}
}  // namespace

uint32_t scan_chip_count(const FabricMap& map, const ScanOptions& options) {
  const auto [first, end] = node_range(map, options);
  uint32_t n = 0;
  for (uint32_t v = first; v < end; ++v) n += scanned(map, v, options);
  return n;
}

uint32_t scan_batch_end(const FabricMap& map, const ScanOptions& options, uint32_t first,
                        uint32_t chips) {
  ScanOptions rest = options;
  rest.first_node = first;
  rest.end_node = UINT32_MAX;
  uint32_t v = first;
  for (uint32_t taken = 0; v < map.num_nodes() && taken < chips; ++v)
    if (scanned(map, v, rest)) ++taken;
  return v;
}

double paper_model_us(const FabricMap& map, const ScanOptions& options) {
  double us = 0;
  const auto [first, end] = node_range(map, options);
  for (uint32_t v = first; v < end; ++v)
    if (scanned(map, v, options))
      us += static_cast<double>(scan_requests_for(map.topology.num_ports(v))) *
            (kPaperDpUs + (map.hops[v] + 1) * kPaperDtUs);
  return us;
}

void merge_scan(ScanResult& into, ScanResult&& batch) {
  for (ChipStatus& c : batch.chips) into.chips.push_back(std::move(c));
  into.non_responding.insert(into.non_responding.end(), batch.non_responding.begin(),
                             batch.non_responding.end());
  into.unreached.insert(into.unreached.end(), batch.unreached.begin(), batch.unreached.end());
  into.requests += batch.requests;
  into.responses += batch.responses;
  into.error_responses += batch.error_responses;
  into.skipped += batch.skipped;
  into.absent_ports += batch.absent_ports;
  into.paper_model_us += batch.paper_model_us;
  into.elapsed = batch.started + batch.elapsed - into.started;
}

Result<ScanResult> Scanner::scan_once(const ScanOptions& options) {
  ScanResult r;
  const auto [first, end] = node_range(map_, options);
  for (uint32_t v = first; v < end; ++v) {
    if (!scanned(map_, v, options)) continue;
    ChipStatus c;
    c.node = v;
    c.chip_id = map_.chip_id[v];
    c.ports.resize(map_.topology.num_ports(v));
    r.chips.push_back(std::move(c));
  }
  if (options.plan && options.only_node == fabric::kNoNode && !options.include &&
      options.first_node == 0)
    for (uint16_t c : shortfall(map_, *options.plan).unreached)
      if (!options.plan->is_nic(c) || options.include_nics) r.unreached.push_back(c);
  if (r.chips.empty() && r.unreached.empty())
    return make_error(Code::kNotFound, 5300, "the fabric map has no chip to scan");
  r.paper_model_us = paper_model_us(map_, options);

  const auto order = grade_order();
  unsigned max_ports = 0;
  for (const auto& c : r.chips) max_ports = std::max<unsigned>(max_ports, c.ports.size());
  std::vector<Read> reads;
  if (options.environment)
    for (uint32_t ci = 0; ci < r.chips.size(); ++ci) reads.push_back({ci, kEnvironment, 0, 2});
  for (uint8_t grade = 1; grade <= 3; ++grade)
    for (unsigned p = 0; p < max_ports; ++p)
      for (uint8_t first = 0; first < kStatusRegisters; first += 2) {
        if (status_registers()[order[first]].grade != grade) continue;
        uint8_t count = first + 1u < kStatusRegisters ? 2 : 1;
        for (uint32_t ci = 0; ci < r.chips.size(); ++ci)
          if (p < r.chips[ci].ports.size())
            reads.push_back({ci, static_cast<uint8_t>(p), first, count});
      }

  const RequesterStats before = requester_.stats();
  r.started = requester_.port().now();
  // Reads are handed to the Requester a window at a time and at most per_chip_window per chip
  // (the rest wait here): its queue stays short, and the reads of a chip that stopped answering
  // are skipped instead of each timing out.
  const size_t limit = 2 * static_cast<size_t>(requester_.options().global_window);
  const unsigned per_chip = std::max(1u, requester_.options().per_chip_window);
  std::vector<unsigned> in_chip(r.chips.size(), 0);
  std::vector<std::deque<Read>> deferred(r.chips.size());
  size_t next = 0, outstanding = 0;
  auto port_absent = [&](const Read& rd) {
    return rd.port != kEnvironment && r.chips[rd.chip].ports[rd.port].absent;
  };
  std::function<void(const Read&)> send;
  std::function<void()> pump;
  send = [&](const Read& rd) {
    const ChipStatus& c = r.chips[rd.chip];
    auto addr = [&](uint8_t pos) {
      return chip::reg::port_register(rd.port,
                                      static_cast<uint16_t>(kFirstStatusOffset + order[pos]));
    };
    const MgmtTarget& t = map_.target[c.node];
    MgmtRequest q = rd.port == kEnvironment
                        ? MgmtRequest::read2(t, chip::reg::kTemperature, chip::reg::kVoltage)
                    : rd.count == 2 ? MgmtRequest::read2(t, addr(rd.first), addr(rd.first + 1))
                                    : MgmtRequest::read(t, addr(rd.first));
    ++outstanding;
    ++in_chip[rd.chip];
    requester_.submit(q, [&, rd](const MgmtReply& reply) {
      --outstanding;
      --in_chip[rd.chip];
      ChipStatus& chip = r.chips[rd.chip];
      if (rd.port == kEnvironment) {
        if (reply.status.ok()) {
          chip.environment_read = true;
          chip.temperature_mc = static_cast<int64_t>(reply.response.data.value[0]);
          chip.voltage_mv = reply.response.data.value[1];
        } else if (reply.response.nmp_type != wire::NmpType::kRegError && chip.responding) {
          chip.responding = false;
          r.non_responding.push_back(chip.node);
        }
      } else if (reply.status.ok()) {
        PortStatus& ps = chip.ports[rd.port];
        for (uint8_t i = 0; i < rd.count; ++i) {
          uint8_t reg = order[rd.first + i];
          ps.value[reg] = reply.response.data.value[i];
          ps.read_mask |= static_cast<uint16_t>(1u << reg);
        }
      } else if (reply.response.nmp_type == wire::NmpType::kRegError) {
        PortStatus& ps = chip.ports[rd.port];
        if (reply.response.data.error == wire::NmpError::kAddressOutOfRange && !ps.absent) {
          ps.absent = true;
          ++r.absent_ports;
        }
      } else if (chip.responding) {
        // Timed out after the retries, or could not be sent at all.
        chip.responding = false;
        r.non_responding.push_back(chip.node);
      }
      auto& waiting = deferred[rd.chip];
      if (!chip.responding) {
        r.skipped += waiting.size();
        waiting.clear();
      } else {
        while (!waiting.empty() && port_absent(waiting.front())) {
          ++r.skipped;
          waiting.pop_front();
        }
        if (!waiting.empty()) {
          Read w = waiting.front();
          waiting.pop_front();
          send(w);
        }
      }
      pump();
    });
  };
  pump = [&]() {
    while (outstanding < limit && next < reads.size()) {
      const Read& rd = reads[next++];
      const ChipStatus& c = r.chips[rd.chip];
      if (!c.responding || port_absent(rd)) {
        ++r.skipped;
      } else if (in_chip[rd.chip] >= per_chip) {
        deferred[rd.chip].push_back(rd);
      } else {
        send(rd);
      }
    }
  };
  pump();
  requester_.run();

  const RequesterStats& after = requester_.stats();
  r.elapsed = requester_.port().now() - r.started;
  r.requests = after.sent - before.sent;
  r.responses = (after.answered - before.answered) + (after.stale - before.stale);
  r.error_responses = after.error_responses - before.error_responses;
  std::sort(r.non_responding.begin(), r.non_responding.end());
  return r;
}

Status Scanner::scan_loop(
    const ScanOptions& options, Picoseconds interval, unsigned count,
    const std::function<Status(const ScanResult* prev, const ScanResult& cur)>& each) {
  if (count == 0)
    return make_error(Code::kInvalidArgument, 5301, "scan loop count = 0: at least one scan");
  ScanResult prev;
  for (unsigned i = 0; i < count; ++i) {
    if (i > 0) {
      Picoseconds due = prev.started + interval;
      Picoseconds now = requester_.port().now();
      if (now < due) requester_.drain_faults(due - now);
    }
    auto cur = scan_once(options);
    if (!cur.ok()) return cur.error();
    Status s = each(i == 0 ? nullptr : &prev, *cur);
    if (!s.ok()) return s;
    prev = std::move(*cur);
  }
  return {};
}

ScanDiff diff(const ScanResult& prev, const ScanResult& cur) {
  ScanDiff d;
  d.interval_s =
      cur.started >= prev.started ? static_cast<double>(cur.started - prev.started) / kSec : 0.0;
  std::unordered_map<uint32_t, const ChipStatus*> before;
  for (const auto& c : prev.chips) before[c.node] = &c;
  const auto& info = status_registers();
  for (const auto& c : cur.chips) {
    auto it = before.find(c.node);
    if (it == before.end()) continue;
    const ChipStatus& b = *it->second;
    if (b.responding && !c.responding) d.stopped_answering.push_back(c.node);
    if (!b.responding && c.responding) d.answering_again.push_back(c.node);
    size_t ports = std::min(b.ports.size(), c.ports.size());
    for (size_t p = 0; p < ports; ++p) {
      const PortStatus& o = b.ports[p];
      const PortStatus& n = c.ports[p];
      uint16_t both = o.read_mask & n.read_mask;
      for (uint8_t reg = 0; reg < kStatusRegisters; ++reg) {
        if (!(both & (1u << reg))) continue;
        RegisterChange ch{
            c.node, c.chip_id, static_cast<uint8_t>(p), reg, o.value[reg], n.value[reg], 0, 0};
        if (info[reg].counter) {
          ch.delta = counter_delta(o.value[reg], n.value[reg], info[reg].width);
          if (ch.delta == 0) continue;
          d.total_delta[reg] += ch.delta;
          if (d.interval_s > 0) ch.rate_per_s = static_cast<double>(ch.delta) / d.interval_s;
        } else if (o.value[reg] == n.value[reg]) {
          continue;
        }
        d.changes.push_back(ch);
      }
    }
  }
  std::sort(d.changes.begin(), d.changes.end(),
            [&](const RegisterChange& a, const RegisterChange& b) {
              bool ac = info[a.reg].counter, bc = info[b.reg].counter;
              if (ac != bc) return !ac;
              if (a.delta != b.delta) return a.delta > b.delta;
              if (a.node != b.node) return a.node < b.node;
              if (a.port != b.port) return a.port < b.port;
              return a.reg < b.reg;
            });
  return d;
}

}  // namespace galaxy::nm
