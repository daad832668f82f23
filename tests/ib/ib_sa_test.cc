// Galaxy's subnet administration (nm/ib_sa.h) on a subnet modelled in-process: after a master
// sweep, SA requests (as saquery sends them) are answered from what the sweep programmed. A
// PathRecord's LIDs, MTU and rate are those of the path the model's switches forward along;
// GetTable answers carry RMPP and as many records as one MAD holds; bad requests get IBA's
// status codes and change nothing; a standby SM leaves requests unanswered. LinkRecords are the
// model's links both ways; ServiceRecords are registered, found, renewed, deleted and expire.
#include <gtest/gtest.h>

#include <thread>

#include "fabric/builders.h"
#include "ib_model_subnet.h"
#include "nm/ib_sm.h"
#include "wire/big_endian.h"

namespace galaxy::nm {
namespace {

using wire::MadMethod;
using wire::SaAttr;

struct SaFixture {
  fabric::Topology topo;
  std::unique_ptr<test::ModelSubnet> model;
  std::unique_ptr<IbSubnetManager> sm;
  explicit SaFixture(const std::string& spec = "fattree:k=4,levels=2") {
    auto t = fabric::build_topology(spec);
    EXPECT_TRUE(t.ok());
    topo = std::move(*t);
    model = std::make_unique<test::ModelSubnet>(topo, topo.nic_node(0));
    sm = std::make_unique<IbSubnetManager>(*model, IbSmOptions{});
    EXPECT_TRUE(sm->serve_sm_info().ok());
  }
  wire::Mad request(MadMethod method, SaAttr attr, uint64_t mask) const {
    wire::Mad m;
    m.mgmt_class = wire::MgmtClass::kSubnAdm;
    m.class_version = wire::kSaClassVersion;
    m.method = method;
    m.transaction_id = 0x1234;
    m.attribute_id = static_cast<uint16_t>(attr);
    wire::SaHeader h;
    h.component_mask = mask;
    encode_sa_header(m, h);
    return m;
  }
  std::optional<ib::GmpAnswer> path(MadMethod method, uint16_t slid, uint16_t dlid) {
    namespace m = wire::pr_mask;
    wire::Mad q = request(method, SaAttr::kPathRecord, m::kSlid | m::kDlid);
    wire::PathRecord want;
    want.slid = slid;
    want.dlid = dlid;
    encode_path_record(want, wire::sa_data(q));
    return model->ask_class(q);
  }
};

TEST(IbSa, StandbyOrBeforeASweepLeavesRequestsUnanswered) {
  SaFixture f;
  EXPECT_FALSE(f.path(MadMethod::kGet, 1, 2).has_value());
  EXPECT_EQ(f.sm->sa().stats().requests, 0u);
}

TEST(IbSa, PathRecordIsThePathTheTablesCarry) {
  SaFixture f;
  auto r = f.sm->sweep();
  ASSERT_TRUE(r.ok() && r->subnet_up);
  const uint32_t a = f.topo.nic_node(0), b = f.topo.nic_node(f.topo.num_nics() - 1);
  const uint16_t la = f.model->lid(a, 1), lb = f.model->lid(b, 1);
  ASSERT_TRUE(f.model->deliver(a, 1, lb).has_value());
  auto ans = f.path(MadMethod::kGet, la, lb);
  ASSERT_TRUE(ans.has_value());
  EXPECT_EQ(ans->mad.method, MadMethod::kGetResp);
  EXPECT_EQ(ans->mad.status, 0);
  EXPECT_EQ(ans->mad.transaction_id, 0x1234u);
  EXPECT_EQ(wire::decode_sa_header(ans->mad).attribute_offset, 8);
  const wire::PathRecord pr = wire::decode_path_record(wire::sa_data(ans->mad));
  EXPECT_EQ(pr.slid, la);
  EXPECT_EQ(pr.dlid, lb);
  EXPECT_EQ(pr.sgid.guid, f.model->guid(a) + 1);
  EXPECT_EQ(pr.dgid.guid, f.model->guid(b) + 1);
  EXPECT_EQ(pr.sgid.prefix, kIbDefaultGidPrefix);
  EXPECT_EQ(pr.mtu, 5);   // the model's links: 4096 bytes,
  EXPECT_EQ(pr.rate, 7);  // 4x QDR
  EXPECT_TRUE(pr.reversible);
  EXPECT_EQ(pr.pkey, kIbDefaultPkey);
  EXPECT_EQ(pr.pkt_life, kIbPathPacketLifeTime);
  EXPECT_EQ(f.sm->sa().stats().answered, 1u);
}

TEST(IbSa, NoPathWhereTheTablesLeadNowhere) {
  SaFixture f;
  ASSERT_TRUE(f.sm->sweep().ok());
  const uint32_t a = f.topo.nic_node(0);
  const uint16_t la = f.model->lid(a, 1);
  // A LID no port holds: no record (Get: IBA's ERR_NO_RECORDS), and nothing else changes.
  auto ans = f.path(MadMethod::kGet, la, 0x9000);
  ASSERT_TRUE(ans.has_value());
  EXPECT_EQ(ans->mad.status, wire::sa_mad_status(wire::SaStatus::kNoRecords));
  auto table = f.path(MadMethod::kGetTable, la, 0x9000);
  ASSERT_TRUE(table.has_value());
  EXPECT_EQ(table->mad.status, 0);
  EXPECT_EQ(table->length, wire::kSaDataOffset);  // zero records
}

TEST(IbSa, GetTableCarriesRmppAndWhatOneMadHolds) {
  SaFixture f;
  ASSERT_TRUE(f.sm->sweep().ok());
  const uint16_t la = f.model->lid(f.topo.nic_node(0), 1);
  namespace m = wire::pr_mask;
  wire::Mad q = f.request(MadMethod::kGetTable, SaAttr::kPathRecord, m::kSlid);
  wire::PathRecord want;
  want.slid = la;
  encode_path_record(want, wire::sa_data(q));
  auto ans = f.model->ask_class(q);
  ASSERT_TRUE(ans.has_value());
  EXPECT_EQ(ans->mad.method, MadMethod::kGetTableResp);
  const wire::SaHeader h = wire::decode_sa_header(ans->mad);
  EXPECT_EQ(h.rmpp.flags, 7);
  EXPECT_EQ(h.rmpp.segment, 1u);
  // Three 64-byte records fit in 200 bytes; the subnet has more destinations.
  EXPECT_EQ(ans->length, wire::kSaDataOffset + 3 * 64);
  EXPECT_EQ(h.rmpp.payload_length, 20u + 3 * 64);
  for (unsigned i = 0; i < 3; ++i) {
    const auto pr = wire::decode_path_record(wire::sa_data(ans->mad).subspan(i * 64));
    EXPECT_EQ(pr.slid, la);
    EXPECT_NE(pr.dlid, la);
  }
  EXPECT_EQ(f.sm->sa().stats().truncated, 1u);
}

TEST(IbSa, UnknownGidIsRefusedWithIbasStatus) {
  SaFixture f;
  ASSERT_TRUE(f.sm->sweep().ok());
  namespace m = wire::pr_mask;
  wire::Mad q = f.request(MadMethod::kGet, SaAttr::kPathRecord, m::kSgid | m::kDgid);
  wire::PathRecord want;
  want.sgid = {kIbDefaultGidPrefix, f.model->guid(f.topo.nic_node(0)) + 1};
  want.dgid = {kIbDefaultGidPrefix, 0xdeadbeefull};
  encode_path_record(want, wire::sa_data(q));
  auto ans = f.model->ask_class(q);
  ASSERT_TRUE(ans.has_value());
  EXPECT_EQ(ans->mad.status, wire::sa_mad_status(wire::SaStatus::kInvalidGid));
  // The right GUID with another subnet's prefix: the same.
  want.dgid = {0xfec0000000000000ull, f.model->guid(f.topo.nic_node(1)) + 1};
  encode_path_record(want, wire::sa_data(q));
  ans = f.model->ask_class(q);
  ASSERT_TRUE(ans.has_value());
  EXPECT_EQ(ans->mad.status, wire::sa_mad_status(wire::SaStatus::kInvalidGid));
  // By GIDs that name ports: the path.
  want.dgid.prefix = kIbDefaultGidPrefix;
  encode_path_record(want, wire::sa_data(q));
  ans = f.model->ask_class(q);
  ASSERT_TRUE(ans.has_value());
  EXPECT_EQ(ans->mad.status, 0);
  EXPECT_EQ(wire::decode_path_record(wire::sa_data(ans->mad)).dlid,
            f.model->lid(f.topo.nic_node(1), 1));
}

TEST(IbSa, BadRequestsGetIbasStatusCodes) {
  SaFixture f;
  ASSERT_TRUE(f.sm->sweep().ok());
  wire::Mad q = f.request(MadMethod::kGet, SaAttr::kPathRecord, 0);
  q.class_version = 1;
  auto a = f.model->ask_class(q);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->mad.status, wire::kMadStatusBadVersion);
  q = f.request(MadMethod::kSend, SaAttr::kPathRecord, 0);
  a = f.model->ask_class(q);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->mad.status, wire::kMadStatusBadMethod);
  q = f.request(MadMethod::kGet, static_cast<SaAttr>(0x0099), 0);
  a = f.model->ask_class(q);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->mad.status, wire::kMadStatusBadMethodAttr);
  // Get of a table with many records: too many.
  q = f.request(MadMethod::kGet, SaAttr::kPathRecord, 0);
  a = f.model->ask_class(q);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->mad.status, wire::sa_mad_status(wire::SaStatus::kTooManyRecords));
  EXPECT_EQ(f.sm->sa().stats().refused, 4u);
  EXPECT_EQ(f.sm->sa().stats().answered, 0u);
}

TEST(IbSa, NodeAndPortInfoRecordsByLid) {
  SaFixture f;
  // A port that says IsSM (an SM process behind it that does not answer).
  const uint32_t other_sm = f.topo.nic_node(2);
  f.model->run_sm(other_sm, std::nullopt);
  ASSERT_TRUE(f.sm->sweep().ok());
  uint32_t sw = 0;
  while (f.topo.is_nic(sw)) ++sw;
  const uint16_t lid = f.model->lid(sw, 0);
  wire::Mad q = f.request(MadMethod::kGet, SaAttr::kNodeRecord, wire::nr_mask::kLid);
  wire::NodeRecord nr;
  nr.lid = lid;
  encode_node_record(nr, wire::sa_data(q));
  auto a = f.model->ask_class(q);
  ASSERT_TRUE(a.has_value());
  ASSERT_EQ(a->mad.status, 0);
  EXPECT_EQ(wire::decode_sa_header(a->mad).attribute_offset, 14);
  const wire::NodeRecord got = wire::decode_node_record(wire::sa_data(a->mad));
  EXPECT_EQ(got.lid, lid);
  EXPECT_EQ(got.info.node_guid, f.model->guid(sw));
  EXPECT_EQ(got.info.node_type, 2);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(got.description.data())), f.topo.name(sw));

  q = f.request(MadMethod::kGet, SaAttr::kPortInfoRecord,
                wire::pir_mask::kLid | wire::pir_mask::kPort);
  wire::PortInfoRecord pr;
  pr.lid = lid;
  pr.port = 1;
  encode_port_info_record(pr, wire::sa_data(q));
  a = f.model->ask_class(q);
  ASSERT_TRUE(a.has_value());
  ASSERT_EQ(a->mad.status, 0);
  const wire::PortInfoRecord pg = wire::decode_port_info_record(wire::sa_data(a->mad));
  EXPECT_EQ(pg.lid, lid);
  EXPECT_EQ(pg.port, 1);
  EXPECT_EQ(pg.info.port_state(), static_cast<uint8_t>(wire::IbPortState::kActive));

  // The SM's own port, found by its IsSM capability (saquery -s).
  q = f.request(MadMethod::kGetTable, SaAttr::kPortInfoRecord, wire::pir_mask::kCapabilityMask);
  pr = {};
  wire::put_be(std::span<uint8_t>(pr.info.raw), 20, 4, wire::kCapIsSm);
  encode_port_info_record(pr, wire::sa_data(q));
  a = f.model->ask_class(q);
  ASSERT_TRUE(a.has_value());
  ASSERT_EQ(a->length, wire::kSaDataOffset + wire::kPortInfoRecordBytes);
  pr = wire::decode_port_info_record(wire::sa_data(a->mad));
  EXPECT_EQ(pr.lid, f.model->lid(other_sm, 1));
  EXPECT_EQ(pr.port, 1);
}

TEST(IbSa, LinkRecordsAreEveryLinkBothWays) {
  SaFixture f;
  ASSERT_TRUE(f.sm->sweep().ok());
  // From a CA's LID: its one link, to the switch it is cabled to (named by the switch's LID).
  const uint32_t a = f.topo.nic_node(0);
  wire::Mad q = f.request(MadMethod::kGetTable, SaAttr::kLinkRecord, wire::lr_mask::kFromLid);
  wire::LinkRecord want;
  want.from_lid = f.model->lid(a, 1);
  encode_link_record(want, wire::sa_data(q));
  auto ans = f.model->ask_class(q);
  ASSERT_TRUE(ans.has_value());
  ASSERT_EQ(ans->mad.status, 0);
  EXPECT_EQ(wire::decode_sa_header(ans->mad).attribute_offset, 1);
  ASSERT_EQ(ans->length, wire::kSaDataOffset + 8);
  const wire::LinkRecord got = wire::decode_link_record(wire::sa_data(ans->mad));
  const auto peer = f.topo.peer({a, 0});  // IB port 1 is the topology's port 0
  ASSERT_TRUE(peer.has_value());
  const uint32_t sw = peer->node;
  const auto sw_port = static_cast<uint8_t>(peer->port + 1);
  EXPECT_EQ(got.from_port, 1);
  EXPECT_EQ(got.to_lid, f.model->lid(sw, 0));
  EXPECT_EQ(got.to_port, sw_port);

  // Towards that CA: the same link the other way.
  q = f.request(MadMethod::kGet, SaAttr::kLinkRecord, wire::lr_mask::kToLid);
  want = {};
  want.to_lid = f.model->lid(a, 1);
  encode_link_record(want, wire::sa_data(q));
  ans = f.model->ask_class(q);
  ASSERT_TRUE(ans.has_value());
  ASSERT_EQ(ans->mad.status, 0);
  EXPECT_EQ(wire::decode_link_record(wire::sa_data(ans->mad)),
            (wire::LinkRecord{f.model->lid(sw, 0), sw_port, 1, f.model->lid(a, 1)}));

  // Every link, both ways: twice the links, more than one MAD holds (24 records fit).
  q = f.request(MadMethod::kGetTable, SaAttr::kLinkRecord, 0);
  ans = f.model->ask_class(q);
  ASSERT_TRUE(ans.has_value());
  ASSERT_GT(f.topo.num_links() * 2, 25u);
  EXPECT_EQ(ans->length, wire::kSaDataOffset + 25 * 8);
  EXPECT_EQ(f.sm->sa().stats().truncated, 1u);
  // A LID nobody holds: nothing.
  q = f.request(MadMethod::kGet, SaAttr::kLinkRecord, wire::lr_mask::kFromLid);
  want = {};
  want.from_lid = 0xBFFF;
  encode_link_record(want, wire::sa_data(q));
  ans = f.model->ask_class(q);
  ASSERT_TRUE(ans.has_value());
  EXPECT_EQ(ans->mad.status, wire::sa_mad_status(wire::SaStatus::kNoRecords));
}

TEST(IbSa, ClassPortInfo) {
  SaFixture f;
  ASSERT_TRUE(f.sm->sweep().ok());
  wire::Mad q = f.request(MadMethod::kGet, SaAttr::kClassPortInfo, 0);
  auto a = f.model->ask_class(q);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->mad.status, 0);
  const auto c = wire::decode_class_port_info(wire::sa_data(a->mad));
  EXPECT_EQ(c.class_version, wire::kSaClassVersion);
  EXPECT_EQ(c.base_version, 1);
}

// A ServiceRecord of `f`'s first CA, named `name`.
wire::ServiceRecord service(const SaFixture& f, uint64_t id, const std::string& name) {
  wire::ServiceRecord r;
  r.id = id;
  r.gid = {kIbDefaultGidPrefix, f.model->guid(f.topo.nic_node(0)) + 1};
  std::copy(name.begin(), name.end(), r.name.begin());
  r.key[0] = 0x5A;
  r.data32[1] = 0xC0FFEE;
  return r;
}

std::optional<ib::GmpAnswer> service_request(SaFixture& f, MadMethod method, uint64_t mask,
                                             const wire::ServiceRecord& r, uint64_t sm_key = 0) {
  wire::Mad q = f.request(method, SaAttr::kServiceRecord, mask);
  wire::SaHeader h = wire::decode_sa_header(q);
  h.sm_key = sm_key;
  encode_sa_header(q, h);
  encode_service_record(r, wire::sa_data(q));
  return f.model->ask_class(q);
}

TEST(IbSaService, RegisterFindRenewAndDelete) {
  namespace m = wire::sr_mask;
  SaFixture f;
  ASSERT_TRUE(f.sm->sweep().ok());
  const wire::ServiceRecord a = service(f, 0x10, "alpha");
  auto ans = service_request(f, MadMethod::kSet, m::kId | m::kGid | m::kName, a);
  ASSERT_TRUE(ans.has_value());
  ASSERT_EQ(ans->mad.status, 0);
  EXPECT_EQ(ans->mad.method, MadMethod::kGetResp);
  wire::ServiceRecord held = wire::decode_service_record(wire::sa_data(ans->mad));
  EXPECT_EQ(held.lease, wire::kServiceLeaseInfinite);  // no lease named: infinite
  EXPECT_EQ(held.pkey, kIbDefaultPkey);                // no P_Key named: the default
  EXPECT_EQ(held.key, decltype(held.key){});           // an untrusted answer shows no key
  EXPECT_EQ(held.data32[1], 0xC0FFEEu);
  ASSERT_TRUE(service_request(f, MadMethod::kSet, m::kId | m::kGid, service(f, 0x20, "beta")));
  EXPECT_EQ(f.sm->sa().services().size(), 2u);

  // Found by name; the key only for a request with the SM_Key.
  wire::ServiceRecord want;
  const std::string beta = "beta";
  std::copy(beta.begin(), beta.end(), want.name.begin());
  ans = service_request(f, MadMethod::kGet, m::kName, want);
  ASSERT_TRUE(ans.has_value());
  ASSERT_EQ(ans->mad.status, 0);
  EXPECT_EQ(wire::decode_service_record(wire::sa_data(ans->mad)).id, 0x20u);
  ans = service_request(f, MadMethod::kGet, m::kId, a, IbSmOptions{}.sm_key);
  ASSERT_TRUE(ans.has_value());
  EXPECT_EQ(wire::decode_service_record(wire::sa_data(ans->mad)).key[0], 0x5A);
  // By a data component.
  want = {};
  want.data32[1] = 0xC0FFEE;
  ans = service_request(f, MadMethod::kGetTable, 1ull << (m::kData32Bit + 1), want);
  ASSERT_TRUE(ans.has_value());
  EXPECT_EQ(ans->length, wire::kSaDataOffset + wire::kServiceRecordBytes);  // one MAD holds one
  EXPECT_EQ(f.sm->sa().stats().truncated, 1u);

  // The same ServiceID, GID and P_Key renews rather than adds.
  wire::ServiceRecord again = a;
  again.data8[0] = 9;
  ASSERT_TRUE(service_request(f, MadMethod::kSet, m::kId | m::kGid, again));
  EXPECT_EQ(f.sm->sa().services().size(), 2u);
  EXPECT_EQ(f.sm->sa().services().front().record.data8[0], 9);

  // Delete answers with the record it removed; a second Delete finds none.
  ans = service_request(f, MadMethod::kDelete, m::kId | m::kGid, a);
  ASSERT_TRUE(ans.has_value());
  ASSERT_EQ(ans->mad.status, 0);
  EXPECT_EQ(ans->mad.method, MadMethod::kDeleteResp);
  EXPECT_EQ(wire::decode_service_record(wire::sa_data(ans->mad)).id, 0x10u);
  ans = service_request(f, MadMethod::kDelete, m::kId | m::kGid, a);
  ASSERT_TRUE(ans.has_value());
  EXPECT_EQ(ans->mad.status, wire::sa_mad_status(wire::SaStatus::kNoRecords));
  EXPECT_EQ(ans->mad.method, MadMethod::kDeleteResp);
  EXPECT_EQ(f.sm->sa().services().size(), 1u);
}

TEST(IbSaService, BadRegistrationsAreRefusedAndChangeNothing) {
  namespace m = wire::sr_mask;
  SaFixture f;
  ASSERT_TRUE(f.sm->sweep().ok());
  wire::ServiceRecord r = service(f, 0x10, "x");
  auto ans = service_request(f, MadMethod::kSet, m::kId, r);  // no ServiceGID
  ASSERT_TRUE(ans.has_value());
  EXPECT_EQ(ans->mad.status, wire::sa_mad_status(wire::SaStatus::kInsufficientComponents));
  r.gid.guid = 0xDEAD;  // no such port
  ans = service_request(f, MadMethod::kSet, m::kId | m::kGid, r);
  ASSERT_TRUE(ans.has_value());
  EXPECT_EQ(ans->mad.status, wire::sa_mad_status(wire::SaStatus::kInvalidGid));
  r = service(f, 0x10, "x");
  r.pkey = 0x8001;  // a partition the SM programs nowhere
  ans = service_request(f, MadMethod::kSet, m::kId | m::kGid | m::kPkey, r);
  ASSERT_TRUE(ans.has_value());
  EXPECT_EQ(ans->mad.status, wire::sa_mad_status(wire::SaStatus::kReqInvalid));
  // Delete of another attribute: not a method that attribute has.
  wire::Mad q = f.request(MadMethod::kDelete, SaAttr::kPathRecord, 0);
  ans = f.model->ask_class(q);
  ASSERT_TRUE(ans.has_value());
  EXPECT_EQ(ans->mad.status, wire::kMadStatusBadMethodAttr);
  EXPECT_TRUE(f.sm->sa().services().empty());
}

TEST(IbSaService, LeaseEnds) {
  namespace m = wire::sr_mask;
  SaFixture f;
  ASSERT_TRUE(f.sm->sweep().ok());
  wire::ServiceRecord r = service(f, 0x10, "short");
  r.lease = 1;
  ASSERT_TRUE(service_request(f, MadMethod::kSet, m::kId | m::kGid | m::kLease, r));
  auto ans = service_request(f, MadMethod::kGet, m::kId, r);
  ASSERT_TRUE(ans.has_value());
  EXPECT_EQ(ans->mad.status, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  ans = service_request(f, MadMethod::kGet, m::kId, r);
  ASSERT_TRUE(ans.has_value());
  EXPECT_EQ(ans->mad.status, wire::sa_mad_status(wire::SaStatus::kNoRecords));
  EXPECT_TRUE(f.sm->sa().services().empty());
}

}  // namespace
}  // namespace galaxy::nm

namespace galaxy::nm {
namespace {

// A port state change trap from switch LID `lid`, as ibsim sends one (IBA 14.2.5.1).
wire::Smp port_state_trap(uint16_t lid) {
  wire::Notice n;
  n.type = 1;  // urgent
  n.producer = 2;
  n.trap_number = 128;
  n.issuer_lid = lid;
  std::array<uint8_t, wire::kNoticeBytes> raw{};
  encode_notice(n, raw);
  wire::Smp trap;
  trap.directed = false;
  trap.method = MadMethod::kTrap;
  trap.attribute_id = static_cast<uint16_t>(wire::SmpAttr::kNotice);
  std::copy_n(raw.begin(), trap.data.size(), trap.data.begin());
  return trap;
}

wire::Mad inform_request(const SaFixture& f, bool subscribe, uint16_t trap_number) {
  wire::Mad q = f.request(MadMethod::kSet, SaAttr::kInformInfo, 0);
  wire::InformInfo i;
  i.subscribe = subscribe;
  i.trap_number = trap_number;
  encode_inform_info(i, wire::sa_data(q));
  return q;
}

TEST(IbSaInform, SubscriberGetsAReportOfEachTrap) {
  SaFixture f;
  ASSERT_TRUE(f.sm->sweep().ok());
  const uint32_t sub = f.topo.nic_node(3);
  const uint16_t sub_lid = f.model->lid(sub, 1);
  auto a = f.model->ask_class(inform_request(f, true, 128), {sub_lid, 1});
  ASSERT_TRUE(a.has_value());
  ASSERT_EQ(a->mad.status, 0);
  EXPECT_EQ(a->mad.method, MadMethod::kGetResp);
  EXPECT_TRUE(wire::decode_inform_info(wire::sa_data(a->mad)).subscribe);
  ASSERT_EQ(f.sm->sa().subscriptions().size(), 1u);
  EXPECT_EQ(f.sm->sa().subscriptions()[0].subscriber.guid, f.model->guid(sub) + 1);

  uint32_t sw = 0;
  while (f.topo.is_nic(sw)) ++sw;
  const uint16_t sw_lid = f.model->lid(sw, 0);
  f.model->sent_gmps.clear();
  auto repress = f.model->ask_sm(port_state_trap(sw_lid));
  ASSERT_TRUE(repress.has_value());
  EXPECT_EQ(repress->method, MadMethod::kTrapRepress);
  ASSERT_EQ(f.model->sent_gmps.size(), 1u);
  const auto& [report, dlid] = f.model->sent_gmps[0];
  EXPECT_EQ(dlid, sub_lid);
  EXPECT_EQ(report.mgmt_class, wire::MgmtClass::kSubnAdm);
  EXPECT_EQ(report.method, MadMethod::kReport);
  EXPECT_EQ(report.attribute_id, static_cast<uint16_t>(SaAttr::kNotice));
  const wire::Notice n = wire::decode_notice(wire::sa_data(report));
  EXPECT_EQ(n.trap_number, 128);
  EXPECT_EQ(n.issuer_lid, sw_lid);
  EXPECT_EQ(n.issuer_gid.guid, f.model->guid(sw));  // a switch's port GUID: its node GUID
  EXPECT_EQ(f.sm->sa().stats().reports, 1u);

  // Another trap number: not this subscription's.
  wire::Smp other = port_state_trap(sw_lid);
  other.data[5] = 144;
  f.model->sent_gmps.clear();
  (void)f.model->ask_sm(other);
  EXPECT_TRUE(f.model->sent_gmps.empty());

  // Listed as InformInfoRecord (saquery -I), then unsubscribed: no more Reports.
  wire::Mad q = f.request(MadMethod::kGetTable, SaAttr::kInformInfoRecord, 0);
  a = f.model->ask_class(q);
  ASSERT_TRUE(a.has_value());
  ASSERT_EQ(a->length, wire::kSaDataOffset + wire::kInformInfoRecordBytes);
  EXPECT_EQ(wire::decode_inform_info_record(wire::sa_data(a->mad)).info.trap_number, 128);
  a = f.model->ask_class(inform_request(f, false, 128), {sub_lid, 1});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->mad.status, 0);
  EXPECT_TRUE(f.sm->sa().subscriptions().empty());
  f.model->sent_gmps.clear();
  (void)f.model->ask_sm(port_state_trap(sw_lid));
  EXPECT_TRUE(f.model->sent_gmps.empty());
  // Unsubscribing again: nothing to remove, IBA's ERR_REQ_INVALID.
  a = f.model->ask_class(inform_request(f, false, 128), {sub_lid, 1});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->mad.status, wire::sa_mad_status(wire::SaStatus::kReqInvalid));
}

TEST(IbSaInform, BadSubscriptionsAreRefused) {
  SaFixture f;
  ASSERT_TRUE(f.sm->sweep().ok());
  const uint16_t sub_lid = f.model->lid(f.topo.nic_node(3), 1);
  // From a LID no port holds.
  auto a = f.model->ask_class(inform_request(f, true, 128), {0x7000, 1});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->mad.status, wire::sa_mad_status(wire::SaStatus::kReqInvalid));
  // Reports to a QP other than the GSI's.
  wire::Mad q = inform_request(f, true, 128);
  wire::InformInfo i = wire::decode_inform_info(wire::sa_data(q));
  i.qpn = 77;
  encode_inform_info(i, wire::sa_data(q));
  a = f.model->ask_class(q, {sub_lid, 1});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->mad.status, wire::sa_mad_status(wire::SaStatus::kReqInvalid));
  // The traps of a GID that is no port's.
  i.qpn = 1;
  i.gid = {kIbDefaultGidPrefix, 0xdeadbeef};
  encode_inform_info(i, wire::sa_data(q));
  a = f.model->ask_class(q, {sub_lid, 1});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->mad.status, wire::sa_mad_status(wire::SaStatus::kInvalidGid));
  EXPECT_TRUE(f.sm->sa().subscriptions().empty());
}

TEST(IbSaInform, NoisyPortIsQuieted) {
  SaFixture f;
  ASSERT_TRUE(f.sm->sweep().ok());
  const uint16_t sub_lid = f.model->lid(f.topo.nic_node(3), 1);
  ASSERT_EQ(
      f.model->ask_class(inform_request(f, true, wire::kInformAllTraps), {sub_lid, 1})->mad.status,
      0);
  uint32_t sw = 0;
  while (f.topo.is_nic(sw)) ++sw;
  const uint16_t sw_lid = f.model->lid(sw, 0);
  f.model->sent_gmps.clear();
  for (unsigned i = 0; i < kIbNoisyTrapLimit + 5; ++i) {
    auto r = f.model->ask_sm(port_state_trap(sw_lid));
    ASSERT_TRUE(r.has_value());  // every trap is answered
  }
  EXPECT_EQ(f.model->sent_gmps.size(), kIbNoisyTrapLimit);
  EXPECT_EQ(f.sm->sa().stats().suppressed, 5u);
  // A quiet port's traps still go through.
  f.model->sent_gmps.clear();
  (void)f.model->ask_sm(port_state_trap(f.model->lid(f.topo.nic_node(0), 1)));
  EXPECT_EQ(f.model->sent_gmps.size(), 1u);
}

}  // namespace
}  // namespace galaxy::nm
