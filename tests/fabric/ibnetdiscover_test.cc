// ibnetdiscover dumps as users paste them (docs/topologies.md "ibnetdiscover"): each variant a
// small file of its own, read through load_topology_file as `file:<path>` reads it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/log.h"
#include "chip/network_port.h"
#include "fabric/io.h"

namespace galaxy::fabric {
namespace {

// One 36-port Switch-IB switch and two HCAs, as ibnetdiscover prints them.
const std::string kSwitch36 =
    "#\n# Topology file: generated on Mon Mar  4 09:30:00 2024\n#\n"
    "vendid=0x2c9\ndevid=0xcb20\nsysimgguid=0xe41d2d0300a1b2c0\n"
    "switchguid=0xe41d2d0300a1b2c0(e41d2d0300a1b2c0)\n"
    "Switch\t36 \"S-e41d2d0300a1b2c0\"\t\t# \"SwitchIB Mellanox Technologies\" enhanced port 0 "
    "lid 3 lmc 0\n"
    "[1]\t\"H-e41d2d0300000010\"[1](e41d2d0300000011) \t\t# \"node001 HCA-1\" lid 10 4xEDR\n"
    "[36]\t\"H-e41d2d0300000020\"[2](e41d2d0300000022) \t\t# \"node002 HCA-1\" lid 12 4xEDR\n"
    "\n"
    "vendid=0x2c9\ndevid=0x1013\nsysimgguid=0xe41d2d0300000013\ncaguid=0xe41d2d0300000010\n"
    "Ca\t2 \"H-e41d2d0300000010\"\t\t# \"node001 HCA-1\"\n"
    "[1](e41d2d0300000011) \t\"S-e41d2d0300a1b2c0\"[1]\t\t# lid 10 lmc 0 \"SwitchIB Mellanox "
    "Technologies\" lid 3 4xEDR\n"
    "\n"
    "caguid=0xe41d2d0300000020\n"
    "Ca\t2 \"H-e41d2d0300000020\"\t\t# \"node002 HCA-1\"\n"
    "[2](e41d2d0300000022) \t\"S-e41d2d0300a1b2c0\"[36]\t\t# lid 12 lmc 0 \"SwitchIB Mellanox "
    "Technologies\" lid 3 4xEDR\n";

class IbnetdiscoverFile : public ::testing::Test {
 protected:
  void SetUp() override {
    log::set_sink([this](std::string_view line) { warnings_.emplace_back(line); });
  }
  void TearDown() override { log::set_sink({}); }

  std::string write(const std::string& name, const std::string& text) {
    std::string path = ::testing::TempDir() + "galaxy_ibnd_" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  Result<Topology> load(const std::string& name, const std::string& text) {
    return load_topology_file(write(name, text));
  }
  // The error of loading `text`: its id, and `what` in its message.
  void expect_refused(const std::string& name, const std::string& text, uint16_t id,
                      const std::string& what) {
    auto t = load(name, text);
    ASSERT_FALSE(t.ok()) << name;
    EXPECT_EQ(t.error().id, id) << t.error().to_string();
    EXPECT_NE(t.error().message.find(what), std::string::npos) << t.error().to_string();
  }

  std::vector<std::string> warnings_;
};

TEST_F(IbnetdiscoverFile, ThirtySixPortSwitchWithIdentities) {
  auto t = load("sw36", kSwitch36);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  ASSERT_EQ(t->num_nodes(), 3u);
  EXPECT_EQ(t->num_ports(0), 36u);
  EXPECT_EQ(t->identity(0).guid, 0xe41d2d0300a1b2c0u);
  EXPECT_EQ(t->identity(0).description, "SwitchIB Mellanox Technologies");
  EXPECT_EQ(t->identity(0).lids, (std::vector<uint16_t>{3}));
  EXPECT_EQ(t->identity(2).description, "node002 HCA-1");
  EXPECT_EQ(t->identity(2).lids, (std::vector<uint16_t>{0, 12}));  // port 2's LID only
  EXPECT_EQ(t->peer({0, 35}), (PortRef{2, 1}));
  EXPECT_TRUE(warnings_.empty());
  // The identities survive the native JSON.
  auto back = read_json(write_json(*t), "t.json");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  for (uint32_t v = 0; v < 3; ++v) EXPECT_EQ(back->identity(v), t->identity(v));
}

TEST_F(IbnetdiscoverFile, WideSwitchesUpToInfiniBandsLimit) {
  std::string text =
      "Switch\t254 \"S-0000000000000001\"\t# \"big\" base port 0 lid 1 lmc 0\n"
      "[254]\t\"H-0000000000000002\"[1]\n\nCa\t1 \"H-0000000000000002\"\t# \"h\"\n"
      "[1]\t\"S-0000000000000001\"[254]\n";
  auto t = load("sw254", text);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->num_ports(0), 254u);
  EXPECT_EQ(t->peer({0, 253}), (PortRef{1, 0}));
  expect_refused("sw255", "Switch\t255 \"S-01\"\n", 3906, "a switch has 2..254 ports");
}

TEST_F(IbnetdiscoverFile, HcaAsIbsimSpellsIt) {
  // ibsim's net format (ibsim-utils net-examples): Hca, bare ids, link attributes.
  auto t = load("ibsim",
                "# ibsim net\nSwitch\t8 \"Switch1\"\n[1]\t\"Hca1\"[1]\tw=4\n[2]\t\"Hca1\"[2] w=4 "
                "s=2\n\nHca\t2 \"Hca1\"\n[1]\t\"Switch1\"[1]\n[2]\t\"Switch1\"[2]\n");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->num_nics(), 1u);
  EXPECT_EQ(t->num_links(), 2u);
  EXPECT_EQ(t->name(1), "Hca1");
  EXPECT_EQ(t->identity(1).guid, 0u);  // ibsim ids carry no GUID
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(IbnetdiscoverFile, ChassisHeadersOfGroupedOutput) {
  // ibnetdiscover -g: "Chassis n (guid ...)" blocks, "# Spine Nodes" comments, [ext n] ports,
  // then "Non-Chassis Nodes".
  auto t = load(
      "grouped",
      "#\n# Topology file\n\nChassis 1 (guid 0x8f104004128c8)\n\n# Spine Nodes\n"
      "switchguid=0x8f104004128c8(8f104004128c8)\t# ISR9288 Spine 1 Chip 1\n"
      "Switch\t24 \"S-0008f104004128c8\"\t\t# \"ISR9288 Voltaire sLB-24\" base port 0 lid 4 lmc 0\n"
      "[1][ext 1]\t\"S-0008f10400400001\"[1]\t\t# \"ISR9024 Voltaire\" lid 2 4xSDR\n\n"
      "Non-Chassis Nodes\n\n"
      "Switch\t24 \"S-0008f10400400001\"\t\t# \"ISR9024 Voltaire\" base port 0 lid 2 lmc 0\n"
      "[1]\t\"S-0008f104004128c8\"[1][ext 1]\t\t# \"ISR9288 Voltaire sLB-24\" lid 4 4xSDR\n"
      "[2]\t\"H-0008f10403961354\"[1](8f10403961355) \t\t# \"host HCA-1\" lid 14 4xSDR\n\n"
      "Ca\t2 \"H-0008f10403961354\"\t\t# \"host HCA-1\"\n"
      "[1](8f10403961355) \t\"S-0008f10400400001\"[2]\t\t# lid 14 lmc 0 \"ISR9024 Voltaire\" "
      "lid 2 4xSDR\n");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->num_links(), 2u);
  EXPECT_EQ(t->location(0).chassis, 1);
  EXPECT_EQ(t->location(1).chassis, -1);
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(IbnetdiscoverFile, StrayLinesAreWarningsWithTheirLine) {
  auto t = load("stray", fmt::format("{}\n{}{}\n",
                                     "ibwarn: [4211] mad_rpc: _do_madrpc failed; dport (DR path "
                                     "slid 0; dlid 0; 0,1)",
                                     kSwitch36,
                                     "src/query_smp.c:228; umad (DR path slid 0; dlid 0; 0,1,3 "
                                     "Attr 0x11:0) bad status 110; Connection timed out"));
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->num_links(), 2u);
  ASSERT_EQ(warnings_.size(), 2u);
  EXPECT_NE(warnings_[0].find("E3920"), std::string::npos) << warnings_[0];
  EXPECT_NE(warnings_[0].find("galaxy_ibnd_stray:1: not a topology line"), std::string::npos)
      << warnings_[0];
  EXPECT_NE(warnings_[1].find(":23: not a topology line"), std::string::npos) << warnings_[1];
}

TEST_F(IbnetdiscoverFile, NamesAreUniqueAndEveryNameResolves) {
  // Six switches sharing the default description stay apart: named by their ids.
  std::string text;
  for (int s = 1; s <= 6; ++s)
    text += fmt::format(
        "Switch\t36 \"S-00000000000000{:02x}\"\t# \"SwitchIB Mellanox Technologies\" base port 0 "
        "lid {} lmc 0\n\n",
        s, s);
  text += "Ca\t1 \"H-0000000000000100\"\t# \"node018 HCA-1\"\n";
  auto t = load("six", text);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->name(0), "S-0000000000000001");
  EXPECT_EQ(t->name(5), "S-0000000000000006");
  EXPECT_EQ(t->name(6), "node018 HCA-1");
  EXPECT_EQ(*t->resolve("node018 HCA-1"), 6u);
  EXPECT_EQ(*t->resolve("H-0000000000000100"), 6u);
  EXPECT_EQ(*t->resolve("0x100"), 6u);
  EXPECT_EQ(*t->resolve("S-0000000000000003"), 2u);
  EXPECT_EQ(*t->resolve("4"), 4u);
  EXPECT_EQ(*t->resolve("nic:0"), 6u);
  auto shared = t->resolve("SwitchIB Mellanox Technologies");
  ASSERT_FALSE(shared.ok());
  EXPECT_EQ(shared.error().id, 3008);
  EXPECT_EQ(t->resolve("node019 HCA-1").error().id, 3009);
  EXPECT_EQ(t->resolve("7").error().id, 3007);
}

TEST_F(IbnetdiscoverFile, NicIndexIsFileOrder) {
  auto t = load("order", kSwitch36);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t->resolve("nic:0"), *t->resolve("node001 HCA-1"));
  EXPECT_EQ(*t->resolve("nic:1"), *t->resolve("node002 HCA-1"));
  // node002 is cabled on its second port only: that is its network port.
  EXPECT_EQ(chip::planned_network_port(*t, 2), std::optional<uint8_t>(1));
  EXPECT_EQ(chip::planned_network_port(*t, 1), std::optional<uint8_t>(0));
}

TEST_F(IbnetdiscoverFile, BadInputIsAClearError) {
  expect_refused("empty", "", 3954, "is empty");
  expect_refused("blank", " \n\t\n", 3954, "is empty");
  expect_refused("comments", "#\n# Topology file\n#\n", 3915, "no Switch, Ca (Hca) or Rt line");
  expect_refused("prose", "hello\nworld\n", 3915, "among 2 lines");
  expect_refused("gzip", std::string("\x1f\x8b\x08\x00rest", 8), 3955, "gzip");
  expect_refused("nul", std::string("Switch\t8 \"S-01\x00x\"\n", 17), 3956, "NUL byte on line 1");
  expect_refused("long", fmt::format("{}{}\n", kSwitch36, std::string(5000, 'x')), 3912,
                 "(5000 bytes)");
  const std::string dir = ::testing::TempDir() + "galaxy_ibnd_dir";
  std::filesystem::create_directories(dir);
  auto d = load_topology_file(dir);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().id, 3957);
}

TEST_F(IbnetdiscoverFile, MessagesQuoteAnExcerptWithControlBytesEscaped) {
  auto t =
      load("quote", fmt::format("Switch\t8 \"{}\x01\"\n[9]\t\"x\"[1]\n", std::string(300, 'n')));
  ASSERT_FALSE(t.ok());
  const std::string m = t.error().to_string();
  EXPECT_LT(m.size(), 300u) << m;
  EXPECT_NE(m.find("... (301 bytes)"), std::string::npos) << m;
  const Error nul = make_error(Code::kMalformed, 1, std::string("a\0b", 3));
  EXPECT_EQ(nul.to_string(), "E0001 malformed: a\\x00b");
}

}  // namespace
}  // namespace galaxy::fabric
