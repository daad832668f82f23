#include "chip/nma.h"

#include "base/bits.h"
#include "chip/chip.h"

namespace galaxy::chip {

using wire::MgmtPacket;
using wire::NmpError;
using wire::NmpType;

Nma::Nma(Chip& chip) : chip_(chip) {}

const std::array<Nma::Handler, 64>& Nma::handlers() {
  static const std::array<Handler, 64> table = [] {
    std::array<Handler, 64> t;
    t.fill(&Nma::on_not_a_request);
    t[static_cast<uint8_t>(NmpType::kRegReadRequest)] = &Nma::on_reg_read;
    t[static_cast<uint8_t>(NmpType::kRegWriteRequest)] = &Nma::on_reg_write;
    t[static_cast<uint8_t>(NmpType::kEepromReadRequest)] = &Nma::on_eeprom_read;
    t[static_cast<uint8_t>(NmpType::kEepromWriteRequest)] = &Nma::on_eeprom_write;
    return t;
  }();
  return table;
}

Result<NmaOutcome> Nma::process(std::span<const uint8_t> packet, uint64_t now_ps) {
  now_ps_ = now_ps;
  auto decoded = wire::decode_mgmt_packet(packet);
  if (!decoded.ok()) return decoded.error();
  const MgmtPacket& req = *decoded;

  NmaOutcome out;
  bool id_matches = req.dest_id == wire::kUnconfiguredId ||
                    (chip_.configured() && req.dest_id == chip_.chip_id());
  bool is_nrc = chip_.type() == wire::ChipType::kNrc;
  // A response needs a way back: an NRC sends it out of backward hop 0.
  bool has_way_back = !is_nrc || req.backward_route.hop_num >= 1;
  if (!id_matches || req.dest_type != chip_.type() || !has_way_back) {
    ++chip_.nma_dropped_;
    out.dropped = true;
    return out;
  }
  ++chip_.nma_requests_;

  MgmtPacket resp;
  resp.dest_id = req.src_id;
  resp.dest_type = req.src_type;
  resp.src_id = chip_.chip_id();
  resp.src_type = chip_.type();
  resp.dest_vp = req.dest_vp;
  resp.src_vp = req.src_vp;
  resp.lint = req.lint;
  resp.rint = req.rint;
  resp.transaction_id = req.transaction_id;
  resp.forward_route = req.forward_route;
  resp.backward_route = req.backward_route;
  (this->*handlers()[static_cast<uint8_t>(req.nmp_type) & 63])(req, resp, out.work);
  if (resp.nmp_type == NmpType::kRegError || resp.nmp_type == NmpType::kEepromError)
    ++chip_.nma_errors_;

  // The response takes backward hop 0 out of this NRC (docs/system.md 2.4 "generate").
  resp.hop_count = is_nrc ? 1 : 0;
  out.response.port = is_nrc ? req.backward_route.hops[0] : 0;
  auto bytes = wire::encode_mgmt_packet(resp);
  if (!bytes.ok()) {  // cannot happen for fields copied from a decoded packet
    ++chip_.nma_dropped_;
    out.dropped = true;
    return out;
  }
  out.response.bytes = *bytes;
  out.response_type = resp.nmp_type;
  return out;
}

void Nma::reject(const MgmtPacket& req, MgmtPacket& resp, NmaWork& work, NmpError error,
                 uint16_t address) {
  resp.nmp_type = wire::is_eeprom(req.nmp_type) ? NmpType::kEepromError : NmpType::kRegError;
  resp.data = {};
  resp.data.error = error;
  resp.data.error_address = address;
  work.kind = NmaWork::Kind::kRejected;
  work.count = 0;
}

void Nma::on_not_a_request(const MgmtPacket& req, MgmtPacket& resp, NmaWork& work) {
  reject(req, resp, work, NmpError::kUnknownType, static_cast<uint16_t>(req.nmp_type));
}

void Nma::on_reg_read(const MgmtPacket& req, MgmtPacket& resp, NmaWork& work) {
  if (req.data.count < 1 || req.data.count > wire::kMaxRegistersPerPacket)
    return reject(req, resp, work, NmpError::kBadLength, req.data.count);
  if (!chip_.key_allows(false, req.m_key, now_ps_))
    return reject(req, resp, work, NmpError::kWrongKey, req.data.address[0]);
  resp.nmp_type = NmpType::kRegReadResponse;
  resp.data.count = req.data.count;
  for (uint8_t i = 0; i < req.data.count; ++i) {
    RegAccess a = chip_.read_register(req.data.address[i]);
    if (a.error != NmpError::kNone) return reject(req, resp, work, a.error, req.data.address[i]);
    resp.data.address[i] = req.data.address[i];
    resp.data.value[i] = a.value;
  }
  work = {NmaWork::Kind::kRegRead, req.data.count};
}

void Nma::on_reg_write(const MgmtPacket& req, MgmtPacket& resp, NmaWork& work) {
  if (req.data.count < 1 || req.data.count > wire::kMaxRegistersPerPacket)
    return reject(req, resp, work, NmpError::kBadLength, req.data.count);
  if (!chip_.key_allows(true, req.m_key, now_ps_))
    return reject(req, resp, work, NmpError::kWrongKey, req.data.address[0]);
  // All or nothing: every register is checked before any is written. Checks depend only on the
  // value written (RT_DATA checks its port set, not the selection), so a packet carrying
  // RT_SELECT then RT_DATA is validated correctly before either is applied.
  for (uint8_t i = 0; i < req.data.count; ++i) {
    NmpError e = chip_.check_write(req.data.address[i], req.data.value[i]);
    if (e != NmpError::kNone) return reject(req, resp, work, e, req.data.address[i]);
  }
  for (uint8_t i = 0; i < req.data.count; ++i)
    chip_.write_register(req.data.address[i], req.data.value[i]);
  resp.nmp_type = NmpType::kRegWriteResponse;
  resp.data.count = req.data.count;
  for (uint8_t i = 0; i < req.data.count; ++i) resp.data.address[i] = req.data.address[i];
  work = {NmaWork::Kind::kRegWrite, req.data.count};
}

void Nma::on_eeprom_read(const MgmtPacket& req, MgmtPacket& resp, NmaWork& work) {
  if (req.data.count < 1 || req.data.count > wire::kMaxEepromBytesPerPacket)
    return reject(req, resp, work, NmpError::kBadLength, req.data.count);
  if (!chip_.key_allows(false, req.m_key, now_ps_))
    return reject(req, resp, work, NmpError::kWrongKey, req.data.address[0]);
  resp.nmp_type = NmpType::kEepromReadResponse;
  resp.data.count = req.data.count;
  for (uint8_t i = 0; i < req.data.count; ++i) {
    resp.data.address[i] = req.data.address[i];
    resp.data.bytes[i] = chip_.eeprom().read(req.data.address[i]);
  }
  work = {NmaWork::Kind::kEepromRead, req.data.count};
}

void Nma::on_eeprom_write(const MgmtPacket& req, MgmtPacket& resp, NmaWork& work) {
  if (req.data.count < 1 || req.data.count > wire::kMaxEepromBytesPerPacket)
    return reject(req, resp, work, NmpError::kBadLength, req.data.count);
  if (!chip_.key_allows(true, req.m_key, now_ps_))
    return reject(req, resp, work, NmpError::kWrongKey, req.data.address[0]);
  resp.nmp_type = NmpType::kEepromWriteResponse;
  resp.data.count = req.data.count;
  for (uint8_t i = 0; i < req.data.count; ++i) {
    chip_.eeprom().write(req.data.address[i], req.data.bytes[i]);
    resp.data.address[i] = req.data.address[i];
  }
  work = {NmaWork::Kind::kEepromWrite, req.data.count};
}

bool Nma::queue_fault_report(FaultCode code, uint8_t port, uint32_t detail) {
  // The server programs the way back (FAULT_ROUTE_LO/HI/EXT) and itself (FAULT_DEST) before it
  // enables reporting; without a valid route there is nowhere to send a report.
  std::array<uint8_t, 14> route_bits{};
  put_bits(route_bits, 0, 64, chip_.fault_route_lo_);
  put_bits(route_bits, 64, 41, chip_.fault_route_hi_);
  auto route = wire::decode_source_route(route_bits, 0);
  bool is_nrc = chip_.type() == wire::ChipType::kNrc;
  if (!route.ok() || (is_nrc && route->hop_num == 0)) return false;
  // FAULT_ROUTE_EXT: the route's extension (wire/source_route.h: its high bits, or its hops
  // beyond 20).
  std::array<uint8_t, 8> ext_bits{};
  put_bits(ext_bits, 0, wire::kSourceRouteExtBits, chip_.fault_route_ext_);
  if (!wire::decode_source_route_ext(*route, ext_bits, 0).ok()) return false;

  MgmtPacket p;
  p.nmp_type = NmpType::kFaultReport;
  p.dest_id = reg::fault_dest_nic(chip_.fault_dest_);
  p.dest_type = wire::ChipType::kNic;
  p.dest_vp = reg::fault_dest_vp(chip_.fault_dest_);
  p.src_id = chip_.chip_id();
  p.src_type = chip_.type();
  // The report's sequence number is the chip's count of reports sent before it (FAULTS_REPORTED,
  // counted by the caller once this one is queued): the server finds lost reports by it.
  p.transaction_id = static_cast<uint16_t>(chip_.faults_reported_);
  p.backward_route = *route;
  p.hop_count = is_nrc ? 1 : 0;
  p.data.fault_code = static_cast<uint8_t>(code);
  p.data.fault_port = port;
  p.data.fault_severity = static_cast<uint8_t>(fault_severity(code));
  p.data.fault_detail = detail;
  auto bytes = wire::encode_mgmt_packet(p);
  if (!bytes.ok()) return false;
  reports_.push_back({is_nrc ? route->hops[0] : uint8_t{0}, *bytes, true});
  return true;
}

std::optional<NmaOutput> Nma::pop_output() {
  auto& q = !responses_.empty() ? responses_ : reports_;
  if (q.empty()) return std::nullopt;
  NmaOutput o = q.front();
  q.pop_front();
  return o;
}

}  // namespace galaxy::chip
