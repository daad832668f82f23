#include "nm/bist.h"

#include <fmt/format.h>

#include "chip/registers.h"
#include "wire/flit.h"

namespace galaxy::nm {

namespace {

namespace reg = chip::reg;

uint16_t port_reg(uint8_t port, uint16_t off) {
  return reg::port_register(port, off);
}

}  // namespace

std::vector<BistPort> bist_ports_of(const FabricMap& map, uint32_t node) {
  std::vector<BistPort> out;
  if (node >= map.num_nodes()) return out;
  for (uint8_t p = 0; p < map.topology.num_ports(node); ++p)
    if (map.topology.peer({node, p})) out.push_back({node, p});
  return out;
}

std::vector<BistPort> bist_all_links(const FabricMap& map) {
  const fabric::Topology& t = map.topology;
  std::vector<BistPort> out;
  for (uint32_t v = 0; v < map.num_nodes(); ++v) {
    if (t.is_nic(v)) continue;
    for (uint8_t p = 0; p < t.num_ports(v); ++p) {
      auto peer = t.peer({v, p});
      if (peer && (t.is_nic(peer->node) || v < peer->node)) out.push_back({v, p});
    }
  }
  return out;
}

Status Bist::start(const std::vector<BistPort>& ports, const BistOptions& options) {
  if (options.duration_us == 0 || options.duration_us > 0xFFFF)
    return make_error(Code::kOutOfRange, 5420,
                      fmt::format("BIST duration_us = {} is outside 1-65535", options.duration_us));
  if (options.intensity_percent > 100)
    return make_error(
        Code::kOutOfRange, 5421,
        fmt::format("BIST intensity_percent = {} exceeds 100", options.intensity_percent));
  for (const BistPort& b : ports)
    if (b.node >= map_.num_nodes() || b.node == map_.server_node ||
        b.port >= map_.topology.num_ports(b.node))
      return make_error(
          Code::kNotFound, 5422,
          fmt::format("BIST port {}:{} is not a port of a remote chip in the map", b.node, b.port));
  options_ = options;
  sent0_ = requester_.stats().sent;
  t0_ = requester_.port().now();
  links_.assign(ports.size(), {});
  const uint64_t ctrl =
      1u | (uint64_t{options.duration_us} << 16) | (uint64_t{options.intensity_percent} << 32);
  for (size_t i = 0; i < ports.size(); ++i) {
    links_[i].at = ports[i];
    links_[i].chip_id = map_.chip_id[ports[i].node];
    requester_.submit(MgmtRequest::write(map_.target[ports[i].node],
                                         port_reg(ports[i].port, reg::port::kBistCtrl), ctrl),
                      [this, i](const MgmtReply& r) {
                        links_[i].started = r.status.ok();
                        if (!r.status.ok())
                          links_[i].problem = "start: " + r.status.error().message;
                      });
  }
  requester_.run();
  return {};
}

BistResult Bist::read() {
  for (size_t i = 0; i < links_.size(); ++i) {
    if (!links_[i].started) continue;
    links_[i].problem.clear();  // judged again from this read
    const BistPort& b = links_[i].at;
    requester_.submit(
        MgmtRequest::read2(map_.target[b.node], port_reg(b.port, reg::port::kBistStatus),
                           port_reg(b.port, reg::port::kBistErrors)),
        [this, i](const MgmtReply& r) {
          BistLinkResult& l = links_[i];
          if (!r.status.ok()) {
            l.problem = "read: " + r.status.error().message;
            return;
          }
          uint64_t status = r.response.data.value[0];
          l.running = status & 1;
          l.done = (status >> 1) & 1;
          l.no_wire = (status >> 2) & 1;
          l.flits = status >> 32;
          l.errors = r.response.data.value[1];
        });
  }
  requester_.run();
  BistResult out;
  for (BistLinkResult& l : links_) {
    if (l.started && l.problem.empty()) {
      double bits = static_cast<double>(l.flits) * wire::kFlitBits;
      l.bit_error_ratio = bits > 0 ? static_cast<double>(l.errors) / bits : 0;
      l.ber_upper_95 = bits > 0 && l.errors == 0 ? 3.0 / bits : l.bit_error_ratio;
      if (!l.done)
        l.problem = l.running ? "not finished" : "stopped before it finished";
      else if (l.no_wire)
        l.problem = "no wire to test (both ends on one host of a live fabric)";
      else if (l.flits == 0)
        l.problem = "no flits tested";
      else if (l.bit_error_ratio > options_.max_bit_error_ratio)
        l.problem = fmt::format("{} errors in {} flits", l.errors, l.flits);
    }
    l.pass = l.started && l.problem.empty();
    (l.pass ? out.passed : l.done && l.no_wire ? out.untested : out.failed) += 1;
  }
  out.links = links_;
  out.requests = requester_.stats().sent - sent0_;
  out.elapsed = requester_.port().now() - t0_;
  return out;
}

Status Bist::stop() {
  unsigned failed = 0;
  std::string first;
  Code code = Code::kTimeout;
  for (const BistLinkResult& l : links_) {
    if (!l.started) continue;
    requester_.submit(
        MgmtRequest::write(map_.target[l.at.node], port_reg(l.at.port, reg::port::kBistCtrl), 2),
        [&, l](const MgmtReply& r) {
          if (r.status.ok() || failed++) return;
          code = r.status.error().code;
          first =
              fmt::format("chip {} port {}: {}", l.chip_id, l.at.port, r.status.error().message);
        });
  }
  requester_.run();
  if (failed)
    return make_error(code, 5423,
                      fmt::format("BIST stop failed on {} ports; first: {}", failed, first));
  return {};
}

Result<BistResult> Bist::run(const std::vector<BistPort>& ports, const BistOptions& options) {
  Status s = start(ports, options);
  if (!s.ok()) return s.error();
  requester_.drain_faults(Picoseconds{options.duration_us} * kUs + options.margin);
  BistResult r = read();
  auto running = [&r] {
    for (const BistLinkResult& l : r.links)
      if (l.running) return true;
    return false;
  };
  for (Picoseconds waited = 0; running() && waited < options.finish_wait;
       waited += options.margin) {
    requester_.drain_faults(options.margin);
    r = read();
  }
  const bool any_running = running();
  if (any_running) {
    Status st = stop();
    if (!st.ok()) return st.error();
    r.requests = requester_.stats().sent - sent0_;
    r.elapsed = requester_.port().now() - t0_;
  }
  return r;
}

}  // namespace galaxy::nm
