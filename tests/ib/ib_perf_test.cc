// PerfMgt PortCounters (wire/ib_perf.h) against libibmad, which perfquery reads them with:
// every field we write is where libibmad reads it, and every field libibmad writes we read.
#include "wire/ib_perf.h"

#include <gtest/gtest.h>
#include <infiniband/mad.h>

#include <random>

namespace galaxy::wire {
namespace {

struct Field {
  MAD_FIELDS f;
  uint32_t PortCounters::*wide = nullptr;
  uint16_t PortCounters::*mid = nullptr;
  uint8_t PortCounters::*narrow = nullptr;
  unsigned bits;
};

const std::vector<Field>& fields() {
  static const std::vector<Field> f{
      {IB_PC_PORT_SELECT_F, nullptr, nullptr, &PortCounters::port_select, 8},
      {IB_PC_COUNTER_SELECT_F, nullptr, &PortCounters::counter_select, nullptr, 16},
      {IB_PC_ERR_SYM_F, nullptr, &PortCounters::symbol_errors, nullptr, 16},
      {IB_PC_LINK_RECOVERS_F, nullptr, nullptr, &PortCounters::link_error_recoveries, 8},
      {IB_PC_LINK_DOWNED_F, nullptr, nullptr, &PortCounters::link_downed, 8},
      {IB_PC_ERR_RCV_F, nullptr, &PortCounters::rcv_errors, nullptr, 16},
      {IB_PC_ERR_PHYSRCV_F, nullptr, &PortCounters::rcv_remote_physical_errors, nullptr, 16},
      {IB_PC_ERR_SWITCH_REL_F, nullptr, &PortCounters::rcv_switch_relay_errors, nullptr, 16},
      {IB_PC_XMT_DISCARDS_F, nullptr, &PortCounters::xmit_discards, nullptr, 16},
      {IB_PC_ERR_XMTCONSTR_F, nullptr, nullptr, &PortCounters::xmit_constraint_errors, 8},
      {IB_PC_ERR_RCVCONSTR_F, nullptr, nullptr, &PortCounters::rcv_constraint_errors, 8},
      {IB_PC_ERR_LOCALINTEG_F, nullptr, nullptr, &PortCounters::local_link_integrity_errors, 4},
      {IB_PC_ERR_EXCESS_OVR_F, nullptr, nullptr, &PortCounters::excessive_buffer_overruns, 4},
      {IB_PC_VL15_DROPPED_F, nullptr, &PortCounters::vl15_dropped, nullptr, 16},
      {IB_PC_XMT_BYTES_F, &PortCounters::xmit_data, nullptr, nullptr, 32},
      {IB_PC_RCV_BYTES_F, &PortCounters::rcv_data, nullptr, nullptr, 32},
      {IB_PC_XMT_PKTS_F, &PortCounters::xmit_pkts, nullptr, nullptr, 32},
      {IB_PC_RCV_PKTS_F, &PortCounters::rcv_pkts, nullptr, nullptr, 32},
      {IB_PC_XMT_WAIT_F, &PortCounters::xmit_wait, nullptr, nullptr, 32},
  };
  return f;
}

uint32_t get(const PortCounters& c, const Field& f) {
  return f.wide ? c.*f.wide : f.mid ? c.*f.mid : c.*f.narrow;
}
void set(PortCounters& c, const Field& f, uint32_t v) {
  if (f.wide)
    c.*f.wide = v;
  else if (f.mid)
    c.*f.mid = static_cast<uint16_t>(v);
  else
    c.*f.narrow = static_cast<uint8_t>(v);
}

TEST(IbPerf, PortCountersWhereLibibmadReadsAndWritesThem) {
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    PortCounters c;
    for (const Field& f : fields())
      set(c, f, static_cast<uint32_t>(rng()) & (f.bits == 32 ? ~0u : (1u << f.bits) - 1));
    Mad m = port_counters_get(c.port_select);
    m.method = MadMethod::kGetResp;
    encode_port_counters(c, m);
    auto bytes = encode_mad(m);
    ASSERT_TRUE(bytes.ok());
    for (const Field& f : fields())
      EXPECT_EQ(mad_get_field(bytes->data() + IB_PC_DATA_OFFS, 0, f.f), get(c, f)) << f.f;
    // And back: libibmad's writes, our reads.
    MadBytes theirs = *bytes;
    PortCounters want;
    for (const Field& f : fields()) {
      const uint32_t v = static_cast<uint32_t>(rng()) & (f.bits == 32 ? ~0u : (1u << f.bits) - 1);
      mad_set_field(theirs.data() + IB_PC_DATA_OFFS, 0, f.f, v);
      set(want, f, v);
    }
    auto mad = decode_mad(theirs);
    ASSERT_TRUE(mad.ok());
    auto got = decode_port_counters(*mad);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(*got, want);
  }
}

TEST(IbPerf, AGetAsLibibmadReadsItAndOnlyAnAnswerDecodes) {
  Mad g = port_counters_get(7);
  auto bytes = encode_mad(g);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(mad_get_field(bytes->data(), 0, IB_MAD_MGMTCLASS_F), 0x04u);
  EXPECT_EQ(mad_get_field(bytes->data(), 0, IB_MAD_ATTRID_F), 0x12u);
  EXPECT_EQ(mad_get_field(bytes->data() + IB_PC_DATA_OFFS, 0, IB_PC_PORT_SELECT_F), 7u);
  EXPECT_FALSE(decode_port_counters(g).ok());  // a Get, not its answer
  Mad other = g;
  other.method = MadMethod::kGetResp;
  other.attribute_id = 0x0001;  // ClassPortInfo
  EXPECT_FALSE(decode_port_counters(other).ok());
}

}  // namespace
}  // namespace galaxy::wire
