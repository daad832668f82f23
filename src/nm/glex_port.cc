#include "nm/glex_port.h"

#include <fmt/format.h>

#include <memory>

#include "glex/device.h"

namespace galaxy::nm {

Result<std::unique_ptr<GlexMgmtPort>> GlexMgmtPort::open(glex_device_handle_t device, int32_t vp) {
  glex_ep_attr attr{vp};
  glex_ep_handle_t ep = nullptr;
  glex_ret_t r = glex_create_ep(device, &attr, &ep);
  if (r != GLEX_SUCCESS)
    return make_error(
        Code::kResourceExhausted, 5010,
        fmt::format("glex_create_ep: {}: {}", glex_error_string(r), glex_last_error()));
  return std::unique_ptr<GlexMgmtPort>(new GlexMgmtPort(ep));
}

GlexMgmtPort::~GlexMgmtPort() {
  glex_destroy_ep(ep_);
}

uint16_t GlexMgmtPort::server_chip_id() const {
  return ep_->device->chip_id();
}
uint8_t GlexMgmtPort::server_vp() const {
  return ep_->vp;
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
  glex_ret_t r = glex_send_mgmt_req(ep_, &info, 0);
  if (r != GLEX_SUCCESS)
    return make_error(r == GLEX_NO_RESOURCE ? Code::kResourceExhausted : Code::kInvalidArgument,
                      5011,
                      fmt::format("glex_send_mgmt_req to chip {}: {}: {}", request.target.chip_id,
                                  glex_error_string(r), glex_last_error()));
  return {};
}

Result<wire::MgmtPacket> GlexMgmtPort::receive(Picoseconds timeout) {
  // The C API counts milliseconds; the management logic needs finer timeouts, so it uses the
  // device directly (the C call is the same code path with timeout_ms x 10^9 ps).
  return ep_->device->wait_mgmt(ep_->vp, timeout);
}

Picoseconds GlexMgmtPort::now() const {
  return ep_->device->now_ps();
}

Result<uint64_t> GlexMgmtPort::read_local_register(uint16_t addr) {
  return ep_->device->read_local_register(addr);
}

}  // namespace galaxy::nm
