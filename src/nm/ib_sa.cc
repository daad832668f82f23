#include "nm/ib_sa.h"

#include <algorithm>

namespace galaxy::nm {
namespace {

using wire::MadMethod;
using wire::SaAttr;
using wire::SaStatus;

// ClassPortInfo's RespTimeValue: the SA answers within 4.096 us x 2^18 (IBA 13.4.6.2).
constexpr uint8_t kSaRespTimeValue = 18;

// The method an answer carries (IBA 15.4.2, Table 203): GetResp for Get and Set, the table and
// delete answers their own.
MadMethod response_method(MadMethod request) {
  switch (request) {
    case MadMethod::kGetTable:
      return MadMethod::kGetTableResp;
    case MadMethod::kDelete:
      return MadMethod::kDeleteResp;
    default:
      return MadMethod::kGetResp;
  }
}

wire::Mad answer_to(const wire::Mad& request) {
  wire::Mad a;
  a.base_version = request.base_version;
  a.mgmt_class = request.mgmt_class;
  a.class_version = request.class_version;
  a.method = response_method(request.method);
  a.transaction_id = request.transaction_id;
  a.attribute_id = request.attribute_id;
  a.attribute_modifier = request.attribute_modifier;
  return a;
}

}  // namespace

void IbSubnetAdmin::publish(const IbSubnet& subnet, const IbRoutes& routes) {
  IbSaView v;
  v.subnet = subnet;
  v.routes = routes;
  v.by_lid.assign(size_t{routes.max_lid} + 1, IbEndpoint{});
  for (uint32_t n = 0; n < v.subnet.nodes.size(); ++n) {
    const IbNode& node = v.subnet.nodes[n];
    for (uint32_t p = 0; p < node.ports.size(); ++p) {
      const IbPort& port = node.ports[p];
      if (port.lid == 0) continue;
      if (port.lid >= v.by_lid.size()) v.by_lid.resize(size_t{port.lid} + 1, IbEndpoint{});
      v.by_lid[port.lid] = {n, static_cast<uint8_t>(p)};
      if (port.guid != 0) v.by_port_guid[port.guid] = {n, static_cast<uint8_t>(p)};
    }
  }
  if (v.subnet.sm_node < v.subnet.nodes.size()) {
    const IbNode& sm = v.subnet.nodes[v.subnet.sm_node];
    const uint32_t p = sm.is_switch() ? 0 : v.subnet.sm_port;
    if (p < sm.ports.size() && sm.ports[p].known && sm.ports[p].info.gid_prefix() != 0)
      v.gid_prefix = sm.ports[p].info.gid_prefix();
  }
  v.subscriptions = &subs_;
  v.services = &services_;
  view_ = std::move(v);
}

ib::GmpAnswer IbSubnetAdmin::refuse(const wire::Mad& request, uint16_t status) {
  ++stats_.refused;
  ib::GmpAnswer a;
  a.mad = answer_to(request);
  a.mad.status = status;
  wire::SaHeader h;
  encode_sa_header(a.mad, h);
  return a;
}

ib::GmpAnswer IbSubnetAdmin::inform(const wire::Mad& request, const ib::GmpSource& from) {
  const wire::InformInfo want = wire::decode_inform_info(wire::sa_data(request));
  // The subscriber is the port the request came from; Reports go to its QP1 (the GSI).
  const IbEndpoint who = view_->at_lid(from.lid);
  if (who.node == kNoIbNode) return refuse(request, wire::sa_mad_status(SaStatus::kReqInvalid));
  if (want.qpn != 1) return refuse(request, wire::sa_mad_status(SaStatus::kReqInvalid));
  if (want.gid != wire::Gid{} &&
      (want.gid.prefix != view_->gid_prefix || !view_->by_port_guid.contains(want.gid.guid)))
    return refuse(request, wire::sa_mad_status(SaStatus::kInvalidGid));
  const wire::Gid subscriber{view_->gid_prefix, view_->subnet.nodes[who.node].ports[who.port].guid};
  auto same = [&](const IbSubscription& s) {
    wire::InformInfo a = s.info, b = want;
    a.subscribe = b.subscribe = true;
    a.resp_time_value = b.resp_time_value = 0;
    return s.lid == from.lid && a == b;
  };
  auto it = std::find_if(subs_.begin(), subs_.end(), same);
  if (want.subscribe) {
    if (it == subs_.end()) {
      if (subs_.size() >= kIbMaxSubscriptions)
        return refuse(request, wire::sa_mad_status(SaStatus::kNoResources));
      subs_.push_back({subscriber, from.lid, next_enum_++, want});
    }
  } else {
    if (it == subs_.end()) return refuse(request, wire::sa_mad_status(SaStatus::kReqInvalid));
    subs_.erase(it);
  }
  ib::GmpAnswer a;
  a.mad = answer_to(request);
  wire::SaHeader h;
  h.attribute_offset = (wire::kInformInfoBytes + 7) / 8;
  encode_sa_header(a.mad, h);
  encode_inform_info(want, wire::sa_data(a.mad));
  ++stats_.answered;
  return a;
}

void IbSubnetAdmin::expire_services() {
  const auto now = std::chrono::steady_clock::now();
  std::erase_if(services_, [&](const IbService& s) { return s.expires && *s.expires <= now; });
}

// The answer to a ServiceRecord Set or Delete: the record as the SA now holds (or held) it.
ib::GmpAnswer IbSubnetAdmin::service_answer(const wire::Mad& request,
                                            const wire::ServiceRecord& r) {
  ib::GmpAnswer a;
  a.mad = answer_to(request);
  wire::SaHeader h;
  h.attribute_offset = wire::kServiceRecordBytes / 8;
  h.component_mask = wire::decode_sa_header(request).component_mask;
  encode_sa_header(a.mad, h);
  wire::ServiceRecord out = r;
  if (!trusted(request)) out.key = {};
  encode_service_record(out, wire::sa_data(a.mad));
  ++stats_.answered;
  return a;
}

bool IbSubnetAdmin::trusted(const wire::Mad& request) const {
  return sm_key_ != 0 && wire::decode_sa_header(request).sm_key == sm_key_;
}

// A service is named by its ServiceID, ServiceGID and ServiceP_Key (IBA 15.2.5.14); a request
// that names no P_Key means the default partition.
wire::ServiceRecord IbSubnetAdmin::named_service(const wire::Mad& request,
                                                 std::vector<IbService>::iterator& held) {
  wire::ServiceRecord r = wire::decode_service_record(wire::sa_data(request));
  if (!(wire::decode_sa_header(request).component_mask & wire::sr_mask::kPkey))
    r.pkey = kIbDefaultPkey;
  held = std::find_if(services_.begin(), services_.end(), [&](const IbService& x) {
    return x.record.id == r.id && x.record.gid == r.gid && x.record.pkey == r.pkey;
  });
  return r;
}

// A Set with a known name renews that record, with a new one registers another.
ib::GmpAnswer IbSubnetAdmin::register_service(const wire::Mad& request) {
  namespace m = wire::sr_mask;
  const uint64_t mask = wire::decode_sa_header(request).component_mask;
  if ((mask & (m::kId | m::kGid)) != (m::kId | m::kGid))
    return refuse(request, wire::sa_mad_status(SaStatus::kInsufficientComponents));
  std::vector<IbService>::iterator it;
  wire::ServiceRecord r = named_service(request, it);
  // A ServiceGID must name a port of this subnet (a service of no port cannot be reached).
  if (r.gid.prefix != view_->gid_prefix || !view_->by_port_guid.contains(r.gid.guid))
    return refuse(request, wire::sa_mad_status(SaStatus::kInvalidGid));
  if ((r.pkey & 0x7FFF) != (kIbDefaultPkey & 0x7FFF))
    return refuse(request, wire::sa_mad_status(SaStatus::kReqInvalid));  // no such partition
  if (!(mask & m::kLease)) r.lease = wire::kServiceLeaseInfinite;
  IbService s{r, std::nullopt};
  if (r.lease != wire::kServiceLeaseInfinite)
    s.expires = std::chrono::steady_clock::now() + std::chrono::seconds(r.lease);
  if (it != services_.end()) {
    *it = s;
  } else {
    if (services_.size() >= kIbMaxServices)
      return refuse(request, wire::sa_mad_status(SaStatus::kNoResources));
    services_.push_back(s);
  }
  return service_answer(request, r);
}

ib::GmpAnswer IbSubnetAdmin::delete_service(const wire::Mad& request) {
  std::vector<IbService>::iterator it;
  (void)named_service(request, it);
  if (it == services_.end()) return refuse(request, wire::sa_mad_status(SaStatus::kNoRecords));
  const wire::ServiceRecord gone = it->record;
  services_.erase(it);
  return service_answer(request, gone);
}

bool IbSubnetAdmin::noisy(const wire::Notice& notice) {
  const auto now = std::chrono::steady_clock::now();
  auto& times = recent_[uint32_t{notice.issuer_lid} << 16 | notice.trap_number];
  std::erase_if(times, [&](auto t) { return now - t > std::chrono::seconds(kIbNoisyTrapWindowS); });
  times.push_back(now);
  return times.size() > kIbNoisyTrapLimit;
}

IbTrapOutcome IbSubnetAdmin::on_trap(const wire::Notice& notice) {
  IbTrapOutcome out;
  if (!view_) return out;
  ++stats_.traps;
  if (noisy(notice)) {
    ++stats_.suppressed;
    out.noisy = true;
    return out;
  }
  wire::Notice n = notice;
  if (IbEndpoint e = view_->at_lid(n.issuer_lid); e.node != kNoIbNode)
    n.issuer_gid = {view_->gid_prefix, view_->subnet.nodes[e.node].ports[e.port].guid};
  for (const IbSubscription& s : subs_) {
    const wire::InformInfo& i = s.info;
    if (i.is_generic != n.is_generic) continue;
    if (i.trap_number != wire::kInformAllTraps && i.trap_number != n.trap_number) continue;
    if (i.type != wire::kInformAllTraps && i.type != n.type) continue;
    if (i.producer != wire::kInformAllProducers && i.producer != n.producer) continue;
    if (i.gid != wire::Gid{} && i.gid.guid != n.issuer_gid.guid) continue;
    if (i.gid == wire::Gid{} && i.lid_begin != 0xFFFF &&
        (n.issuer_lid < i.lid_begin || n.issuer_lid > i.lid_end))
      continue;
    IbTrapOutcome::Report r;
    r.dlid = s.lid;
    r.mad.mgmt_class = wire::MgmtClass::kSubnAdm;
    r.mad.class_version = wire::kSaClassVersion;
    r.mad.method = MadMethod::kReport;
    r.mad.attribute_id = static_cast<uint16_t>(SaAttr::kNotice);
    r.mad.transaction_id = kIbReportTidBase | (next_report_++ & 0x3FFFFFFFu);
    wire::SaHeader h;
    h.attribute_offset = wire::kNoticeBytes / 8;
    encode_sa_header(r.mad, h);
    encode_notice(n, wire::sa_data(r.mad));
    out.reports.push_back(std::move(r));
    ++stats_.reports;
  }
  return out;
}

std::optional<ib::GmpAnswer> IbSubnetAdmin::handle(const wire::Mad& request,
                                                   const ib::GmpSource& from) {
  if (!view_) return std::nullopt;
  ++stats_.requests;
  if (request.class_version != wire::kSaClassVersion)
    return refuse(request, wire::kMadStatusBadVersion);
  if (request.method == MadMethod::kSet &&
      request.attribute_id == static_cast<uint16_t>(SaAttr::kInformInfo))
    return inform(request, from);
  if (request.attribute_id == static_cast<uint16_t>(SaAttr::kServiceRecord)) {
    expire_services();
    if (request.method == MadMethod::kSet) return register_service(request);
    if (request.method == MadMethod::kDelete) return delete_service(request);
  }
  if (request.method == MadMethod::kSet || request.method == MadMethod::kDelete)
    return refuse(request, wire::kMadStatusBadMethodAttr);
  if (request.method != MadMethod::kGet && request.method != MadMethod::kGetTable)
    return refuse(request, wire::kMadStatusBadMethod);

  if (request.attribute_id == static_cast<uint16_t>(SaAttr::kClassPortInfo)) {
    if (request.method != MadMethod::kGet) return refuse(request, wire::kMadStatusBadMethodAttr);
    ib::GmpAnswer a;
    a.mad = answer_to(request);
    wire::SaHeader h;
    h.attribute_offset = wire::kClassPortInfoBytes / 8;
    encode_sa_header(a.mad, h);
    wire::ClassPortInfo c;
    c.class_version = wire::kSaClassVersion;
    c.resp_time_value = kSaRespTimeValue;
    encode_class_port_info(c, wire::sa_data(a.mad));
    ++stats_.answered;
    return a;
  }

  const auto attrs = ib_sa_attributes();
  const auto it = std::find_if(attrs.begin(), attrs.end(), [&](const IbSaAttribute& x) {
    return static_cast<uint16_t>(x.attr) == request.attribute_id;
  });
  if (it == attrs.end()) return refuse(request, wire::kMadStatusBadMethodAttr);

  const wire::SaHeader in = wire::decode_sa_header(request);
  const unsigned stride = (it->record_bytes + 7) / 8 * 8;
  const size_t fit = wire::kSaDataBytes / stride;
  // One more than fits (or than a Get takes) tells a cut answer from a whole one.
  const size_t max = request.method == MadMethod::kGet ? 2 : fit + 1;
  std::vector<uint8_t> records;
  const IbSaQueryArgs q{wire::sa_data(request), in.component_mask, max, trusted(request)};
  const SaStatus st = it->query(*view_, q, records);
  if (st != SaStatus::kOk) return refuse(request, wire::sa_mad_status(st));
  size_t n = records.size() / stride;
  if (request.method == MadMethod::kGet && n != 1)
    return refuse(request,
                  wire::sa_mad_status(n == 0 ? SaStatus::kNoRecords : SaStatus::kTooManyRecords));

  ib::GmpAnswer a;
  wire::SaHeader h;
  h.attribute_offset = static_cast<uint16_t>(stride / 8);
  h.component_mask = in.component_mask;
  a.mad = answer_to(request);
  if (request.method == MadMethod::kGetTable) {
    if (n > fit) {
      // One MAD's worth: the transport carries no more (ibsim's has no RMPP segmentation).
      ++stats_.truncated;
      n = fit;
    }
    h.rmpp.version = wire::kRmppVersion;
    h.rmpp.type = wire::kRmppTypeData;
    h.rmpp.flags = wire::kRmppFlagActive | wire::kRmppFlagFirst | wire::kRmppFlagLast;
    h.rmpp.resp_time = 0x1F;  // none given
    h.rmpp.segment = 1;
    h.rmpp.payload_length =
        static_cast<uint32_t>(wire::kSaDataOffset - wire::kSaHeaderOffset + n * stride);
    a.length = static_cast<unsigned>(wire::kSaDataOffset + n * stride);
  }
  encode_sa_header(a.mad, h);
  std::copy_n(records.begin(), n * stride, wire::sa_data(a.mad).begin());
  ++stats_.answered;
  return a;
}

}  // namespace galaxy::nm
