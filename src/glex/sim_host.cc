#include "glex/sim_host.h"

#include <fmt/format.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "base/bits.h"
#include "glex/device.h"

namespace galaxy::glex {

namespace {

Status process_io(pid_t pid, uint64_t addr, void* buf, size_t n, bool write, uint16_t id) {
  iovec local{buf, n};
  iovec remote{reinterpret_cast<void*>(addr), n};
  const ssize_t done = write ? process_vm_writev(pid, &local, 1, &remote, 1, 0)
                             : process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (done == static_cast<ssize_t>(n)) return {};
  return make_error(
      Code::kIoError, id,
      fmt::format("host memory {} of {} bytes at {:#x} in process {}: {}", write ? "write" : "read",
                  n, addr, pid, done < 0 ? std::strerror(errno) : "short transfer"));
}

uint32_t glex_op(chip::DescriptorOp op) {
  switch (op) {
    case chip::DescriptorOp::kMp:
      return GLEX_OP_MP;
    case chip::DescriptorOp::kPut:
      return GLEX_OP_PUT;
    case chip::DescriptorOp::kGet:
      return GLEX_OP_GET;
    case chip::DescriptorOp::kImmediate:
      return GLEX_OP_IMM;
    case chip::DescriptorOp::kCp:
    case chip::DescriptorOp::kLocal:
      return GLEX_OP_COLL;
    case chip::DescriptorOp::kMgmt:
      break;
  }
  return 0;
}

glex_ret_t status_of(uint16_t error_id) {
  switch (chip::failure_of(error_id)) {
    case chip::Failure::kAccess:
      return GLEX_ACCESS_ERROR;
    case chip::Failure::kUnreachable:
      return GLEX_UNREACHABLE;
    case chip::Failure::kDescriptor:
      break;
  }
  return GLEX_DESCRIPTOR_ERROR;
}

}  // namespace

Status ProcessMemory::read(uint64_t phys, std::span<uint8_t> out) {
  return process_io(pid_, phys, out.data(), out.size(), false, 6170);
}

Status ProcessMemory::write(uint64_t phys, std::span<const uint8_t> in) {
  ++writes_;
  return process_io(pid_, phys, const_cast<uint8_t*>(in.data()), in.size(), true, 6171);
}

uint64_t SimHost::rdma_descriptor_bytes(uint32_t op, uint64_t len) {
  wire::RdmaDescriptor d;
  d.op = op == GLEX_OP_IMM ? wire::RdmaOp::kImmediate : wire::RdmaOp::kWrite;
  d.length = static_cast<uint32_t>(std::min<uint64_t>(len, wire::kMaxImmediateBytes));
  return wire::rdma_descriptor_size(d);
}

uint64_t SimHost::mp_descriptor_bytes(uint32_t len) {
  return wire::kMpBytes - wire::kMpPayloadBytes + len;  // the MP's header, then its data
}

glex_device::CollTiming coll_timing(const sim::Timing& t, double links) {
  const unsigned cp_flits = static_cast<unsigned>(wire::data_packet_flits(8));
  const double hop =
      static_cast<double>(t.serialisation(cp_flits) + t.link_latency + t.chip_input_pipeline);
  glex_device::CollTiming c;
  c.offload_level_ps = t.nic_mp_build + static_cast<uint64_t>(links * hop);
  c.offload_child_ps = std::max(t.nic_descriptor_interval, t.serialisation(cp_flits));
  const sim::Time post = post_cost(t, 0, SimHost::mp_descriptor_bytes(8));
  c.p2p_level_ps =
      c.offload_level_ps + t.nic_rx_dma + t.host_poll_detect + take_cost(t, true) + post;
  c.p2p_child_ps = post + take_cost(t, false);
  return c;
}

double mean_links(const fabric::Topology& topo, uint32_t node, std::span<const uint32_t> members) {
  const std::vector<uint32_t> d = topo.bfs_distances(node);
  double sum = 0;
  uint64_t n = 0;
  auto add = [&](uint32_t m) {
    if (m == node || m >= d.size() || d[m] == fabric::kNoNode) return;
    sum += d[m] + 1;  // bfs_distances counts the NRCs on the way: one link more
    ++n;
  };
  if (members.empty())
    for (uint32_t i = 0; i < topo.num_nics(); ++i) add(topo.nic_node(i));
  else
    for (uint32_t m : members) add(m);
  return n ? sum / static_cast<double>(n) : 2.0;
}

uint64_t SimHost::coll_descriptor_bytes(const chip::CollDescriptor& d) {
  // A CP is a special MP (docs/system.md 1.1): its descriptor is an MP's with one word more
  // (trigger count, increment, flags, combining operation); a local descriptor's adds the address
  // word.
  const uint64_t extra = d.kind == chip::CollDescriptor::Kind::kLocal ? 16 : 8;
  return mp_descriptor_bytes(d.length) + extra;
}

uint64_t SimHost::mgmt_descriptor_bytes(const wire::MgmtDescriptor& d) {
  return d.forward_route.needs_ext() || d.backward_route.needs_ext()
             ? wire::kMgmtWideDescriptorBytes
             : wire::kMgmtDescriptorBytes;
}

SimHost::SimHost(sim::SimFabric& fabric, uint32_t nic_node, pid_t pid)
    : fabric_(fabric), node_(nic_node), memory_(pid) {
  nic().attach_host_memory(&memory_);
}

SimHost::~SimHost() {
  for (const auto& [key, live] : regions_)
    if (live) (void)nic().att().deregister(key);
  nic().attach_host_memory(nullptr);
}

wire::ChipId SimHost::chip_id() const {
  return fabric_.chip(node_).chip_id();
}

Result<uint8_t> SimHost::open_vp(int32_t wanted) {
  if (wanted >= 0) {
    if (wanted >= chip::kNumVps)
      return make_error(Code::kOutOfRange, 6000,
                        fmt::format("vp = {}: the NIC has VPs 0-{}", wanted, chip::kNumVps - 1));
    if (used_[wanted])
      return make_error(Code::kResourceExhausted, 6001, fmt::format("vp {} is in use", wanted));
    used_[wanted] = true;
    return static_cast<uint8_t>(wanted);
  }
  // DMA VPs first (management needs them), then the PIO ones.
  for (uint8_t i = 0; i < chip::kNumVps; ++i) {
    const uint8_t v = static_cast<uint8_t>((i + chip::kPioVps) % chip::kNumVps);
    if (!used_[v]) {
      used_[v] = true;
      return v;
    }
  }
  return make_error(Code::kResourceExhausted, 6002, "no free VP");
}

void SimHost::close_vp(uint8_t vp) {
  if (vp < chip::kNumVps) {
    used_[vp] = false;
    posted_[vp].clear();
    nic().reset_coll(vp);
  }
}

glex_ret_t SimHost::check_dest(glex_ep_addr_t dest) const {
  const uint64_t dn = GLEX_EP_ADDR_NODE(dest), dv = GLEX_EP_ADDR_VP(dest);
  const fabric::Topology& t = fabric_.topology();
  if ((dest >> 8) >= t.num_nodes() || !t.is_nic(static_cast<uint32_t>(dn)))
    return set_error(GLEX_INVALID_PARAM,
                     fmt::format("E6172 target node {} is not a NIC of this fabric", dest >> 8));
  if (dv >= chip::kNumVps)
    return set_error(GLEX_INVALID_PARAM, fmt::format("E6173 target vp {} exceeds the NIC's VPs "
                                                     "0-{}",
                                                     dv, chip::kNumVps - 1));
  return GLEX_SUCCESS;
}

glex_ret_t SimHost::check_vp_open(uint8_t vp, const char* fn) const {
  if (vp >= chip::kNumVps || !used_[vp])
    return set_error(GLEX_INVALID_PARAM, fmt::format("E6174 {}: vp {} is not open", fn, vp));
  return GLEX_SUCCESS;
}

void SimHost::remember(uint8_t vp, uint64_t sequence, Posted p) {
  auto& m = posted_[vp];
  // Every earlier descriptor has completed and its entry been taken: none is still wanted.
  if (nic().outstanding(vp) <= 1 && nic().eq_count(vp) == 0) m.clear();
  m[sequence] = p;
}

glex_ret_t SimHost::register_mem(uint64_t addr, uint64_t len, uint32_t access,
                                 glex_mem_handle_t* mh) {
  // Refused before anything is pinned: a length the table cannot hold is not walked page by page.
  if (Status room = nic().att().check_room(addr, len); !room.ok())
    return set_error(GLEX_NO_RESOURCE, room.error().to_string());
  // The pages must be there: a registration pins them (one byte of each page is read).
  std::vector<uint64_t> frames(chip::att_pages(addr, len));
  for (size_t i = 0; i < frames.size(); ++i) {
    frames[i] = (addr / chip::kAttPageBytes + i) * chip::kAttPageBytes;
    uint8_t b;
    const uint64_t probe = i == 0 ? addr : frames[i];
    if (Status s = memory_.read(probe, {&b, 1}); !s.ok())
      return set_error(GLEX_INVALID_PARAM,
                       fmt::format("E6175 glex_register_mem: addr = {:#x} len = {}: page {:#x} is "
                                   "not mapped",
                                   addr, len, frames[i]));
  }
  uint32_t rights = 0;
  if (access & GLEX_MEM_READ) rights |= chip::kAccessRead;
  if (access & GLEX_MEM_WRITE) rights |= chip::kAccessWrite;
  auto key = nic().att().register_region(addr, len, rights, frames);
  if (!key.ok()) return set_error(GLEX_NO_RESOURCE, key.error().to_string());
  regions_[*key] = true;
  *mh = sim_handle(*key);
  return GLEX_SUCCESS;
}

glex_ret_t SimHost::deregister_mem(glex_mem_handle_t mh) {
  const uint32_t key = static_cast<uint32_t>(mh);
  auto it = regions_.find(key);
  if (it == regions_.end() || mh != sim_handle(key))
    return set_error(GLEX_INVALID_PARAM,
                     fmt::format("E6176 glex_deregister_mem: mh = {:#x} is not a registration of "
                                 "this device",
                                 mh));
  regions_.erase(it);
  if (Status s = nic().att().deregister(key); !s.ok())
    return set_error(GLEX_INVALID_PARAM, s.error().to_string());
  return GLEX_SUCCESS;
}

glex_ret_t SimHost::send_mp(uint8_t vp, glex_ep_addr_t dest, std::span<const uint8_t> data,
                            uint32_t flags) {
  if (glex_ret_t r = check_vp_open(vp, "glex_send_mp"); r != GLEX_SUCCESS) return r;
  if (glex_ret_t r = check_dest(dest); r != GLEX_SUCCESS) return r;
  const uint64_t seq = nic().next_sequence(vp);
  Status s = fabric_.post_mp(node_, vp, static_cast<wire::ChipId>(GLEX_EP_ADDR_NODE(dest)),
                             static_cast<uint8_t>(GLEX_EP_ADDR_VP(dest)), data,
                             (flags & GLEX_FLAG_FENCE) != 0, (flags & GLEX_FLAG_LOCAL_CQ) != 0);
  if (!s.ok())
    return set_error(s.error().code == Code::kResourceExhausted ? GLEX_BUSY : GLEX_INVALID_PARAM,
                     s.error().to_string());
  remember(vp, seq, {GLEX_OP_MP, 0, data.size(), (flags & GLEX_FLAG_LOCAL_CQ) != 0});
  return GLEX_SUCCESS;
}

glex_ret_t SimHost::rdma(uint8_t vp, const glex_rdma_req& r, std::span<const uint8_t> immediate,
                         uint16_t cp_count) {
  if (glex_ret_t x = check_vp_open(vp, "glex_rdma"); x != GLEX_SUCCESS) return x;
  if (glex_ret_t x = check_dest(r.target); x != GLEX_SUCCESS) return x;
  if (r.len > UINT32_MAX)
    return set_error(GLEX_INVALID_PARAM,
                     fmt::format("E6177 glex_rdma: len = {} exceeds one descriptor's {} bytes",
                                 r.len, UINT32_MAX));
  wire::RdmaDescriptor d;
  d.op = r.op == GLEX_OP_GET   ? wire::RdmaOp::kRead
         : r.op == GLEX_OP_IMM ? wire::RdmaOp::kImmediate
                               : wire::RdmaOp::kWrite;
  d.fen = (r.flags & GLEX_FLAG_FENCE) != 0;
  d.local_cq = (r.flags & GLEX_FLAG_LOCAL_CQ) != 0;
  d.remote_node = static_cast<wire::ChipId>(GLEX_EP_ADDR_NODE(r.target));
  d.remote_vp = static_cast<uint8_t>(GLEX_EP_ADDR_VP(r.target));
  d.length = static_cast<uint32_t>(r.len);
  d.remote_address = r.remote_addr;
  d.remote_key = static_cast<uint32_t>(r.remote_mh);
  d.cp_count = cp_count;
  if (r.op == GLEX_OP_IMM) {
    std::copy(immediate.begin(), immediate.end(), d.immediate_data.begin());
  } else {
    d.local_address = reinterpret_cast<uint64_t>(r.local_addr);
    d.local_key = static_cast<uint32_t>(r.local_mh);
  }
  if (r.flags & GLEX_FLAG_REMOTE_EVT) {
    d.completion = wire::Completion::kEvent;
    d.notify_address = r.event_addr;
    d.notify_key = static_cast<uint32_t>(r.event_mh);
    put_bits(d.notify_data, 0, 64, r.event.data[0]);
    put_bits(d.notify_data, 64, 64, r.event.data[1]);
  }
  const uint64_t seq = nic().next_sequence(vp);
  Status s = fabric_.post_rdma(node_, vp, d);
  if (!s.ok())
    return set_error(s.error().code == Code::kResourceExhausted ? GLEX_BUSY : GLEX_INVALID_PARAM,
                     s.error().to_string());
  remember(vp, seq, {r.op, r.cookie, r.len, d.local_cq});
  return GLEX_SUCCESS;
}

glex_ret_t SimHost::post_coll(uint8_t vp, const chip::CollDescriptor& d, uint64_t cookie) {
  if (glex_ret_t x = check_vp_open(vp, "glex_coll"); x != GLEX_SUCCESS) return x;
  const uint64_t seq = nic().next_sequence(vp);
  Status s = fabric_.post_coll(node_, vp, d);
  if (!s.ok())
    return set_error(s.error().code == Code::kResourceExhausted ? GLEX_BUSY : GLEX_INVALID_PARAM,
                     s.error().to_string());
  remember(vp, seq, {GLEX_OP_COLL, cookie, d.length, d.notify});
  return GLEX_SUCCESS;
}

void SimHost::reset_coll(uint8_t vp) {
  if (vp < chip::kNumVps) nic().reset_coll(vp);
}

glex_ret_t SimHost::try_recv_mp(uint8_t vp, glex_mp* mp) {
  if (glex_ret_t r = check_vp_open(vp, "glex_recv_mp"); r != GLEX_SUCCESS) return r;
  while (nic().mpq_count(vp) > 0) {
    auto e = nic().poll_mpq(vp);
    if (!e || e->management) continue;  // a management response is not the data API's
    mp->src = GLEX_EP_ADDR(e->src_node, e->src_vp);
    mp->len = e->length;
    std::memcpy(mp->data, e->data.data(), e->length);
    return GLEX_SUCCESS;
  }
  return GLEX_NO_ENTRY;
}

glex_ret_t SimHost::try_poll_cq(uint8_t vp, glex_cq_entry* out) {
  if (glex_ret_t r = check_vp_open(vp, "glex_poll_cq"); r != GLEX_SUCCESS) return r;
  while (nic().eq_count(vp) > 0) {
    auto e = nic().poll_eq(vp);
    if (!e || e->op == chip::DescriptorOp::kMgmt) continue;
    Posted p;
    auto& m = posted_[vp];
    if (e->kind == chip::EventKind::kMpRefused) {
      // names no descriptor: the MP's own completed when it left
    } else if (auto it = m.find(e->sequence); it != m.end()) {
      p = it->second;
      m.erase(it);
    }
    *out = {};
    out->op = glex_op(e->op);
    out->cookie = p.cookie;
    if (e->kind == chip::EventKind::kDescriptorDone) {
      out->status = GLEX_SUCCESS;
      out->bytes = e->bytes ? e->bytes : p.bytes;
    } else {
      out->status = status_of(e->error_id);
      out->error_id = e->error_id;
      fmt::format_to_n(out->reason, sizeof out->reason - 1, "E{} {}", e->error_id,
                       glex_error_string(out->status));
    }
    return GLEX_SUCCESS;
  }
  return GLEX_NO_ENTRY;
}

glex_ret_t SimHost::try_event(uint64_t addr, glex_event* out) {
  event_writes_seen_ = memory_.writes();
  std::array<uint8_t, sizeof(glex_event)> b{};
  if (Status s = memory_.read(addr, b); !s.ok())
    return set_error(GLEX_INVALID_PARAM,
                     fmt::format("E6178 glex_wait_event: {}", s.error().message));
  const uint64_t w0 = get_bits(b, 0, 64), w1 = get_bits(b, 64, 64);
  if (w1 == 0) return GLEX_NO_ENTRY;
  out->data[0] = w0;
  out->data[1] = w1;
  b.fill(0);
  if (Status s = memory_.write(addr, b); !s.ok())
    return set_error(GLEX_INVALID_PARAM,
                     fmt::format("E6178 glex_wait_event: {}", s.error().message));
  event_writes_seen_ = memory_.writes();
  return GLEX_SUCCESS;
}

bool SimHost::ready(SimWait w, uint8_t vp, uint64_t addr) {
  switch (w) {
    case SimWait::kMp:
    case SimWait::kMgmt:
      return vp < chip::kNumVps && nic().mpq_count(vp) > 0;
    case SimWait::kCq:
      return vp < chip::kNumVps && nic().eq_count(vp) > 0;
    case SimWait::kFence:
      return vp < chip::kNumVps && nic().outstanding(vp) == 0;
    case SimWait::kEvent: {
      if (memory_.writes() == event_writes_seen_) return false;
      event_writes_seen_ = memory_.writes();
      std::array<uint8_t, 16> b{};
      return !memory_.read(addr, b).ok() || get_bits(b, 64, 64) != 0;
    }
  }
  return false;
}

}  // namespace galaxy::glex
