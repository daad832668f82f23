#include "glex/nic_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "glex/device.h"
#include "glex/sim_device.h"

namespace galaxy::glex {

namespace {

constexpr uint8_t kPioVp = 0;
constexpr uint8_t kDmaVp = chip::kPioVps;

Error failed(const char* what) {
  return make_error(Code::kInvalidArgument, 6200,
                    fmt::format("bench nic: {}: {}", what, glex_last_error()));
}

// One host with its NIC, its endpoints and its registered buffers.
struct Side {
  std::unique_ptr<glex_device> dev;
  std::vector<uint8_t> small, big;
  glex_event event{};
  glex_mem_handle_t small_mh = 0, big_mh = 0, event_mh = 0;
};

Status prepare(Side& s, sim::SimFabric& f, uint32_t node, uint64_t big_bytes) {
  s.dev = open_sim_device(f, node);
  for (uint8_t vp : {kPioVp, kDmaVp})
    if (!s.dev->open_vp(vp).ok()) return failed("open VP");
  s.small.assign(4096, 0x5A);
  s.big.assign(big_bytes, 0xA5);
  const uint32_t rw = GLEX_MEM_READ | GLEX_MEM_WRITE;
  if (s.dev->register_mem(s.small.data(), s.small.size(), rw, &s.small_mh) != GLEX_SUCCESS ||
      s.dev->register_mem(s.big.data(), s.big.size(), rw, &s.big_mh) != GLEX_SUCCESS ||
      s.dev->register_mem(&s.event, sizeof s.event, GLEX_MEM_WRITE, &s.event_mh) != GLEX_SUCCESS)
    return failed("register memory");
  return {};
}

glex_rdma_req request(Side& from, Side& to, uint8_t vp, uint32_t op, uint64_t len, bool big) {
  glex_rdma_req r{};
  r.target = GLEX_EP_ADDR(to.dev->chip_id(), vp);
  r.op = op;
  r.flags = GLEX_FLAG_REMOTE_EVT;
  r.local_addr = big ? from.big.data() : from.small.data();
  r.local_mh = big ? from.big_mh : from.small_mh;
  r.len = len;
  r.remote_addr = reinterpret_cast<uint64_t>(big ? to.big.data() : to.small.data());
  r.remote_mh = big ? to.big_mh : to.small_mh;
  r.event_addr = reinterpret_cast<uint64_t>(&to.event);
  r.event_mh = to.event_mh;
  r.event.data[0] = len;
  r.event.data[1] = 1;
  return r;
}

// Half the round trip of a ping-pong of `op` on `vp`, each side waiting for the event the
// other's RDMA writes (the paper's method), in microseconds.
Result<double> pingpong(Side& a, Side& b, uint8_t vp, uint32_t op, uint32_t bytes,
                        uint32_t iterations) {
  const glex_rdma_req ab = request(a, b, vp, op, bytes, false);
  const glex_rdma_req ba = request(b, a, vp, op, bytes, false);
  glex_event got;
  uint64_t start = 0;
  for (uint32_t i = 0; i <= iterations; ++i) {
    if (i == 1) start = a.dev->now_ps();  // the first round trip warms nothing up: skip it
    if (a.dev->rdma(vp, ab) != GLEX_SUCCESS) return failed("ping");
    if (b.dev->wait_event(ab.event_addr, 1000, &got) != GLEX_SUCCESS) return failed("ping event");
    if (b.dev->rdma(vp, ba) != GLEX_SUCCESS) return failed("pong");
    if (a.dev->wait_event(ba.event_addr, 1000, &got) != GLEX_SUCCESS) return failed("pong event");
  }
  return static_cast<double>(a.dev->now_ps() - start) / (2.0 * iterations) / 1e6;
}

// Pipelined puts from a to b, the last with an event; bytes over the time from the first post
// to b seeing the event.
Result<double> bandwidth(Side& a, Side& b, uint64_t size, uint64_t total) {
  const uint64_t count = std::max<uint64_t>(2, total / size);
  glex_rdma_req r = request(a, b, kDmaVp, GLEX_OP_PUT, size, true);
  const uint64_t start = a.dev->now_ps();
  for (uint64_t i = 0; i < count; ++i) {
    r.flags = i + 1 == count ? GLEX_FLAG_REMOTE_EVT : 0;
    glex_ret_t ret;
    while ((ret = a.dev->rdma(kDmaVp, r)) == GLEX_BUSY) {  // the SDQ is full: let it drain
      if (a.dev->fence(kDmaVp, 1000) != GLEX_SUCCESS) return failed("drain");
    }
    if (ret != GLEX_SUCCESS) return failed("put");
  }
  glex_event got;
  if (b.dev->wait_event(r.event_addr, 10000, &got) != GLEX_SUCCESS) return failed("put event");
  const double seconds = static_cast<double>(b.dev->now_ps() - start) * 1e-12;
  return static_cast<double>(count * size) / seconds / 1e9;
}

}  // namespace

Result<std::pair<uint32_t, uint32_t>> nearest_nic_pair(const fabric::Topology& t) {
  for (uint32_t i = 0; i < t.num_nics(); ++i) {
    const uint32_t a = t.nic_node(i);
    auto nrc = t.peer({a, 0});
    if (!nrc) continue;
    for (uint8_t p = 0; p < t.num_ports(nrc->node); ++p) {
      auto other = t.peer({nrc->node, p});
      if (other && other->node != a && t.is_nic(other->node)) return std::make_pair(a, other->node);
    }
  }
  return make_error(Code::kNotFound, 6201, "bench nic: no NRC has two NICs");
}

Result<NicFigures> measure_nic(sim::SimFabric& f, uint32_t a_node, uint32_t b_node,
                               const NicBenchOptions& o) {
  const uint64_t big = *std::max_element(o.bandwidth_sizes.begin(), o.bandwidth_sizes.end());
  Side a, b;
  GALAXY_TRY(prepare(a, f, a_node, big));
  GALAXY_TRY(prepare(b, f, b_node, big));
  NicFigures n;
  const uint32_t len = o.latency_bytes;
  auto pio_imm = pingpong(a, b, kPioVp, GLEX_OP_IMM, len, o.iterations);
  auto pio_put = pingpong(a, b, kPioVp, GLEX_OP_PUT, len, o.iterations);
  auto dma_imm = pingpong(a, b, kDmaVp, GLEX_OP_IMM, len, o.iterations);
  auto dma_put = pingpong(a, b, kDmaVp, GLEX_OP_PUT, len, o.iterations);
  for (const auto* r : {&pio_imm, &pio_put, &dma_imm, &dma_put})
    if (!r->ok()) return r->error();
  n.pio_immediate_us = *pio_imm;
  n.pio_put_us = *pio_put;
  n.dma_immediate_us = *dma_imm;
  n.dma_put_us = *dma_put;
  for (uint64_t size : o.bandwidth_sizes) {
    auto bw = bandwidth(a, b, size, o.bandwidth_total);
    if (!bw.ok()) return bw.error();
    n.bandwidth.emplace_back(size, *bw);
    n.peak_gbytes_per_s = std::max(n.peak_gbytes_per_s, *bw);
  }
  return n;
}

}  // namespace galaxy::glex
