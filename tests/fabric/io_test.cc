#include "fabric/io.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "build_util.h"
#include "fabric/builders.h"

namespace galaxy::fabric {
namespace {

using testing::build;

void expect_same(const Topology& a, const Topology& b) {
  ASSERT_EQ(a.num_nodes(), b.num_nodes());
  ASSERT_EQ(a.num_links(), b.num_links());
  ASSERT_EQ(a.num_nics(), b.num_nics());
  for (uint32_t v = 0; v < a.num_nodes(); ++v) {
    ASSERT_EQ(a.kind(v), b.kind(v)) << v;
    ASSERT_EQ(a.num_ports(v), b.num_ports(v)) << v;
    ASSERT_EQ(a.name(v), b.name(v)) << v;
    ASSERT_EQ(a.location(v), b.location(v)) << v;
    ASSERT_EQ(a.level(v), b.level(v)) << v;
    ASSERT_EQ(a.nic_index(v), b.nic_index(v)) << v;
    ASSERT_EQ(a.identity(v), b.identity(v)) << v;
    for (uint32_t p = 0; p < a.num_ports(v); ++p)
      ASSERT_EQ(a.peer({v, uint8_t(p)}), b.peer({v, uint8_t(p)})) << v << ":" << p;
  }
}

// The error names the source and line ("src:12:" or "src:12:7:") and contains `what`.
template <class T>
void expect_error(const Result<T>& r, const std::string& where, const std::string& what) {
  ASSERT_FALSE(r.ok()) << "expected an error at " << where;
  const std::string& m = r.error().message;
  EXPECT_EQ(m.rfind(where, 0), 0u) << m;
  EXPECT_NE(m.find(what), std::string::npos) << m;
  EXPECT_GE(r.error().id, 3000) << m;
  EXPECT_LT(r.error().id, 4000) << m;
}

TEST(Json, RoundTripIsExact) {
  for (const char* spec : {"th2:cabinets=3", "dragonfly", "torus:4x3", "line:n=5"}) {
    Topology t = build(spec);
    std::string text = write_json(t);
    auto back = read_json(text, "t.json");
    ASSERT_TRUE(back.ok()) << spec << ": " << back.status().to_string();
    expect_same(t, *back);
    EXPECT_EQ(write_json(*back), text) << spec;
  }
}

TEST(Json, FullTh2RoundTrip) {
  Topology t = build("th2");
  auto back = read_json(write_json(t), "th2.json");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  expect_same(t, *back);
}

TEST(Json, SpecialCharactersInNames) {
  Topology t;
  ASSERT_TRUE(
      t.add_node(NodeKind::kNrc, 4, "a \"quoted\" \\ name\n", {1, 2, 3, 4, "r\"x"}, 7).ok());
  ASSERT_TRUE(t.add_node(NodeKind::kNic, 2, "", {}, 0).ok());
  ASSERT_TRUE(t.connect({0, 3}, {1, 1}).ok());
  auto back = read_json(write_json(t));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  expect_same(t, *back);
}

constexpr const char* kJsonHead = "{\"format\":\"galaxy-topology\",\"version\":1,\n\"nodes\":[\n";

TEST(Json, ErrorsNameTheLine) {
  std::string nodes =
      "{\"id\":0,\"kind\":\"nrc\",\"ports\":4,\"name\":\"s\"},\n"
      "{\"id\":1,\"kind\":\"nic\",\"ports\":1,\"name\":\"h\"}\n";
  auto with_links = [&](const std::string& links) {
    return std::string(kJsonHead) + nodes + "],\n\"links\":[\n" + links + "]}\n";
  };
  ASSERT_TRUE(read_json(with_links("[0,0,1,0]\n"), "t.json").ok());
  expect_error(read_json(with_links("[0,0,1,0],\n[0,1,1,0]\n"), "t.json"),
               "t.json:8:", "already linked");
  expect_error(read_json(with_links("[0,0,1,0],\n[0,9,1,0]\n"), "t.json"),
               "t.json:8:", "port 9 of node 0 ('s') exceeds its 4 ports");
  expect_error(read_json(with_links("[0,0,7,0]\n"), "t.json"),
               "t.json:7:", "node 7 does not exist");
  expect_error(read_json(with_links("[0,0,1]\n"), "t.json"), "t.json:7:", "[node, port, node");
  expect_error(read_json(with_links("[0,0,1,-1]\n"), "t.json"), "t.json:7:", "not a port");
  expect_error(read_json(with_links("[0,0,1,0],\n[0,0,1,0\n"), "t.json"),
               "t.json:9:2:", "JSON syntax");

  auto with_node = [&](const std::string& second) {
    return std::string(kJsonHead) + "{\"id\":0,\"kind\":\"nrc\",\"ports\":4,\"name\":\"s\"},\n" +
           second + "\n],\n\"links\":[]}\n";
  };
  expect_error(read_json(with_node("{\"id\":2,\"kind\":\"nic\",\"ports\":1}"), "t.json"),
               "t.json:4:", "ids must be 0, 1, 2");
  expect_error(read_json(with_node("{\"id\":1,\"kind\":\"nix\",\"ports\":1}"), "t.json"),
               "t.json:4:", "\"kind\" = \"nix\"");
  expect_error(read_json(with_node("{\"id\":1,\"kind\":\"nrc\",\"ports\":255}"), "t.json"),
               "t.json:4:", "\"ports\" = 255 is outside [1, 254]");
  expect_error(read_json(with_node("{\"id\":1,\"kind\":\"nrc\"}"), "t.json"),
               "t.json:4:", "no \"ports\"");
  expect_error(
      read_json(with_node("{\"id\":1,\"kind\":\"nrc\",\"ports\":2,\"colour\":1}"), "t.json"),
      "t.json:4:", "unknown field \"colour\"");
  expect_error(
      read_json(with_node("{\"id\":1,\"kind\":\"nrc\",\"ports\":2,\"location\":{\"rack\":1}}"),
                "t.json"),
      "t.json:4:", "unknown location field \"rack\"");
  expect_error(
      read_json(with_node("{\"id\":1,\"kind\":\"nrc\",\"ports\":2,\"level\":\"x\"}"), "t.json"),
      "t.json:4:", "\"level\" = \"x\" is not an integer");
  expect_error(read_json(with_node("7"), "t.json"), "t.json:4:", "not an object");

  expect_error(read_json("{\"format\":\"other\"}", "t.json"), "t.json:1:", "galaxy-topology");
  expect_error(read_json("{\"format\":\"galaxy-topology\",\"version\":2}", "t.json"),
               "t.json:1:", "\"version\" = 2");
  expect_error(read_json("{\"format\":\"galaxy-topology\",\"version\":1,\"nodes\":{}}", "t.json"),
               "t.json:1:", "must both be arrays");
  expect_error(read_json("\n\n  {\"format\": tru }", "t.json"), "t.json:3:", "JSON syntax");
}

TEST(Dot, RoundTripIsExact) {
  for (const char* spec : {"th2:cabinets=2", "fattree:k=4,levels=3", "mesh:3x3x2,nics=2"}) {
    Topology t = build(spec);
    std::string text = write_dot(t);
    auto back = read_dot(text, "t.dot");
    ASSERT_TRUE(back.ok()) << spec << ": " << back.status().to_string();
    expect_same(t, *back);
    EXPECT_EQ(write_dot(*back), text);
  }
}

TEST(Dot, WritesPortsAsEdgeAttributes) {
  std::string text = write_dot(build("line:n=2"));
  EXPECT_EQ(text.rfind("graph fabric {\n", 0), 0u);
  EXPECT_NE(text.find("n0 [label=\"nrc00\", kind=nrc, ports=3, level=1"), std::string::npos);
  EXPECT_NE(text.find("n0 -- n1 [taillabel=0, headlabel=0];"), std::string::npos);
  EXPECT_NE(text.find("n0 -- n2 [taillabel=2, headlabel=1];"), std::string::npos);
}

TEST(Dot, ReadsAHandWrittenSubset) {
  const char* text = R"(/* two routers, three hosts */
strict graph "my fabric" {
  rankdir=LR;
  node [kind=nrc, ports=4, shape=box];   // defaults for what follows
  a; "b router" [label="B", role="leaf", level=2];
  # preprocessor-style line
  node [kind=nic, ports=1]
  h0 h1; h2
  a:0 -- h0:0;
  a -- "b router" [tailport=3, headport=2, color=red]
  subgraph cluster_x { h1 -- a [taillabel="0", headlabel=1] }
  "b router" -- h2 [headlabel=0 taillabel=0]
}
)";
  auto t = read_dot(text, "hand.dot");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->num_nrcs(), 2u);
  EXPECT_EQ(t->num_nics(), 3u);
  EXPECT_EQ(t->num_links(), 4u);
  uint32_t a = *t->find_node("a");
  uint32_t b = *t->find_node("B");
  EXPECT_EQ(t->location(b).role, "leaf");
  EXPECT_EQ(t->level(b), 2);
  EXPECT_EQ(t->peer({a, 3}), (PortRef{b, 2}));
  EXPECT_EQ(t->peer({*t->find_node("h1"), 0}), (PortRef{a, 1}));
  EXPECT_EQ(analyze(*t).max_hops, 2u);
}

TEST(Dot, ErrorsNameTheLine) {
  std::string head = "graph fabric {\n  n0 [kind=nrc, ports=24];\n  n1 [kind=nic];\n";
  expect_error(read_dot(head + "  n0 -- n1 [taillabel=40, headlabel=0];\n}\n", "topo.dot"),
               "topo.dot:4:", "port 40 of node n0 exceeds its 24 ports");
  expect_error(read_dot(head + "  n0 -- n1 [taillabel=1];\n}\n", "topo.dot"),
               "topo.dot:4:", "gives no port for n1");
  expect_error(read_dot(head + "  n0 -- n1 [taillabel=1, headlabel=0];\n  n1 -- n0 "
                               "[taillabel=0, headlabel=2];\n}\n",
                        "topo.dot"),
               "topo.dot:5:", "already linked");
  expect_error(read_dot(head + "  n0 -- n1 [taillabel=x1, headlabel=0];\n}\n", "topo.dot"),
               "topo.dot:4:", "'x1' is not an integer");
  expect_error(read_dot(head + "  n0 -- n9 [taillabel=1, headlabel=0];\n}\n", "topo.dot"),
               "topo.dot:4:", "node n9 has no kind");
  expect_error(read_dot(head + "  n2 [kind=nrc];\n}\n", "topo.dot"),
               "topo.dot:4:", "no ports attribute");
  expect_error(read_dot(head + "  n2 [kind=nrc, ports=255];\n}\n", "topo.dot"),
               "topo.dot:4:", "ports = 255 is outside [1, 254]");
  expect_error(read_dot(head + "  n2 [kind=switch, ports=3];\n}\n", "topo.dot"),
               "topo.dot:4:", "kind = 'switch'");
  expect_error(read_dot(head + "  n2 [label=\"open];\n}\n", "topo.dot"),
               "topo.dot:4:", "never closed");
  expect_error(read_dot(head + "  /* open\n}\n", "topo.dot"), "topo.dot:4:", "never closed");
  expect_error(read_dot(head + "  n0 -- n1 @\n}\n", "topo.dot"),
               "topo.dot:4:", "unexpected character '@'");
  expect_error(read_dot(head + "  n0 -- ;\n}\n", "topo.dot"), "topo.dot:4:", "a node name");
  expect_error(read_dot(head + "  n0 [kind=nrc ports]\n}\n", "topo.dot"),
               "topo.dot:4:", "'=' after attribute 'ports'");
  expect_error(read_dot(head, "topo.dot"), "topo.dot:4:", "expected '}'");
  expect_error(read_dot(head + "}\n}\n", "topo.dot"), "topo.dot:5:", "end of file");
  expect_error(read_dot("digraf x {}", "topo.dot"), "topo.dot:1:1:", "'graph' or 'digraph'");
  std::string deep = "graph g {\n";
  for (int i = 0; i < 100; ++i) deep += "{";
  expect_error(read_dot(deep, "topo.dot"), "topo.dot:2:65:", "nested deeper than 64");
}

const std::string kExample =
    std::string(GALAXY_SOURCE_DIR) + "/config/topologies/two-switch-four-host.ibnetdiscover";

TEST(Ibnetdiscover, ReadsTheExampleFabric) {
  auto t = load_topology_file(kExample);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->num_nrcs(), 2u);
  EXPECT_EQ(t->num_nics(), 4u);
  EXPECT_EQ(t->num_links(), 2u + 5);
  uint32_t a = *t->find_node("galaxy-sw-a");
  uint32_t b = *t->find_node("galaxy-sw-b");
  uint32_t node04 = *t->find_node("node04 HCA-1");
  EXPECT_EQ(t->num_ports(a), 8u);
  EXPECT_EQ(t->num_ports(node04), 2u);  // a dual-port HCA stays one NIC with 2 ports
  EXPECT_TRUE(t->is_nic(node04));
  // IB port k is our port k-1.
  EXPECT_EQ(t->peer({a, 6}), (PortRef{b, 6}));
  EXPECT_EQ(t->peer({a, 7}), (PortRef{b, 7}));
  EXPECT_EQ(t->peer({node04, 1}), (PortRef{b, 1}));
  EXPECT_EQ(t->location(a).role, "switch");
  FabricStats s = analyze(*t);
  EXPECT_TRUE(s.connected);
  EXPECT_EQ(s.max_hops, 2u);
}

TEST(Ibnetdiscover, ErrorsNameTheLine) {
  const std::string sw = "Switch\t4 \"S-01\"\t\t# \"sw\" base port 0 lid 1 lmc 0\n";
  const std::string ca = "\nCa\t1 \"H-02\"\t\t# \"host\"\n[1](3)\t\"S-01\"[1]\t\t# lid 2\n";
  ASSERT_TRUE(read_ibnetdiscover(sw + "[1]\t\"H-02\"[1](3)\t# \"host\"\n" + ca, "ib.txt").ok());
  expect_error(read_ibnetdiscover("\nSwitch\t255 \"S-01\"\t# \"big\"\n", "ib.txt"),
               "ib.txt:2:", "declares 255 ports; a switch has 2..254 ports");
  expect_error(read_ibnetdiscover("\nSwitch\t1 \"S-01\"\t# \"tiny\"\n", "ib.txt"),
               "ib.txt:2:", "declares 1 ports; a switch has 2..254 ports");
  expect_error(read_ibnetdiscover("vendid=0x2c9\n[1]\t\"S-01\"[1]\n", "ib.txt"),
               "ib.txt:2:", "outside a Switch/Ca/Rt block");
  expect_error(read_ibnetdiscover(sw + "[1]\t\"S-77\"[1]\n", "ib.txt"),
               "ib.txt:2:", "\"S-77\", which has no Switch/Ca/Rt block");
  expect_error(read_ibnetdiscover(sw + "[5]\t\"H-02\"[1]\n" + ca, "ib.txt"),
               "ib.txt:2:", "port 5 of \"S-01\" is outside 1..4");
  expect_error(read_ibnetdiscover(sw + "[1]\t\"H-02\"[2]\n" + ca, "ib.txt"),
               "ib.txt:2:", "port 2 of \"H-02\" is outside 1..1");
  expect_error(read_ibnetdiscover(sw + "[2]\t\"H-02\"[1]\n" + ca, "ib.txt"),
               "ib.txt:5:", "already linked");
  expect_error(read_ibnetdiscover(sw + "[1]\t\"H-02\"\n", "ib.txt"), "ib.txt:2:", "remote port");
  expect_error(read_ibnetdiscover(sw + "[1\t\"H-02\"[1]\n", "ib.txt"),
               "ib.txt:2:", "']' after local port");
  expect_error(read_ibnetdiscover(sw + "[1]\tH-02[1]\n", "ib.txt"),
               "ib.txt:2:", "in double quotes");
  expect_error(read_ibnetdiscover("Switch \"S-01\"\n", "ib.txt"), "ib.txt:1:", "no port count");
  expect_error(read_ibnetdiscover(sw + "\n" + sw, "ib.txt"),
               "ib.txt:3:", "described twice (first on line 1)");
}

TEST(Load, DetectsFormatsAndSaves) {
  EXPECT_EQ(detect_format("  {\"format\""), TopologyFormat::kJson);
  EXPECT_EQ(detect_format("// c\n/* d */ graph x {}"), TopologyFormat::kDot);
  EXPECT_EQ(detect_format("digraph{}"), TopologyFormat::kDot);
  EXPECT_EQ(detect_format("#\n# Topology file\nvendid=0x2c9\n"), TopologyFormat::kIbnetdiscover);
  EXPECT_EQ(detect_format("graphite"), TopologyFormat::kIbnetdiscover);

  Topology t = build("dragonfly:a=2,p=1,h=1");
  std::string base = ::testing::TempDir() + "galaxy_fabric_io_test";
  for (const char* ext : {".json", ".dot"}) {
    std::string path = base + ext;
    ASSERT_TRUE(save_topology_file(t, path).ok());
    auto back = load_topology_file(path);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    expect_same(t, *back);
    std::remove(path.c_str());
  }
  auto missing = load_topology_file(base + ".does-not-exist");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Code::kNotFound);
  EXPECT_FALSE(save_topology_file(t, "/nonexistent-dir/x.json").ok());

  // Errors from a file name the path.
  std::string bad = base + "_bad.dot";
  std::ofstream(bad) << "graph g {\n  a [kind=nrc, ports=2];\n  a -- a;\n}\n";
  expect_error(load_topology_file(bad), bad + ":3:", "gives no port for a");
  std::remove(bad.c_str());
}

// Found by fuzz_topology_json: nlohmann throws out_of_range (not parse_error) for a number
// beyond a double, which escaped read_json.
TEST(Json, NumberOverflowIsASyntaxError) {
  auto r = read_json("{\"format\":\"galaxy-topology\",\n  \"version\":1e999}", "t.json");
  expect_error(r, "t.json:2:13:", "1e999");
  EXPECT_EQ(r.error().code, Code::kMalformed);
}

// Found by fuzz_topology_dot and fuzz_ibnetdiscover: write_json threw on names that are not
// UTF-8; it now writes U+FFFD for the bad bytes and dot keeps them.
TEST(Json, NamesThatAreNotUtf8AreWrittenAsReplacementCharacters) {
  auto dot = read_dot("graph g { a [kind=nic, label=\"x\xbby\", role=\"\xff\"]; }", "t.dot");
  ASSERT_TRUE(dot.ok()) << dot.status().to_string();
  ASSERT_EQ(dot->name(0), "x\xbby");
  auto back = read_json(write_json(*dot), "t.json");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->name(0), "x\xef\xbf\xbdy");
  EXPECT_EQ(back->location(0).role, "\xef\xbf\xbd");
  auto again = read_dot(write_dot(*dot), "t.dot");
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  expect_same(*dot, *again);

  auto ib = read_ibnetdiscover("Ca 1 \"H-1\" # \"host\xa4\"\n", "t.ib");
  ASSERT_TRUE(ib.ok()) << ib.status().to_string();
  auto ib_back = read_json(write_json(*ib), "t.json");
  ASSERT_TRUE(ib_back.ok()) << ib_back.status().to_string();
  EXPECT_EQ(ib_back->name(0), "host\xef\xbf\xbd");
}

}  // namespace
}  // namespace galaxy::fabric
