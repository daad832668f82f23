#include "engine/sim/sim_fabric.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/time_units.h"
#include "chip/i2c.h"
#include "chip/registers.h"
#include "engine/sim/calibration.h"
#include "engine/sim/load.h"
#include "engine/sim/mgmt_probe.h"
#include "fabric/builders.h"
#include "fabric/io.h"
#include "sim_test_util.h"
#include "wire/oob.h"

namespace galaxy::sim {
namespace {

using testing::make;

TEST(CalibrationTest, ComponentsReproduceThePapersFigures) {
  auto t = default_timing().value();
  // docs/system.md 2.8: per-hop round trip 0.8762 us, register processing 5.9597 us, EEPROM
  // 157.826.
  EXPECT_NEAR(to_us(2 * t.mgmt_hop()), 0.8762, 1e-6);
  EXPECT_NEAR(to_us(t.register_read_processing()), 5.9597, 1e-6);
  EXPECT_NEAR(to_us(t.eeprom_read_processing(1)), 157.826, 1e-6);
  EXPECT_NEAR(to_us(t.eeprom_read_processing(2) - t.eeprom_read_processing(1)), 150.0, 1e-6);
}

TEST(CalibrationTest, BadFilesAreRefusedNamingTheParameter) {
  auto missing = load_timing("/nonexistent/timing.json");
  EXPECT_EQ(missing.error().code, Code::kIoError);
  char path[] = "/tmp/galaxy_timing_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string text =
      R"({"format":"galaxy-timing","version":1,"parameters":{"link_lane_gbps":{"value":14,"source":"x"}}})";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  auto r = load_timing(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("link_lanes"), std::string::npos);
  unlink(path);
}

// Acceptance (issue 2): a single-register read from a NIC to an NRC h hops away takes
// processing + (h + 1) x per-hop time within 1%, through the chip models.
TEST(SimFabricTest, RegisterReadLatencyFollowsThePapersModelAtEveryHopCount) {
  auto f = make("line:n=10");
  const Timing& t = f->timing();
  const double processing = to_us(t.register_read_processing());
  const double per_hop = 2 * to_us(t.mgmt_hop());
  uint32_t server = f->topology().nic_node(0);
  auto dist = f->topology().bfs_distances(server);
  int measured = 0;
  for (uint32_t h = 0; h <= 8; ++h) {
    uint32_t target = UINT32_MAX;
    for (uint32_t v = 0; v < f->topology().num_nodes(); ++v)
      if (!f->topology().is_nic(v) && dist[v] == h + 1) target = v;
    ASSERT_NE(target, UINT32_MAX) << "no NRC at h = " << h;
    ProbeSpec ps;
    ps.server_nic = server;
    ps.target = target;
    ps.count = 50;
    auto r = run_probe(*f, ps);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_EQ(r->hops, h);
    double model = processing + (h + 1) * per_hop;
    EXPECT_NEAR(r->mean_us, model, model * 0.01) << "h = " << h;
    ++measured;
  }
  EXPECT_EQ(measured, 9);
}

TEST(SimFabricTest, WriteFasterThanReadTwoRegistersBetweenOneAndTwoReads) {
  auto f = make("line:n=3");
  uint32_t server = f->topology().nic_node(0);
  uint32_t target = f->topology().peer({server, 0})->node;
  auto probe = [&](wire::NmpType type, std::vector<uint16_t> addrs) {
    ProbeSpec ps;
    ps.server_nic = server;
    ps.target = target;
    ps.type = type;
    ps.addresses = addrs;
    ps.values.assign(addrs.size(), 1);
    ps.count = 10;
    return run_probe(*f, ps).value();
  };
  double read1 = probe(wire::NmpType::kRegReadRequest, {chip::reg::kScratch}).mean_us;
  double read2 =
      probe(wire::NmpType::kRegReadRequest, {chip::reg::kScratch, chip::reg::kChipId}).mean_us;
  double write1 = probe(wire::NmpType::kRegWriteRequest, {chip::reg::kScratch}).mean_us;
  double eep1 = probe(wire::NmpType::kEepromReadRequest, {0x200}).mean_us;
  double eep3 = probe(wire::NmpType::kEepromReadRequest, {0x200, 0x201, 0x202}).mean_us;
  double eepw1 = probe(wire::NmpType::kEepromWriteRequest, {0x200}).mean_us;
  double eepw2 = probe(wire::NmpType::kEepromWriteRequest, {0x200, 0x201}).mean_us;
  EXPECT_LT(write1, read1);
  EXPECT_GT(read2, read1);
  EXPECT_LT(read2, 2 * read1);
  EXPECT_NEAR(eep3 - eep1, 300.0, 1.0);     // about +150 us per extra byte read
  EXPECT_NEAR(eepw2 - eepw1, 3000.0, 1.0);  // about +3,000 us per extra byte written
  // The response really carries the register: the written value comes back.
  auto r = probe(wire::NmpType::kRegReadRequest, {chip::reg::kScratch});
  EXPECT_EQ(r.last_response.data.value[0], 1u);
}

TEST(SimFabricTest, BackgroundLoadDelaysManagementByResidualService) {
  auto idle = make("fattree:k=4,levels=3", 7);
  auto busy = make("fattree:k=4,levels=3", 7);
  auto sum = apply_load(*busy, "uniform:util=0.5");
  ASSERT_TRUE(sum.ok());
  EXPECT_NEAR(sum->max_utilisation, 0.5, 1e-6);
  const auto& topo = idle->topology();
  uint32_t server = topo.nic_node(0);
  auto dist = topo.bfs_distances(server);
  uint32_t far = 0;
  for (uint32_t v = 0; v < topo.num_nodes(); ++v)
    if (!topo.is_nic(v) && dist[v] != UINT32_MAX && dist[v] > dist[far]) far = v;
  ProbeSpec ps;
  ps.server_nic = server;
  ps.target = far;
  ps.count = 2000;
  double t_idle = run_probe(*idle, ps).value().mean_us;
  auto rb = run_probe(*busy, ps).value();
  // Expected extra: 2(h+1) hops x util x mean residual (half a data packet's transmission).
  double data_us = to_us(busy->timing().serialisation_bits(busy->timing().data_packet_bytes * 8));
  double expect = 2.0 * (rb.hops + 1) * 0.5 * data_us / 2;
  EXPECT_GT(busy->stats().mgmt_waits_behind_data, 0u);
  EXPECT_NEAR(rb.mean_us - t_idle, expect, expect * 0.15);
  EXPECT_EQ(idle->stats().mgmt_waits_behind_data, 0u);
}

TEST(SimFabricTest, AlltoallLoadSpreadsOverLinksAndRejectsBadParameters) {
  auto f = make("fattree:k=4,levels=3");
  auto sum = apply_load(*f, "alltoall:groups=2");
  ASSERT_TRUE(sum.ok()) << sum.error().to_string();
  EXPECT_NEAR(sum->max_utilisation, 0.9, 1e-6);
  EXPECT_GT(sum->busy_outputs, f->topology().num_links());  // both directions of most links
  EXPECT_FALSE(apply_load(*f, "alltoall:groups=0").ok());
  EXPECT_FALSE(apply_load(*f, "alltoall:util=2").ok());
  EXPECT_FALSE(apply_load(*f, "alltoall:grops=2").ok());
  EXPECT_FALSE(apply_load(*f, "nosuchload").ok());
}

TEST(SimFabricTest, TableRoutedMpsReachTheirVpAndLinkDownRaisesFault) {
  auto f = make("line:n=4");
  const auto& topo = f->topology();
  testing::program_minimal_routes(*f);
  uint32_t src = topo.nic_node(0);
  uint32_t dst = topo.nic_node(topo.num_nics() - 1);
  int delivered = 0;
  f->set_mpq_listener([&](uint32_t nic, uint8_t vp) {
    if (nic == dst && vp == 5) ++delivered;
  });
  uint8_t msg[120];
  for (int i = 0; i < 120; ++i) msg[i] = static_cast<uint8_t>(i);
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(f->post_mp(src, 0, static_cast<uint16_t>(dst), 5, msg).ok());
  f->sim().run();
  EXPECT_EQ(delivered, 10);
  auto e = f->nic(dst).poll_mpq(5);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->src_node, src);
  EXPECT_EQ(e->data[119], 119);
  // A full MPQ loses nothing: the MPs wait in the NIC's input and enter, in order, as the host
  // polls (chip/mpq.h).
  while (f->nic(dst).poll_mpq(5)) {
  }
  f->nic(dst).set_mpq_depth(5, 2);
  const uint64_t dropped_before = f->stats().packets_dropped;
  for (uint8_t i = 0; i < 6; ++i) {
    msg[0] = i;
    ASSERT_TRUE(f->post_mp(src, 0, static_cast<uint16_t>(dst), 5, msg).ok());
  }
  f->sim().run();
  EXPECT_EQ(f->nic(dst).mpq_count(5), 2u);
  EXPECT_EQ(f->nic(dst).mpq_waiting(5), 4u);
  EXPECT_EQ(f->stats().mpq_waits, 4u);
  EXPECT_EQ(f->stats().packets_dropped, dropped_before);
  for (uint8_t i = 0; i < 6; ++i) {
    auto m = f->nic(dst).poll_mpq(5);
    ASSERT_TRUE(m) << "MP " << int{i};
    EXPECT_EQ(m->data[0], i);
  }
  EXPECT_FALSE(f->nic(dst).poll_mpq(5));
  // A link down: chips on both ends latch the fault; packets no longer pass. The sender's NIC
  // discards the MP and refuses it to its VP (chip/refusal.h): an error in the EQ, counted.
  uint32_t nrc0 = topo.peer({src, 0})->node;
  const int delivered_before = delivered;
  ASSERT_TRUE(f->set_link({src, 0}, false).ok());
  EXPECT_EQ(f->chip(nrc0).read_register(chip::reg::kFaultStatus).value & 1, 1u);
  while (f->nic(src).poll_eq(0)) {
  }
  ASSERT_TRUE(f->post_mp(src, 0, static_cast<uint16_t>(dst), 5, msg).ok());
  f->sim().run();
  EXPECT_EQ(delivered, delivered_before);
  EXPECT_EQ(f->stats().data_discarded, 1u);
  EXPECT_EQ(f->stats().mp_refusals, 1u);
  auto refused = f->nic(src).poll_eq(0);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->kind, chip::EventKind::kMpRefused);
  EXPECT_EQ(refused->error_id, chip::kErrNicPortDown);
  EXPECT_EQ(f->nic(src).read_register(chip::reg::vp_register(0, chip::reg::vp::kMpRefused)).value,
            1u);
}

TEST(SimFabricTest, Th2InstantiatesAtFullScale) {
  auto f = make("th2");
  EXPECT_EQ(f->topology().num_nics(), 18304u);
  EXPECT_EQ(f->topology().num_nrcs(), 5832u);
  // Every chip booted from its EEPROM with its id.
  EXPECT_TRUE(f->chip(12345).configured());
  EXPECT_EQ(f->chip(12345).chip_id(), 12345);
}

}  // namespace
}  // namespace galaxy::sim

namespace galaxy::sim {
namespace {

// Regression: a dual-port HCA from ibnetdiscover overran the one-port NIC model.
TEST(SimFabricTest, MultiPortNicsFromIbnetdiscoverInstantiate) {
  auto topo = fabric::load_topology_file(std::string(GALAXY_SOURCE_DIR) +
                                         "/config/topologies/two-switch-four-host.ibnetdiscover");
  ASSERT_TRUE(topo.ok()) << topo.error().to_string();
  auto f = SimFabric::create(*topo, default_timing().value());
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  bool multi = false;
  for (uint32_t v = 0; v < topo->num_nodes(); ++v)
    if (topo->is_nic(v) && topo->num_ports(v) > 1) {
      multi = true;
      for (uint8_t p = 0; p < topo->num_ports(v); ++p) {
        if (topo->peer({v, p})) {
          EXPECT_EQ((*f)->chip(v).port(p).link, chip::LinkState::kUp);
        }
      }
    }
  EXPECT_TRUE(multi) << "the example should contain a multi-port HCA";

  fabric::Topology t;
  uint32_t nic = t.add_node(fabric::NodeKind::kNic, 5, "fat-nic").value();
  (void)nic;
  auto bad = SimFabric::create(t, default_timing().value());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("fat-nic"), std::string::npos);
}

}  // namespace
}  // namespace galaxy::sim

namespace galaxy::sim {
namespace {

TEST(SimFabricTest, BistStartedThroughManagementCompletesWithResults) {
  auto f = make("line:n=3");
  uint32_t server = f->topology().nic_node(0);
  uint32_t nrc0 = f->topology().peer({server, 0})->node;
  // Port of NRC0 towards NRC1 gets a bad link; BIST on it finds errors.
  uint8_t port = 0;
  for (uint8_t p = 0; p < f->topology().num_ports(nrc0); ++p) {
    auto peer = f->topology().peer({nrc0, p});
    if (peer && !f->topology().is_nic(peer->node)) port = p;
  }
  f->set_flit_error_rate({nrc0, port}, 1e-4);
  uint16_t ctrl = chip::reg::port_register(port, chip::reg::port::kBistCtrl);
  ProbeSpec ps;
  ps.server_nic = server;
  ps.target = nrc0;
  ps.type = wire::NmpType::kRegWriteRequest;
  ps.addresses = {ctrl};
  ps.values = {1 | (uint64_t{200} << 16) | (uint64_t{50} << 32)};  // start, 200 us, 50%
  ps.count = 1;
  ASSERT_TRUE(run_probe(*f, ps).ok());
  const chip::PortState& s = f->chip(nrc0).port(port);
  EXPECT_TRUE(s.bist_done);
  EXPECT_FALSE(s.bist_running);
  // 200 us at 112 Gbit/s of 198-bit flits, half intensity: about 56,600 flits.
  EXPECT_NEAR(static_cast<double>(s.bist_flits), 200e-6 * 112e9 / 198 * 0.5, 1e4);
  // Each flit corrupted with probability 1e-4: a binomial draw of mean 5.7, within 4 standard
  // deviations.
  const double mean = static_cast<double>(s.bist_flits) * 1e-4;
  EXPECT_NEAR(static_cast<double>(s.bist_errors), mean, 4 * std::sqrt(mean));
  EXPECT_EQ(f->stats().bists_completed, 1u);
}

TEST(SimFabricTest, CorruptedFlitsAreRetransmittedNeverLost) {
  auto clean = make("line:n=4", 3);
  auto noisy = make("line:n=4", 3);
  const auto& topo = noisy->topology();
  for (uint32_t v = 0; v < topo.num_nodes(); ++v)
    for (uint8_t p = 0; p < topo.num_ports(v); ++p)
      if (topo.peer({v, p})) noisy->set_flit_error_rate({v, p}, 0.02);
  uint32_t server = topo.nic_node(0);
  uint32_t far = 0;
  auto dist = topo.bfs_distances(server);
  for (uint32_t v = 0; v < topo.num_nodes(); ++v)
    if (!topo.is_nic(v) && dist[v] != UINT32_MAX && dist[v] > dist[far]) far = v;
  ProbeSpec ps;
  ps.server_nic = server;
  ps.target = far;
  ps.count = 500;
  auto a = run_probe(*clean, ps);
  auto b = run_probe(*noisy, ps);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(b->completed, 500u);  // every request answered
  EXPECT_GT(noisy->stats().retransmissions, 0u);
  EXPECT_GT(b->mean_us, a->mean_us);
  uint64_t retrans = 0, crc = 0;
  for (uint32_t v = 0; v < topo.num_nodes(); ++v)
    for (uint8_t p = 0; p < topo.num_ports(v); ++p) {
      retrans += noisy->chip(v).port(p).retransmissions;
      crc += noisy->chip(v).port(p).crc_errors;
    }
  EXPECT_EQ(retrans, noisy->stats().retransmissions);
  EXPECT_EQ(crc, retrans);
  EXPECT_EQ(clean->stats().retransmissions, 0u);
}

}  // namespace
}  // namespace galaxy::sim

namespace galaxy::sim {
namespace {

// Many requests posted at once: the NIC pipelines descriptors (one per initiation interval),
// each target's NMA serves its requests one at a time, and every response arrives.
TEST(SimFabricTest, PipelinedRequestsOverlapAndNmasSerialise) {
  auto f = make("fattree:k=4,levels=3");
  const auto& topo = f->topology();
  const Timing& t = f->timing();
  uint32_t server = topo.nic_node(0);
  std::vector<uint32_t> nrcs;
  for (uint32_t v = 0; v < topo.num_nodes(); ++v)
    if (!topo.is_nic(v)) nrcs.push_back(v);
  int answered = 0;
  Time last = 0;
  f->set_mpq_listener([&](uint32_t nic, uint8_t vp) {
    while (f->nic(nic).poll_mpq(vp)) ++answered;
    last = f->sim().now();
  });
  uint16_t tid = 0;
  for (int rep = 0; rep < 2; ++rep) {
    for (uint32_t target : nrcs) {
      auto r = f->shortest_routes(server, target).value();
      wire::MgmtDescriptor d;
      d.dest_id = static_cast<uint16_t>(target);
      d.dest_vp = d.src_vp = 8;
      d.forward_route = r.first;
      d.backward_route = r.second;
      d.transaction_id = tid++;
      d.data.count = 1;
      d.data.address[0] = chip::reg::kScratch;
      ASSERT_TRUE(f->post_mgmt(server, 8, d).ok());
    }
  }
  f->sim().run();
  const int n = static_cast<int>(2 * nrcs.size());
  EXPECT_EQ(answered, n);
  // Serial would take n x (processing + hops); pipelined it is one latency plus the issue
  // intervals and the second request to each NMA waiting for the first.
  Time serial_lower_bound = n * t.register_read_processing();
  Time one_far = t.register_read_processing() + 2 * 5 * t.mgmt_hop();
  EXPECT_LT(last, serial_lower_bound / 4);
  EXPECT_LT(last, one_far + n * t.nic_descriptor_interval + t.nma_register_read +
                      t.nma_unpack_dispatch + t.nma_collect_pack);
  EXPECT_GT(last, one_far / 2);
}

// The out-of-band path on the simulator's clock: the board's frames in and out, the time of a
// register read the board's stated overhead plus what its bus did (131 bit times and the chip's
// register fetch), the fabric's clock moved by that much; a frame that does not decode is refused
// with the decoder's id and moves nothing.
TEST(SimFabricTest, OutOfBandReadTakesTheBoardsOverheadAndItsBusOnTheSimulatorsClock) {
  auto f = make("line:n=3");
  const Timing& t = f->timing();
  const uint32_t nrc = f->topology().nic_node(0) == 0 ? 1 : 0;
  f->chip(nrc).write_register(chip::reg::kScratch, 0xABCD);
  const Time t0 = f->sim().now();
  auto frame = f->oob(
      wire::encode_oob_request({wire::OobOp::kReadRegister, nrc, 7, chip::reg::kScratch, 0}));
  ASSERT_TRUE(frame.ok()) << frame.error().to_string();
  auto r = wire::decode_oob_response(*frame);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->error_id, 0);
  EXPECT_EQ(r->tag, 7u);
  EXPECT_EQ(r->value, 0xABCDu);
  const uint64_t fetch_ns = t.nma_register_read / units::kNanosecond;
  EXPECT_EQ(r->bus_ns, 131 * chip::kI2cBitNs + fetch_ns);
  EXPECT_EQ(f->sim().now() - t0,
            t.oob_board_overhead + static_cast<Time>(r->bus_ns) * units::kNanosecond);
  auto bad = wire::encode_oob_request({wire::OobOp::kStatus, nrc, 8, 0, 0});
  bad[0] ^= 0xFF;
  const Time t1 = f->sim().now();
  auto refused = f->oob(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().id, 1951);
  EXPECT_EQ(f->sim().now(), t1);
  auto none = f->oob(wire::encode_oob_request({wire::OobOp::kStatus, 99, 9, 0, 0}));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().id, 2206);
}

}  // namespace
}  // namespace galaxy::sim
