#include "wire/ib_mad.h"

#include <gtest/gtest.h>

#include <random>

#include "wire_test_util.h"

namespace galaxy::wire {
namespace {

using testing::FailsWith;
using testing::hex;

Mad sample_mad() {
  Mad m;
  m.base_version = 1;
  m.mgmt_class = MgmtClass::kSubnDirectedRoute;
  m.class_version = 1;
  m.method = MadMethod::kGetResp;
  m.status = 0x8001;
  m.class_specific = 0x0203;
  m.transaction_id = 0x0102030405060708;
  m.attribute_id = 0x0011;  // NodeInfo
  m.attribute_modifier = 0xDEADBEEF;
  m.data[0] = 0x99;
  m.data[231] = 0x77;
  return m;
}

TEST(Mad, GoldenBigEndianHeader) {
  auto b = encode_mad(sample_mad());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(hex(std::span(*b).first(24)),
            "01810181"
            "80010203"
            "0102030405060708"
            "00110000"
            "deadbeef");
  EXPECT_EQ((*b)[24], 0x99);
  EXPECT_EQ((*b)[255], 0x77);
  EXPECT_TRUE(is_response(MadMethod::kGetResp));
  EXPECT_FALSE(is_response(MadMethod::kTrap));
}

TEST(Mad, RandomRoundTrip) {
  std::mt19937_64 rng(10);
  const uint8_t methods[] = {0x01, 0x02, 0x03, 0x05, 0x06, 0x07, 0x81, 0x86};
  for (int i = 0; i < 1000; ++i) {
    Mad m;
    m.base_version = static_cast<uint8_t>(rng());
    uint8_t cls = static_cast<uint8_t>(rng() % 0x20);
    if (cls < 3) cls = cls == 0 ? 0x81 : 0x01;
    m.mgmt_class = static_cast<MgmtClass>(cls);
    m.class_version = static_cast<uint8_t>(rng());
    m.method = static_cast<MadMethod>(methods[rng() % 8]);
    m.status = static_cast<uint16_t>(rng());
    m.class_specific = static_cast<uint16_t>(rng());
    m.transaction_id = rng();
    m.attribute_id = static_cast<uint16_t>(rng());
    m.attribute_modifier = static_cast<uint32_t>(rng());
    for (auto& x : m.data) x = static_cast<uint8_t>(rng());
    auto b = encode_mad(m);
    ASSERT_TRUE(b.ok()) << b.error().to_string();
    auto d = decode_mad(*b);
    ASSERT_TRUE(d.ok()) << d.error().to_string();
    EXPECT_EQ(*d, m);
  }
}

TEST(Mad, ClassAndMethodTables) {
  int classes = 0, methods = 0;
  for (int raw = 0; raw < 256; ++raw) {
    classes += is_valid_mgmt_class(static_cast<uint8_t>(raw));
    methods += is_valid_mad_method(static_cast<uint8_t>(raw));
  }
  EXPECT_EQ(classes, 1 + 29 + 1);  // 0x01, 0x03-0x1F, 0x81
  EXPECT_EQ(methods, 12);          // and SA's GetTable, Delete and their responses
  EXPECT_EQ(mgmt_class_name(static_cast<MgmtClass>(0x0A)), "vendor");
  EXPECT_EQ(mgmt_class_name(static_cast<MgmtClass>(0x1F)), "application");
  EXPECT_EQ(mgmt_class_name(MgmtClass::kSubnAdm), "subn adm");
  EXPECT_EQ(mad_method_name(MadMethod::kTrapRepress), "TrapRepress");
}

TEST(Mad, EncodeRejectsUnknownClassAndMethod) {
  Mad m = sample_mad();
  m.mgmt_class = static_cast<MgmtClass>(0x02);
  EXPECT_TRUE(FailsWith(encode_mad(m), "mgmt_class = 0x02"));
  m = sample_mad();
  m.method = static_cast<MadMethod>(0x04);
  EXPECT_TRUE(FailsWith(encode_mad(m), "method = 0x04"));
}

TEST(Mad, DecodeRejectsMalformed) {
  MadBytes good = *encode_mad(sample_mad());
  EXPECT_TRUE(FailsWith(decode_mad(std::span(good).first(255)), "mad: length = 255 bytes"));
  MadBytes b = good;
  b[1] = 0x20;
  EXPECT_TRUE(FailsWith(decode_mad(b), "mgmt_class = 0x20"));
  b = good;
  b[1] = 0x00;
  EXPECT_TRUE(FailsWith(decode_mad(b), "mgmt_class = 0x00"));
  b = good;
  b[3] = 0x82;
  EXPECT_TRUE(FailsWith(decode_mad(b), "method = 0x82"));
  b = good;
  b[19] = 1;
  EXPECT_TRUE(FailsWith(decode_mad(b), "reserved = 0x0001"));
}

}  // namespace
}  // namespace galaxy::wire
