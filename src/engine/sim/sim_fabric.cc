#include "engine/sim/sim_fabric.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>

#include "base/time_units.h"
#include "chip/forwarding.h"
#include "chip/mgmt_step.h"
#include "chip/nma.h"
#include "chip/refusal.h"
#include "fabric/chassis.h"

namespace galaxy::sim {

using fabric::PortRef;

SimFabric::SimFabric(const fabric::Topology& topology, const Timing& timing,
                     const SimOptions& options)
    : sim_(options.seed), topo_(topology), timing_(timing) {}

SimFabric::~SimFabric() = default;

Result<std::unique_ptr<SimFabric>> SimFabric::create(const fabric::Topology& topology,
                                                     const Timing& timing,
                                                     const SimOptions& options) {
  if (uint64_t{options.first_chip_id} + topology.num_nodes() > wire::kMaxChips)
    return make_error(
        Code::kOutOfRange, 4200,
        fmt::format("fabric has {} chips from id {}; chip ids are {}-bit (at most {} chips)",
                    topology.num_nodes(), options.first_chip_id, wire::kChipIdBits,
                    wire::kMaxChips));
  std::unique_ptr<SimFabric> f(new SimFabric(topology, timing, options));
  const uint32_t n = topology.num_nodes();
  f->chips_.reserve(n);
  f->port_base_.resize(n + 1);
  for (uint32_t v = 0; v < n; ++v) {
    uint32_t ports = topology.num_ports(v);
    GALAXY_TRY(chip::check_model_ports(topology.is_nic(v), ports, v, topology.name(v)));
    if (topology.is_nic(v))
      f->chips_.push_back(std::make_unique<chip::Nic>(static_cast<uint16_t>(ports)));
    else
      f->chips_.push_back(std::make_unique<chip::Nrc>(static_cast<uint16_t>(ports)));
    f->port_base_[v + 1] = f->port_base_[v] + ports;
  }
  f->outputs_.resize(f->port_base_[n]);
  for (uint32_t v = 0; v < n; ++v)
    for (uint8_t p = 0; p < topology.num_ports(v); ++p)
      if (auto peer = topology.peer({v, p})) {
        Output& o = f->outputs_[f->port_base_[v] + p];
        o.peer_node = peer->node;
        o.peer_port = peer->port;
      }
  f->nic_busy_.assign(n, 0);
  f->engine_busy_.assign(n, {});
  f->nma_busy_until_.assign(n, 0);
  f->background_until_.assign(n, 0);
  f->data_packet_time_ = timing.serialisation_bits(timing.data_packet_bytes * 8.0);
  GALAXY_TRY(f->power_on(options));
  return f;
}

Status SimFabric::power_on(const SimOptions& options) {
  const bool wide_ids =
      uint64_t{options.first_chip_id} + topo_.num_nodes() > chip::reg::kNarrowChips;
  for (uint32_t v = 0; v < topo_.num_nodes(); ++v) {
    if (options.program_chip_ids) {
      chip::BootImage img;
      img.registers.push_back({chip::reg::kChipId, chip::reg::encode_chip_id(
                                                       options.first_chip_id + v, true, wide_ids)});
      auto bytes = chip::encode_boot_image(img);
      chips_[v]->eeprom().write_block(0, bytes);
    }
    GALAXY_TRY(chips_[v]->power_on());
    (void)chips_[v]->take_link_control_changes();  // the links train below
  }
  // Links train and each port learns who is at the other end (docs/system.md 1.4), unless a boot
  // image holds either end down.
  for (uint32_t v = 0; v < topo_.num_nodes(); ++v) {
    for (uint8_t p = 0; p < topo_.num_ports(v); ++p) {
      auto peer = topo_.peer({v, p});
      if (!peer || !chip::link_allowed(*chips_[v], p, *chips_[peer->node], peer->port)) continue;
      const chip::Chip& other = *chips_[peer->node];
      chips_[v]->link_up(p, {other.configured(), other.type(), other.chip_id(), peer->port,
                             static_cast<uint8_t>(other.num_ports())});
    }
  }
  return {};
}

chip::Nic& SimFabric::nic(uint32_t node) {
  assert(topo_.is_nic(node));
  return static_cast<chip::Nic&>(*chips_[node]);
}

chip::Nrc& SimFabric::nrc(uint32_t node) {
  assert(!topo_.is_nic(node));
  return static_cast<chip::Nrc&>(*chips_[node]);
}

uint32_t SimFabric::alloc_packet() {
  if (!free_packets_.empty()) {
    uint32_t s = free_packets_.back();
    free_packets_.pop_back();
    return s;
  }
  if ((packets_allocated_ & kPacketChunkMask) == 0)
    packet_chunks_.push_back(std::make_unique<Packet[]>(kPacketChunk));
  return packets_allocated_++;
}

void SimFabric::release_input(uint32_t slot, Time at) {
  Packet& p = packet(slot);
  const uint32_t node = p.held_node;
  p.held_node = fabric::kNoNode;
  const auto flits = flits_of(p);
  if (!chips_[node]->port(p.in_port).vc.buffered.give(p.held_vc, flits)) {
    ++stats_.credit_violations;
    return;
  }
  const Output& back = outputs_[port_base_[node] + p.in_port];
  if (back.peer_node == fabric::kNoNode) return;
  schedule(at + timing_.link_latency, kCredit,
           (uint64_t{back.epoch} << 32) | (uint64_t{p.held_vc} << 16) | flits, back.peer_node,
           back.peer_port);
}

void SimFabric::on_credit(uint32_t node, uint8_t port, uint64_t credit) {
  Output& o = outputs_[port_base_[node] + port];
  if (static_cast<uint16_t>(credit >> 32) != o.epoch) return;  // sent before the link retrained
  ++stats_.credits_returned;
  const auto vc = static_cast<uint8_t>((credit >> 16) & 0xFF);
  if (!chips_[node]->port(port).vc.credits.give(vc, credit & 0xFFFF)) ++stats_.credit_violations;
  try_start(node, port);
}

Status SimFabric::post_mgmt(uint32_t nic_node, uint8_t vp, const wire::MgmtDescriptor& d) {
  if (nic_node >= topo_.num_nodes() || !topo_.is_nic(nic_node))
    return make_error(Code::kNotFound, 4202, fmt::format("node {} is not a NIC", nic_node));
  auto bytes = wire::encode_mgmt_descriptor(d);
  if (!bytes.ok()) return bytes.error();
  GALAXY_TRY(nic(nic_node).post_mgmt(vp, *bytes));
  kick_nic(nic_node);
  return {};
}

Status SimFabric::post_mp(uint32_t nic_node, uint8_t vp, wire::ChipId dest_chip, uint8_t dest_vp,
                          std::span<const uint8_t> data, bool fence, bool notify) {
  if (nic_node >= topo_.num_nodes() || !topo_.is_nic(nic_node))
    return make_error(Code::kNotFound, 4203, fmt::format("node {} is not a NIC", nic_node));
  if (dest_chip >= topo_.num_nodes() || !topo_.is_nic(dest_chip))
    return make_error(Code::kOutOfRange, 4204,
                      fmt::format("destination chip {} is not a NIC of this fabric", dest_chip));
  GALAXY_TRY(nic(nic_node).post_mp(vp, dest_chip, dest_vp, data, fence, notify));
  kick_nic(nic_node);
  return {};
}

Status SimFabric::check_nic(uint32_t node, uint16_t id) const {
  if (node >= topo_.num_nodes() || !topo_.is_nic(node))
    return make_error(Code::kNotFound, id, fmt::format("node {} is not a NIC", node));
  return {};
}

Status SimFabric::post_rdma(uint32_t nic_node, uint8_t vp, const wire::RdmaDescriptor& d) {
  GALAXY_TRY(check_nic(nic_node, 4209));
  auto bytes = wire::encode_rdma_descriptor(d);
  if (!bytes.ok()) return bytes.error();
  GALAXY_TRY(nic(nic_node).post_rdma(vp, *bytes));
  kick_nic(nic_node);
  return {};
}

Status SimFabric::post_coll(uint32_t nic_node, uint8_t vp, const chip::CollDescriptor& d) {
  GALAXY_TRY(check_nic(nic_node, 4214));
  GALAXY_TRY(nic(nic_node).post_coll(vp, d));
  kick_nic(nic_node);
  return {};
}

Result<uint32_t> SimFabric::register_memory(uint32_t nic_node, uint64_t vaddr, uint64_t length,
                                            uint32_t access) {
  GALAXY_TRY(check_nic(nic_node, 4210));
  auto& m = memory_[nic_node];
  if (!m) {
    m = std::make_unique<SimHostMemory>();
    nic(nic_node).attach_host_memory(m.get());
  }
  if (length == 0 || vaddr + length < vaddr)
    return make_error(
        Code::kOutOfRange, 4219,
        fmt::format("register_memory: [{:#x}, +{}) is empty or wraps", vaddr, length));
  auto frames = m->allocate(chip::att_pages(vaddr, length));
  return nic(nic_node).att().register_region(vaddr, length, access, frames);
}

Result<SimHostMemory*> SimFabric::host_memory(uint32_t nic_node) {
  GALAXY_TRY(check_nic(nic_node, 4212));
  auto it = memory_.find(nic_node);
  if (it == memory_.end())
    return make_error(Code::kNotFound, 4213,
                      fmt::format("NIC {} has no registered memory", nic_node));
  return it->second.get();
}

Status SimFabric::write_memory(uint32_t nic_node, uint32_t key, uint64_t vaddr,
                               std::span<const uint8_t> data) {
  auto m = host_memory(nic_node);
  if (!m.ok()) return m.error();
  return nic(nic_node).att().translate(key, vaddr, data.size(), chip::kAccessNone,
                                       [&](uint64_t phys, uint64_t off, uint64_t n) {
                                         return (*m)->write(phys, data.subspan(off, n));
                                       });
}

Status SimFabric::read_memory(uint32_t nic_node, uint32_t key, uint64_t vaddr,
                              std::span<uint8_t> out) {
  auto m = host_memory(nic_node);
  if (!m.ok()) return m.error();
  return nic(nic_node).att().translate(key, vaddr, out.size(), chip::kAccessNone,
                                       [&](uint64_t phys, uint64_t off, uint64_t n) {
                                         return (*m)->read(phys, out.subspan(off, n));
                                       });
}

Status SimFabric::inject_data(PortRef at, std::span<const wire::Flit> flits) {
  if (at.node >= topo_.num_nodes() || at.port >= topo_.num_ports(at.node))
    return make_error(Code::kNotFound, 4216,
                      fmt::format("inject_data: no port {} on node {}", at.port, at.node));
  if (flits.empty() || flits.size() > wire::kMaxDataPacketFlits)
    return make_error(Code::kOutOfRange, 4217,
                      fmt::format("inject_data: {} flits, a data packet has 1 to {}", flits.size(),
                                  wire::kMaxDataPacketFlits));
  uint32_t slot = alloc_packet();
  Packet& p = packet(slot);
  p.mgmt = false;
  p.injected = true;
  p.nflits = static_cast<uint8_t>(flits.size());
  std::copy(flits.begin(), flits.end(), p.flits.begin());
  schedule(sim_.now(), kArrive, slot, at.node, at.port);
  return {};
}

uint32_t SimFabric::packet_of(const chip::NicPacket& np) {
  uint32_t slot = alloc_packet();
  Packet& p = packet(slot);
  p.mgmt = false;
  const std::vector<wire::Flit> flits = np.flits();  // the NIC checked that it encodes
  p.nflits = static_cast<uint8_t>(flits.size());
  std::copy(flits.begin(), flits.end(), p.flits.begin());
  return slot;
}

// A DMA engine takes its next packet: reading host data over PCIe at the link's rate (the
// first read of a stream pays the read latency; later ones are hidden behind the 8 KiB FIFO),
// never faster than the network port serialises it.
void SimFabric::pump_engine(uint32_t node, chip::DmaEngine e, bool streaming) {
  uint8_t& busy = engine_busy_[node][static_cast<uint8_t>(e)];
  if (busy) return;
  Output& o = outputs_[port_base_[node]];
  if (o.queued_data >= kNicTxFifoPackets) {  // the port sends them first (try_start)
    o.engines_waiting = true;
    return;
  }
  auto np = nic(node).next_packet(e);
  if (!np) return;
  busy = 1;
  Time t = timing_.serialisation(static_cast<unsigned>(np->head.length_flits));
  if (np->host_read_bytes) {
    t = std::max(t, timing_.pcie(np->host_read_bytes));
    if (!streaming) t += timing_.nic_sdq_fetch;
  }
  schedule(sim_.now() + t, kEngineDone, packet_of(*np), node, static_cast<uint8_t>(e));
}

// A data packet reaches its NIC: DMA engine 2 writes it (nic_rx_dma), the host sees it.
void SimFabric::deliver_data(uint32_t slot, uint32_t node) {
  Packet& p = packet(slot);
  chip::Nic& n = nic(node);
  auto head = wire::decode_data_head(p.flits[0]);
  const uint8_t vp = head.ok() && head->dest_vp < chip::kNumVps ? head->dest_vp : 0;
  const size_t before = n.mpq_count(vp);
  const size_t waiting = n.mpq_waiting(vp);
  chip::NicRx rx = n.receive_packet(std::span(p.flits).first(p.nflits));
  free_packet(slot);
  if (rx == chip::NicRx::kDiscarded) {
    ++stats_.packets_dropped;
  } else {
    ++stats_.data_packets_received;
    if (n.mpq_count(vp) > before) {
      ++stats_.mpq_deliveries;
      if (mpq_listener_) mpq_listener_(node, vp);
    } else if (n.mpq_waiting(vp) > waiting) {
      ++stats_.mpq_waits;  // enters the MPQ as the host polls it (chip/mpq.h)
    }
  }
  // What the packet set going: an ack, a get to answer, a fenced descriptor.
  pump_engine(node, chip::DmaEngine::kRemoteRead, false);
  pump_engine(node, chip::DmaEngine::kWrite, false);
  kick_nic(node);
}

void SimFabric::discard_data(uint32_t slot, uint32_t node, uint16_t error_id) {
  ++stats_.data_discarded;
  const uint8_t in_port = packet(slot).in_port;
  auto head = chip::routable_head(packet(slot).flits[0]);
  free_packet(slot);
  if (!head) return;
  auto refusal = chip::refusal_of(*head, static_cast<wire::ChipId>(node), error_id);
  if (!refusal) return;
  auto flits = wire::encode_data_packet(*refusal);
  if (!flits.ok()) return;
  ++stats_.mp_refusals;
  const uint32_t r = alloc_packet();
  Packet& p = packet(r);
  p.mgmt = false;
  p.in_port = in_port;
  p.nflits = static_cast<uint8_t>(flits->size());
  std::copy(flits->begin(), flits->end(), p.flits.begin());
  if (topo_.is_nic(node)) {  // the sender's own NIC: the refusal goes straight to its EQ
    deliver_data(r, node);
    return;
  }
  auto out = nrc(node).route_own(in_port, refusal->head.dest_node);
  if (!out.ok()) {  // a refusal is not answered (chip/refusal.h)
    ++stats_.data_discarded;
    free_packet(r);
    return;
  }
  transmit(node, *out, r);
}

void SimFabric::kick_nic(uint32_t node) {
  if (nic_busy_[node]) return;
  nic_busy_[node] = 1;
  schedule(sim_.now(), kNicKick, 0, node);
}

void SimFabric::on_nic_kick(uint32_t node) {
  chip::Nic& n = nic(node);
  auto w = n.next_work();
  if (!w) {
    nic_busy_[node] = 0;
    return;
  }
  if (w->kind == chip::NicWork::Kind::kRejected) {
    n.complete(w->vp, false, w->error.id);
    // A collective's end that failed is its end all the same (chip/coll.h).
    if (w->op == chip::DescriptorOp::kLocal && local_listener_) local_listener_(node, w->vp);
    schedule(sim_.now(), kNicKick, 0, node);
    return;
  }
  // DMA VPs fetch the descriptor from host memory; PIO VPs already hold it on chip. The fetch
  // engine is pipelined: the next descriptor starts one initiation interval later, while this
  // one is still in flight (a fenced one waits in Nic::next_work for its predecessors).
  Time fetch = chip::is_pio_vp(w->vp) ? 0 : timing_.nic_sdq_fetch;
  if (w->kind == chip::NicWork::Kind::kRdma) {
    // The transfer is DMA engine 0's once its descriptor is fetched and decoded.
    schedule(sim_.now() + fetch + timing_.nic_mp_build, kEngineKick, 0, node,
             static_cast<uint8_t>(chip::DmaEngine::kLocalRead));
    schedule(sim_.now() + timing_.nic_descriptor_interval, kNicKick, 0, node);
    return;
  }
  if (w->kind == chip::NicWork::Kind::kLocal) {
    // A collective's local descriptor: DMA engine 2 writes its data and its completion into
    // host memory, where the host's poll sees them (as an MP's); the VP's next waits for it.
    schedule(sim_.now() + fetch + timing_.nic_rx_dma + timing_.host_poll_detect, kLocalDone, 0,
             node, w->vp);
    schedule(sim_.now() + timing_.nic_descriptor_interval, kNicKick, 0, node);
    return;
  }
  if (w->kind == chip::NicWork::Kind::kMp && !w->packet) {  // never: an MP always encodes
    n.complete(w->vp, false, 4218);
    schedule(sim_.now(), kNicKick, 0, node);
    return;
  }
  uint32_t slot = w->kind == chip::NicWork::Kind::kMp ? packet_of(*w->packet) : alloc_packet();
  Packet& p = packet(slot);
  p.vp = w->vp;
  p.mgmt = w->kind == chip::NicWork::Kind::kMgmtRequest;
  if (p.mgmt) p.bytes = w->mgmt;
  schedule(sim_.now() + fetch + timing_.nic_mp_build, kNicSent, slot, node);
  schedule(sim_.now() + timing_.nic_descriptor_interval, kNicKick, 0, node);
}

void SimFabric::transmit(uint32_t node, uint8_t port, uint32_t slot) {
  Output& o = outputs_[port_base_[node] + port];
  Packet& p = packet(slot);
  p.vc = p.mgmt ? chip::kMgmtVc : chip::data_link_vc(p.flits[0].vc);
  const Waiting w{slot, static_cast<uint8_t>(flits_of(p)), p.vc};
  o.queue[w.vc].push_back(w);
  if (!p.mgmt) {
    chips_[node]->port(port).output_load += w.flits;
    ++o.queued_data;
  }
  try_start(node, port);
}

void SimFabric::try_start(uint32_t node, uint8_t port) {
  Output& o = outputs_[port_base_[node] + port];
  if (o.busy_until > sim_.now()) {
    if (!o.free_event_pending) {
      o.free_event_pending = true;
      schedule(o.busy_until, kOutputFree, 0, node, port);
    }
    return;
  }
  chip::PortState& ps = chips_[node]->port(port);
  // A port whose link cannot carry the packet fills no buffer: what starts there is dropped
  // (start_transmission), whatever its credits say.
  static const chip::VcState kNoPeer;
  const bool counted = o.peer_node != fabric::kNoNode && chips_[node]->port_usable(port);
  const int vc = (counted ? ps.vc : kNoPeer).arbitrate(o.last_vc, [&](uint8_t v) -> unsigned {
    return o.queue[v].empty() ? 0 : o.queue[v].front().flits;
  });
  if (vc < 0) {
    if (o.waiting() && !o.stalled) {  // a credit coming back calls try_start again
      o.stalled = true;
      ++ps.vc.credit_stalls;
      ++stats_.credit_stalls;
    }
    return;
  }
  o.stalled = false;
  const Waiting w = o.queue[vc].front();
  o.queue[vc].pop_front();
  if (vc != chip::kMgmtVc) {
    o.last_vc = static_cast<uint8_t>(vc);
    ps.output_load -= std::min<uint64_t>(ps.output_load, w.flits);
    --o.queued_data;
  }
  if (counted && !ps.vc.credits.take(w.vc, w.flits)) ++stats_.credit_violations;
  start_transmission(node, port, w);
  if (o.engines_waiting && o.queued_data < kNicTxFifoPackets) {  // a NIC's FIFO has room again
    o.engines_waiting = false;
    for (uint8_t e = 0; e < chip::kDmaEngines; ++e)
      pump_engine(node, static_cast<chip::DmaEngine>(e), true);
  }
}

// Reads the packet itself only if it cannot go: a packet that waited has left the caches.
void SimFabric::start_transmission(uint32_t node, uint8_t port, Waiting w) {
  Output& o = outputs_[port_base_[node] + port];
  const uint32_t slot = w.slot;
  const bool mgmt = w.vc == chip::kMgmtVc;
  Time start = sim_.now();
  // Management has priority (VC3) but does not preempt: under background load a data packet
  // may be on the wire; the residual of a packet in service seen at a random instant is
  // uniform over its transmission time.
  if (mgmt && o.util > 0 && sim_.rng().bernoulli(o.util)) {
    Time wait = static_cast<Time>(sim_.rng().uniform() * static_cast<double>(data_packet_time_));
    start += wait;
    stats_.mgmt_wait_time += wait;
    ++stats_.mgmt_waits_behind_data;
  }
  const unsigned flits = w.flits;
  Time end = start + timing_.serialisation(flits);
  const bool linked = o.peer_node != fabric::kNoNode;
  if (o.flit_error_rate > 0 && linked) {
    // Sliding-window retransmission (docs/system.md 1.3): every corrupted transmission is caught by
    // the receiver's CRC and resent after the NACK's round trip; the link loses nothing.
    chip::PortState& rx = chips_[o.peer_node]->port(o.peer_port);
    chip::PortState& tx = chips_[node]->port(port);
    for (unsigned tries = 0; tries < 64; ++tries) {
      double p_ok = 1.0;
      for (unsigned f = 0; f < flits; ++f) p_ok *= 1.0 - o.flit_error_rate;
      if (sim_.rng().uniform() < p_ok) break;
      ++rx.crc_errors;
      ++tx.retransmissions;
      tx.tx_flits += flits;
      ++stats_.retransmissions;
      end += 2 * timing_.link_latency + timing_.serialisation(flits);
    }
  }
  o.busy_until = end;
  chip::PortState& ps = chips_[node]->port(port);
  ps.tx_flits += flits;
  ++ps.tx_packets;
  ++ps.vc.tx_packets[w.vc];
  (mgmt ? stats_.mgmt_packets_sent : stats_.data_packets_sent) += 1;
  if (!linked || !chips_[node]->port_usable(port)) {
    // The link went down while the packet waited for it (an NRC chose the port when it was up),
    // or the sender's own NIC port is down.
    if (mgmt) {
      ++stats_.packets_dropped;
      free_packet(slot);
    } else if (topo_.is_nic(node)) {
      discard_data(slot, node, chip::kErrNicPortDown);
    } else {
      chips_[node]->count_dirty(packet(slot).in_port);
      discard_data(slot, node, chip::kErrNoUsableRoute);
    }
  } else {
    Packet& p = packet(slot);
    // The packet's room in this chip's input buffer is free once its tail has left.
    if (p.held_node != fabric::kNoNode) release_input(slot, end);
    p.epoch = o.epoch;
    // Virtual cut-through: an NRC routes a data packet when its head has arrived; a NIC takes
    // a packet, and an NRC's NMA a management packet, once the whole packet is in.
    const bool cut_through = !mgmt && !topo_.is_nic(o.peer_node);
    const Time in =
        cut_through ? end - timing_.serialisation(flits) + timing_.serialisation(1) : end;
    schedule(in + timing_.link_latency + timing_.chip_input_pipeline, kArrive, slot, o.peer_node,
             o.peer_port);
  }
  if (o.waiting() && !o.free_event_pending) {
    o.free_event_pending = true;
    schedule(end, kOutputFree, 0, node, port);
  }
}

void SimFabric::on_arrive(uint32_t slot, uint32_t node, uint8_t in_port) {
  Packet& p = packet(slot);
  p.in_port = in_port;
  chip::Chip& c = *chips_[node];
  chip::PortState& ps = c.port(in_port);
  ps.rx_flits += flits_of(p);
  ++ps.rx_packets;
  // Lost with the link: it is down, or went down (and perhaps up again) since the packet left.
  if (c.port(in_port).link != chip::LinkState::kUp ||
      (!p.injected && p.epoch != outputs_[port_base_[node] + in_port].epoch)) {
    ++stats_.packets_dropped;
    free_packet(slot);
    return;
  }
  if (!p.injected) {  // the sender's credits promised this room
    if (!ps.vc.buffered.take(p.vc, flits_of(p))) {
      ++stats_.credit_violations;
      ++stats_.packets_dropped;
      free_packet(slot);
      return;
    }
    p.held_node = node;
    p.held_vc = p.vc;
  }
  if (p.mgmt) {
    chip::MgmtArrival a = chip::accept_mgmt(c, in_port, p.bytes);
    switch (a.action) {
      case chip::MgmtArrival::Action::kForward:
        transmit(node, a.out_port, slot);
        return;
      case chip::MgmtArrival::Action::kToNma:
        run_nma(slot, node);
        return;
      case chip::MgmtArrival::Action::kToHost:
        break;
      case chip::MgmtArrival::Action::kDrop:
        ++stats_.packets_dropped;
        free_packet(slot);
        return;
    }
  } else if (!topo_.is_nic(node)) {
    auto head = chip::routable_head(p.flits[0]);
    if (!head) {
      c.count_dirty(in_port);
      ++stats_.packets_dropped;
      free_packet(slot);
      return;
    }
    // Counts a discard itself (no usable output, or the hop limit: chip/forwarding.h).
    auto out = nrc(node).route_data(in_port, head->dest_node, head->hops);
    if (!out.ok()) {
      discard_data(slot, node, out.error().id);
      return;
    }
    wire::set_data_hops(p.flits[0], static_cast<uint8_t>(head->hops + 1));
    const uint8_t vc = nrc(node).data_vc_out(head->kind, head->vc, in_port, *out);
    if (vc != head->vc) wire::set_flits_vc(std::span(p.flits).first(p.nflits), vc);
    transmit(node, *out, slot);
    return;
  }
  // NIC: the receive path takes the packet from the input buffer at once (DMA engine 2 writes
  // it into host memory, an MP into its MPQ). A CP that stays on the chip (chip/coll.h) writes
  // nothing there: its counter moves at once.
  if (p.held_node != fabric::kNoNode) release_input(slot, sim_.now());
  auto head = wire::decode_data_head(p.flits[0]);
  const Time rx =
      head.ok() && chip::stays_on_chip(*head) ? 0 : timing_.nic_rx_dma + timing_.host_poll_detect;
  schedule(sim_.now() + rx, kMpqDeliver, slot, node);
}

void SimFabric::account_background(uint32_t node) {
  const Time now = sim_.now();
  const Time since = background_until_[node];
  background_until_[node] = now;
  if (!background_load_ || now <= since) return;
  // Flits one link direction carries per picosecond at full rate.
  const double flits_per_ps = 1.0 / static_cast<double>(timing_.serialisation(1));
  const double span = static_cast<double>(now - since) * flits_per_ps;
  const double flits_per_packet = timing_.data_packet_bytes * 8.0 / timing_.flit_bits;
  chip::Chip& c = *chips_[node];
  for (uint8_t p = 0; p < topo_.num_ports(node); ++p) {
    auto peer = topo_.peer({node, p});
    if (!peer) continue;
    chip::PortState& s = c.port(p);
    const double tx = outputs_[output_index({node, p})].util * span;
    const double rx = outputs_[output_index(*peer)].util * span;
    s.tx_flits += static_cast<uint64_t>(tx);
    s.rx_flits += static_cast<uint64_t>(rx);
    s.tx_packets += static_cast<uint64_t>(tx / flits_per_packet);
    s.rx_packets += static_cast<uint64_t>(rx / flits_per_packet);
  }
}

void SimFabric::run_nma(uint32_t slot, uint32_t node) {
  if (packet(slot).held_node != fabric::kNoNode) release_input(slot, sim_.now());
  chip::Chip& c = *chips_[node];
  account_background(node);
  auto outcome = chip::serve_nma(c, packet(slot).bytes, sim_.now());
  if (!outcome) {
    ++stats_.packets_dropped;
    free_packet(slot);
    return;
  }
  // reg_access answers a write at once and a read when the data is there; eep_access waits
  // for the I2C transfer (and, for writes, the EEPROM write cycle).
  Time t = timing_.nma_unpack_dispatch + timing_.nma_collect_pack;
  switch (outcome->work.kind) {
    case chip::NmaWork::Kind::kRegRead:
      t += outcome->work.count * timing_.nma_register_read;
      break;
    case chip::NmaWork::Kind::kEepromRead:
      t += timing_.eeprom_i2c_setup + outcome->work.count * timing_.eeprom_read_per_byte;
      break;
    case chip::NmaWork::Kind::kEepromWrite:
      t += timing_.eeprom_i2c_setup + outcome->work.count * timing_.eeprom_write_per_byte;
      break;
    default:
      break;
  }
  if (outcome->work.kind == chip::NmaWork::Kind::kRegWrite) {
    schedule_bists(node);
    apply_link_controls(node);
  }
  Packet& p = packet(slot);
  p.bytes = outcome->response.bytes;
  p.vp = outcome->response.port;  // the output port, until the NMA hands the packet out
  Time start = std::max(sim_.now(), nma_busy_until_[node]);
  nma_busy_until_[node] = start + t;
  schedule(start + t, kNmaDone, slot, node);
}

// A BIST started through BIST_CTRL runs for its duration and then reports what it found
// (docs/system.md 2.5.6): flits tested at the link rate scaled by the intensity, each corrupted
// with the link's flit error rate (a draw from the simulation's random numbers per test).
void SimFabric::schedule_bists(uint32_t node) {
  chip::Chip& c = *chips_[node];
  for (uint8_t p = 0; p < c.num_ports(); ++p) {
    Output& o = outputs_[port_base_[node] + p];
    if (!c.port(p).bist_running || o.bist_scheduled) continue;
    o.bist_scheduled = true;
    Time duration = ((c.port(p).bist_ctrl >> 16) & 0xFFFF) * kMicrosecond;
    schedule(sim_.now() + duration, kBistDone, 0, node, p);
  }
}

void SimFabric::finish_bist(uint32_t node, uint8_t port) {
  chip::Chip& c = *chips_[node];
  Output& o = outputs_[port_base_[node] + port];
  o.bist_scheduled = false;
  chip::PortState& ps = c.port(port);
  if (!ps.bist_running) return;  // stopped by software
  uint64_t duration_us = (ps.bist_ctrl >> 16) & 0xFFFF;
  double intensity = static_cast<double>((ps.bist_ctrl >> 32) & 0xFF) / 100.0;
  double flit_time_us = to_us(timing_.serialisation(1));
  auto flits = static_cast<uint64_t>(duration_us / flit_time_us * intensity);
  uint64_t errors = 0;
  if (o.flit_error_rate > 0 && c.port_usable(port))
    errors = sim_.rng().binomial(flits, o.flit_error_rate);
  if (!c.port_usable(port)) errors = flits;  // nothing comes back over a dead link
  c.complete_bist(port, flits, errors);
  ++stats_.bists_completed;
  drain_nma(node);
}

void SimFabric::drain_nma(uint32_t node) {
  chip::drain_nma(*chips_[node], [&](uint8_t port, const wire::MgmtPacketBytes& bytes) {
    uint32_t s = alloc_packet();
    packet(s).mgmt = true;
    packet(s).bytes = bytes;
    transmit(node, port, s);
  });
}

void SimFabric::handle(Time now, uint64_t a, uint64_t b) {
  (void)now;
  auto kind = static_cast<EventKind>(b >> 56);
  uint32_t node = static_cast<uint32_t>((b >> 8) & 0xFFFFFFFF);
  uint8_t port = static_cast<uint8_t>(b & 0xFF);
  uint32_t slot = static_cast<uint32_t>(a);
  switch (kind) {
    case kArrive:
      on_arrive(slot, node, port);
      break;
    case kNmaDone: {
      chip::NmaOutput out;
      out.port = packet(slot).vp;
      out.bytes = packet(slot).bytes;
      free_packet(slot);
      chips_[node]->nma().push_response(out);
      drain_nma(node);
      break;
    }
    case kNicKick:
      on_nic_kick(node);
      break;
    case kNicSent: {
      uint8_t vp = packet(slot).vp;
      transmit(node, nic(node).network_port(), slot);
      nic(node).complete(vp, true);
      // A fenced descriptor may have been waiting for this completion.
      kick_nic(node);
      break;
    }
    case kLocalDone:
      nic(node).complete(port, true);
      if (local_listener_) local_listener_(node, port);
      kick_nic(node);
      break;
    case kMpqDeliver: {
      Packet& p = packet(slot);
      if (!p.mgmt) {
        deliver_data(slot, node);
        break;
      }
      chip::NicRx rx = nic(node).receive_mgmt(p.bytes);
      auto head = wire::decode_mgmt_packet(p.bytes);
      uint8_t vp = head.ok() ? head->dest_vp : 0;
      free_packet(slot);
      if (rx == chip::NicRx::kDelivered) {
        ++stats_.mpq_deliveries;
        if (mpq_listener_) mpq_listener_(node, vp);
      } else if (rx == chip::NicRx::kWaiting) {
        ++stats_.mpq_waits;  // enters the MPQ as the host polls it (chip/mpq.h)
      } else {
        ++stats_.packets_dropped;
      }
      break;
    }
    case kBistDone:
      finish_bist(node, port);
      break;
    case kEngineKick:
      pump_engine(node, static_cast<chip::DmaEngine>(port), false);
      break;
    case kEngineDone:
      transmit(node, 0, slot);
      engine_busy_[node][port] = 0;
      pump_engine(node, static_cast<chip::DmaEngine>(port), true);
      kick_nic(node);  // a fenced descriptor may wait for transfers to finish
      break;
    case kOutputFree:
      outputs_[port_base_[node] + port].free_event_pending = false;
      try_start(node, port);
      break;
    case kCredit:
      on_credit(node, port, a);
      break;
  }
}

Status SimFabric::set_link(PortRef end, bool up) {
  auto peer = topo_.peer(end);
  if (!peer)
    return make_error(Code::kNotFound, 4205,
                      fmt::format("node {} port {} has no link", end.node, end.port));
  outputs_[port_base_[end.node] + end.port].cable_cut = !up;
  outputs_[port_base_[peer->node] + peer->port].cable_cut = !up;
  update_link(end);
  return {};
}

// Ports whose PORT_CTRL "force link down" changed by a management write.
void SimFabric::apply_link_controls(uint32_t node) {
  chips_[node]->take_link_control_changes().for_each([&](unsigned p) {
    if (topo_.peer({node, static_cast<uint8_t>(p)})) update_link({node, static_cast<uint8_t>(p)});
  });
}

// A link is up when its cable carries signal and neither end holds it down; both ends learn a
// change at once (the training and the loss of signal take no simulated time).
void SimFabric::update_link(PortRef end) {
  PortRef peer = *topo_.peer(end);
  bool up = !outputs_[port_base_[end.node] + end.port].cable_cut &&
            chip::link_allowed(*chips_[end.node], end.port, *chips_[peer.node], peer.port);
  for (PortRef e : {end, peer}) {
    PortRef other = e == end ? peer : end;
    // A link that goes down or trains again starts over: what was on the wire is lost with it
    // (the epoch), and the sender's credits are the room the peer's buffer has now.
    ++outputs_[port_base_[e.node] + e.port].epoch;
    chips_[e.node]->port(e.port).vc.credits = chips_[other.node]->port(other.port).vc.buffered;
    if (up) {
      const chip::Chip& o = *chips_[other.node];
      chips_[e.node]->link_up(e.port, {o.configured(), o.type(), o.chip_id(), other.port,
                                       static_cast<uint8_t>(o.num_ports())});
    } else {
      chips_[e.node]->link_down(e.port);
    }
    drain_nma(e.node);
  }
}

Result<std::array<uint8_t, wire::kOobResponseBytes>> SimFabric::oob(
    std::span<const uint8_t> request) {
  auto decoded = wire::decode_oob_request(request);
  if (!decoded.ok()) return decoded.error();
  const wire::OobRequest& r = *decoded;
  if (r.chip >= topo_.num_nodes())
    return make_error(Code::kNotFound, 2206,
                      fmt::format("out-of-band request for chip {}: the fabric has {} chips",
                                  r.chip, topo_.num_nodes()));
  if (boards_.empty()) {
    board_of_.assign(topo_.num_nodes(), 0);
    chip::MonitorBoardOptions bo;
    bo.register_fetch_ns = static_cast<uint64_t>(timing_.nma_register_read / units::kNanosecond);
    for (const auto& chips : fabric::monitor_boards(topo_, chip::kMonitorBoardChannels)) {
      auto board = std::make_unique<chip::MonitorBoard>(bo);
      for (uint32_t v : chips) {
        GALAXY_TRY(board->add_chip(v, chips_[v].get()));
        board_of_[v] = static_cast<uint32_t>(boards_.size());
      }
      boards_.push_back(std::move(board));
    }
  }
  const Time half = timing_.oob_board_overhead / 2;
  sim_.run(sim_.now() + half);
  account_background(r.chip);
  auto out = boards_[board_of_[r.chip]]->execute(r, sim_.now(), [&](uint32_t node) {
    apply_link_controls(node);
    schedule_bists(node);
  });
  sim_.run(sim_.now() + static_cast<Time>(out.response.bus_ns) * units::kNanosecond +
           (timing_.oob_board_overhead - half));
  return wire::encode_oob_response(out.response);
}

void SimFabric::set_utilisation(std::vector<float> per_output) {
  for (size_t i = 0; i < outputs_.size() && i < per_output.size(); ++i)
    outputs_[i].util = per_output[i];
  // Counters start counting the load from now.
  for (uint32_t n = 0; n < background_until_.size(); ++n) account_background(n);
  background_load_ = false;
  for (const Output& o : outputs_) background_load_ = background_load_ || o.util > 0;
  for (Time& t : background_until_) t = sim_.now();
}

Result<std::pair<wire::SourceRoute, wire::SourceRoute>> SimFabric::shortest_routes(
    uint32_t from_nic, uint32_t to_node) const {
  if (from_nic >= topo_.num_nodes() || to_node >= topo_.num_nodes() || !topo_.is_nic(from_nic))
    return make_error(Code::kNotFound, 4206,
                      fmt::format("no NIC {} or node {} in the fabric", from_nic, to_node));
  // Link-count BFS from the target (never through a NIC), so that following decreasing
  // distance from the NIC leads to the target along a shortest path.
  std::vector<uint32_t> dist(topo_.num_nodes(), UINT32_MAX);
  std::vector<uint32_t> queue{to_node};
  dist[to_node] = 0;
  for (size_t qi = 0; qi < queue.size(); ++qi) {
    uint32_t v = queue[qi];
    if (topo_.is_nic(v) && v != to_node) continue;
    for (uint8_t p = 0; p < topo_.num_ports(v); ++p) {
      auto peer = topo_.peer({v, p});
      if (!peer || dist[peer->node] != UINT32_MAX) continue;
      dist[peer->node] = dist[v] + 1;
      queue.push_back(peer->node);
    }
  }
  std::vector<uint32_t> path{from_nic};
  uint32_t cur = from_nic;
  std::vector<uint8_t> out_ports;
  while (cur != to_node) {
    bool moved = false;
    for (uint8_t p = 0; p < topo_.num_ports(cur) && !moved; ++p) {
      auto peer = topo_.peer({cur, p});
      if (!peer || dist[peer->node] == UINT32_MAX || dist[peer->node] >= dist[cur]) continue;
      if (peer->node != to_node && topo_.is_nic(peer->node)) continue;
      out_ports.push_back(p);
      cur = peer->node;
      path.push_back(cur);
      moved = true;
    }
    if (!moved)
      return make_error(Code::kNotFound, 4207,
                        fmt::format("node {} is unreachable from NIC {}", to_node, from_nic));
  }
  // out_ports[0] leaves the NIC (no hop); out_ports[i] for i >= 1 leaves the i-th NRC.
  std::pair<wire::SourceRoute, wire::SourceRoute> r;
  for (size_t i = 1; i < out_ports.size(); ++i) GALAXY_TRY(r.first.push(out_ports[i]));
  // Backward: from the target (if it is an NRC, its own output is hop 0) back to the NIC.
  for (size_t i = path.size() - 1; i >= 1; --i) {
    uint32_t here = path[i];
    uint32_t prev = path[i - 1];
    if (topo_.is_nic(here)) continue;  // a NIC has one port and consumes no hop
    for (uint8_t p = 0; p < topo_.num_ports(here); ++p) {
      auto peer = topo_.peer({here, p});
      if (peer && peer->node == prev) {
        GALAXY_TRY(r.second.push(p));
        break;
      }
    }
  }
  return r;
}

size_t SimFabric::memory_bytes_estimate() const {
  return chips_.size() * sizeof(chip::Nrc) + outputs_.size() * sizeof(Output) +
         size_t{packets_allocated_} * sizeof(Packet);
}

}  // namespace galaxy::sim
