#include "engine/live/live_spec.h"

#include <gtest/gtest.h>

#include <fstream>

namespace galaxy::live {
namespace {

TEST(LiveSpec, ParsesTopologyNameAndHostsWithDefaultPorts) {
  auto f =
      parse_live_fabric("live:fattree:k=4,levels=2,name=lab,hosts=h1:10.0.0.1,h2:10.0.0.2:9000");
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  EXPECT_EQ(f->name, "lab");
  ASSERT_EQ(f->hosts.size(), 2u);
  EXPECT_EQ(f->hosts[0].name, "h1");
  EXPECT_EQ(f->hosts[0].ip, "10.0.0.1");
  EXPECT_EQ(f->hosts[0].port, 7400);
  EXPECT_EQ(f->hosts[1].port, 9000);
  EXPECT_EQ(f->topology.num_nics(), 8u);
  EXPECT_EQ(f->topology.num_nrcs(), 6u);
  EXPECT_EQ(f->host_index("h2"), 1);
  EXPECT_EQ(f->host_index("h3"), -1);
}

TEST(LiveSpec, NicsInContiguousBlocksAndNrcsWithTheirNics) {
  auto f = parse_live_fabric("live:fattree:k=4,levels=2,hosts=a:127.0.0.1,b:127.0.0.1");
  ASSERT_TRUE(f.ok());
  const auto& t = f->topology;
  for (uint32_t i = 0; i < t.num_nics(); ++i)
    EXPECT_EQ(f->host_of[t.nic_node(i)], i < 4 ? 0 : 1) << "NIC " << i;
  int per_host[2] = {0, 0};
  for (uint32_t n = 0; n < t.num_nodes(); ++n) {
    if (t.is_nic(n)) continue;
    ++per_host[f->host_of[n]];
    for (uint8_t p = 0; p < t.num_ports(n); ++p) {
      auto peer = t.peer({n, p});
      if (peer && t.is_nic(peer->node)) {
        EXPECT_EQ(f->host_of[n], f->host_of[peer->node]);
      }
    }
  }
  EXPECT_EQ(per_host[0], 3);  // two leaves each, the spine split between the hosts
  EXPECT_EQ(per_host[1], 3);
  // Some links cross between the hosts, and crosses_hosts says which.
  int crossing = 0;
  for (uint32_t n = 0; n < t.num_nodes(); ++n)
    for (uint8_t p = 0; p < t.num_ports(n); ++p) crossing += f->crosses_hosts({n, p});
  EXPECT_EQ(crossing, 8);  // 4 links, counted from both ends
}

TEST(LiveSpec, ErrorsNameTheBadPart) {
  struct Case {
    const char* spec;
    uint16_t id;
  } cases[] = {
      {"sim:th2", 4704},
      {"live:fattree:k=4,levels=2", 4705},
      {"live:fattree:k=4,levels=2,hosts=", 4701},
      {"live:fattree:k=4,levels=2,hosts=h1", 4701},
      {"live:fattree:k=4,levels=2,hosts=h1:", 4702},
      {"live:fattree:k=4,levels=2,hosts=h1:1.2.3.4,h1:1.2.3.5", 4703},
      {"live:fattree:k=4,levels=2,name=a/b,hosts=h1:1.2.3.4", 4706},
      {"live:hosts=h1:1.2.3.4", 4707},
  };
  for (const Case& c : cases) {
    auto f = parse_live_fabric(c.spec);
    ASSERT_FALSE(f.ok()) << c.spec;
    EXPECT_EQ(f.error().id, c.id) << c.spec << ": " << f.error().to_string();
  }
  auto port = parse_live_fabric("live:fattree:k=4,levels=2,hosts=h1:1.2.3.4:70000");
  ASSERT_FALSE(port.ok());
  EXPECT_NE(port.error().message.find("70000"), std::string::npos);
  auto builder = parse_live_fabric("live:nosuch:x=1,hosts=h1:1.2.3.4");
  EXPECT_FALSE(builder.ok());
}

TEST(LiveSpec, ReadsAFabricFile) {
  auto f = parse_live_fabric("live:" GALAXY_SOURCE_DIR "/config/live/two-hosts.json");
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  EXPECT_EQ(f->name, "lab");
  ASSERT_EQ(f->hosts.size(), 2u);
  EXPECT_EQ(f->hosts[1].port, 7451);
  EXPECT_EQ(f->topology.num_nics(), 8u);
  const std::string bad = ::testing::TempDir() + "/bad-live.json";
  std::ofstream(bad) << R"({"topology": "fattree:k=4,levels=2", "hosts": [{"name": 3}]})";
  auto b = parse_live_fabric("live:" + bad);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().id, 4725);
  auto missing = parse_live_fabric("live:/nonexistent/fabric.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().id, 4720);
}

}  // namespace
}  // namespace galaxy::live
