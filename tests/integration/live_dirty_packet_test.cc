// Dirty packets on a live link (docs/system.md 1.1): a fabric daemon runs in this process for one
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
    // h2 never runs: its socket is held so that no other test's daemon takes its port.
    const LiveFabricUnderTest::BoundUdp h1 = LiveFabricUnderTest::bound_udp();
    h2_ = LiveFabricUnderTest::bound_udp();
    const std::string spec =
        fmt::format("live:fattree:k=4,levels=2,name=dirty{},hosts=h1:127.0.0.1:{},h2:127.0.0.1:{}",
                    getpid(), h1.port, h2_.port);
    fabric_ = parse_live_fabric(spec).value();
    DaemonOptions o;
    o.socket_fd = h1.fd;
    o.board_fd = h1.board_fd;
    auto d = FabricDaemon::start(fabric_, 0, o);
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
      chip::PortSet mask;
      for (uint8_t p = 0; p < t.num_ports(n); ++p)
        if (auto q = t.peer({n, p}); q && dist[q->node] == dist[n] - 1) mask.set(p);
      for (uint8_t p = 0; p < t.num_ports(n); ++p)
        seg.route_row(seg.chip(n).local, p)[dest].store(mask);
    }
  }
  void TearDown() override {
    daemon_.reset();
    shm_unlink(Segment::shm_name(fabric_.name, fabric_.hosts[0].name).c_str());
    if (h2_.fd >= 0) close(h2_.fd);
    if (h2_.board_fd >= 0) close(h2_.board_fd);
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
  LiveFabricUnderTest::BoundUdp h2_;
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
    seg.route_row(leaf, p)[*other].store(chip::PortSet::of(up.port));
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

// Link ids follow from the topology, so the daemon of another fabric of the same shape, given
// this host's port by mistake, sends frames whose ids this host knows: only frames from the
// link's peer daemon reach the link; the others are counted and discarded.
TEST_F(LiveDirtyPacket, LinkFramesFromAnAddressThatIsNotThePeerAreCountedAndDiscarded) {
  LinkConfig lc;
  lc.link_id = link_.link_id;
  lc.epoch = 1;
  Link far(lc);
  far.on_timer(1);  // its first handshake
  std::vector<uint8_t> handshake;
  ASSERT_TRUE(far.pop_outgoing(&handshake));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(fabric_.hosts[0].port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  auto send_from = [&](int fd) {
    return sendto(fd, handshake.data(), handshake.size(), 0, reinterpret_cast<sockaddr*>(&to),
                  sizeof to) == static_cast<ssize_t>(handshake.size());
  };
  auto poll_until = [&](const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!done() && std::chrono::steady_clock::now() < deadline) daemon_->poll_once();
    return done();
  };
  auto received = [&] { return daemon_->links()[0].stats.handshake_frames_received; };
  const LiveFabricUnderTest::BoundUdp stranger = LiveFabricUnderTest::bound_udp();
  ASSERT_TRUE(send_from(stranger.fd));
  EXPECT_TRUE(poll_until([&] { return daemon_->stats().foreign_datagrams == 1; }));
  EXPECT_EQ(received(), 0u);
  close(stranger.fd);
  close(stranger.board_fd);
  // The same frame from the peer's own address is the link's.
  ASSERT_TRUE(send_from(h2_.fd));
  EXPECT_TRUE(poll_until([&] { return received() == 1; }));
  EXPECT_EQ(daemon_->stats().foreign_datagrams, 1u);
}

// A socket handed to the daemon must be the host's: UDP, bound to its address and port.
TEST_F(LiveDirtyPacket, AHandedOverSocketThatIsNotTheHostsIsRefused) {
  const int tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const LiveFabricUnderTest::BoundUdp elsewhere = LiveFabricUnderTest::bound_udp();
  struct Case {
    int fd;
    uint16_t id;
    std::string says;
  };
  for (const Case& c :
       {Case{tcp, 4760, "is not a UDP/IPv4 socket"},
        Case{elsewhere.fd, 4761,
             fmt::format("bound to 127.0.0.1:{}, not 127.0.0.1:{}", elsewhere.port, h2_.port)}}) {
    DaemonOptions o;
    o.socket_fd = dup(c.fd);
    auto d = FabricDaemon::start(fabric_, 1, o);
    shm_unlink(Segment::shm_name(fabric_.name, fabric_.hosts[1].name).c_str());
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.error().id, c.id) << d.error().to_string();
    EXPECT_NE(d.error().to_string().find(c.says), std::string::npos) << d.error().to_string();
  }
  close(tcp);
  close(elsewhere.fd);
  close(elsewhere.board_fd);
}

}  // namespace
}  // namespace galaxy::live::testing
