// The C API of include/glex.h over a glex_device.
#include "glex.h"

#include <fmt/format.h>

#include <cstring>
#include <string>

#include "chip/nic.h"
#include "glex/device.h"

namespace {

thread_local std::string g_last_error;

glex_ret_t fail(glex_ret_t ret, const galaxy::Error& e) {
  g_last_error = e.to_string();
  return ret;
}

glex_ret_t fail(glex_ret_t ret, std::string message) {
  g_last_error = std::move(message);
  return ret;
}

bool to_route(const glex_route& in, galaxy::wire::SourceRoute* out, const char* field) {
  if (in.hop_num > GLEX_MGMT_MAX_HOPS) {
    g_last_error = fmt::format("{}.hop_num = {} exceeds {}", field, in.hop_num, GLEX_MGMT_MAX_HOPS);
    return false;
  }
  *out = {};
  for (uint8_t i = 0; i < in.hop_num; ++i) {
    if (!out->push(in.hops[i]).ok()) {
      g_last_error = fmt::format("{}.hops[{}] = {} exceeds port {}", field, i, in.hops[i],
                                 galaxy::kMaxSwitchPorts - 1);
      return false;
    }
  }
  if (!out->carried()) {
    g_last_error = fmt::format(
        "{}: {} hops through a port above 31: a route of more than 20 "
        "hops names ports up to 31 only",
        field, in.hop_num);
    return false;
  }
  return true;
}

void from_route(const galaxy::wire::SourceRoute& in, glex_route* out) {
  out->hop_num = in.hop_num;
  for (int i = 0; i < GLEX_MGMT_MAX_HOPS; ++i) out->hops[i] = in.hops[i];
}

}  // namespace

namespace galaxy::glex {
glex_ret_t set_error(glex_ret_t ret, std::string message) {
  g_last_error = std::move(message);
  return ret;
}
}  // namespace galaxy::glex

extern "C" {

glex_ret_t glex_create_ep(glex_device_handle_t dev, const struct glex_ep_attr* attr,
                          glex_ep_handle_t* ep) {
  if (!dev || !ep)
    return fail(GLEX_INVALID_PARAM, "glex_create_ep: device and ep must not be NULL");
  if (attr && attr->vp < -1)
    return fail(GLEX_INVALID_PARAM,
                fmt::format("E6135 glex_create_ep: vp = {} (a VP 0-39, or -1 for any)", attr->vp));
  auto vp = dev->open_vp(attr ? attr->vp : -1);
  if (!vp.ok())
    return fail(
        vp.error().code == galaxy::Code::kOutOfRange ? GLEX_INVALID_PARAM : GLEX_NO_RESOURCE,
        vp.error());
  *ep = new glex_ep{dev, *vp, 0};
  return GLEX_SUCCESS;
}

glex_ret_t glex_destroy_ep(glex_ep_handle_t ep) {
  if (!ep) return fail(GLEX_INVALID_PARAM, "glex_destroy_ep: ep is NULL");
  ep->device->close_vp(ep->vp);
  delete ep;
  return GLEX_SUCCESS;
}

uint32_t glex_ep_vp(glex_ep_handle_t ep) {
  return ep ? ep->vp : 0;
}

glex_ret_t glex_send_mgmt_req(glex_ep_handle_t ep, struct glex_mgmt_info* req, int32_t flag) {
  using namespace galaxy;
  if (!ep || !req)
    return fail(GLEX_INVALID_PARAM, "glex_send_mgmt_req: ep and req must not be NULL");
  if (flag & ~(GLEX_MGMT_FENCE | GLEX_MGMT_INTERRUPT | GLEX_MGMT_AUTO_TID))
    return fail(GLEX_INVALID_PARAM,
                fmt::format("glex_send_mgmt_req: flag = 0x{:x} has unknown bits", flag));
  if (req->dest_type > GLEX_CHIP_NRC)
    return fail(GLEX_INVALID_PARAM,
                fmt::format("dest_type = {} is neither NIC (0) nor NRC (1)", req->dest_type));
  if (!wire::is_valid_nmp_type(req->nmp_type) ||
      !wire::host_may_send(static_cast<wire::NmpType>(req->nmp_type)))
    return fail(
        GLEX_INVALID_PARAM,
        fmt::format("nmp_type = 0x{:02x} is neither a request type nor SMInfo", req->nmp_type));
  const bool sm_info = wire::is_sm_info(static_cast<wire::NmpType>(req->nmp_type));
  if (sm_info && req->dest_vp >= galaxy::chip::kNumVps)
    return fail(GLEX_INVALID_PARAM, fmt::format("SMInfo dest_vp = {} exceeds the {} VPs",
                                                req->dest_vp, galaxy::chip::kNumVps));
  wire::MgmtDescriptor d;
  d.dest_id = req->dest_id;
  d.dest_type = static_cast<wire::ChipType>(req->dest_type);
  d.dest_vp = sm_info ? req->dest_vp : ep->vp;  // SMInfo: the other server's VP
  d.src_vp = ep->vp;
  d.fen = flag & GLEX_MGMT_FENCE;
  d.rint = (flag & GLEX_MGMT_INTERRUPT) || req->rint;
  d.lint = req->lint;
  if (flag & GLEX_MGMT_AUTO_TID) req->transaction_id = ep->next_tid++;  // wraps at 65,536
  d.transaction_id = req->transaction_id;
  if (!to_route(req->forward_route, &d.forward_route, "forward_route") ||
      !to_route(req->backward_route, &d.backward_route, "backward_route"))
    return GLEX_INVALID_PARAM;
  d.nmp_type = static_cast<wire::NmpType>(req->nmp_type);
  d.m_key = req->m_key;
  d.data.count = req->count;
  for (int i = 0; i < 6; ++i) {
    d.data.address[i] = req->address[i];
    d.data.bytes[i] = req->bytes[i];
  }
  d.data.value[0] = req->value[0];
  d.data.value[1] = req->value[1];
  d.data.sm = {req->sm_guid,    req->sm_act_count,    req->sm_priority,    req->sm_state,
               req->sm_control, req->sm_successor_id, req->sm_successor_vp};
  req->dest_vp = d.dest_vp;
  req->src_vp = ep->vp;
  Status s = ep->device->post_mgmt(ep->vp, d);
  if (!s.ok())
    return fail(
        s.error().code == Code::kResourceExhausted ? GLEX_NO_RESOURCE : GLEX_DESCRIPTOR_ERROR,
        s.error());
  return GLEX_SUCCESS;
}

glex_ret_t glex_receive_mgmt_ack(glex_ep_handle_t ep, int32_t timeout_ms,
                                 struct glex_mgmt_info* ack) {
  if (timeout_ms < 0)
    return fail(GLEX_INVALID_PARAM, fmt::format("timeout_ms = {} is negative", timeout_ms));
  return glex_receive_mgmt_ack_ps(ep, static_cast<uint64_t>(timeout_ms) * 1000000000ull, ack);
}

glex_ret_t glex_receive_mgmt_ack_ps(glex_ep_handle_t ep, uint64_t timeout_ps,
                                    struct glex_mgmt_info* ack) {
  using namespace galaxy;
  if (!ep || !ack)
    return fail(GLEX_INVALID_PARAM, "glex_receive_mgmt_ack: ep and ack must not be NULL");
  auto p = ep->device->wait_mgmt(ep->vp, timeout_ps);
  if (!p.ok())
    return fail(p.error().code == Code::kTimeout ? GLEX_TIMEOUT : GLEX_DESCRIPTOR_ERROR, p.error());
  *ack = {};
  ack->dest_id = p->dest_id;
  ack->dest_type = static_cast<uint8_t>(p->dest_type);
  ack->dest_vp = p->dest_vp;
  ack->src_id = p->src_id;
  ack->src_type = static_cast<uint8_t>(p->src_type);
  ack->src_vp = p->src_vp;
  ack->transaction_id = p->transaction_id;
  from_route(p->forward_route, &ack->forward_route);
  from_route(p->backward_route, &ack->backward_route);
  ack->nmp_type = static_cast<uint8_t>(p->nmp_type);
  ack->count = p->data.count;
  for (int i = 0; i < 6; ++i) {
    ack->address[i] = p->data.address[i];
    ack->bytes[i] = p->data.bytes[i];
  }
  ack->value[0] = p->data.value[0];
  ack->value[1] = p->data.value[1];
  ack->error = static_cast<uint8_t>(p->data.error);
  ack->error_address = p->data.error_address;
  ack->fault_code = p->data.fault_code;
  ack->fault_port = p->data.fault_port;
  ack->fault_severity = p->data.fault_severity;
  ack->fault_detail = p->data.fault_detail;
  ack->sm_guid = p->data.sm.guid;
  ack->sm_act_count = p->data.sm.act_count;
  ack->sm_priority = p->data.sm.priority;
  ack->sm_state = p->data.sm.state;
  ack->sm_control = p->data.sm.control;
  ack->sm_successor_id = p->data.sm.successor_chip;
  ack->sm_successor_vp = p->data.sm.successor_vp;
  ack->m_key = p->m_key;
  ack->lint = p->lint;
  ack->rint = p->rint;
  return GLEX_SUCCESS;
}

uint64_t glex_time_ps(glex_device_handle_t dev) {
  return dev ? dev->now_ps() : 0;
}

glex_ret_t glex_read_local_reg(glex_device_handle_t dev, uint16_t addr, uint64_t* value) {
  if (!dev || !value)
    return fail(GLEX_INVALID_PARAM, "glex_read_local_reg: dev and value must not be NULL");
  auto v = dev->read_local_register(addr);
  if (!v.ok()) return fail(GLEX_INVALID_PARAM, v.error());
  *value = *v;
  return GLEX_SUCCESS;
}

const char* glex_error_string(glex_ret_t ret) {
  // A C caller may pass any int; reading one outside the enumerators as a glex_ret_t would be
  // undefined in C++, so the bytes are read as the int they are.
  int code = 0;
  static_assert(sizeof code == sizeof ret);
  std::memcpy(&code, &ret, sizeof code);
  switch (code) {
    case GLEX_SUCCESS:
      return "success";
    case GLEX_INVALID_PARAM:
      return "invalid parameter";
    case GLEX_NO_RESOURCE:
      return "no resource";
    case GLEX_TIMEOUT:
      return "timeout";
    case GLEX_DESCRIPTOR_ERROR:
      return "descriptor error";
    case GLEX_BUSY:
      return "busy, retry";
    case GLEX_NO_ENTRY:
      return "no entry";
    case GLEX_ACCESS_ERROR:
      return "remote access refused";
    case GLEX_UNREACHABLE:
      return "unreachable";
    case GLEX_PEER_DEAD:
      return "peer process dead";
    case GLEX_UNSUPPORTED:
      return "unsupported on this engine";
  }
  return "unknown error";
}

const char* glex_last_error(void) {
  return g_last_error.c_str();
}

}  // extern "C"
