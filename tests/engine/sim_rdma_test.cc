// RDMA at packet level in the simulated engine: descriptors through chip::Nic, encoded flits on
// every link, routed hop by hop by the NRCs, written by the target NIC into modelled host
// memory.
#include <gtest/gtest.h>

#include <numeric>

#include "engine/sim/sim_fabric.h"
#include "sim_test_util.h"

namespace galaxy::sim {
namespace {

using testing::make;
using wire::Completion;
using wire::RdmaDescriptor;
using wire::RdmaOp;

struct Ends {
  uint32_t src, dst;
  uint32_t src_key, dst_key;
};

Ends setup(SimFabric& f, uint64_t bytes) {
  testing::program_minimal_routes(f);
  const auto& t = f.topology();
  Ends e{t.nic_node(0), t.nic_node(t.num_nics() - 1), 0, 0};
  e.src_key = f.register_memory(e.src, 0x10000, bytes + 4096, chip::kAccessRead).value();
  e.dst_key =
      f.register_memory(e.dst, 0x20000, bytes + 4096, chip::kAccessRead | chip::kAccessWrite)
          .value();
  return e;
}

RdmaDescriptor put(const Ends& e, uint64_t src, uint64_t dst, uint32_t len) {
  RdmaDescriptor d;
  d.remote_node = static_cast<uint16_t>(e.dst);
  d.remote_vp = 9;
  d.local_address = src;
  d.local_key = e.src_key;
  d.remote_address = dst;
  d.remote_key = e.dst_key;
  d.length = len;
  d.local_cq = true;
  return d;
}

TEST(SimRdmaTest, PutWithEventCrossesTheFabricAndCompletesOnce) {
  auto f = make("fattree:k=4,levels=3");
  const uint64_t n = 64 * 1024 + 5;
  Ends e = setup(*f, n);
  std::vector<uint8_t> data(n);
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<uint8_t>(i * 13 + 1);
  ASSERT_TRUE(f->write_memory(e.src, e.src_key, 0x10003, data).ok());
  RdmaDescriptor d = put(e, 0x10003, 0x20001, static_cast<uint32_t>(n));
  d.completion = Completion::kEvent;
  d.notify_address = 0x20000 + n + 100;
  d.notify_key = e.dst_key;
  d.notify_data[0] = 0x77;
  ASSERT_TRUE(f->post_rdma(e.src, 3, d).ok());
  f->sim().run();
  std::vector<uint8_t> got(n);
  ASSERT_TRUE(f->read_memory(e.dst, e.dst_key, 0x20001, got).ok());
  EXPECT_EQ(got, data);
  uint8_t ev[16];
  ASSERT_TRUE(f->read_memory(e.dst, e.dst_key, d.notify_address, ev).ok());
  EXPECT_EQ(ev[0], 0x77);
  auto c = f->nic(e.src).poll_eq(3);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->kind, chip::EventKind::kDescriptorDone);
  EXPECT_EQ(c->bytes, n);
  EXPECT_FALSE(f->nic(e.src).poll_eq(3));
  // Every packet crossed the links as flits: data + event + ack, several hops each.
  const uint64_t packets = wire::packets_for(0x20001, n) + 2;
  EXPECT_EQ(f->stats().data_packets_received, packets);
  EXPECT_GE(f->stats().data_packets_sent, packets * 3);
  EXPECT_EQ(f->stats().packets_dropped, 0u);
  // Bandwidth: the port's flit rate bounds it (PCIe is faster on TH-2); a 64 KiB put takes at
  // least its serialisation and not much more than that plus the pipeline.
  const Time ser =
      f->timing().serialisation(static_cast<unsigned>(wire::transfer_traffic(0x20001, n).flits));
  EXPECT_GT(f->sim().now(), ser);
  EXPECT_LT(f->sim().now(), ser + 20 * kMicrosecond);
}

TEST(SimRdmaTest, GetReadsTheRemoteMemory) {
  auto f = make("fattree:k=4,levels=3");
  const uint64_t n = 10000;
  Ends e = setup(*f, n);
  std::vector<uint8_t> data(n);
  std::iota(data.begin(), data.end(), 0);
  ASSERT_TRUE(f->write_memory(e.dst, e.dst_key, 0x20077, data).ok());
  RdmaDescriptor d = put(e, 0x10001, 0x20077, static_cast<uint32_t>(n));
  d.op = RdmaOp::kRead;
  ASSERT_TRUE(f->post_rdma(e.src, 9, d).ok());
  f->sim().run();
  std::vector<uint8_t> got(n);
  ASSERT_TRUE(f->read_memory(e.src, e.src_key, 0x10001, got).ok());
  EXPECT_EQ(got, data);
  auto c = f->nic(e.src).poll_eq(9);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->kind, chip::EventKind::kDescriptorDone);
  EXPECT_EQ(c->op, chip::DescriptorOp::kGet);
}

TEST(SimRdmaTest, RefusedPutWritesNothingAndReportsTheTargetsError) {
  auto f = make("fattree:k=4,levels=3");
  Ends e = setup(*f, 4096);
  RdmaDescriptor d = put(e, 0x10000, 0x20000 + 8000, 1000);  // runs past the target region
  ASSERT_TRUE(f->post_rdma(e.src, 8, d).ok());
  f->sim().run();
  auto c = f->nic(e.src).poll_eq(8);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->kind, chip::EventKind::kDescriptorError);
  EXPECT_EQ(c->error_id, 2068);
  std::vector<uint8_t> got(4096);
  ASSERT_TRUE(f->read_memory(e.dst, e.dst_key, 0x20000 + 4096, got).ok());
  EXPECT_EQ(std::count(got.begin(), got.end(), 0), 4096);
}

// A dirty packet arriving at a NIC in the simulator is discarded into its error buffer and
// counted; nothing reaches host memory.
TEST(SimRdmaTest, DirtyPacketArrivingAtANicIsDiscarded) {
  auto f = make("fattree:k=4,levels=3");
  Ends e = setup(*f, 4096);
  wire::DataPacket p;
  p.head.kind = wire::PacketKind::kRdmaWrite;
  p.head.dest_node = static_cast<uint16_t>(e.dst);
  p.head.src_node = static_cast<uint16_t>(e.src);
  p.head.bytes = 64;
  p.head.flags = wire::kDataFlagInTransfer;
  p.ext = {0x20000, e.dst_key, 0, 64};
  p.payload.fill(0xAB);
  auto flits = wire::encode_data_packet(p).value();
  flits[2].payload[1] ^= 4;  // a bit flipped on the way
  ASSERT_TRUE(f->inject_data({e.dst, 0}, flits).ok());
  f->sim().run();
  EXPECT_EQ(f->nic(e.dst).dirty_packets(wire::DataDefect::kDataError), 1u);
  EXPECT_TRUE(f->nic(e.dst).error_buffer().valid);
  uint8_t got[64];
  ASSERT_TRUE(f->read_memory(e.dst, e.dst_key, 0x20000, got).ok());
  EXPECT_EQ(got[0], 0);
  EXPECT_FALSE(f->inject_data({e.dst, 7}, flits).ok());
}

}  // namespace
}  // namespace galaxy::sim
