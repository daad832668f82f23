// Dirty packets on a live link (SYSTEM.md 1.1): a fabric daemon runs in this process for one
// host of a two-host fabric, and packets are handed to it as the link layer delivers them.
// A packet that is missing its tail, too long, misrouted or carries a data error reaches the
// target NIC, which discards it into its error buffer (readable through registers) and counts
// it; a packet missing its head cannot be routed by the first switch and is discarded there.
// Nothing of any of them reaches host memory; the clean packet they were made from does.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <vector>

#include "chip/nic.h"
#include "chip/registers.h"
#include "engine/live/daemon.h"
#include "engine/live/items.h"
#include "engine/live/nic_host.h"
#include "live_fixture.h"
#include "wire/data_packet.h"
#include "wire/flit.h"

namespace galaxy::live::testing {
namespace {

using wire::DataDefect;

class LiveDirtyPacket : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string spec =
        fmt::format("live:fattree:k=4,levels=2,name=dirty{},hosts=h1:127.0.0.1:{},h2:127.0.0.1:{}",
                    getpid(), LiveFabricUnderTest::free_port(), LiveFabricUnderTest::free_port());
    fabric_ = parse_live_fabric(spec).value();
    auto d = FabricDaemon::start(fabric_, 0, {});
    ASSERT_TRUE(d.ok()) << d.error().to_string();
    daemon_ = std::move(*d);
    // A link into this host and the NIC of this host that packets through it are sent to.
    ASSERT_GT(daemon_->num_links(), 0u);
    link_ = daemon_->links()[0];
    for (uint32_t n = 0; n < fabric_.topology.num_nodes(); ++n)
      if (fabric_.topology.is_nic(n) && fabric_.host_of[n] == 0) {
        nic_ = n;
        break;
      }
    // A registration of this process's buffer in the NIC's ATT, as glex_register_mem writes it.
    NicSlot& slot = *daemon_->segment().nic_of(nic_);
    AttEntry& e = slot.att[3];
    e.key = 0x123456;
    e.base = reinterpret_cast<uint64_t>(buffer_.data());
    e.length = buffer_.size();
    e.pid = getpid();
    e.memfd = -1;
    e.access = kAccessWrite;
    e.generation++;
    e.state.store(2);
    mh_ = (uint64_t{3} << 32) | e.key;
    buffer_.fill(0x5A);
    route_to(nic_);
  }

  // Route table entries of this host's switches towards `dest` along shortest paths (what the
  // management server would load), so that a packet entering at the link reaches it.
  void route_to(uint32_t dest) {
    const fabric::Topology& t = fabric_.topology;
    std::vector<int> dist(t.num_nodes(), -1);
    std::vector<uint32_t> frontier{dest};
    dist[dest] = 0;
    while (!frontier.empty()) {
      std::vector<uint32_t> next;
      for (uint32_t n : frontier)
        for (uint8_t p = 0; p < t.num_ports(n); ++p)
          if (auto q = t.peer({n, p}); q && dist[q->node] < 0 && !t.is_nic(q->node)) {
            dist[q->node] = dist[n] + 1;
            next.push_back(q->node);
          }
      frontier = std::move(next);
    }
    Segment& seg = daemon_->segment();
    for (uint32_t n = 0; n < t.num_nodes(); ++n) {
      if (t.is_nic(n) || !seg.is_local(n) || dist[n] <= 0) continue;
      uint32_t mask = 0;
      for (uint8_t p = 0; p < t.num_ports(n); ++p)
        if (auto q = t.peer({n, p}); q && dist[q->node] == dist[n] - 1) mask |= 1u << p;
      for (uint8_t p = 0; p < t.num_ports(n); ++p)
        seg.route_row(seg.chip(n).local, p)[dest].store(mask);
    }
  }
  void TearDown() override {
    daemon_.reset();
    shm_unlink(Segment::shm_name(fabric_.name, fabric_.hosts[0].name).c_str());
  }

  const chip::Nic& nic() const { return static_cast<const chip::Nic&>(*daemon_->chip_model(nic_)); }

  // A one-packet put of 64 bytes of 0xAB at buffer offset 256, from a NIC of the other host.
  std::vector<wire::Flit> clean_put(uint16_t tag) const {
    wire::DataPacket p;
    p.head.kind = wire::PacketKind::kRdmaWrite;
    p.head.dest_node = static_cast<uint16_t>(nic_);
    p.head.src_node = static_cast<uint16_t>(link_.peer_chip);
    p.head.dest_vp = 8;
    p.head.src_vp = 8;
    p.head.tag = tag;
    p.head.bytes = 64;
    p.head.flags = wire::kDataFlagInTransfer;
    p.ext = {reinterpret_cast<uint64_t>(buffer_.data()) + 256, wire_key(mh_), 0, 64};
    p.payload.fill(0xAB);
    return wire::encode_data_packet(p).value();
  }

  // The packet as one link item from the link's far end, delivered by the link layer.
  void deliver(const std::vector<wire::Flit>& flits) {
    std::vector<uint8_t> item(sizeof(ItemHead) + flits.size() * wire::kFlitBytes);
    ItemHead h{static_cast<uint16_t>(item.size()), static_cast<uint8_t>(ItemType::kData),
               link_.peer_port, link_.peer_chip};
    std::memcpy(item.data(), &h, sizeof h);
    for (size_t i = 0; i < flits.size(); ++i) {
      const wire::FlitBytes b = wire::encode_flit(flits[i]);
      std::memcpy(item.data() + sizeof h + i * wire::kFlitBytes, b.data(), b.size());
    }
    daemon_->feed_frame(0, item);
  }

  bool untouched() const {
    for (uint8_t b : buffer_)
      if (b != 0x5A) return false;
    return true;
  }

  LiveFabric fabric_;
  std::unique_ptr<FabricDaemon> daemon_;
  FabricDaemon::LinkView link_{};
  uint32_t nic_ = 0;
  uint64_t mh_ = 0;
  alignas(4096) std::array<uint8_t, 4096> buffer_{};  // packets are cut at 128-byte boundaries
};

TEST_F(LiveDirtyPacket, EachDirtyKindIsDiscardedIntoTheErrorBufferAndNothingIsWritten) {
  const std::vector<wire::Flit> good = clean_put(1);
  struct Case {
    DataDefect defect;
    std::vector<wire::Flit> flits;
  };
  std::vector<Case> cases;
  cases.push_back({DataDefect::kMissingTail, {good.begin(), good.end() - 1}});
  std::vector<wire::Flit> longer = good;
  longer.insert(longer.end() - 1, good[2]);
  cases.push_back({DataDefect::kTooLong, longer});
  std::vector<wire::Flit> corrupt = good;
  corrupt[3].payload[5] ^= 0x10;
  cases.push_back({DataDefect::kDataError, corrupt});
  // Misrouted: a well-formed packet for another NIC of this NIC's switch, which a wrong
  // entry of that switch's tables sends here.
  const fabric::PortRef up = fabric_.topology.peer({nic_, 0}).value();
  std::optional<uint32_t> other;
  for (uint8_t p = 0; p < fabric_.topology.num_ports(up.node) && !other; ++p)
    if (auto q = fabric_.topology.peer({up.node, p});
        q && q->node != nic_ && fabric_.topology.is_nic(q->node))
      other = q->node;
  ASSERT_TRUE(other);
  route_to(*other);  // the right way to it, then the wrong entry at its switch
  Segment& seg = daemon_->segment();
  const uint32_t leaf = seg.chip(up.node).local;
  for (uint8_t p = 0; p < fabric_.topology.num_ports(up.node); ++p)
    seg.route_row(leaf, p)[*other].store(1u << up.port);
  wire::DataPacket mis = wire::decode_data_packet(good).value();
  mis.head.dest_node = static_cast<uint16_t>(*other);
  cases.push_back({DataDefect::kMisrouted, wire::encode_data_packet(mis).value()});
  for (const Case& c : cases) {
    const uint64_t before = nic().dirty_packets(c.defect);
    deliver(c.flits);
    EXPECT_EQ(nic().dirty_packets(c.defect), before + 1) << wire::data_defect_name(c.defect);
    EXPECT_TRUE(nic().error_buffer().valid);
    EXPECT_EQ(nic().error_buffer().defect, c.defect);
    auto& model = const_cast<chip::Nic&>(nic());
    const auto st = model.read_register(chip::reg::kErrBufStatus);
    EXPECT_EQ((st.value >> 32) & 0xFF, static_cast<uint64_t>(c.defect));
    EXPECT_TRUE(untouched()) << wire::data_defect_name(c.defect);
  }
  EXPECT_EQ(daemon_->stats().rdma_bytes_written, 0u);
  // The clean packet itself is written: the path the dirty ones took is the real one.
  deliver(good);
  EXPECT_EQ(daemon_->stats().rdma_bytes_written, 64u);
  EXPECT_EQ(buffer_[256], 0xAB) << "items " << daemon_->stats().items_received << " dropped "
                                << daemon_->stats().dropped << " last error E"
                                << nic().error_buffer().error_id;
  EXPECT_EQ(buffer_[256 + 63], 0xAB);
  EXPECT_EQ(buffer_[256 + 64], 0x5A);
}

TEST_F(LiveDirtyPacket, APacketMissingItsHeadIsDiscardedByTheFirstSwitch) {
  const std::vector<wire::Flit> good = clean_put(2);
  const uint32_t local = daemon_->segment().chip(link_.chip).local;
  CounterLine& rx = daemon_->segment().counters(local, link_.port).rx;
  const uint64_t discards = rx.discards.load();
  deliver({good.begin() + 1, good.end()});
  EXPECT_EQ(rx.discards.load(), discards + 1);
  EXPECT_TRUE(untouched());
  for (uint8_t d = 0; d <= static_cast<uint8_t>(DataDefect::kMalformed); ++d)
    EXPECT_EQ(nic().dirty_packets(static_cast<DataDefect>(d)), 0u);
}

}  // namespace
}  // namespace galaxy::live::testing
