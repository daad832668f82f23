// The daemon's API, one chip in-band (docs/api.md "Chips: registers, EEPROM, status"):
// GET/PUT /api/chips/{chip}/registers/{addr}, GET/PUT /api/chips/{chip}/eeprom,
// GET /api/chips/{chip}/status. A refused request changes nothing: every refusal is followed
// by a read-back.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "fabric/builders.h"
#include "nmd_fixture.h"

namespace galaxy::nmd::api_test {
namespace {

uint64_t scratch(const NmdInstance& nmd, const std::string& chip) {
  Reply r = nmd.get("/api/chips/" + chip + "/registers/SCRATCH");
  EXPECT_EQ(r.status, 200) << r.describe();
  return r.json.value("value", uint64_t{0xDEAD});
}

int64_t config_changes(const NmdInstance& nmd) {
  Reply r = nmd.get("/api/log?kind=config_change&limit=10000");
  EXPECT_EQ(r.status, 200) << r.describe();
  return static_cast<int64_t>(r.json["events"].size());
}

// ---------------------------------------------------------------------------------------------
// Registers

TEST_F(NmdApiTest, RegisterReadWriteReadBack) {
  Reply first = get("/api/chips/0/registers/SCRATCH");
  ASSERT_EQ(first.status, 200) << first.describe();
  EXPECT_EQ(first.json["register"], "SCRATCH");
  EXPECT_EQ(first.json["addr"], "0x012");
  EXPECT_EQ(first.json["chip"], 0);
  EXPECT_EQ(first.json["value"], 0);
  EXPECT_EQ(first.json["value_hex"], "0x0");
  EXPECT_GE(first.json["attempts"].get<int>(), 1);
  EXPECT_GT(first.json["latency_us"].get<double>(), 0.0);

  Reply w = put("/api/chips/0/registers/SCRATCH", {{"value", "0x1234"}});
  ASSERT_EQ(w.status, 200) << w.describe();
  EXPECT_EQ(w.json["action"], "write");
  EXPECT_EQ(w.json["value"], 0x1234);
  Reply back = get("/api/chips/0/registers/SCRATCH");
  ASSERT_EQ(back.status, 200);
  EXPECT_EQ(back.json["value"], 0x1234);
  EXPECT_EQ(back.json["value_hex"], "0x1234");
  // The same register by hex and decimal address.
  EXPECT_EQ(get("/api/chips/0/registers/0x012").json["value"], 0x1234);
  EXPECT_EQ(get("/api/chips/0/registers/18").json["value"], 0x1234);
  // Other chips are untouched; a chip several hops away answers too.
  EXPECT_EQ(scratch(*nmd_, "3"), 0u);
  Reply far = put("/api/chips/nic:15/registers/SCRATCH", {{"value", 77}});  // a decimal number
  ASSERT_EQ(far.status, 200) << far.describe();
  EXPECT_EQ(scratch(*nmd_, "nic:15"), 77u);
  EXPECT_EQ(scratch(*nmd_, "nic00015"), 77u);

  // Each write is a config_change event naming the register and the chip.
  Reply log = get("/api/log?kind=config_change");
  ASSERT_EQ(log.status, 200);
  bool found = false;
  for (const auto& e : log.json["events"])
    found |= e["cause"] == "register SCRATCH written" && e["chip"] == 0 &&
             e["detail"].get<std::string>().find("4660") != std::string::npos;
  EXPECT_TRUE(found) << log.body;

  // Port registers by name.
  Reply link = get("/api/chips/0/registers/PORT3.LINK_STATE");
  ASSERT_EQ(link.status, 200) << link.describe();
  EXPECT_EQ(link.json["register"], "PORT3.LINK_STATE");
  EXPECT_EQ(link.json["value"].get<uint64_t>() & 3, 2u) << "link up";
}

TEST_F(NmdApiTest, RegisterOutOfRangeIsRefusedAndChangesNothing) {
  ASSERT_EQ(put("/api/chips/0/registers/SCRATCH", {{"value", 42}}).status, 200);
  const int64_t events = config_changes(*nmd_);
  for (const char* addr : {"0xFFF", "PORT99.LINK_STATE", "0x10000", "PORT9.LINK_STATE"}) {
    Reply r = get(std::string("/api/chips/0/registers/") + addr);
    EXPECT_EQ(r.status, 400) << addr << ": " << r.describe();
    EXPECT_FALSE(r.error_id().empty()) << addr;
    Reply w = put(std::string("/api/chips/0/registers/") + addr, {{"value", 5}});
    EXPECT_EQ(w.status, 400) << addr << ": " << w.describe();
    EXPECT_FALSE(w.error_id().empty()) << addr;
  }
  // An unknown register name: bad input or an unknown resource.
  Reply name = put("/api/chips/0/registers/NO_SUCH_REGISTER", {{"value", 5}});
  EXPECT_TRUE(name.status == 400 || name.status == 404) << name.describe();
  EXPECT_FALSE(name.error_id().empty());
  for (const Json& body : {Json{{"value", "zz"}}, Json{{"value", -1}}, Json{{"value", 1.5}},
                           Json::object(), Json{{"value", "0x1FFFFFFFFFFFFFFFF"}}}) {
    Reply w = put("/api/chips/0/registers/SCRATCH", body);
    EXPECT_EQ(w.status, 400) << body.dump() << ": " << w.describe();
    EXPECT_FALSE(w.error_id().empty()) << body.dump();
  }
  EXPECT_EQ(scratch(*nmd_, "0"), 42u);
  EXPECT_EQ(config_changes(*nmd_), events) << "a refused write is not logged as a change";
}

TEST_F(NmdApiTest, RegisterOfUnknownChipOrOwnNicIsRefused) {
  Reply unknown = get("/api/chips/99999/registers/SCRATCH");
  EXPECT_EQ(unknown.status, 404) << unknown.describe();
  EXPECT_NE(unknown.content_type.find("application/json"), std::string::npos);
  EXPECT_FALSE(unknown.error_id().empty());
  EXPECT_EQ(unknown.json["error"]["code"], "not_found");
  Reply unknown_w = put("/api/chips/no-such-chip/registers/SCRATCH", {{"value", 1}});
  EXPECT_EQ(unknown_w.status, 404) << unknown_w.describe();

  // The management server's own NIC (nic:0, the session's server) is not reachable in-band.
  Reply own = get("/api/chips/nic:0/registers/SCRATCH");
  EXPECT_EQ(own.status, 400) << own.describe();
  EXPECT_FALSE(own.error_id().empty());
  Reply own_w = put("/api/chips/nic00000/registers/SCRATCH", {{"value", 1}});
  EXPECT_EQ(own_w.status, 400) << own_w.describe();
}

TEST_F(NmdApiTest, RegisterWriteNeedsTheToken) {
  ASSERT_EQ(put("/api/chips/3/registers/SCRATCH", {{"value", 7}}).status, 200);
  const int64_t events = config_changes(*nmd_);

  Reply none = put("/api/chips/3/registers/SCRATCH", {{"value", 9}}, "");
  EXPECT_EQ(none.status, 401) << none.describe();
  EXPECT_EQ(none.error_id(), "E8302");
  EXPECT_EQ(none.json["error"]["code"], "permission_denied");
  Reply wrong = put("/api/chips/3/registers/SCRATCH", {{"value", 9}}, "test-token-124");
  EXPECT_EQ(wrong.status, 401) << wrong.describe();
  EXPECT_EQ(wrong.error_id(), "E8303");
  Reply prefix = put("/api/chips/3/registers/SCRATCH", {{"value", 9}}, "test-token-12");
  EXPECT_EQ(prefix.status, 401) << prefix.describe();
  // Not "Bearer": no token.
  Reply basic = nmd_->request("PUT", "/api/chips/3/registers/SCRATCH", R"({"value": 9})", "",
                              {{"Authorization", std::string("Basic ") + kToken}});
  EXPECT_EQ(basic.status, 401) << basic.describe();

  EXPECT_EQ(scratch(*nmd_, "3"), 7u);
  EXPECT_EQ(config_changes(*nmd_), events);
}

// BUG (see report): a register is 64 bits and the body may give the value as a JSON number, but
// a number >= 2^63 is converted through int64 (body_string) and refused as negative.
TEST_F(NmdApiTest, RegisterWriteTakesFull64BitJsonNumbers) {
  const uint64_t big = 0x8000000000000001ull;
  Reply w = put("/api/chips/0/registers/SCRATCH", Json{{"value", big}});
  EXPECT_EQ(w.status, 200) << w.describe();
  EXPECT_EQ(scratch(*nmd_, "0"), w.status == 200 ? big : 0u);
  // As a hex string it works.
  Reply hex = put("/api/chips/0/registers/SCRATCH", {{"value", "0xffffffffffffffff"}});
  ASSERT_EQ(hex.status, 200) << hex.describe();
  EXPECT_EQ(scratch(*nmd_, "0"), UINT64_MAX);
}

// ---------------------------------------------------------------------------------------------
// EEPROM

TEST_F(NmdApiTest, EepromWriteReadRoundTrip) {
  Reply dflt = get("/api/chips/3/eeprom");
  ASSERT_EQ(dflt.status, 200) << dflt.describe();
  EXPECT_EQ(dflt.json["count"], 16);  // default count, at addr 0
  EXPECT_EQ(dflt.json["addr"], "0x0000");
  EXPECT_EQ(dflt.json["bytes"].size(), 16u);
  EXPECT_EQ(dflt.json["hex"].get<std::string>().size(), 32u);

  const Json bytes = Json::array({1, 2, 3, 250, 255, 0, 7, 8});
  Reply w = put("/api/chips/3/eeprom", {{"addr", "0x100"}, {"bytes", bytes}});
  ASSERT_EQ(w.status, 200) << w.describe();
  EXPECT_EQ(w.json["action"], "write");
  EXPECT_EQ(w.json["count"], 8);
  EXPECT_EQ(w.json["packets"], 2);  // six bytes per packet
  Reply r = get("/api/chips/3/eeprom?addr=0x100&count=8");
  ASSERT_EQ(r.status, 200) << r.describe();
  EXPECT_EQ(r.json["bytes"], bytes);
  EXPECT_EQ(r.json["hex"], "010203faff000708");
  EXPECT_EQ(r.json["addr"], "0x0100");
  // A decimal address; a read across the end of the written bytes.
  Reply part = get("/api/chips/3/eeprom?addr=262&count=2");
  ASSERT_EQ(part.status, 200);
  EXPECT_EQ(part.json["bytes"], Json::array({7, 8}));
  // 256 bytes in one request (the maximum).
  Reply big = get("/api/chips/3/eeprom?addr=0xFC&count=256");
  ASSERT_EQ(big.status, 200) << big.describe();
  ASSERT_EQ(big.json["bytes"].size(), 256u);
  EXPECT_EQ(big.json["bytes"][4], 1);
  EXPECT_EQ(big.json["bytes"][7], 250);

  Reply log = get("/api/log?kind=config_change");
  bool found = false;
  for (const auto& e : log.json["events"])
    found |= e["cause"] == "EEPROM written" && e["chip"] == 3;
  EXPECT_TRUE(found) << log.body;
}

TEST_F(NmdApiTest, EepromBadBytesAreRefusedAndChangeNothing) {
  const Json bytes = Json::array({10, 20, 30});
  ASSERT_EQ(put("/api/chips/3/eeprom", {{"addr", "0x40"}, {"bytes", bytes}}).status, 200);
  for (const Json& bad :
       {Json::array({256}), Json::array({-1}), Json::array({"x"}), Json::array({9, 256}),
        Json::array({1.5}), Json::array(), Json("abc"), Json(nullptr)}) {
    Reply w = put("/api/chips/3/eeprom", {{"addr", "0x40"}, {"bytes", bad}});
    EXPECT_EQ(w.status, 400) << bad.dump() << ": " << w.describe();
    EXPECT_FALSE(w.error_id().empty()) << bad.dump();
  }
  Reply no_addr = put("/api/chips/3/eeprom", {{"bytes", Json::array({1})}});
  EXPECT_EQ(no_addr.status, 400) << no_addr.describe();
  Reply past_end = put("/api/chips/3/eeprom", {{"addr", "0xFFFF"}, {"bytes", {1, 2}}});
  EXPECT_EQ(past_end.status, 400) << past_end.describe();
  Reply too_many =
      put("/api/chips/3/eeprom", {{"addr", "0x40"}, {"bytes", Json(std::vector<int>(257, 1))}});
  EXPECT_EQ(too_many.status, 400) << too_many.describe();
  Reply no_token = put("/api/chips/3/eeprom", {{"addr", "0x40"}, {"bytes", {1, 1, 1}}}, "");
  EXPECT_EQ(no_token.status, 401) << no_token.describe();
  EXPECT_EQ(no_token.error_id(), "E8302");

  Reply r = get("/api/chips/3/eeprom?addr=0x40&count=3");
  ASSERT_EQ(r.status, 200) << r.describe();
  EXPECT_EQ(r.json["bytes"], bytes) << "a refused write changes nothing";
}

TEST_F(NmdApiTest, EepromBadReadsAndChipsAreRefused) {
  for (const char* q :
       {"count=257", "count=0", "count=x", "addr=0x10000", "addr=0xFFFF&count=2", "addr=zz"}) {
    Reply r = get(std::string("/api/chips/3/eeprom?") + q);
    EXPECT_EQ(r.status, 400) << q << ": " << r.describe();
    EXPECT_FALSE(r.error_id().empty()) << q;
  }
  Reply unknown = get("/api/chips/99999/eeprom");
  EXPECT_EQ(unknown.status, 404) << unknown.describe();
  EXPECT_FALSE(unknown.error_id().empty());
  Reply own = get("/api/chips/nic:0/eeprom");
  EXPECT_EQ(own.status, 400) << own.describe();
  Reply own_w = put("/api/chips/nic:0/eeprom", {{"addr", "0"}, {"bytes", {1}}});
  EXPECT_EQ(own_w.status, 400) << own_w.describe();
}

// ---------------------------------------------------------------------------------------------
// GET /api/chips/{chip}/status: the device view (single, loop, compare)

TEST_F(NmdApiTest, ChipStatusComparesWithThePreviousRead) {
  Reply first = get("/api/chips/0/status");
  ASSERT_EQ(first.status, 200) << first.describe();
  EXPECT_EQ(first.json["chip"], 0);
  EXPECT_EQ(first.json["name"], "l1/sw00000");
  EXPECT_EQ(first.json["first_read"], true);
  EXPECT_TRUE(first.json["changes"].empty());
  EXPECT_EQ(first.json["interval_s"], 0.0);
  ASSERT_EQ(first.json["ports"].size(), 4u);
  for (const auto& p : first.json["ports"]) {
    EXPECT_EQ(p["registers"].size(), 10u) << p.dump();  // the ten status registers
    for (const char* reg : {"LINK_STATE", "TX_FLITS", "RX_FLITS", "RETRANSMISSIONS", "CRC_ERRORS"})
      EXPECT_TRUE(p["registers"].contains(reg)) << reg;
    EXPECT_EQ(p["registers"]["LINK_STATE"].get<uint64_t>() & 3, 2u);
  }

  // Traffic through chip 0 (nic:0 -> nic:3 leaves by one of its up-links), then compare.
  ASSERT_EQ(get("/api/trace?src=nic:0&dst=nic:3").status, 200);
  Reply second = get("/api/chips/0/status");
  ASSERT_EQ(second.status, 200) << second.describe();
  EXPECT_EQ(second.json["first_read"], false);
  EXPECT_GT(second.json["interval_s"].get<double>(), 0.0);
  ASSERT_FALSE(second.json["changes"].empty());
  bool tx = false;
  for (const auto& c : second.json["changes"]) {
    const size_t port = c["port"];
    const std::string reg = c["register"];
    ASSERT_LT(port, 4u);
    // old is the first read's value, new the second's.
    EXPECT_EQ(c["old"], first.json["ports"][port]["registers"][reg]) << c.dump();
    EXPECT_EQ(c["new"], second.json["ports"][port]["registers"][reg]) << c.dump();
    EXPECT_NE(c["old"], c["new"]);
    if (reg == "TX_FLITS") {
      tx = true;
      EXPECT_EQ(c["delta"].get<uint64_t>(), c["new"].get<uint64_t>() - c["old"].get<uint64_t>());
    }
  }
  EXPECT_TRUE(tx) << second.json["changes"].dump();

  // Another chip's first read is still a first read.
  Reply other = get("/api/chips/nic:3/status");
  ASSERT_EQ(other.status, 200) << other.describe();
  EXPECT_EQ(other.json["first_read"], true);
  EXPECT_EQ(other.json["ports"].size(), 1u);
}

TEST_F(NmdApiTest, ChipStatusOfUnknownChipOrOwnNicIsRefused) {
  Reply unknown = get("/api/chips/99999/status");
  EXPECT_EQ(unknown.status, 404) << unknown.describe();
  EXPECT_FALSE(unknown.error_id().empty());
  Reply own = get("/api/chips/nic:0/status");
  EXPECT_EQ(own.status, 400) << own.describe();
  EXPECT_FALSE(own.error_id().empty());
}

}  // namespace
}  // namespace galaxy::nmd::api_test

namespace galaxy::nmd::api_test {

// POST /api/chips/{chip}/eeprom/defaults: the configuration registers become the boot image in
// the EEPROM, read back and compared; the write is logged; a bad chip or no token changes nothing.
TEST_F(NmdApiTest, EepromDefaultsAreWrittenAndVerified) {
  Reply no_token = post("/api/chips/3/eeprom/defaults", Json::object(), "");
  EXPECT_EQ(no_token.status, 401) << no_token.describe();
  Reply unknown = post("/api/chips/9999/eeprom/defaults");
  EXPECT_EQ(unknown.status, 404) << unknown.describe();
  EXPECT_TRUE(get("/api/log?kind=config_change").json["events"].empty());

  Reply w = post("/api/chips/3/eeprom/defaults");
  ASSERT_EQ(w.status, 200) << w.describe();
  EXPECT_EQ(w.json["chip"], 3);
  EXPECT_TRUE(w.json["verified"].get<bool>());
  EXPECT_GT(w.json["bytes"].get<int>(), 0);
  ASSERT_FALSE(w.json["registers"].empty());
  bool has_chip_id = false;
  for (const auto& r : w.json["registers"]) has_chip_id |= r["register"] == "CHIP_ID";
  EXPECT_TRUE(has_chip_id);
  Json log = get("/api/log?kind=config_change").json["events"];
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0]["cause"], "EEPROM defaults written");
  EXPECT_EQ(log[0]["chip"], 3);
}

}  // namespace galaxy::nmd::api_test

namespace galaxy::nmd::api_test {

// POST /api/chips/{chip}/oob: a top switch switched off through its monitor board is gone from
// the next discovery sweep and back after power-on; temperature reads over I2C; the power
// changes are logged; a bad operation or no token changes nothing.
TEST_F(NmdApiTest, OutOfBandPowerOffRemovesAChipFromDiscoveryAndPowerOnBringsItBack) {
  const fabric::Topology t = fabric::build_topology("fattree:k=4").value();
  uint32_t spine = fabric::kNoNode;
  for (uint32_t v = 0; v < t.num_nodes() && spine == fabric::kNoNode; ++v)
    if (!t.is_nic(v) && t.location(v).role.find("core") != std::string::npos) spine = v;
  ASSERT_NE(spine, fabric::kNoNode);
  const std::string at = fmt::format("/api/chips/{}/oob", spine);
  Reply no_token = post(at, {{"operation", "power-off"}}, "");
  EXPECT_EQ(no_token.status, 401) << no_token.describe();
  Reply bad = post(at, {{"operation", "boil"}});
  EXPECT_EQ(bad.status, 400) << bad.describe();
  EXPECT_NE(bad.body.find("E5724"), std::string::npos) << bad.body;

  Reply temp = post(at, {{"operation", "temperature"}});
  ASSERT_EQ(temp.status, 200) << temp.describe();
  EXPECT_GT(temp.json["temperature_c"].get<double>(), 25.0);
  EXPECT_TRUE(temp.json["powered"].get<bool>());

  Reply off = post(at, {{"operation", "power-off"}});
  ASSERT_EQ(off.status, 200) << off.describe();
  EXPECT_FALSE(off.json["powered"].get<bool>());
  Reply gone = post("/api/discover");
  ASSERT_EQ(gone.status, 200) << gone.describe();
  EXPECT_EQ(gone.json["chips"], 35) << "the chip switched off answers nothing in band";
  Reply read_off = post(at, {{"operation", "read"}, {"register", "SCRATCH"}});
  EXPECT_NE(read_off.status, 200);
  EXPECT_NE(read_off.body.find("E2202"), std::string::npos) << read_off.body;

  Reply on = post(at, {{"operation", "power-on"}});
  ASSERT_EQ(on.status, 200) << on.describe();
  Reply back = post("/api/discover");
  ASSERT_EQ(back.status, 200) << back.describe();
  EXPECT_EQ(back.json["chips"], 36);
  Json log = get("/api/log?kind=config_change").json["events"];
  ASSERT_EQ(log.size(), 2u) << "power-off and power-on, not the reads";
  EXPECT_EQ(log[0]["chip"], spine);
}

}  // namespace galaxy::nmd::api_test
