// A discovered map saved and read back (nm/map_io.h) on every back end: the same chips, links and
// ids, routes that reach every chip; a map of another fabric refused; every malformed file
// refused with its id.
#include "nm/map_io.h"

#include <gtest/gtest.h>

#include "fabric/builders.h"
#include "nm/discovery.h"
#include "nm_test_util.h"

namespace galaxy::nm {
namespace {

// CHIP_ID read through every route of `map` (up to `limit` chips) answers that chip's id.
void expect_map_routes_answer(Requester& req, const FabricMap& map, int limit) {
  int checked = 0;
  for (uint32_t v = 0; v < map.num_nodes() && checked < limit; ++v) {
    if (v == map.server_node) continue;
    MgmtReply got;
    req.submit(MgmtRequest::read(map.target[v], chip::reg::kChipId),
               [&](const MgmtReply& x) { got = x; });
    req.run();
    ASSERT_TRUE(got.status.ok()) << "node " << v << ": " << got.status.to_string();
    EXPECT_EQ(got.response.data.value[0] & 0xFFFF, map.chip_id[v]);
    ++checked;
  }
}

class MapIoTest : public ::testing::TestWithParam<std::tuple<const char*, const char*>> {};

TEST_P(MapIoTest, ADiscoveredMapSurvivesTheFileAndItsRoutesReachEveryChip) {
  const auto [kind, spec] = GetParam();
  auto s = testing::Backend::make(kind, spec);
  ASSERT_TRUE(s) << kind << " " << spec << " did not come up";
  Requester req(*s->port, {});
  auto found = discover(req, {});
  ASSERT_TRUE(found.ok()) << found.error().to_string();
  const std::string text = write_map(found->map);
  auto m = read_map(text, "test");
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  EXPECT_TRUE(same_fabric(*m, s->topology()));
  EXPECT_EQ(m->chip_id, found->map.chip_id);
  EXPECT_EQ(m->server_node, found->map.server_node);
  EXPECT_EQ(m->hops, found->map.hops) << "the routes rebuilt are as long as discovery's";
  EXPECT_EQ(m->node_of, found->map.node_of);
  EXPECT_EQ(write_map(*m), text) << "a second save writes the same file";
  EXPECT_TRUE(check_map_against(*m, s->topology()).ok());
  expect_map_routes_answer(req, *m, 40);
}

INSTANTIATE_TEST_SUITE_P(Sim, MapIoTest,
                         ::testing::Combine(::testing::Values("sim"),
                                            ::testing::Values("fattree:k=4,levels=3", "torus:4x4",
                                                              "th2:cabinets=1",
                                                              "fattree:k=36,levels=2")),
                         [](const auto& i) { return testing::param_name(std::get<1>(i.param)); });
INSTANTIATE_TEST_SUITE_P(Live, MapIoTest,
                         ::testing::Combine(::testing::Values("live"),
                                            ::testing::Values("fattree:k=4,levels=2")),
                         [](const auto& i) { return testing::param_name(std::get<1>(i.param)); });

FabricMap map_of(const std::string& spec) {
  auto t = fabric::build_topology(spec);
  EXPECT_TRUE(t.ok());
  auto m = map_from_topology(*t, t->nic_node(0));
  EXPECT_TRUE(m.ok());
  return *m;
}

TEST(MapIo, AMapOfAnotherFabricOrOfThisOneRecabledIsRefused) {
  const FabricMap m = map_of("fattree:k=4,levels=2");
  auto other = fabric::build_topology("fattree:k=6,levels=2").value();
  Status st = check_map_against(m, other);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().id, 5708);
  // The same chips, two NICs' cables swapped: the map finds NIC b where the fabric has NIC a.
  fabric::Topology plan = fabric::build_topology("fattree:k=4,levels=2").value();
  EXPECT_TRUE(check_map_against(m, plan).ok());
  FabricMap swapped = m;
  const uint32_t a = m.node_of.at(static_cast<uint16_t>(plan.nic_node(0)));
  const uint32_t b = m.node_of.at(static_cast<uint16_t>(plan.nic_node(5)));
  std::swap(swapped.chip_id[a], swapped.chip_id[b]);
  st = check_map_against(swapped, plan);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().id, 5708);
  EXPECT_NE(st.error().message.find(" leads to chip "), std::string::npos) << st.error().message;
}

TEST(MapIo, MalformedFilesAreRefusedWithTheirIds) {
  const FabricMap good_map = map_of("line:n=3");
  const std::string good = write_map(good_map);
  ASSERT_TRUE(read_map(good).ok()) << good;
  const size_t eol = good.find('\n');
  const std::string topo = good.substr(eol);
  const uint32_t n = good_map.num_nodes(), server = good_map.server_node;
  // A head with these fields over the good topology.
  auto head = [&](const std::string& server_node, const std::string& ids, int version = 1) {
    return fmt::format(
               "{{\"format\":\"galaxy-map\",\"version\":{},\"server_node\":{},"
               "\"chip_id\":{}}}",
               version, server_node, ids) +
           topo;
  };
  std::vector<uint32_t> ids(n);
  for (uint32_t v = 0; v < n; ++v) ids[v] = v;
  auto list = [](std::vector<uint32_t> v, int at, const std::string& with) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i)
      out += (i ? "," : "") + (static_cast<int>(i) == at ? with : std::to_string(v[i]));
    return out + "]";
  };
  const std::string srv = std::to_string(server);
  const uint32_t other = server == 0 ? 1 : 0;  // a node that is not the server NIC
  struct Case {
    std::string text;
    int id;
  };
  const std::vector<Case> cases{
      {"", 5700},
      {"{\"format\":\"galaxy-map\"}", 5700},
      {"[1,2]" + topo, 5701},
      {"{\"format\":0,\"version\":1}" + topo, 5701},
      {"{\"format\":\"galaxy-map\",\"version\":\"1\"}" + topo, 5702},
      {"{\"format\":\"galaxy-topology\",\"version\":1}" + topo, 5701},
      {head(srv, list(ids, -1, ""), 2), 5702},
      {head(srv, "[0]"), 5703},
      {head(srv, "{}"), 5703},
      {head("99", list(ids, -1, "")), 5704},
      {head("-1", list(ids, -1, "")), 5704},
      {head(good_map.topology.is_nic(other) ? "\"x\"" : std::to_string(other), list(ids, -1, "")),
       5704},
      {head(srv, list(ids, 1, "131071")), 5705},
      {head(srv, list(ids, 1, "\"1\"")), 5705},
      {head(srv, list(ids, 1, "0")), 5706},
      {head(srv, list(ids, -1, "") + ",\"exact_ranges\":1"), 5707},
  };
  for (const Case& c : cases) {
    auto m = read_map(c.text, "f.map");
    ASSERT_FALSE(m.ok()) << c.text;
    EXPECT_EQ(m.error().id, c.id) << c.text << ": " << m.error().to_string();
    EXPECT_NE(m.error().message.find("f.map"), std::string::npos) << m.error().message;
  }
  auto fine = read_map(head(srv, list(ids, -1, "")), "f.map");
  EXPECT_TRUE(fine.ok()) << fine.error().to_string();
  // A head that is fine over a topology that is not: the topology reader's own error.
  EXPECT_FALSE(read_map(good.substr(0, eol + 1) + "{\"format\":\"galaxy-topology\"", "f").ok());
}

}  // namespace
}  // namespace galaxy::nm
