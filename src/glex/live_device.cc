#include "glex/live_device.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <vector>

#include "base/env.h"
#include "chip/event.h"
#include "chip/nic.h"
#include "chip/rdma_rules.h"
#include "chip/registers.h"
#include "engine/live/daemon.h"
#include "engine/live/direct.h"
#include "engine/live/forward.h"
#include "engine/live/items.h"
#include "engine/live/mpq_claim.h"
#include "engine/live/nic_host.h"
#include "engine/live/segment.h"
#include "glex/copy_engines.h"
#include "glex/direct_path.h"
#include "glex/provider.h"
#include "wire/mp.h"

#define GALAXY_GLEX_TRY(expr)                                  \
  do {                                                         \
    glex_ret_t galaxy_glex_r_ = (expr);                        \
    if (galaxy_glex_r_ != GLEX_SUCCESS) return galaxy_glex_r_; \
  } while (0)

namespace galaxy::glex {

namespace {

using live::OpCode;
using live::OpStatus;

static_assert(static_cast<int>(OpStatus::kSuccess) == GLEX_SUCCESS);
static_assert(static_cast<int>(OpStatus::kTimeout) == GLEX_TIMEOUT);
static_assert(static_cast<int>(OpStatus::kBusy) == GLEX_BUSY);
static_assert(static_cast<int>(OpStatus::kAccessError) == GLEX_ACCESS_ERROR);
static_assert(static_cast<int>(OpStatus::kUnreachable) == GLEX_UNREACHABLE);
static_assert(static_cast<int>(OpStatus::kPeerDead) == GLEX_PEER_DEAD);
static_assert(static_cast<int>(OpCode::kPut) == GLEX_OP_PUT &&
              static_cast<int>(OpCode::kGet) == GLEX_OP_GET &&
              static_cast<int>(OpCode::kImm) == GLEX_OP_IMM &&
              static_cast<int>(OpCode::kMp) == GLEX_OP_MP &&
              static_cast<int>(OpCode::kColl) == GLEX_OP_COLL);
static_assert(live::kFlagFence == GLEX_FLAG_FENCE && live::kFlagLocalCq == GLEX_FLAG_LOCAL_CQ &&
              live::kFlagRemoteEvent == GLEX_FLAG_REMOTE_EVT);

// How long dropping a VP's collective state waits for the daemon (a daemon that is gone never
// answers).
constexpr uint64_t kResetWaitNs = 2'000'000'000;

uint64_t deadline_after(int32_t timeout_ms) {
  return timeout_ms < 0 ? UINT64_MAX
                        : live::monotonic_ns() + static_cast<uint64_t>(timeout_ms) * 1000000ull;
}

class LiveDevice final : public glex_device {
 public:
  LiveDevice(std::unique_ptr<live::Segment> seg, uint32_t node, uint64_t spin_ns)
      : seg_(std::move(seg)),
        node_(node),
        nic_(seg_->nic_of(node)),
        pid_(getpid()),
        spin_ns_(spin_ns) {
    paths_.resize(seg_->num_chips());
    paths_back_.resize(seg_->num_chips());
    rdma_ = std::make_unique<DirectRdma>(*seg_, *nic_, node_);
    direct_ = std::make_unique<DirectPath>(*seg_);
    direct_->set_transfers(rdma_.get());
  }
  ~LiveDevice() override {
    flush_counters();
    // Only this handle's VPs and registrations: the process may hold other handles on the NIC.
    for (uint8_t v = 0; v < live::kVps; ++v)
      if (my_vps_[v]) close_vp(v);
    // After the VPs: what its links still hold for them goes to the daemon, which refuses it.
    direct_.reset();
    const std::set<uint64_t> regs = my_registrations_;
    for (uint64_t mh : regs) (void)deregister_mem(mh);
    for (auto& a : allocs_) {
      munmap(a.addr, a.length);
      close(a.fd);
    }
  }

  Result<uint8_t> open_vp(int32_t wanted) override {
    if (wanted >= static_cast<int32_t>(live::kVps))
      return make_error(Code::kOutOfRange, 6100,
                        fmt::format("vp = {} exceeds the NIC's VPs 0-{}", wanted, live::kVps - 1));
    std::vector<uint8_t> order;
    if (wanted >= 0) {
      order.push_back(static_cast<uint8_t>(wanted));
    } else {
      for (uint8_t v = chip::kPioVps; v < live::kVps; ++v) order.push_back(v);
      for (uint8_t v = 0; v < chip::kPioVps; ++v) order.push_back(v);
    }
    for (uint8_t v : order) {
      live::VpSlot& s = nic_->vps[v];
      int32_t owner = s.owner_pid.load();
      // A VP whose owner died is free again (the daemon also closes it on its liveness scan).
      if (owner != 0 && (owner == pid_ || live::process_alive(owner))) continue;
      if (!s.owner_pid.compare_exchange_strong(owner, pid_)) continue;
      s.mpq.init();
      s.cq.init();
      s.outstanding.store(0);
      s.mps_received.store(0);
      s.direct_port.store(direct_->port());
      direct_->start();
      s.generation.fetch_add(1);
      s.open.store(1, std::memory_order_release);
      my_vps_[v] = true;
      return v;
    }
    if (wanted >= 0)
      return make_error(Code::kResourceExhausted, 6101,
                        fmt::format("vp {} of NIC {} is in use", wanted, node_));
    return make_error(Code::kResourceExhausted, 6102, fmt::format("NIC {} has no free VP", node_));
  }

  void close_vp(uint8_t vp) override {
    live::VpSlot& s = nic_->vps[vp];
    if (s.owner_pid.load() != pid_ || !my_vps_[vp]) return;
    // What its collectives left in the daemon's NIC goes before another process may take it.
    if (coll_used_[vp]) reset_coll(vp);
    my_vps_[vp] = false;
    s.open.store(0, std::memory_order_release);
    s.direct_port.store(0);
    s.owner_pid.store(0);
  }

  Status post_mgmt(uint8_t vp, const wire::MgmtDescriptor& d) override {
    auto bytes = wire::encode_mgmt_descriptor(d);
    if (!bytes.ok()) return bytes.error();
    live::EgressMgmt m{};
    m.nic = node_;
    m.vp = vp;
    static_assert(sizeof(m.descriptor) == wire::kMgmtWideDescriptorBytes);
    m.length = static_cast<uint8_t>(bytes->size());
    std::memcpy(m.descriptor, bytes->data(), bytes->size());
    if (!seg_->post_egress(live::EgressKind::kMgmt, &m, sizeof m))
      return make_error(Code::kResourceExhausted, 6103, "the daemon's egress ring is full");
    return {};
  }

  Result<wire::MgmtPacket> wait_mgmt(uint8_t vp, uint64_t timeout_ps) override {
    const uint64_t deadline = live::monotonic_ns() + timeout_ps / 1000;
    live::MpqRing& q = nic_->vps[vp].mpq;
    for (;;) {
      live::MpqCell* c = wait_idle(q, deadline);
      if (!c)
        return make_error(
            Code::kTimeout, 6104,
            fmt::format("no management packet on vp {} within {} us", vp, timeout_ps / 1000000));
      const uint64_t w = c->header.load(std::memory_order_relaxed);
      if (wire::mp_word::kind(w) != static_cast<uint8_t>(wire::MpKind::kMgmt)) {
        q.pop();  // not management: a management VP takes no user MPs
        continue;
      }
      auto p = wire::decode_mgmt_packet(std::span<const uint8_t>(
          c->data, std::min<size_t>(wire::mp_word::length(w), wire::kMpPayloadBytes)));
      q.pop();
      return p;
    }
  }

  uint64_t now_ps() const override { return live::monotonic_ns() * 1000; }

  Result<uint64_t> read_local_register(uint16_t addr) override {
    if (addr == chip::reg::kPortBase + chip::reg::port::kPeerIdent) {
      live::PeerInfo& p = seg_->peer(node_, 0);
      if (p.chip == live::kNoChip) return uint64_t{0};
      const live::ChipInfo& c = seg_->chip(p.chip);
      const bool up = p.up.load() != 0, nrc = c.type != 0;
      chip::reg::WidePeer wide{up, nrc, static_cast<uint8_t>(p.port),
                               static_cast<wire::ChipId>(p.chip),
                               static_cast<uint16_t>(c.num_ports)};
      return chip::reg::encode_peer(true, nrc, static_cast<uint8_t>(p.port), up,
                                    static_cast<wire::ChipId>(p.chip),
                                    static_cast<uint8_t>(c.num_ports)) |
             uint64_t{chip::reg::encode_wide_peer(wide)} << 32;
    }
    if (addr == chip::reg::kChipId)  // a live fabric's ids are 16-bit (live_spec.cc)
      return chip::reg::encode_chip_id(static_cast<wire::ChipId>(node_));
    if (addr == chip::reg::kPeerSummaryHigh) {
      live::PeerInfo& p = seg_->peer(node_, 0);
      if (p.chip == live::kNoChip || p.up.load() == 0) return uint64_t{0};
      return uint64_t{wire::chip_id_high(static_cast<wire::ChipId>(p.chip))};
    }
    return make_error(Code::kUnsupported, 6105,
                      fmt::format("register {:#x}: on a live fabric the host reads only its "
                                  "port's peer identity; use a management request",
                                  addr));
  }

  wire::ChipId chip_id() const override { return static_cast<wire::ChipId>(node_); }

  glex_ret_t register_mem(void* addr, uint64_t len, uint32_t access,
                          glex_mem_handle_t* mh) override {
    for (uint32_t i = 0; i < live::kAttEntries; ++i) {
      live::AttEntry& e = nic_->att[i];
      uint32_t free_state = 0;
      if (!e.state.compare_exchange_strong(free_state, 1)) continue;
      const uint64_t a = reinterpret_cast<uint64_t>(addr);
      uint32_t key = static_cast<uint32_t>((nic_->att_clock.fetch_add(1) + 1) * 2654435761u) ^
                     static_cast<uint32_t>(live::monotonic_ns()) ^ static_cast<uint32_t>(pid_);
      key &= live::kWireKeyMask;  // a descriptor carries 24 bits of it (engine/live/nic_host.h)
      if (key == 0) key = 1;
      e.key = key;
      e.base = a;
      e.length = len;
      e.pid = pid_;
      e.access = access;
      e.memfd = -1;
      e.memfd_base = 0;
      for (const Alloc& al : allocs_) {
        const uint64_t b = reinterpret_cast<uint64_t>(al.addr);
        if (a >= b && a - b <= al.length && len <= al.length - (a - b)) {
          e.memfd = al.fd;
          e.memfd_base = b;
        }
      }
      e.generation++;
      e.state.store(2, std::memory_order_release);
      *mh = (uint64_t{i} << 32) | key;
      my_registrations_.insert(*mh);
      return GLEX_SUCCESS;
    }
    return set_error(GLEX_NO_RESOURCE,
                     fmt::format("E6106 the ATT of NIC {} is full ({} registrations)", node_,
                                 live::kAttEntries));
  }

  glex_ret_t deregister_mem(glex_mem_handle_t mh) override {
    const uint64_t i = mh >> 32;
    if (i >= live::kAttEntries)
      return set_error(GLEX_INVALID_PARAM,
                       fmt::format("E6107 mh = {:#x}: ATT index {} out of range", mh, i));
    live::AttEntry& e = nic_->att[i];
    if (e.state.load() != 2 || e.key != static_cast<uint32_t>(mh) || e.pid != pid_)
      return set_error(GLEX_INVALID_PARAM,
                       fmt::format("E6108 mh = {:#x} is not a registration of this process", mh));
    e.generation++;
    e.state.store(0, std::memory_order_release);
    my_registrations_.erase(mh);
    return GLEX_SUCCESS;
  }

  glex_ret_t alloc_mem(uint64_t len, void** addr) override {
    const uint64_t size = (len + 4095) & ~uint64_t{4095};
    int fd = memfd_create("glex-mem", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
      if (fd >= 0) close(fd);
      return set_error(GLEX_NO_RESOURCE,
                       fmt::format("E6109 glex_alloc_mem({}): {}", len, std::strerror(errno)));
    }
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      close(fd);
      return set_error(GLEX_NO_RESOURCE,
                       fmt::format("E6110 glex_alloc_mem({}): {}", len, std::strerror(errno)));
    }
    allocs_.push_back({p, size, fd});
    *addr = p;
    return GLEX_SUCCESS;
  }

  glex_ret_t free_mem(void* addr) override {
    for (size_t i = 0; i < allocs_.size(); ++i)
      if (allocs_[i].addr == addr) {
        // Registrations of the freed memory go with it (its memfd number may be reused).
        const uint64_t b = reinterpret_cast<uint64_t>(addr);
        std::vector<uint64_t> inside;
        for (uint64_t mh : my_registrations_) {
          const live::AttEntry& e = nic_->att[mh >> 32];
          if (e.base >= b && e.base - b < allocs_[i].length) inside.push_back(mh);
        }
        for (uint64_t mh : inside) (void)deregister_mem(mh);
        munmap(allocs_[i].addr, allocs_[i].length);
        close(allocs_[i].fd);
        allocs_.erase(allocs_.begin() + static_cast<long>(i));
        return GLEX_SUCCESS;
      }
    return set_error(GLEX_INVALID_PARAM,
                     fmt::format("E6111 addr = {} was not returned by glex_alloc_mem", addr));
  }

  glex_ret_t send_mp(uint8_t vp, glex_ep_addr_t dest, const void* data, uint32_t len,
                     uint32_t flags) override {
    const uint32_t dn = GLEX_EP_ADDR_NODE(dest), dv = GLEX_EP_ADDR_VP(dest);
    if (dest_problem(dest) != 0) return check_dest(dest);
    if ((flags & GLEX_FLAG_FENCE) && fence(vp, -1) != GLEX_SUCCESS) return GLEX_TIMEOUT;
    const uint8_t mp_flags = (flags & GLEX_FLAG_INTERRUPT) ? wire::kMpFlagInterrupt : 0;
    live::PathCounters* path = &path_to(dn);
    // A target on a host the path enters straight from this one: the direct path between the
    // processes (engine/live/direct.h), when the target's owner has a socket of its own.
    if (path->result.kind == live::Forwarded::Kind::kLeavesHost) {
      switch (direct_->send_mp(live::mp_packet(node_, vp, dn, static_cast<uint8_t>(dv), mp_flags,
                                               data, static_cast<uint8_t>(len)),
                               path->result, (flags & GLEX_FLAG_MORE) != 0)) {
        case DirectPath::Sent::kSent:
          path->add(wire::packet_traffic(wire::kMpBytes));
          complete_local(vp, flags, OpCode::kMp, len);
          return GLEX_SUCCESS;
        case DirectPath::Sent::kBusy:
          return set_error(GLEX_BUSY, fmt::format("E6136 the direct link to {}:{} has no room; "
                                                  "retry",
                                                  dn, dv));
        case DirectPath::Sent::kNotDirect:
          break;
      }
    }
    // A target on another host beyond, on this one by a path through another, or on a path
    // that stops on the way: the daemon's (its NICs and NRCs discard what they cannot pass on
    // and refuse such an MP to its sender: chip/refusal.h).
    if (!seg_->is_local(dn) || path->result.kind != live::Forwarded::Kind::kDelivered) {
      live::EgressMp m{};
      m.src_node = node_;
      m.dest_node = dn;
      m.src_vp = vp;
      m.dest_vp = static_cast<uint8_t>(dv);
      m.kind_flags = mp_flags;
      m.length = static_cast<uint8_t>(len);
      if (len) std::memcpy(m.data, data, len);
      if (!seg_->post_egress(live::EgressKind::kMp, &m, sizeof m))
        return set_error(GLEX_BUSY, "E6112 the daemon's egress ring is full; retry");
      complete_local(vp, flags, OpCode::kMp, len);
      return GLEX_SUCCESS;
    }
    live::VpSlot& t = seg_->nic_of(dn)->vps[dv];
    uint64_t pos;
    live::MpqCell* c;
    // The sender writes the peer's MPQ itself, so a full one makes it wait here (chip/mpq.h).
    switch (live::claim_mpq(t, &c, &pos)) {
      case chip::MpqAdmit::kWrite:
        break;
      case chip::MpqAdmit::kNotOpen:
        return set_error(GLEX_UNREACHABLE, fmt::format("E6113 endpoint {}:{} is not open", dn, dv));
      case chip::MpqAdmit::kOwnerGone:
        return set_error(GLEX_PEER_DEAD, fmt::format("E6114 the process of {}:{} is gone", dn, dv));
      case chip::MpqAdmit::kWait:
        return set_error(GLEX_BUSY, fmt::format("E6115 the MPQ of {}:{} is full; retry", dn, dv));
    }
    live::fill_mpq(
        t, c, pos,
        wire::mp_word::make(wire::MpKind::kUser, mp_flags, static_cast<uint8_t>(dv), vp,
                            static_cast<wire::ChipId>(node_), static_cast<uint8_t>(len), 0),
        data);
    path->add(wire::packet_traffic(wire::kMpBytes));
    complete_local(vp, flags, OpCode::kMp, len);
    return GLEX_SUCCESS;
  }

  glex_ret_t recv_mp(uint8_t vp, int32_t timeout_ms, glex_mp* mp) override {
    live::MpqRing& q = nic_->vps[vp].mpq;
    const uint64_t deadline = deadline_after(timeout_ms);
    for (;;) {
      live::MpqCell* c = timeout_ms == 0 ? peek_polling(q) : wait_idle(q, deadline);
      if (!c)
        return timeout_ms == 0
                   ? GLEX_NO_ENTRY
                   : set_error(GLEX_TIMEOUT,
                               fmt::format("E6117 no MP on vp {} within {} ms", vp, timeout_ms));
      const uint64_t w = c->header.load(std::memory_order_relaxed);
      // User MPs and CPs the NIC wrote into the MPQ (chip::kCpFlagToMpq); not management.
      if (wire::mp_word::kind(w) != static_cast<uint8_t>(wire::MpKind::kUser) &&
          wire::mp_word::kind(w) != static_cast<uint8_t>(wire::MpKind::kCp)) {
        q.pop();
        continue;
      }
      const uint32_t len = std::min<uint32_t>(wire::mp_word::length(w), wire::kMpPayloadBytes);
      mp->src = GLEX_EP_ADDR(wire::mp_word::src_node(w), wire::mp_word::src_vp(w));
      mp->len = len;
      live::copy_payload(mp->data, c->data, len);
      q.pop();
      return GLEX_SUCCESS;
    }
  }

  glex_ret_t rdma(uint8_t vp, const glex_rdma_req& r) override {
    return start_rdma(vp, r, false, 0);
  }

  // A CP-triggered RDMA descriptor always goes to the daemon's NIC, even towards this host: it
  // waits there in the VP's queue, behind the VP's collective descriptors, for its CPs.
  glex_ret_t rdma_triggered(uint8_t vp, const glex_rdma_req& r, uint16_t cp_count) override {
    if (glex_ret_t x = check_coll_vp(vp, "rdma_triggered"); x != GLEX_SUCCESS) return x;
    coll_used_[vp] = true;
    return start_rdma(vp, r, true, cp_count);
  }

  // A descriptor of the NIC's collective engine (chip/coll.h), for the daemon's model of this
  // NIC: it runs with no thread of this process. Refused here with the field that is wrong.
  glex_ret_t post_coll(uint8_t vp, const chip::CollDescriptor& d, uint64_t cookie) override {
    if (glex_ret_t x = check_coll_vp(vp, "post_coll"); x != GLEX_SUCCESS) return x;
    if (Status st = chip::check_coll_descriptor(d); !st.ok())
      return set_error(GLEX_INVALID_PARAM, st.error().to_string());
    if (d.sends()) GALAXY_GLEX_TRY(check_dest(GLEX_EP_ADDR(d.dest_node, d.dest_vp)));
    if (d.kind == chip::CollDescriptor::Kind::kLocal && d.length > 0) {
      live::AttEntry e{};
      if (!live::lookup_att(*nic_, d.key, d.address, d.length, chip::kAccessWrite, &e).ok() ||
          e.pid != pid_)
        return set_error(GLEX_ACCESS_ERROR,
                         fmt::format("E6123 post_coll: key {:#x} address {:#x} length {}: not "
                                     "memory this process registered for write on NIC {}",
                                     d.key, d.address, d.length, node_));
    }
    live::VpSlot& s = nic_->vps[vp];
    const size_t depth = chip::dq_depth(vp);  // the NIC's queue, as the daemon's model holds it
    if (s.outstanding.load(std::memory_order_relaxed) >= depth)
      return set_error(GLEX_BUSY, fmt::format("E6121 post_coll: the descriptor queue of vp {} is "
                                              "full ({} descriptors); retry",
                                              vp, depth));
    live::EgressColl c{};
    c.nic = node_;
    c.vp = vp;
    c.kind = static_cast<uint8_t>(d.kind);
    c.data_from = static_cast<uint8_t>(d.data_from);
    c.op = static_cast<uint8_t>(d.op);
    c.pid = pid_;
    c.trigger = d.trigger;
    c.dest_node = d.dest_node;
    c.dest_vp = d.dest_vp;
    c.flags = static_cast<uint8_t>((d.fence ? live::kCollFlagFence : 0) |
                                   (d.notify ? live::kCollFlagNotify : 0));
    c.increment = d.increment;
    c.cp_flags = d.cp_flags;
    c.cp_op = static_cast<uint8_t>(d.cp_op);
    c.length = d.length;
    c.key = d.key;
    c.address = d.address;
    c.cookie = cookie;
    std::memcpy(c.data, d.data.data(), sizeof c.data);
    coll_used_[vp] = true;
    s.outstanding.fetch_add(1);  // the daemon's NIC completes it (a CQ entry when asked for)
    if (!seg_->post_egress(live::EgressKind::kColl, &c, sizeof c)) {
      s.outstanding.fetch_sub(1);
      return set_error(GLEX_BUSY, "E6122 the daemon's egress ring is full; retry");
    }
    return GLEX_SUCCESS;
  }

  // Drops what the VP's collectives left in the daemon's NIC, and returns once the daemon has:
  // descriptors posted after it are not dropped, CPs counted after it count anew.
  void reset_coll(uint8_t vp) override {
    if (vp >= live::kVps || !my_vps_[vp]) return;
    live::EgressCollReset r{};
    r.nic = node_;
    r.vp = vp;
    r.pid = pid_;
    // A full ring is drained by the daemon; one that is gone never does (its NIC went with it)
    // and never hands the cell back after acting on it, hence the bound on both waits.
    const uint64_t deadline = live::monotonic_ns() + kResetWaitNs;
    uint64_t pos = 0;
    while (!seg_->post_egress(live::EgressKind::kCollReset, &r, sizeof r, &pos)) {
      if (live::monotonic_ns() >= deadline) return;
      usleep(50);
    }
    coll_used_[vp] = false;
    live::EgressRing& ring = seg_->egress();
    for (uint32_t i = 0; ring.head.load(std::memory_order_acquire) <= pos; ++i) {
      if (live::monotonic_ns() >= deadline) return;
      if (i < 1000)
        live::cpu_relax();
      else
        usleep(50);
    }
  }

  uint32_t descriptor_key(glex_mem_handle_t mh) const override { return live::wire_key(mh); }
  glex_ret_t resolve_nic(const char* name, uint32_t* chip) override {
    return resolve_nic_in(names(), name, chip);
  }
  glex_ret_t node_name(uint32_t chip, std::string* name) override {
    return node_name_in(names(), chip, name);
  }
  glex_mem_handle_t handle_of_key(uint32_t key) const override {
    return live::handle_of_wire_key(key);
  }

 private:
  glex_ret_t check_coll_vp(uint8_t vp, const char* fn) {
    if (vp >= live::kVps || !my_vps_[vp])
      return set_error(GLEX_INVALID_PARAM,
                       fmt::format("E6124 {}: vp {} is not an open VP of this device", fn, vp));
    return GLEX_SUCCESS;
  }

  glex_ret_t start_rdma(uint8_t vp, const glex_rdma_req& r, bool triggered, uint16_t cp_count) {
    const uint32_t dn = GLEX_EP_ADDR_NODE(r.target);
    GALAXY_GLEX_TRY(check_dest(r.target));
    const bool imm = r.op == GLEX_OP_IMM;
    live::AttEntry local{};
    if (!imm) {
      live::AttEntry& e = local;
      const char* why = "";
      if (check_att(*nic_, r.local_mh, reinterpret_cast<uint64_t>(r.local_addr), r.len, 0, &e,
                    &why) != OpStatus::kSuccess ||
          e.pid != pid_)
        return set_error(
            GLEX_ACCESS_ERROR,
            fmt::format("E6118 local_addr/local_mh: {} (mh {:#x})",
                        e.pid != pid_ && why[0] == 0 ? "not this process's memory" : why,
                        r.local_mh));
    }
    // A fenced descriptor waits for the earlier ones of its VP; a triggered one does so in the
    // NIC (its fence bit), since what it follows may wait there for CPs.
    if ((r.flags & GLEX_FLAG_FENCE) && !triggered && fence(vp, -1) != GLEX_SUCCESS)
      return GLEX_TIMEOUT;
    const OpCode op = static_cast<OpCode>(r.op);
    // Every field is set; the 128 bytes of immediate data only when they are used.
    live::EgressRdma d;
    d.op = static_cast<uint8_t>(r.op);
    d.flags = static_cast<uint8_t>(r.flags);
    d.src_vp = vp;
    d.dest_vp = static_cast<uint8_t>(GLEX_EP_ADDR_VP(r.target));
    d.src_node = node_;
    d.dest_node = dn;
    d.pid = pid_;
    d.local_addr = reinterpret_cast<uint64_t>(r.local_addr);
    d.local_mh = r.local_mh;
    d.length = r.len;
    d.remote_addr = r.remote_addr;
    d.remote_mh = r.remote_mh;
    d.event_addr = r.event_addr;
    d.event_mh = r.event_mh;
    d.event[0] = r.event.data[0];
    d.event[1] = r.event.data[1];
    d.cookie = r.cookie;
    d.cp_count = cp_count;
    std::memset(d.reserved, 0, sizeof d.reserved);
    if (imm) std::memcpy(d.imm, r.local_addr, r.len);
    if (glex_ret_t ret; !triggered && direct_transfer(vp, r, d, local, &ret)) return ret;
    if (triggered || !seg_->is_local(dn) ||
        path_to(dn).result.kind == live::Forwarded::Kind::kLeavesHost ||
        (op == OpCode::kGet && path_from(dn).result.kind == live::Forwarded::Kind::kLeavesHost)) {
      if (!imm) std::memset(d.imm, 0, sizeof d.imm);  // nothing of this stack goes out
      nic_->vps[vp].outstanding.fetch_add(1);
      if (!seg_->post_egress(live::EgressKind::kRdma, &d, sizeof d)) {
        nic_->vps[vp].outstanding.fetch_sub(1);
        return set_error(GLEX_BUSY, "E6119 the daemon's egress ring is full; retry");
      }
      return GLEX_SUCCESS;
    }
    // On this host: the NIC's rules of a transfer (chip::direct_rdma: the checks, the order of
    // data, event and completion) over the two NICs' tables in the segment, the copy done here.
    // Its completion needs room in the CQ (errors always, successes when asked for): a full CQ
    // is the caller's to drain.
    if (nic_->vps[vp].cq.size() + live::CqRing::kRelease >= live::kCqDepth)
      return set_error(GLEX_BUSY, fmt::format("E6134 the CQ of vp {} is full; poll it", vp));
    live::PathCounters& path = path_to(dn);
    if (path.result.kind != live::Forwarded::Kind::kDelivered)
      return complete(vp, r, GLEX_UNREACHABLE, 6120, "no route to the target NIC");
    path.add(op == OpCode::kGet ? wire::packet_traffic(wire::kReadRequestBytes)
                                : wire::transfer_traffic(r.remote_addr, r.len));
    if (op == OpCode::kGet) {  // the response data come back the other way
      live::PathCounters& back = path_from(dn);
      if (back.result.kind != live::Forwarded::Kind::kDelivered)
        return complete(vp, r, GLEX_UNREACHABLE, 6133, "no route back from the target NIC");
      back.add(wire::transfer_traffic(reinterpret_cast<uint64_t>(r.local_addr), r.len));
    }
    wire::RdmaDescriptor& w = scratch_;
    uint16_t err = 0;
    if (Status st = live::rdma_descriptor(d, seg_->num_chips(), &w); !st.ok()) {
      err = st.error().id;
    } else {
      live::NicSlot& t = *seg_->nic_of(dn);
      const live::SegmentAtt theirs(t);
      SegmentDirect memory(*this, t, theirs);
      err = imm ? chip::direct_rdma(w, live::SegmentAtt(*nic_), theirs, memory)
                : chip::direct_rdma(w, live::SegmentAtt(*nic_, w.local_key, local), theirs, memory);
    }
    if (!chip::completes_locally((r.flags & GLEX_FLAG_LOCAL_CQ) != 0, err != 0))
      return GLEX_SUCCESS;
    if (err == 0) return complete(vp, r, GLEX_SUCCESS, 0, "");
    const live::RdmaFailure f = live::rdma_failure(err, op);
    return complete(vp, r, static_cast<glex_ret_t>(f.status), err, f.reason);
  }

  // Between hosts, a transfer whose path leaves this host straight into its target's, to a VP
  // whose owner has a socket of its own: the two processes run their NICs' parts of it on their
  // direct link (glex/direct_rdma.h), not the daemons.
  // False when it is not such a transfer (the daemon's NIC takes it); else *ret is the result.
  bool direct_transfer(uint8_t vp, const glex_rdma_req& r, const live::EgressRdma& d,
                       const live::AttEntry& local, glex_ret_t* ret) {
    const uint32_t dn = d.dest_node;
    const OpCode op = static_cast<OpCode>(r.op);
    if (seg_->is_local(dn)) return false;
    live::PathCounters& path = path_to(dn);
    if (path.result.kind != live::Forwarded::Kind::kLeavesHost) return false;
    wire::RdmaDescriptor& w = scratch_;
    // A descriptor the wire cannot carry, or one with a trailing MP (the target's MPQ is its
    // daemon's to write): the daemon's NIC reports or runs it.
    if (!live::rdma_descriptor(d, seg_->num_chips(), &w).ok() ||
        w.completion == wire::Completion::kTrailingMp)
      return false;
    if (nic_->vps[vp].cq.size() + live::CqRing::kRelease >= live::kCqDepth) {
      *ret = set_error(GLEX_BUSY, fmt::format("E6134 the CQ of vp {} is full; poll it", vp));
      return true;
    }
    const Status st = op == OpCode::kImm
                          ? chip::check_rdma_start(w, live::SegmentAtt(*nic_))
                          : chip::check_rdma_start(w, live::SegmentAtt(*nic_, w.local_key, local));
    if (!st.ok()) {  // refused as it starts: an error, which always reaches the CQ
      const live::RdmaFailure f = live::rdma_failure(st.error().id, op);
      *ret = complete(vp, r, static_cast<glex_ret_t>(f.status), st.error().id, f.reason);
      return true;
    }
    const DirectRdma::Request req{vp, op, r.flags, r.cookie, r.len};
    switch (direct_->send_transfer(dn, d.dest_vp, path.result,
                                   [&](uint64_t peer, size_t run_room, DirectRdma::SendFn send) {
                                     return rdma_->start(req, w, path.result, peer, run_room, send);
                                   })) {
      case DirectPath::Sent::kSent:
        path.add(op == OpCode::kGet ? wire::packet_traffic(wire::kReadRequestBytes)
                                    : wire::transfer_traffic(r.remote_addr, r.len));
        *ret = GLEX_SUCCESS;
        return true;
      case DirectPath::Sent::kBusy:
        *ret = set_error(GLEX_BUSY,
                         fmt::format("E6215 the NIC's queue of {} transfers waiting to start is "
                                     "full (the one to NIC {} would wait behind them); retry",
                                     DirectRdma::kMaxQueued, dn));
        return true;
      case DirectPath::Sent::kNotDirect:
        break;
    }
    return false;
  }

 public:
  glex_ret_t poll_cq(uint8_t vp, int32_t timeout_ms, glex_cq_entry* out) override {
    live::CqRing& q = nic_->vps[vp].cq;
    live::CqCell* c = timeout_ms == 0 ? peek_polling(q) : wait_idle(q, deadline_after(timeout_ms));
    if (!c)
      return timeout_ms == 0
                 ? GLEX_NO_ENTRY
                 : set_error(GLEX_TIMEOUT, fmt::format("E6125 no completion on vp {} within {} ms",
                                                       vp, timeout_ms));
    out->op = c->op;
    out->status = static_cast<glex_ret_t>(c->status);
    out->cookie = c->cookie;
    out->bytes = c->bytes;
    out->error_id = c->error_id;
    std::memcpy(out->reason, c->reason, sizeof out->reason);
    out->reason[sizeof out->reason - 1] = 0;
    q.pop();
    return GLEX_SUCCESS;
  }

  glex_ret_t fence(uint8_t vp, int32_t timeout_ms) override {
    live::VpSlot& s = nic_->vps[vp];
    const uint64_t deadline = deadline_after(timeout_ms);
    const uint64_t spin_until = live::monotonic_ns() + spin_ns_;
    while (s.outstanding.load(std::memory_order_acquire) != 0) {
      uint64_t now = live::monotonic_ns();
      if (now >= deadline)
        return set_error(GLEX_TIMEOUT,
                         fmt::format("E6126 {} descriptors of vp {} still outstanding after {} ms",
                                     s.outstanding.load(), vp, timeout_ms));
      if (now < spin_until) {
        // Direct transfers complete as their answers are taken off the links.
        if (!direct_->active() || !direct_->poll()) live::cpu_relax();
        continue;
      }
      if (direct_->active()) direct_->release();
      flush_counters();
      uint32_t v = s.cq.futex.load();
      s.cq.waiters.fetch_add(1);
      if (s.outstanding.load() != 0)
        live::futex_wait(&s.cq.futex, v,
                         deadline == UINT64_MAX
                             ? 1000000
                             : static_cast<int64_t>(std::min<uint64_t>(deadline - now, 1000000)));
      s.cq.waiters.fetch_sub(1);
    }
    return GLEX_SUCCESS;
  }

 private:
  struct Alloc {
    void* addr;
    uint64_t length;
    int fd;
  };

  // A look at a ring that does not wait: what the direct links brought is taken first.
  template <class Ring>
  decltype(std::declval<Ring&>().peek()) peek_polling(Ring& q) {
    if (auto* c = q.peek()) return c;
    if (direct_->active() && direct_->poll()) return q.peek();
    return nullptr;
  }

  live::PathCounters& refresh(live::PathCounters& p, uint32_t from, uint32_t to) {
    return p.refresh(seg_->header().route_generation.load(std::memory_order_acquire),
                     [&](auto* lines) { return live::forward(*seg_, from, 0, to, {}, lines); });
  }
  live::PathCounters& path_to(uint32_t dest) { return refresh(paths_[dest], node_, dest); }
  live::PathCounters& path_from(uint32_t src) { return refresh(paths_back_[src], src, node_); }
  void flush_counters() {
    for (auto& p : paths_) p.flush();
    for (auto& p : paths_back_) p.flush();
  }

  // Polls for the spin time, brings the port counters up to date, then sleeps until deadline.
  // The spin time adapts: a wait that slept and was woken within kMaxSpinNs by what it waited
  // for would have caught it spinning longer, so the next spins twice as long (up to
  // kMaxSpinNs: busy-polling while traffic flows); a wait that slept longer, or timed out,
  // starts again from GLEX_SPIN_US.
  // Without it two processes whose exchange once took longer than the spin time (the first
  // message's directory question, a preemption) keep waking each other through the kernel, each
  // wake making the next exchange slower than the spin time again.
  static constexpr uint64_t kMaxSpinNs = 1'000'000;
  template <class Ring>
  decltype(std::declval<Ring&>().peek()) wait_idle(Ring& q, uint64_t deadline) {
    const uint64_t spin = std::max(spin_ns_, adaptive_spin_ns_.load(std::memory_order_relaxed));
    const uint64_t start = live::monotonic_ns();
    if (direct_->active()) {
      // The direct links' socket is polled between looks at the ring while the wait spins;
      // once it sleeps, the NIC thread takes the socket.
      const uint64_t spin_until = std::min(deadline, start + spin);
      for (;;) {
        if (auto* c = q.peek()) return c;
        direct_->poll();
        if (auto* c = q.peek()) return c;
        if (live::monotonic_ns() >= spin_until) break;
      }
      direct_->release();
    } else if (auto* c = q.spin(spin, deadline)) {
      return c;
    }
    flush_counters();
    const uint64_t slept_from = live::monotonic_ns();
    auto* c = q.wait(0, deadline);
    const uint64_t slept = live::monotonic_ns() - slept_from;
    adaptive_spin_ns_.store(c && slept < kMaxSpinNs ? std::min(kMaxSpinNs, 2 * spin) : spin_ns_,
                            std::memory_order_relaxed);
    return c;
  }

  // What is wrong with a target address, by its error id: 0 when it names a VP of a NIC of this
  // fabric (all 64 bits: nothing above the node), 6127 when its node is not a NIC, 6128 when its
  // VP is out of range. Cheap, for the hot path; check_dest says it in words.
  uint16_t dest_problem(glex_ep_addr_t dest) const {
    const uint64_t dn = dest >> 8;
    if (dn >= seg_->num_chips() ||
        seg_->chip(static_cast<uint32_t>(dn)).type != static_cast<uint8_t>(wire::ChipType::kNic))
      return 6127;
    return (dest & 0xFF) < live::kVps ? 0 : 6128;
  }
  glex_ret_t check_dest(glex_ep_addr_t dest) {
    switch (dest_problem(dest)) {
      case 0:
        return GLEX_SUCCESS;
      case 6127:
        return set_error(GLEX_INVALID_PARAM, fmt::format("E6127 target node {} is not a NIC of "
                                                         "this fabric",
                                                         dest >> 8));
      default:
        return set_error(GLEX_INVALID_PARAM,
                         fmt::format("E6128 target vp {} exceeds the NIC's VPs 0-{}", dest & 0xFF,
                                     live::kVps - 1));
    }
  }

  void complete_local(uint8_t vp, uint32_t flags, OpCode op, uint64_t bytes) {
    if (chip::completes_locally((flags & GLEX_FLAG_LOCAL_CQ) != 0, false))
      live::push_completion(nic_->vps[vp], op, OpStatus::kSuccess, 0, bytes, 0, "");
  }

  // Same-host RDMA finishes in the call: a completion the rule sends to the CQ (every error, a
  // success when asked: chip::completes_locally) goes there as a remote one does, so the caller
  // handles both alike.
  glex_ret_t complete(uint8_t vp, const glex_rdma_req& r, glex_ret_t st, uint16_t id,
                      const char* why) {
    live::push_completion(nic_->vps[vp], static_cast<OpCode>(r.op), static_cast<OpStatus>(st),
                          r.cookie, st == GLEX_SUCCESS ? r.len : 0, id, why);
    return GLEX_SUCCESS;
  }

  // The memory of a same-host transfer as chip::direct_rdma moves it. The initiator's side is a
  // registration of this process on its NIC (its owner was checked when the request came), the
  // target's a registration of any process on the target NIC, reached by copy().
  class SegmentDirect final : public chip::DirectMemory {
   public:
    SegmentDirect(LiveDevice& dev, live::NicSlot& target, const live::SegmentAtt& att)
        : dev_(dev), target_(target), att_(att) {}
    Status copy(bool into_target, uint64_t dst, uint64_t src, uint64_t n) override {
      // The initiator's registration was this process's when the request was checked (E6118):
      // its address is one of ours whoever holds the entry now.
      const uint64_t mine = into_target ? src : dst;
      auto* local = reinterpret_cast<uint8_t*>(mine & live::kPhysAddressMask);
      return move(into_target ? dst : src, local, n, into_target);
    }
    Status write_target(uint64_t phys, std::span<const uint8_t> in) override {
      return move(phys, const_cast<uint8_t*>(in.data()), in.size(), true);
    }

   private:
    Status move(uint64_t phys, uint8_t* local, uint64_t n, bool write) {
      live::AttEntry read{};
      const uint64_t index = phys >> live::kPhysEntryShift;
      const live::AttEntry* e = att_.last_entry(index);
      if (!e) {
        if (!live::read_att_entry(target_, index, &read)) return live::deregistered_error(phys);
        e = &read;
      }
      const uint64_t vaddr = phys & live::kPhysAddressMask;
      return live::memory_access_status(dev_.copy(*e, index << 32, write, local, vaddr, n), e->pid,
                                        vaddr, n);
    }
    LiveDevice& dev_;
    live::NicSlot& target_;
    const live::SegmentAtt& att_;
  };

  // One copy to or from a registration of a process on this host: a memcpy when the memory is
  // shared (glex_alloc_mem), else cross-memory attach.
  OpStatus copy(const live::AttEntry& e, uint64_t mh, bool write, void* local, uint64_t remote,
                uint64_t len) {
    if (e.pid != pid_)
      if (uint8_t* at =
              maps_.at(static_cast<uint32_t>(mh >> 32), e, remote, len, live::monotonic_ns())) {
        if (write)
          engines_.copy(at, local, len);
        else
          engines_.copy(local, at, len);
        return OpStatus::kSuccess;
      }
    return live::copy_with(e.pid, write, local, remote, len);
  }

  std::unique_ptr<live::Segment> seg_;
  uint32_t node_;
  live::NicSlot* nic_;
  int32_t pid_;
  uint64_t spin_ns_;
  std::atomic<uint64_t> adaptive_spin_ns_{0};  // wait_idle's spin time, GLEX_SPIN_US at least
  std::vector<Alloc> allocs_;
  live::SharedMaps maps_;  // registrations of other processes in their glex_alloc_mem memory
  CopyEngines engines_;
  std::vector<live::PathCounters> paths_;  // by destination NIC
  std::array<bool, live::kVps> my_vps_{};
  std::array<bool, live::kVps> coll_used_{};  // VPs with collective work in the daemon's NIC
  std::set<uint64_t> my_registrations_;
  std::unique_ptr<DirectRdma> rdma_;            // transfers on the direct links (outlives them)
  std::unique_ptr<DirectPath> direct_;          // to processes on other hosts
  std::vector<live::PathCounters> paths_back_;  // get responses, by target NIC
  // The names the daemon wrote into the segment, read once.
  const fabric::Topology& names() {
    std::call_once(names_once_, [this] { names_ = seg_->chip_names(); });
    return names_;
  }
  std::once_flag names_once_;
  fabric::Topology names_;        // the fabric's chips as users name them (resolve_nic)
  wire::RdmaDescriptor scratch_;  // the same-host path's descriptor
};

// The hosts of `fabric` that have a segment on this machine.
std::vector<std::string> local_hosts(const std::string& fabric) {
  std::vector<std::string> hosts;
  const std::string prefix = "galaxy." + fabric + ".";
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.rfind(prefix, 0) == 0) hosts.push_back(n.substr(prefix.size()));
    }
    closedir(d);
  }
  std::sort(hosts.begin(), hosts.end());
  return hosts;
}

}  // namespace

Result<std::unique_ptr<glex_device>> open_live_device(const std::string& fabric_in,
                                                      const std::string& host_in, int32_t nic) {
  // Every variable the device reads is checked here, before anything is attached.
  auto spin_us = env_int_or_default("GLEX_SPIN_US");
  if (!spin_us.ok()) return spin_us.error();
  if (auto engines = env_int("GLEX_COPY_ENGINES"); !engines.ok()) return engines.error();
  std::string fabric = fabric_in.empty() ? env_string_or_default("GLEX_FABRIC") : fabric_in;
  if (live::is_live_spec(fabric)) {
    auto f = live::parse_live_fabric(fabric);
    if (!f.ok()) return f.error();
    fabric = f->name;
  }
  std::string host = host_in.empty() ? env_string("GLEX_HOST").value_or("") : host_in;
  if (host.empty()) {
    auto hosts = local_hosts(fabric);
    if (hosts.size() != 1)
      return make_error(Code::kNotFound, 6129,
                        fmt::format("fabric '{}' has {} hosts on this machine ({}): set GLEX_HOST "
                                    "or give the host",
                                    fabric, hosts.size(), fmt::join(hosts, ", ")));
    host = hosts.front();
  }
  auto seg = live::Segment::attach(fabric, host);
  if (!seg.ok()) return seg.error();
  for (int i = 0; i < 2000 && !(*seg)->header().ready.load(std::memory_order_acquire); ++i)
    usleep(1000);
  if (!(*seg)->header().ready.load())
    return make_error(Code::kTimeout, 6130,
                      fmt::format("the daemon of host {} is not ready", host));
  std::vector<uint32_t> local_nics;
  for (uint32_t n = 0; n < (*seg)->num_chips(); ++n)
    if ((*seg)->chip(n).nic_slot != live::kNoLocal) local_nics.push_back(n);
  if (local_nics.empty())
    return make_error(Code::kNotFound, 6131, fmt::format("host {} has no NIC", host));
  if (nic < 0) {
    auto env = env_nic();
    if (!env.ok()) return env.error();
    if (*env) {
      nic = static_cast<int32_t>(**env);
    } else {
      auto rank = env_rank();
      if (!rank.ok()) return rank.error();
      nic = static_cast<int32_t>(local_nics[static_cast<size_t>(*rank) % local_nics.size()]);
    }
  }
  if (nic < 0 || static_cast<uint32_t>(nic) >= (*seg)->num_chips() ||
      !(*seg)->nic_of(static_cast<uint32_t>(nic)))
    return make_error(Code::kNotFound, 6132,
                      fmt::format("nic = {} is not a NIC of host {} (its NICs: {})", nic, host,
                                  fmt::join(local_nics, ", ")));
  return std::unique_ptr<glex_device>(new LiveDevice(std::move(*seg), static_cast<uint32_t>(nic),
                                                     static_cast<uint64_t>(*spin_us) * 1000));
}

}  // namespace galaxy::glex
