// The SMP codec and the SM's attributes against libibmad (rdma-core, what infiniband-diags and
// OpenSM's tools are built on) as the judge of every field's place: bytes we write, libibmad
// reads; bytes libibmad writes, we read.
#include "wire/ib_smp.h"

#include <gtest/gtest.h>
#include <infiniband/mad.h>

#include <random>

namespace galaxy::wire {
namespace {

uint32_t ibmad(SmpData& d, MAD_FIELDS f) {
  return mad_get_field(d.data(), 0, f);
}
uint64_t ibmad64(SmpData& d, MAD_FIELDS f) {
  return mad_get_field64(d.data(), 0, f);
}

SmpData random_data(uint32_t seed) {
  std::mt19937 rng(seed);
  SmpData d;
  for (auto& b : d) b = static_cast<uint8_t>(rng());
  return d;
}

TEST(IbSmp, DirectedRequestAsLibibmadReadsIt) {
  const uint8_t ports[] = {1, 4, 2};
  auto s = Smp::directed_request(MadMethod::kGet, SmpAttr::kPortInfo, 3, ports);
  ASSERT_TRUE(s.ok());
  s->transaction_id = 0x0000000512345678ull;
  s->m_key = 0x1122334455667788ull;
  auto b = encode_smp(*s);
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  uint8_t* m = b->data();
  EXPECT_EQ(mad_get_field(m, 0, IB_MAD_MGMTCLASS_F), 0x81u);
  EXPECT_EQ(mad_get_field(m, 0, IB_MAD_METHOD_F), 0x01u);
  EXPECT_EQ(mad_get_field(m, 0, IB_MAD_RESPONSE_F), 0u);
  EXPECT_EQ(mad_get_field(m, 0, IB_DRSMP_HOPCNT_F), 3u);
  EXPECT_EQ(mad_get_field(m, 0, IB_DRSMP_HOPPTR_F), 0u);
  EXPECT_EQ(mad_get_field(m, 0, IB_DRSMP_DIRECTION_F), 0u);
  EXPECT_EQ(mad_get_field64(m, 0, IB_MAD_TRID_F), 0x0000000512345678ull);
  EXPECT_EQ(mad_get_field(m, 0, IB_MAD_ATTRID_F), 0x15u);
  EXPECT_EQ(mad_get_field(m, 0, IB_MAD_ATTRMOD_F), 3u);
  EXPECT_EQ(mad_get_field64(m, 0, IB_MAD_MKEY_F), 0x1122334455667788ull);
  EXPECT_EQ(mad_get_field(m, 0, IB_DRSMP_DRSLID_F), 0xFFFFu);
  EXPECT_EQ(mad_get_field(m, 0, IB_DRSMP_DRDLID_F), 0xFFFFu);
  uint8_t path[64];
  mad_get_array(m, 0, IB_DRSMP_PATH_F, path);
  EXPECT_EQ(path[1], 1);
  EXPECT_EQ(path[2], 4);
  EXPECT_EQ(path[3], 2);
}

TEST(IbSmp, DecodesADirectedResponseLibibmadWrote) {
  MadBytes b{};
  uint8_t* m = b.data();
  mad_set_field(m, 0, IB_MAD_BASEVER_F, 1);
  mad_set_field(m, 0, IB_MAD_MGMTCLASS_F, 0x81);
  mad_set_field(m, 0, IB_MAD_CLASSVER_F, 1);
  mad_set_field(m, 0, IB_MAD_METHOD_F, 0x01);
  mad_set_field(m, 0, IB_MAD_RESPONSE_F, 1);
  mad_set_field(m, 0, IB_DRSMP_DIRECTION_F, 1);
  mad_set_field(m, 0, IB_DRSMP_STATUS_F, 0x1C);
  mad_set_field(m, 0, IB_DRSMP_HOPCNT_F, 2);
  mad_set_field(m, 0, IB_DRSMP_HOPPTR_F, 3);
  mad_set_field64(m, 0, IB_MAD_TRID_F, 0xABCDEF01ull);
  mad_set_field(m, 0, IB_MAD_ATTRID_F, 0x11);
  mad_set_field(m, 0, IB_DRSMP_DRSLID_F, 7);
  uint8_t rpath[64] = {0, 9, 8};
  mad_set_array(m, 0, IB_DRSMP_RPATH_F, rpath);
  m[IB_SMP_DATA_OFFS + 5] = 0x42;
  auto s = decode_smp(b);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  EXPECT_TRUE(s->directed);
  EXPECT_EQ(s->method, MadMethod::kGetResp);
  EXPECT_TRUE(s->returning);
  EXPECT_EQ(s->status, 0x1C);
  EXPECT_EQ(smp_status_text(s->status), "invalid value in the attribute or modifier");
  EXPECT_EQ(s->hop_count, 2);
  EXPECT_EQ(s->hop_pointer, 3);
  EXPECT_EQ(s->transaction_id, 0xABCDEF01ull);
  EXPECT_EQ(s->attribute_id, 0x11);
  EXPECT_EQ(s->dr_slid, 7);
  EXPECT_EQ(s->return_path[1], 9);
  EXPECT_EQ(s->return_path[2], 8);
  EXPECT_EQ(s->data[5], 0x42);
  // And back: the same bytes.
  auto again = encode_smp(*s);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, b);
}

TEST(IbSmp, LidRoutedRoundTrip) {
  Smp s;
  s.directed = false;
  s.method = MadMethod::kSet;
  s.attribute_id = static_cast<uint16_t>(SmpAttr::kLinearForwardingTable);
  s.attribute_modifier = 2;
  s.transaction_id = 77;
  s.data = random_data(3);
  auto b = encode_smp(s);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)[1], 0x01);
  EXPECT_EQ(std::vector<uint8_t>(b->begin() + IB_SMP_DATA_OFFS, b->begin() + IB_SMP_DATA_OFFS + 64),
            std::vector<uint8_t>(s.data.begin(), s.data.end()));
  auto d = decode_smp(*b);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, s);
}

TEST(IbSmp, RefusesWhatIsNoSmp) {
  MadBytes b{};
  b[0] = 1;
  b[1] = 0x04;  // performance management: a MAD, not an SMP
  b[2] = 1;
  b[3] = 0x01;
  auto s = decode_smp(b);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().id, 1810);
  b[1] = 0x81;
  b[7] = 64;  // hop count beyond 63
  s = decode_smp(b);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().id, 1811);
  EXPECT_FALSE(decode_smp(std::span<const uint8_t>(b.data(), 255)).ok());
  std::vector<uint8_t> long_route(64, 1);
  auto r = Smp::directed_request(MadMethod::kGet, SmpAttr::kNodeInfo, 0, long_route);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, 1800);
}

TEST(IbSmp, PortInfoFieldsWhereLibibmadHasThem) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    PortInfo p;
    p.raw = random_data(seed);
    EXPECT_EQ(p.m_key(), ibmad64(p.raw, IB_PORT_MKEY_F));
    EXPECT_EQ(p.gid_prefix(), ibmad64(p.raw, IB_PORT_GID_PREFIX_F));
    EXPECT_EQ(p.lid(), ibmad(p.raw, IB_PORT_LID_F));
    EXPECT_EQ(p.master_sm_lid(), ibmad(p.raw, IB_PORT_SMLID_F));
    EXPECT_EQ(p.capability_mask(), ibmad(p.raw, IB_PORT_CAPMASK_F));
    EXPECT_EQ(p.local_port_num(), ibmad(p.raw, IB_PORT_LOCAL_PORT_F));
    EXPECT_EQ(p.link_width_active(), ibmad(p.raw, IB_PORT_LINK_WIDTH_ACTIVE_F));
    EXPECT_EQ(p.port_state(), ibmad(p.raw, IB_PORT_STATE_F));
    EXPECT_EQ(p.phys_state(), ibmad(p.raw, IB_PORT_PHYS_STATE_F));
    EXPECT_EQ(p.lmc(), ibmad(p.raw, IB_PORT_LMC_F));
    EXPECT_EQ(p.link_speed_active(), ibmad(p.raw, IB_PORT_LINK_SPEED_ACTIVE_F));
    EXPECT_EQ(p.neighbor_mtu(), ibmad(p.raw, IB_PORT_NEIGHBOR_MTU_F));
    EXPECT_EQ(p.mtu_cap(), ibmad(p.raw, IB_PORT_MTU_CAP_F));
    EXPECT_EQ(p.vl_cap(), ibmad(p.raw, IB_PORT_VL_CAP_F));
    EXPECT_EQ(p.operational_vls(), ibmad(p.raw, IB_PORT_OPER_VLS_F));
    EXPECT_EQ(p.m_key_protect_bits(), ibmad(p.raw, IB_PORT_MKEY_PROT_BITS_F));
    EXPECT_EQ(p.m_key_lease_period(), ibmad(p.raw, IB_PORT_MKEY_LEASE_F));
    EXPECT_EQ(p.m_key_violations(), ibmad(p.raw, IB_PORT_MKEY_VIOL_F));

    const SmpData before = p.raw;
    p.set_m_key(0x0102030405060708ull);
    p.set_m_key_protect_bits(3);
    p.set_m_key_lease_period(0x4242);
    p.set_m_key_violations(7);
    p.set_lid(0x1234);
    p.set_master_sm_lid(0x0BCD);
    p.set_port_state(IbPortState::kArmed);
    p.set_lmc(5);
    EXPECT_EQ(ibmad(p.raw, IB_PORT_LID_F), 0x1234u);
    EXPECT_EQ(ibmad(p.raw, IB_PORT_SMLID_F), 0x0BCDu);
    EXPECT_EQ(ibmad(p.raw, IB_PORT_STATE_F), 3u);
    EXPECT_EQ(ibmad(p.raw, IB_PORT_LMC_F), 5u);
    // Nothing else moved.
    SmpData expect = before;
    mad_set_field64(expect.data(), 0, IB_PORT_MKEY_F, 0x0102030405060708ull);
    mad_set_field(expect.data(), 0, IB_PORT_MKEY_PROT_BITS_F, 3);
    mad_set_field(expect.data(), 0, IB_PORT_MKEY_LEASE_F, 0x4242);
    mad_set_field(expect.data(), 0, IB_PORT_MKEY_VIOL_F, 7);
    mad_set_field(expect.data(), 0, IB_PORT_LID_F, 0x1234);
    mad_set_field(expect.data(), 0, IB_PORT_SMLID_F, 0x0BCD);
    mad_set_field(expect.data(), 0, IB_PORT_STATE_F, 3);
    mad_set_field(expect.data(), 0, IB_PORT_LMC_F, 5);
    EXPECT_EQ(p.raw, expect);

    PortInfo s = p.for_set();
    EXPECT_EQ(ibmad(s.raw, IB_PORT_STATE_F), 0u);
    EXPECT_EQ(ibmad(s.raw, IB_PORT_PHYS_STATE_F), 0u);
    EXPECT_EQ(ibmad(s.raw, IB_PORT_LINK_DOWN_DEF_F), 0u);
    EXPECT_EQ(ibmad(s.raw, IB_PORT_LID_F), 0x1234u);
  }
}

TEST(IbSmp, NodeInfoSwitchInfoSmInfoWhereLibibmadHasThem) {
  NodeInfo n{1,
             1,
             2,
             36,
             0x0002c90300001111ull,
             0x0002c90300002222ull,
             0x0002c90300003333ull,
             8,
             0xcb20,
             0xa0,
             17,
             0x0002c9};
  SmpData d = encode_node_info(n);
  EXPECT_EQ(ibmad(d, IB_NODE_TYPE_F), 2u);
  EXPECT_EQ(ibmad(d, IB_NODE_NPORTS_F), 36u);
  EXPECT_EQ(ibmad64(d, IB_NODE_SYSTEM_GUID_F), n.system_image_guid);
  EXPECT_EQ(ibmad64(d, IB_NODE_GUID_F), n.node_guid);
  EXPECT_EQ(ibmad64(d, IB_NODE_PORT_GUID_F), n.port_guid);
  EXPECT_EQ(ibmad(d, IB_NODE_PARTITION_CAP_F), 8u);
  EXPECT_EQ(ibmad(d, IB_NODE_DEVID_F), 0xcb20u);
  EXPECT_EQ(ibmad(d, IB_NODE_REVISION_F), 0xa0u);
  EXPECT_EQ(ibmad(d, IB_NODE_LOCAL_PORT_F), 17u);
  EXPECT_EQ(ibmad(d, IB_NODE_VENDORID_F), 0x0002c9u);
  auto back = decode_node_info(d);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, n);
  d[2] = 0;
  EXPECT_FALSE(decode_node_info(d).ok());

  SwitchInfo si;
  si.raw = random_data(9);
  EXPECT_EQ(si.linear_fdb_cap(), ibmad(si.raw, IB_SW_LINEAR_FDB_CAP_F));
  EXPECT_EQ(si.linear_fdb_top(), ibmad(si.raw, IB_SW_LINEAR_FDB_TOP_F));
  EXPECT_EQ(si.port_state_change(), ibmad(si.raw, IB_SW_STATE_CHANGE_F) != 0);
  si.set_linear_fdb_top(1000);
  si.set_port_state_change(true);
  EXPECT_EQ(ibmad(si.raw, IB_SW_LINEAR_FDB_TOP_F), 1000u);
  EXPECT_EQ(ibmad(si.raw, IB_SW_STATE_CHANGE_F), 1u);

  SmInfo sm{0x0002c90300004444ull, 0x1234, 99, 14, 3};
  SmpData e = encode_sm_info(sm);
  EXPECT_EQ(ibmad64(e, IB_SMINFO_GUID_F), sm.guid);
  EXPECT_EQ(ibmad64(e, IB_SMINFO_KEY_F), sm.sm_key);
  EXPECT_EQ(ibmad(e, IB_SMINFO_ACT_F), 99u);
  EXPECT_EQ(ibmad(e, IB_SMINFO_PRIO_F), 14u);
  EXPECT_EQ(ibmad(e, IB_SMINFO_STATE_F), 3u);
  EXPECT_EQ(decode_sm_info(e), sm);
}

TEST(IbSmp, NodeDescriptionStopsAtNul) {
  SmpData d{};
  const char text[] = "node018 HCA-1";
  std::copy(std::begin(text), std::end(text) - 1, d.begin());
  EXPECT_EQ(decode_node_description(d), "node018 HCA-1");
  d.fill('x');
  EXPECT_EQ(decode_node_description(d).size(), 64u);
}

}  // namespace
}  // namespace galaxy::wire
