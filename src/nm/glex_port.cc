#include "nm/glex_port.h"

#include <fmt/format.h>

#include <memory>

namespace galaxy::nm {

Result<std::unique_ptr<GlexMgmtPort>> GlexMgmtPort::open(glex_device_handle_t device, int32_t vp) {
  glex_ep_attr attr{vp};
  glex_ep_handle_t ep = nullptr;
  glex_ret_t r = glex_create_ep(device, &attr, &ep);
  if (r != GLEX_SUCCESS)
    return make_error(
        Code::kResourceExhausted, 5010,
        fmt::format("glex_create_ep: {}: {}", glex_error_string(r), glex_last_error()));
  return std::unique_ptr<GlexMgmtPort>(new GlexMgmtPort(device, ep));
}

GlexMgmtPort::~GlexMgmtPort() {
  glex_destroy_ep(ep_);
}

wire::ChipId GlexMgmtPort::server_chip_id() const {
  return static_cast<wire::ChipId>(glex_device_node(device_));
}
uint8_t GlexMgmtPort::server_vp() const {
  return static_cast<uint8_t>(glex_ep_vp(ep_));
}

Status GlexMgmtPort::send(const MgmtRequest& request, uint16_t transaction_id) {
  glex_mgmt_info info{};
  info.dest_id = request.target.chip_id;
  info.dest_type = static_cast<uint8_t>(request.target.type);
  info.transaction_id = transaction_id;
  info.forward_route.hop_num = request.target.forward.hop_num;
  info.backward_route.hop_num = request.target.backward.hop_num;
  for (int i = 0; i < GLEX_MGMT_MAX_HOPS; ++i) {
    info.forward_route.hops[i] = request.target.forward.hops[i];
    info.backward_route.hops[i] = request.target.backward.hops[i];
  }
  info.nmp_type = static_cast<uint8_t>(request.type);
  info.count = request.data.count;
  for (int i = 0; i < 6; ++i) {
    info.address[i] = request.data.address[i];
    info.bytes[i] = request.data.bytes[i];
  }
  info.value[0] = request.data.value[0];
  info.value[1] = request.data.value[1];
  info.m_key = request.m_key;
  info.dest_vp = request.dest_vp;
  info.sm_guid = request.data.sm.guid;
  info.sm_act_count = request.data.sm.act_count;
  info.sm_priority = request.data.sm.priority;
  info.sm_state = request.data.sm.state;
  info.sm_control = request.data.sm.control;
  info.sm_successor_id = request.data.sm.successor_chip;
  info.sm_successor_vp = request.data.sm.successor_vp;
  glex_ret_t r = glex_send_mgmt_req(ep_, &info, 0);
  if (r != GLEX_SUCCESS)
    return make_error(r == GLEX_NO_RESOURCE ? Code::kResourceExhausted : Code::kInvalidArgument,
                      5011,
                      fmt::format("glex_send_mgmt_req to chip {}: {}: {}", request.target.chip_id,
                                  glex_error_string(r), glex_last_error()));
  return {};
}

Result<wire::MgmtPacket> GlexMgmtPort::receive(Picoseconds timeout) {
  glex_mgmt_info a{};
  glex_ret_t r = glex_receive_mgmt_ack_ps(ep_, timeout, &a);
  if (r != GLEX_SUCCESS)
    return make_error(
        r == GLEX_TIMEOUT ? Code::kTimeout : Code::kMalformed, 5013,
        fmt::format("glex_receive_mgmt_ack: {}: {}", glex_error_string(r), glex_last_error()));
  wire::MgmtPacket p;
  p.dest_id = a.dest_id;
  p.dest_type = static_cast<wire::ChipType>(a.dest_type);
  p.dest_vp = a.dest_vp;
  p.src_id = a.src_id;
  p.src_type = static_cast<wire::ChipType>(a.src_type);
  p.src_vp = a.src_vp;
  p.transaction_id = a.transaction_id;
  for (uint8_t i = 0; i < a.forward_route.hop_num; ++i)
    (void)p.forward_route.push(a.forward_route.hops[i]);
  for (uint8_t i = 0; i < a.backward_route.hop_num; ++i)
    (void)p.backward_route.push(a.backward_route.hops[i]);
  p.nmp_type = static_cast<wire::NmpType>(a.nmp_type);
  p.m_key = a.m_key;
  p.lint = a.lint != 0;
  p.rint = a.rint != 0;
  p.data.count = a.count;
  for (int i = 0; i < 6; ++i) {
    p.data.address[i] = a.address[i];
    p.data.bytes[i] = a.bytes[i];
  }
  p.data.value[0] = a.value[0];
  p.data.value[1] = a.value[1];
  p.data.error = static_cast<wire::NmpError>(a.error);
  p.data.error_address = a.error_address;
  p.data.fault_code = a.fault_code;
  p.data.fault_port = a.fault_port;
  p.data.fault_severity = a.fault_severity;
  p.data.fault_detail = a.fault_detail;
  p.data.sm = {a.sm_guid,    a.sm_act_count,    a.sm_priority,    a.sm_state,
               a.sm_control, a.sm_successor_id, a.sm_successor_vp};
  return p;
}

Picoseconds GlexMgmtPort::now() const {
  return glex_time_ps(device_);
}

Result<uint64_t> GlexMgmtPort::read_local_register(uint16_t addr) {
  uint64_t v = 0;
  if (glex_read_local_reg(device_, addr, &v) != GLEX_SUCCESS)
    return make_error(Code::kOutOfRange, 5014, glex_last_error());
  return v;
}

}  // namespace galaxy::nm
