// A run item of the direct path (engine/live/direct.h, ItemType::kDataRun): a transfer's packet
// and the payload of the packets that follow it cross as one item, arrive as that packet and
// its run, and are dropped with their error id when the run's head is wrong or the item is no
// transfer's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chip/rdma_transfer.h"
#include "engine/live/direct.h"
#include "engine/live/live_spec.h"
#include "engine/live/segment.h"
#include "wire/mgmt.h"

namespace galaxy::live::direct_run_test {

// Host h2 of a two-host fat tree, every link up, its NRCs routing to a NIC beside them straight
// and to any other NIC towards an NRC.
std::unique_ptr<Segment> make_segment() {
  auto f = parse_live_fabric("live:fattree:k=4,levels=2,name=drt" + std::to_string(getpid()) +
                             ",hosts=h1:127.0.0.1:1,h2:127.0.0.1:2");
  if (!f.ok()) return nullptr;
  auto seg = Segment::create(*f, 1);
  if (!seg.ok()) return nullptr;
  Segment& g = **seg;
  for (uint32_t n = 0; n < g.num_chips(); ++n)
    for (uint32_t p = 0; p < g.chip(n).num_ports; ++p) g.peer(n, p).up.store(1);
  for (uint32_t n = 0; n < g.num_chips(); ++n) {
    const ChipInfo& c = g.chip(n);
    if (c.local == kNoLocal || g.nic_of(n)) continue;
    for (uint32_t d = 0; d < g.num_chips(); ++d) {
      chip::PortSet direct, onwards;
      for (uint32_t p = 0; p < c.num_ports; ++p) {
        const uint32_t peer = g.peer(n, p).chip;
        if (peer == d) direct.set(p);
        if (peer != kNoChip && !g.nic_of(peer) &&
            g.chip(peer).type == static_cast<uint8_t>(wire::ChipType::kNrc))
          onwards.set(p);
      }
      for (uint32_t in = 0; in < c.num_ports; ++in)
        g.route_row(c.local, in)[d].store(direct.any() ? direct : onwards);
    }
  }
  return std::move(*seg);
}

class DirectRun : public ::testing::Test {
 protected:
  void SetUp() override {
    seg_ = make_segment();
    ASSERT_TRUE(seg_);
    // A cable from a chip of the other host into this one, and a NIC of this host a transfer's
    // packet that crosses it is delivered to.
    for (uint32_t c = 0; c < seg_->num_chips() && !leaving_; ++c) {
      if (seg_->is_local(c)) continue;
      for (uint32_t p = 0; p < seg_->chip(c).num_ports && !leaving_; ++p) {
        if (!seg_->is_local(seg_->peer(c, p).chip)) continue;
        for (uint32_t d = 0; d < seg_->num_chips() && !leaving_; ++d) {
          if (!seg_->nic_of(d)) continue;
          Forwarded f;
          f.kind = Forwarded::Kind::kLeavesHost;
          f.chip = c;
          f.port = static_cast<uint8_t>(p);
          dest_ = d;
          if (arrive(f, {}).first == Arrival::kTransfer) leaving_ = f;
        }
      }
    }
    ASSERT_TRUE(leaving_) << "no cable into this host delivers to its NICs";
  }

  // Put `d`'s packet at `sent`, sealed at source node 0.
  wire::DataPacket packet(uint64_t sent) {
    wire::RdmaDescriptor d;
    d.op = wire::RdmaOp::kWrite;
    d.remote_node = dest_;
    d.remote_address = 0x10000 + 77;
    d.remote_key = 5;
    d.length = 5000;
    d.completion = wire::Completion::kNone;
    wire::DataPacket p;
    chip::rdma_data_packet(d, 1, 9, sent, p);
    for (size_t i = 0; i < p.head.bytes; ++i) p.payload[i] = static_cast<uint8_t>(i + sent);
    EXPECT_TRUE(chip::seal_data_packet(p, 0).ok());
    return p;
  }

  std::pair<Arrival, TransferArrival> arrive(const Forwarded& f, std::span<const uint8_t> run,
                                             std::vector<uint8_t>* item = nullptr,
                                             bool transfer = true) {
    std::vector<uint8_t> own;
    if (!item) {
      item = &own;
      EXPECT_TRUE(append_leaving_item(packet(0), f, item, run).ok());
    }
    TransferArrival t;
    const Arrival a = arrive_direct(*seg_, *item, &paths_, &why_, transfer ? &t : nullptr);
    return {a, t};
  }

  std::unique_ptr<Segment> seg_;
  std::optional<Forwarded> leaving_;
  uint32_t dest_ = 0;
  ArrivalPaths paths_;
  Error why_;
};

std::vector<uint8_t> run_bytes(size_t n) {
  std::vector<uint8_t> r(n);
  for (size_t i = 0; i < n; ++i) r[i] = static_cast<uint8_t>(i * 13 + 5);
  return r;
}

TEST_F(DirectRun, ARunArrivesAsItsPacketAndItsPayload) {
  const std::vector<uint8_t> run = run_bytes(4096);
  std::vector<uint8_t> item;
  ASSERT_TRUE(append_leaving_item(packet(0), *leaving_, &item, run).ok());
  EXPECT_EQ(item[2], static_cast<uint8_t>(ItemType::kDataRun));
  const auto [a, t] = arrive(*leaving_, run, &item);
  ASSERT_EQ(a, Arrival::kTransfer) << why_.to_string();
  EXPECT_EQ(t.nic, dest_);
  const wire::DataPacket sent = packet(0);
  EXPECT_EQ(t.packet.head.kind, sent.head.kind);
  EXPECT_EQ(t.packet.head.dest_node, sent.head.dest_node);
  EXPECT_EQ(t.packet.head.tag, sent.head.tag);
  EXPECT_EQ(t.packet.head.bytes, sent.head.bytes);
  EXPECT_EQ(t.packet.ext, sent.ext);
  EXPECT_TRUE(std::equal(t.packet.data().begin(), t.packet.data().end(), sent.data().begin()));
  ASSERT_EQ(t.run.size(), run.size());
  EXPECT_TRUE(std::equal(t.run.begin(), t.run.end(), run.begin()));
  // Without a run the same packet is a plain data item.
  std::vector<uint8_t> plain;
  ASSERT_TRUE(append_leaving_item(packet(0), *leaving_, &plain).ok());
  EXPECT_EQ(plain[2], static_cast<uint8_t>(ItemType::kData));
  EXPECT_EQ(arrive(*leaving_, {}, &plain).second.run.size(), 0u);
}

TEST_F(DirectRun, ARunWhoseHeadDisagreesWithTheItemIsDropped) {
  const std::vector<uint8_t> run = run_bytes(1024);
  std::vector<uint8_t> item;
  ASSERT_TRUE(append_leaving_item(packet(0), *leaving_, &item, run).ok());
  // The run head's byte count, after the item head and the packet's flits.
  const size_t at = sizeof(ItemHead) + (item.size() - sizeof(ItemHead) - sizeof(RunHead) - 1024);
  uint32_t bytes;
  std::memcpy(&bytes, item.data() + at, 4);
  ASSERT_EQ(bytes, 1024u);
  bytes = 2048;
  std::memcpy(item.data() + at, &bytes, 4);
  EXPECT_EQ(arrive(*leaving_, run, &item).first, Arrival::kDropped);
  EXPECT_EQ(why_.id, 2082);
  bytes = 1024;  // and what is reserved must be 0
  std::memcpy(item.data() + at, &bytes, 4);
  item[at + 5] = 1;
  EXPECT_EQ(arrive(*leaving_, run, &item).first, Arrival::kDropped);
  EXPECT_EQ(why_.id, 2082);
  // Cut short: what the head says is not there.
  std::vector<uint8_t> cut;
  ASSERT_TRUE(append_leaving_item(packet(0), *leaving_, &cut, run).ok());
  cut.resize(cut.size() - 10);
  const uint16_t length = static_cast<uint16_t>(cut.size());
  std::memcpy(cut.data(), &length, 2);
  EXPECT_EQ(arrive(*leaving_, run, &cut).first, Arrival::kDropped);
  EXPECT_EQ(why_.id, 2082);
}

// A run after an MP, or one that arrives where no transfer is handled, is no transfer's: it
// cannot go to the daemon (it does not fit its egress cell) and is dropped, named.
TEST_F(DirectRun, ARunThatIsNoTransfersIsDroppedNamed) {
  const std::vector<uint8_t> run = run_bytes(256);
  EXPECT_EQ(arrive(*leaving_, run, nullptr, false).first, Arrival::kDropped);
  EXPECT_EQ(why_.id, 2083);
  wire::DataPacket mp = mp_packet(0, 1, dest_, 2, 0, "hello", 5);
  std::vector<uint8_t> item;
  ASSERT_TRUE(append_leaving_item(mp, *leaving_, &item, run).ok());
  EXPECT_EQ(arrive(*leaving_, run, &item).first, Arrival::kDropped);
  EXPECT_EQ(why_.id, 2083);
}

TEST_F(DirectRun, ARunTooLargeForAnItemIsRefused) {
  std::vector<uint8_t> item;
  const Status st = append_leaving_item(packet(0), *leaving_, &item, run_bytes(70000));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().id, 4895);
  EXPECT_TRUE(item.empty());
}

}  // namespace galaxy::live::direct_run_test
