#include "engine/live/daemon.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <optional>

#include "chip/event.h"
#include "chip/mgmt_step.h"
#include "chip/nic.h"
#include "chip/nma.h"
#include "chip/nrc.h"
#include "chip/registers.h"
#include "engine/live/forward.h"
#include "engine/live/mpq_claim.h"
#include "wire/mgmt.h"
#include "wire/mp.h"

namespace galaxy::live {

namespace {

constexpr size_t kChunk = 4096;         // RDMA data per link item
constexpr size_t kMaxFramesQueued = 8;  // per link, before streams pause
constexpr uint64_t kOpScanNs = 10'000'000;

uint64_t port_key(uint32_t chip, uint8_t port) {
  return (uint64_t{chip} << 8) | port;
}

// The link id of a datagram, read before the link validates it, to pick the Link that does.
std::optional<uint32_t> peek_link_id(std::span<const uint8_t> d) {
  if (d.size() < kLinkHeaderBytes || d[0] != (kLinkMagic >> 8) || d[1] != (kLinkMagic & 0xFF))
    return std::nullopt;
  return (uint32_t{d[8]} << 24) | (uint32_t{d[9]} << 16) | (uint32_t{d[10]} << 8) | d[11];
}

void set_reason(char* dst, size_t n, const char* src) {
  std::snprintf(dst, n, "%s", src);
}

}  // namespace

bool push_completion(VpSlot& vp, OpCode op, OpStatus status, uint64_t cookie, uint64_t bytes,
                     uint16_t error_id, const char* reason) {
  uint64_t pos;
  CqCell* c = vp.cq.claim(&pos);
  if (!c) return false;
  c->op = static_cast<uint8_t>(op);
  c->status = static_cast<uint8_t>(status);
  c->error_id = error_id;
  c->cookie = cookie;
  c->bytes = bytes;
  set_reason(c->reason, sizeof c->reason, reason ? reason : "");
  vp.cq.publish(c, pos);
  return true;
}

OpStatus check_att(NicSlot& nic, uint64_t mh, uint64_t addr, uint64_t length, uint32_t access,
                   AttEntry* entry, const char** reason) {
  const uint64_t index = mh >> 32;
  const uint32_t key = static_cast<uint32_t>(mh);
  if (index >= kAttEntries) {
    *reason = "memory handle: ATT index out of range";
    return OpStatus::kAccessError;
  }
  AttEntry& e = nic.att[index];
  uint32_t gen = e.generation;
  if (e.state.load(std::memory_order_acquire) != 2 || e.key != key) {
    *reason = "wrong memory key";
    return OpStatus::kAccessError;
  }
  entry->key = e.key;
  entry->base = e.base;
  entry->length = e.length;
  entry->pid = e.pid;
  entry->memfd = e.memfd;
  entry->memfd_base = e.memfd_base;
  entry->access = e.access;
  entry->generation = e.generation;
  std::atomic_thread_fence(std::memory_order_acquire);
  if (e.state.load(std::memory_order_relaxed) != 2 || e.generation != gen) {
    *reason = "memory deregistered during the access";
    return OpStatus::kAccessError;
  }
  if (addr < entry->base || length > entry->length || addr - entry->base > entry->length - length) {
    *reason = "outside the registered range";
    return OpStatus::kAccessError;
  }
  if ((entry->access & access) != access) {
    *reason = access == kAccessWrite ? "memory not registered for write"
                                     : "memory not registered for read";
    return OpStatus::kAccessError;
  }
  return OpStatus::kSuccess;
}

OpStatus copy_with(int32_t pid, bool write, void* local, uint64_t remote, uint64_t length) {
  if (length == 0) return OpStatus::kSuccess;
  if (pid == getpid()) {
    void* r = reinterpret_cast<void*>(remote);
    if (write)
      std::memcpy(r, local, length);
    else
      std::memcpy(local, r, length);
    return OpStatus::kSuccess;
  }
  uint64_t done = 0;
  while (done < length) {
    iovec l{static_cast<uint8_t*>(local) + done, length - done};
    iovec r{reinterpret_cast<void*>(remote + done), length - done};
    ssize_t n =
        write ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n <= 0) return errno == ESRCH ? OpStatus::kPeerDead : OpStatus::kAccessError;
    done += static_cast<uint64_t>(n);
  }
  return OpStatus::kSuccess;
}

FabricDaemon::FabricDaemon(const LiveFabric& f, int host, const DaemonOptions& o)
    : fabric_(f), host_(host), options_(o) {}

FabricDaemon::~FabricDaemon() {
  if (seg_) {
    seg_->header().ready.store(0);
    seg_->header().daemon_pid.store(0);
  }
  if (epfd_ >= 0) close(epfd_);
  if (efd_ >= 0) close(efd_);
  if (sock_ >= 0) close(sock_);
}

Result<std::unique_ptr<FabricDaemon>> FabricDaemon::start(const LiveFabric& f, int host,
                                                          const DaemonOptions& o) {
  std::unique_ptr<FabricDaemon> d(new FabricDaemon(f, host, o));
  GALAXY_TRY(d->init());
  return d;
}

Status FabricDaemon::init() {
  auto seg = Segment::create(fabric_, host_);
  if (!seg.ok()) return seg.error();
  seg_ = std::move(*seg);
  const fabric::Topology& t = fabric_.topology;
  chips_.resize(t.num_nodes());
  for (uint32_t n = 0; n < t.num_nodes(); ++n) {
    if (fabric_.host_of[n] != host_) continue;
    uint16_t ports = static_cast<uint16_t>(t.num_ports(n));
    if (t.is_nic(n))
      chips_[n] = std::make_unique<chip::Nic>(ports);
    else
      chips_[n] = std::make_unique<chip::Nrc>(ports);
    // Factory programming: the chip id in the EEPROM boot image (as the simulated engine).
    chip::BootImage img;
    img.registers.push_back({chip::reg::kChipId, n | (uint64_t{1} << 16)});
    chips_[n]->eeprom().write_block(0, chip::encode_boot_image(img));
    GALAXY_TRY(chips_[n]->power_on());
  }
  for (uint32_t n = 0; n < t.num_nodes(); ++n) {
    if (!chips_[n]) continue;
    for (uint8_t p = 0; p < t.num_ports(n); ++p) {
      auto peer = t.peer({n, p});
      if (!peer) continue;
      if (fabric_.host_of[peer->node] == host_) {
        chips_[n]->link_up(
            p, {true, t.is_nic(peer->node) ? wire::ChipType::kNic : wire::ChipType::kNrc,
                static_cast<uint16_t>(peer->node), peer->port,
                static_cast<uint8_t>(t.num_ports(peer->node))});
        continue;
      }
      HostLink hl;
      hl.chip = n;
      hl.port = p;
      hl.peer_chip = peer->node;
      hl.peer_port = peer->port;
      hl.peer_host = fabric_.host_of[peer->node];
      const LiveHost& ph = fabric_.hosts[static_cast<size_t>(hl.peer_host)];
      hl.peer_address.sin_family = AF_INET;
      hl.peer_address.sin_port = htons(ph.port);
      if (inet_pton(AF_INET, ph.ip.c_str(), &hl.peer_address.sin_addr) != 1)
        return make_error(Code::kInvalidArgument, 4735,
                          fmt::format("host {}: ip = '{}' is not an IPv4 address", ph.name, ph.ip));
      LinkConfig lc;
      lc.link_id =
          static_cast<uint32_t>(std::min(port_key(n, p), port_key(peer->node, peer->port)));
      hl.link = std::make_unique<Link>(lc);
      link_by_port_[port_key(n, p)] = links_.size();
      link_by_id_[lc.link_id] = links_.size();
      if (options_.impaired) {
        ImpairmentConfig ic = options_.impairment;
        ic.seed = ic.seed * 1000003 + lc.link_id * 2 + static_cast<uint64_t>(host_);
        impairments_.push_back(std::make_unique<Impairment>(ic));
      } else {
        impairments_.push_back(nullptr);
      }
      links_.push_back(std::move(hl));
    }
  }
  for (uint32_t n = 0; n < t.num_nodes(); ++n)
    if (chips_[n] && !t.is_nic(n)) export_routes(n);
  GALAXY_TRY(open_socket());
  // The doorbell processes ring when they queued work for a sleeping daemon.
  efd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  epfd_ = epoll_create1(EPOLL_CLOEXEC);
  if (efd_ < 0 || epfd_ < 0)
    return make_error(Code::kIoError, 4730,
                      fmt::format("doorbell socket/epoll: {}", std::strerror(errno)));
  {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    const std::string n = seg_->doorbell_name();
    const size_t len = std::min(n.size(), sizeof a.sun_path - 2);
    std::memcpy(a.sun_path + 1, n.data(), len);
    if (bind(efd_, reinterpret_cast<sockaddr*>(&a),
             static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + len)) != 0)
      return make_error(Code::kIoError, 4734,
                        fmt::format("doorbell @{}: {}", n, std::strerror(errno)));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = efd_;
  epoll_ctl(epfd_, EPOLL_CTL_ADD, efd_, &ev);
  ev.data.fd = sock_;
  epoll_ctl(epfd_, EPOLL_CTL_ADD, sock_, &ev);
  seg_->header().ready.store(1, std::memory_order_release);
  return {};
}

Status FabricDaemon::open_socket() {
  const LiveHost& me = fabric_.hosts[static_cast<size_t>(host_)];
  sock_ = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (sock_ < 0)
    return make_error(Code::kIoError, 4731, fmt::format("socket: {}", std::strerror(errno)));
  // Room for a whole window of frames; FORCE passes net.core.rmem_max when we may.
  int buf = 8 << 20;
  if (setsockopt(sock_, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) != 0)
    setsockopt(sock_, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  if (setsockopt(sock_, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf) != 0)
    setsockopt(sock_, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(me.port);
  if (inet_pton(AF_INET, me.ip.c_str(), &a.sin_addr) != 1)
    return make_error(Code::kInvalidArgument, 4732,
                      fmt::format("host {}: ip = '{}' is not an IPv4 address", me.name, me.ip));
  if (bind(sock_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    return make_error(
        Code::kIoError, 4733,
        fmt::format("host {}: bind {}:{}: {}", me.name, me.ip, me.port, std::strerror(errno)));
  return {};
}

std::vector<FabricDaemon::LinkView> FabricDaemon::links() const {
  std::vector<LinkView> v;
  for (const HostLink& l : links_)
    v.push_back({l.chip, l.port, l.peer_chip, l.peer_port, l.link->state(), l.link->stats()});
  return v;
}

void FabricDaemon::run(const std::atomic<bool>& stop) {
  uint64_t idle_since = monotonic_ns();
  while (!stop.load(std::memory_order_relaxed)) {
    if (poll_once()) {
      idle_since = monotonic_ns();
      continue;
    }
    uint64_t now = monotonic_ns();
    if (now - idle_since < options_.spin_ns) {
      cpu_relax();
      continue;
    }
    // Sleep until a process kicks us, a datagram arrives, or the next timer.
    uint64_t next = now + 10'000'000;
    for (const HostLink& l : links_) next = std::min(next, l.link->next_deadline_ns());
    int timeout_ms = next <= now ? 0 : static_cast<int>((next - now + 999'999) / 1'000'000);
    SegHeader& h = seg_->header();
    h.daemon_sleeping.store(1, std::memory_order_seq_cst);
    if (!seg_->egress().peek()) {
      epoll_event evs[4];
      epoll_wait(epfd_, evs, 4, timeout_ms);
    }
    h.daemon_sleeping.store(0, std::memory_order_relaxed);
    char drain[64];
    while (recv(efd_, drain, sizeof drain, 0) > 0) {
    }
    idle_since = monotonic_ns();
  }
}

bool FabricDaemon::poll_once() {
  const uint64_t now = monotonic_ns();
  bool busy = drain_egress();
  if (!held_completions_.empty()) busy |= retry_completions();
  if (!mgmt_waiting_.empty()) busy |= retry_mgmt_to_host();
  for (size_t i = 0; i < links_.size(); ++i) busy |= process_held(i);
  busy |= pump_streams();
  busy |= flush_links(now);
  busy |= receive_udp(now);
  timers(now);
  update_link_states();
  return busy;
}

// ---- egress -------------------------------------------------------------------------------

bool FabricDaemon::drain_egress() {
  EgressRing& ring = seg_->egress();
  int n = 0;
  while (n < 256) {
    EgressCell* c = ring.peek();
    if (!c) break;
    on_egress(*c);
    ring.pop();
    ++n;
  }
  stats_.egress_cells += static_cast<uint64_t>(n);
  return n > 0;
}

void FabricDaemon::on_egress(const EgressCell& cell) {
  switch (static_cast<EgressKind>(cell.kind)) {
    case EgressKind::kMgmt: {
      EgressMgmt m;
      std::memcpy(&m, cell.body, sizeof m);
      if (m.nic >= chips_.size() || !chips_[m.nic] || !fabric_.topology.is_nic(m.nic) ||
          m.vp >= kVps) {
        ++stats_.dropped;
        return;
      }
      auto& nic = static_cast<chip::Nic&>(*chips_[m.nic]);
      Status s = nic.post_mgmt(m.vp, std::span<const uint8_t>(m.descriptor, 64));
      if (!s.ok()) {
        complete(m.nic, m.vp, OpCode::kMp, OpStatus::kDescriptorError, 0, 0, s.error().id,
                 s.error().message.c_str());
        return;
      }
      while (auto w = nic.next_work()) {
        if (w->kind == chip::NicWork::Kind::kMgmtRequest) {
          nic.complete(w->vp, true);
          ++stats_.mgmt_packets;
          send_mgmt(m.nic, 0, w->mgmt);
        } else {
          nic.complete(w->vp, false, w->error.id);
          complete(m.nic, w->vp, OpCode::kMp, OpStatus::kDescriptorError, 0, 0, w->error.id,
                   w->error.message.c_str());
        }
      }
      return;
    }
    case EgressKind::kMp: {
      EgressMp m;
      std::memcpy(&m, cell.body, sizeof m);
      if (!seg_->nic_of(m.src_node) || m.src_vp >= kVps || m.length > 120 ||
          m.dest_node >= seg_->num_chips() || m.dest_vp >= kVps) {
        ++stats_.dropped;
        return;
      }
      Forwarded f =
          forward(*seg_, m.src_node, 0, m.dest_node, wire::packet_traffic(wire::kMpBytes));
      ItemMp im{m.dest_node, m.src_node, m.dest_vp, m.src_vp, m.kind_flags, m.length};
      if (f.kind == Forwarded::Kind::kLeavesHost) {
        queue_item(link_at(f.chip, f.port), ItemType::kMp, f.chip, f.port, &im, sizeof im, m.data,
                   m.length);
      } else if (f.kind == Forwarded::Kind::kDelivered) {
        if (!deliver_mp(f.chip, im, m.data)) ++stats_.dropped;
      } else {
        complete(m.src_node, m.src_vp, OpCode::kMp, OpStatus::kUnreachable, 0, m.length, 4740,
                 "no route to the destination");
      }
      return;
    }
    case EgressKind::kRdma: {
      EgressRdma d;
      std::memcpy(&d, cell.body, sizeof d);
      start_rdma(d);
      return;
    }
  }
  ++stats_.dropped;  // an unknown kind
}

void FabricDaemon::start_rdma(const EgressRdma& d) {
  NicSlot* slot = seg_->nic_of(d.src_node);
  if (!slot || d.src_vp >= kVps) {
    ++stats_.dropped;
    return;
  }
  VpSlot& vp = slot->vps[d.src_vp];
  const OpCode op = static_cast<OpCode>(d.op);
  // A descriptor from a process is checked like one from the network: a bad one fails.
  if ((op != OpCode::kPut && op != OpCode::kGet && op != OpCode::kImm) ||
      (op == OpCode::kImm && (d.length == 0 || d.length > sizeof d.imm)) ||
      d.dest_node >= seg_->num_chips() || d.remote_addr + d.length < d.remote_addr) {
    complete(d.src_node, d.src_vp, op, OpStatus::kDescriptorError, d.cookie, 0, 4753,
             "malformed RDMA descriptor");
    vp.outstanding.fetch_sub(1);
    return;
  }
  // The daemon reads and writes the initiator's memory for it: only memory that the VP's owner
  // registered, so no process can make the daemon touch another's memory.
  if (op != OpCode::kImm) {
    AttEntry e{};
    const char* why = "";
    if (vp.owner_pid.load() != d.pid ||
        check_att(*slot, d.local_mh, d.local_addr, d.length, 0, &e, &why) != OpStatus::kSuccess ||
        e.pid != d.pid) {
      complete(d.src_node, d.src_vp, op, OpStatus::kAccessError, d.cookie, 0, 4754,
               "local memory not registered by the VP's owner");
      vp.outstanding.fetch_sub(1);
      return;
    }
  }
  Forwarded f = forward(*seg_, d.src_node, 0, d.dest_node,
                        op == OpCode::kGet ? wire::packet_traffic(wire::kReadRequestBytes)
                                           : wire::transfer_traffic(d.remote_addr, d.length));
  // A get whose request path stays here but whose data come back over a link is served by
  // this daemon for the local target.
  const bool local_get = op == OpCode::kGet && f.kind == Forwarded::Kind::kDelivered;
  if (f.kind != Forwarded::Kind::kLeavesHost && !local_get) {
    complete(d.src_node, d.src_vp, op, OpStatus::kUnreachable, d.cookie, 0, 4741,
             "no route to the target over the links");
    vp.outstanding.fetch_sub(1);
    return;
  }
  const uint64_t id = next_op_id_++;
  PendingOp p;
  p.nic = d.src_node;
  p.vp = d.src_vp;
  p.op = op;
  p.flags = d.flags;
  p.pid = d.pid;
  p.local_addr = d.local_addr;
  p.length = d.length;
  p.cookie = d.cookie;
  p.deadline = monotonic_ns() + options_.op_timeout_ns;
  ops_[id] = p;
  if (op == OpCode::kGet) {
    ItemGetReq g{id,
                 d.src_node,
                 d.dest_node,
                 d.remote_mh,
                 d.remote_addr,
                 d.length,
                 d.event_addr,
                 d.event_mh,
                 {d.event[0], d.event[1]},
                 static_cast<uint8_t>((d.flags & kFlagRemoteEvent) ? kPutEvent : 0),
                 {}};
    if (local_get)
      on_get_req(f.chip, g);
    else
      queue_item(link_at(f.chip, f.port), ItemType::kGetReq, f.chip, f.port, &g, sizeof g);
    return;
  }
  const size_t link = link_at(f.chip, f.port);
  Stream s(false, id, d.src_node, d.pid, d.local_addr, d.length, link, f.chip, f.port);
  ItemPut& h = s.put;
  h.op_id = id;
  h.initiator = d.src_node;
  h.dest_node = d.dest_node;
  h.remote_mh = d.remote_mh;
  h.op_base = d.remote_addr;
  h.op_length = d.length;
  h.event_addr = d.event_addr;
  h.event_mh = d.event_mh;
  h.event[0] = d.event[0];
  h.event[1] = d.event[1];
  h.flags = (d.flags & kFlagRemoteEvent) ? kPutEvent : 0;
  if (op == OpCode::kImm) {
    h.flags |= kPutImm | kPutLast;
    queue_item(link, ItemType::kPut, f.chip, f.port, &h, sizeof h, d.imm, d.length);
    return;
  }
  streams_.push_back(s);
}

// ---- management ---------------------------------------------------------------------------

void FabricDaemon::send_mgmt(uint32_t chip, uint8_t out_port, std::span<const uint8_t> packet) {
  // A response's port comes from the request's backward route: any value a requester chose.
  if (out_port >= seg_->chip(chip).num_ports) {
    ++stats_.dropped;
    return;
  }
  PeerInfo& l = seg_->peer(chip, out_port);
  if (l.chip == kNoChip || !l.up.load(std::memory_order_relaxed)) {
    ++stats_.dropped;
    return;
  }
  count_tx(*seg_, chip, out_port, wire::kMgmtPacketTraffic);
  if (l.crosses_hosts) {
    queue_item(link_at(chip, out_port), ItemType::kMgmt, chip, out_port, packet.data(),
               packet.size());
    return;
  }
  arrive_mgmt(l.chip, l.port, packet);
}

void FabricDaemon::arrive_mgmt(uint32_t chip, uint8_t in_port, std::span<const uint8_t> packet) {
  if (chip >= chips_.size() || !chips_[chip]) {
    ++stats_.dropped;
    return;
  }
  count_rx(*seg_, chip, in_port, wire::kMgmtPacketTraffic);
  wire::MgmtPacketBytes bytes{};
  if (packet.size() != bytes.size()) {
    ++stats_.dropped;
    return;
  }
  std::copy(packet.begin(), packet.end(), bytes.begin());
  chip::Chip& c = *chips_[chip];
  chip::MgmtArrival a = chip::accept_mgmt(c, in_port, bytes);
  switch (a.action) {
    case chip::MgmtArrival::Action::kForward:
      send_mgmt(chip, a.out_port, bytes);
      return;
    case chip::MgmtArrival::Action::kToNma:
      run_nma(chip, bytes);
      return;
    case chip::MgmtArrival::Action::kToHost:
      break;
    case chip::MgmtArrival::Action::kDrop:
      ++stats_.dropped;
      return;
  }
  auto& nic = static_cast<chip::Nic&>(c);
  if (nic.receive_mgmt(bytes) == chip::NicRx::kDiscarded) {
    ++stats_.dropped;
    return;
  }
  if (!mgmt_to_host(chip)) mgmt_waiting_.insert(chip);
}

// The chip model's MPQ is the NIC's input: its packets enter the host's MPQ ring in order as
// far as there is room; the rest wait there (chip/mpq.h) and are retried by poll_once. Returns
// whether nothing is left waiting.
bool FabricDaemon::mgmt_to_host(uint32_t chip) {
  auto& nic = static_cast<chip::Nic&>(*chips_[chip]);
  NicSlot* slot = seg_->nic_of(chip);
  bool empty = true;
  for (uint8_t v = 0; v < kVps; ++v) {
    VpSlot& vp = slot->vps[v];
    while (nic.mpq_count(v) > 0) {
      uint64_t pos;
      MpqCell* cell;
      const chip::MpqAdmit admit = claim_mpq(vp, &cell, &pos);
      if (admit == chip::MpqAdmit::kWait) {
        empty = false;
        break;
      }
      auto e = nic.poll_mpq(v);
      if (admit != chip::MpqAdmit::kWrite) {
        ++stats_.dropped;  // a response for an endpoint that closed or died: nobody to tell
        continue;
      }
      cell->src_node = e->src_node;
      cell->src_vp = e->src_vp;
      cell->length = e->length;
      cell->kind_flags = static_cast<uint8_t>(wire::MpKind::kMgmt) << 4;
      cell->tag = 0;
      std::memcpy(cell->data, e->data.data(), std::min<size_t>(e->length, sizeof cell->data));
      vp.mpq.publish(cell, pos);
    }
  }
  return empty;
}

bool FabricDaemon::retry_mgmt_to_host() {
  bool any = false;
  for (auto it = mgmt_waiting_.begin(); it != mgmt_waiting_.end();) {
    if (mgmt_to_host(*it)) {
      it = mgmt_waiting_.erase(it);
      any = true;
    } else {
      ++it;
    }
  }
  return any;
}

void FabricDaemon::sync_counters(uint32_t chip) {
  chip::Chip& c = *chips_[chip];
  const uint32_t local = seg_->chip(chip).local;
  for (uint8_t p = 0; p < c.num_ports(); ++p) {
    PortCounters& pc = seg_->counters(local, p);
    chip::PortState& ps = c.port(p);
    ps.tx_packets = pc.tx.packets.load(std::memory_order_relaxed);
    ps.rx_packets = pc.rx.packets.load(std::memory_order_relaxed);
    ps.tx_flits = pc.tx.flits.load(std::memory_order_relaxed);
    ps.rx_flits = pc.rx.flits.load(std::memory_order_relaxed);
    ps.dirty_discards = pc.rx.discards.load(std::memory_order_relaxed);
    auto it = link_by_port_.find(port_key(chip, p));
    if (it != link_by_port_.end()) {
      const LinkStats& ls = links_[it->second].link->stats();
      ps.retransmissions = ls.retransmissions;
      ps.crc_errors = ls.crc_errors;
      ps.handshakes = ls.handshakes;
    }
  }
}

void FabricDaemon::run_nma(uint32_t chip, std::span<const uint8_t> packet) {
  ++stats_.nma_requests;
  sync_counters(chip);
  chip::Chip& c = *chips_[chip];
  auto out = chip::serve_nma(c, packet);
  if (!out) {
    ++stats_.dropped;
    return;
  }
  c.nma().push_response(out->response);
  if (!fabric_.topology.is_nic(chip) && out->work.kind == chip::NmaWork::Kind::kRegWrite)
    export_routes(chip);
  drain_nma(chip);
}

void FabricDaemon::drain_nma(uint32_t chip) {
  chip::drain_nma(*chips_[chip], [&](uint8_t port, const wire::MgmtPacketBytes& bytes) {
    send_mgmt(chip, port, bytes);
  });
}

void FabricDaemon::export_routes(uint32_t chip) {
  auto& nrc = static_cast<chip::Nrc&>(*chips_[chip]);
  const uint32_t local = seg_->chip(chip).local;
  const uint32_t n = seg_->num_chips();
  for (uint8_t p = 0; p < nrc.num_ports(); ++p) {
    std::atomic<uint32_t>* row = seg_->route_row(local, p);
    for (uint32_t d = 0; d < n; ++d)
      row[d].store(static_cast<uint32_t>(nrc.allowed_ports(p, d)), std::memory_order_relaxed);
  }
  seg_->header().route_generation.fetch_add(1, std::memory_order_release);
}

// ---- link items ---------------------------------------------------------------------------

size_t FabricDaemon::link_at(uint32_t chip, uint8_t port) const {
  return link_by_port_.at(port_key(chip, port));
}

void FabricDaemon::queue_item(size_t link, ItemType type, uint32_t from_chip, uint8_t from_port,
                              const void* body, size_t body_len, const void* data,
                              size_t data_len) {
  HostLink& l = links_[link];
  ItemHead h{static_cast<uint16_t>(sizeof(ItemHead) + body_len + data_len),
             static_cast<uint8_t>(type), from_port, from_chip};
  const size_t max = 8192;
  if (!l.batch.empty() && l.batch.size() + h.length > max) {
    l.out_frames.push_back(std::move(l.batch));
    l.batch.clear();
  }
  const size_t at = l.batch.size();
  l.batch.resize(at + h.length);
  std::memcpy(l.batch.data() + at, &h, sizeof h);
  std::memcpy(l.batch.data() + at + sizeof h, body, body_len);
  if (data_len) std::memcpy(l.batch.data() + at + sizeof h + body_len, data, data_len);
  ++stats_.items_sent;
}

void FabricDaemon::route_item_from(uint32_t nic, uint32_t dest, ItemType type, const void* body,
                                   size_t body_len, const void* data, size_t data_len) {
  Forwarded f = forward(*seg_, nic, 0, dest, wire::packet_traffic(body_len + data_len));
  if (f.kind == Forwarded::Kind::kLeavesHost) {
    queue_item(link_at(f.chip, f.port), type, f.chip, f.port, body, body_len, data, data_len);
    return;
  }
  if (f.kind == Forwarded::Kind::kDelivered) {
    // Initiator and target on this host (a daemon-executed op looped back): handle here.
    std::vector<uint8_t> item(sizeof(ItemHead) + body_len + data_len);
    ItemHead h{static_cast<uint16_t>(item.size()), static_cast<uint8_t>(type), 0, kNoChip};
    std::memcpy(item.data(), &h, sizeof h);
    std::memcpy(item.data() + sizeof h, body, body_len);
    if (data_len) std::memcpy(item.data() + sizeof h + body_len, data, data_len);
    if (type == ItemType::kResp) {
      ItemResp r;
      std::memcpy(&r, body, sizeof r);
      on_resp(r);
    } else if (type == ItemType::kMpNack) {
      ItemMpNack n;
      std::memcpy(&n, body, sizeof n);
      on_mp_nack(n);
    } else if (type == ItemType::kGetResp) {
      ItemGetResp g;
      std::memcpy(&g, body, sizeof g);
      on_get_resp(g, {static_cast<const uint8_t*>(data), data_len});
    }
    return;
  }
  ++stats_.dropped;
}

bool FabricDaemon::deliver_mp(uint32_t nic, const ItemMp& mp, const uint8_t* data) {
  NicSlot* slot = seg_->nic_of(nic);
  auto nack = [&](OpStatus st, uint16_t id, const char* why) {
    ItemMpNack n{mp.src_node, mp.src_vp, static_cast<uint8_t>(st), id, {}};
    set_reason(n.reason, sizeof n.reason, why);
    ++stats_.mps_refused;
    route_item_from(nic, mp.src_node, ItemType::kMpNack, &n, sizeof n);
    return true;
  };
  if (!slot || mp.dest_vp >= kVps) return nack(OpStatus::kUnreachable, 4742, "no such VP");
  VpSlot& vp = slot->vps[mp.dest_vp];
  uint64_t pos;
  MpqCell* c;
  switch (claim_mpq(vp, &c, &pos)) {
    case chip::MpqAdmit::kWrite:
      break;
    case chip::MpqAdmit::kNotOpen:
      return nack(OpStatus::kUnreachable, 4743, "target VP is not open");
    case chip::MpqAdmit::kOwnerGone:
      return nack(OpStatus::kPeerDead, 4744, "target process is gone");
    case chip::MpqAdmit::kWait:
      return false;  // hold the link's items, in order, until the receiver drains it
  }
  c->src_node = static_cast<uint16_t>(mp.src_node);
  c->src_vp = mp.src_vp;
  c->length = mp.length;
  c->kind_flags = mp.kind_flags;
  c->tag = 0;
  std::memcpy(c->data, data, mp.length);
  vp.mpq.publish(c, pos);
  vp.mps_received.fetch_add(1, std::memory_order_relaxed);
  ++stats_.mps_delivered;
  return true;
}

bool FabricDaemon::process_item(size_t link, std::span<const uint8_t> item) {
  ItemHead h;
  if (!read_struct(item, 0, &h) || h.length != item.size() || h.from_chip >= seg_->num_chips() ||
      h.from_port >= seg_->max_ports()) {
    ++stats_.dropped;
    return true;
  }
  PeerInfo& entry = seg_->peer(h.from_chip, h.from_port);
  if (entry.chip == kNoChip || !seg_->is_local(entry.chip)) {
    ++stats_.dropped;
    return true;
  }
  const uint32_t chip = entry.chip;
  const uint8_t in_port = entry.port;
  std::span<const uint8_t> body = item.subspan(sizeof h);
  (void)link;
  auto route = [&](uint32_t dest, const wire::Traffic& t, size_t body_len, uint32_t* nic) {
    Forwarded f = forward_arrived(*seg_, chip, in_port, dest, t);
    if (f.kind == Forwarded::Kind::kDelivered) {
      *nic = f.chip;
      return true;
    }
    if (f.kind == Forwarded::Kind::kLeavesHost)  // onwards to a third host
      queue_item(link_at(f.chip, f.port), static_cast<ItemType>(h.type), f.chip, f.port,
                 body.data(), body_len, body.data() + body_len, body.size() - body_len);
    else
      ++stats_.dropped;
    return false;
  };
  ++stats_.items_received;
  uint32_t nic = 0;
  switch (static_cast<ItemType>(h.type)) {
    case ItemType::kMgmt:
      arrive_mgmt(chip, in_port, body);
      return true;
    case ItemType::kMp: {
      ItemMp m;
      if (!read_struct(body, 0, &m) || m.length > 120 || body.size() != sizeof m + m.length) break;
      if (!route(m.dest_node, wire::packet_traffic(wire::kMpBytes), body.size(), &nic)) return true;
      return deliver_mp(nic, m, body.data() + sizeof m);
    }
    case ItemType::kPut: {
      ItemPut p;
      if (!read_struct(body, 0, &p)) break;
      auto data = body.subspan(sizeof p);
      if (!route(p.dest_node, wire::transfer_traffic(p.op_base + p.offset, data.size()),
                 body.size(), &nic))
        return true;
      on_put(nic, p, data);
      return true;
    }
    case ItemType::kGetReq: {
      ItemGetReq g;
      if (!read_struct(body, 0, &g) || body.size() != sizeof g) break;
      if (!route(g.dest_node, wire::packet_traffic(wire::kReadRequestBytes), body.size(), &nic))
        return true;
      on_get_req(nic, g);
      return true;
    }
    case ItemType::kGetResp: {
      ItemGetResp g;
      if (!read_struct(body, 0, &g)) break;
      auto data = body.subspan(sizeof g);
      if (!route(g.initiator, wire::transfer_traffic(g.offset, data.size()), body.size(), &nic))
        return true;
      on_get_resp(g, data);
      return true;
    }
    case ItemType::kResp: {
      ItemResp r;
      if (!read_struct(body, 0, &r) || body.size() != sizeof r) break;
      if (!route(r.initiator, wire::packet_traffic(sizeof r), body.size(), &nic)) return true;
      on_resp(r);
      return true;
    }
    case ItemType::kMpNack: {
      ItemMpNack n;
      if (!read_struct(body, 0, &n) || body.size() != sizeof n) break;
      if (!route(n.sender, wire::packet_traffic(sizeof n), body.size(), &nic)) return true;
      on_mp_nack(n);
      return true;
    }
  }
  ++stats_.dropped;  // a malformed item: counted and discarded, the rest of the frame goes on
  return true;
}

void FabricDaemon::feed_frame(size_t link, std::span<const uint8_t> payload) {
  if (link >= links_.size()) return;
  links_[link].held.emplace_back(payload.begin(), payload.end());
  process_held(link);
  links_[link].held.clear();  // items waiting on a full MPQ are dropped here, not retried
  links_[link].held_offset = 0;
}

bool FabricDaemon::process_held(size_t link) {
  HostLink& l = links_[link];
  bool any = false;
  for (;;) {
    if (l.held.empty()) {
      std::vector<uint8_t> frame;
      if (!l.link->pop_delivered(&frame)) break;
      l.held.push_back(std::move(frame));
      l.held_offset = 0;
    }
    std::vector<uint8_t>& f = l.held.front();
    while (l.held_offset < f.size()) {
      ItemHead h;
      if (!read_struct(std::span<const uint8_t>(f), l.held_offset, &h) || h.length < sizeof h ||
          l.held_offset + h.length > f.size()) {
        ++stats_.dropped;
        l.held_offset = f.size();
        break;
      }
      if (!process_item(link, std::span<const uint8_t>(f).subspan(l.held_offset, h.length)))
        return any;  // the receiver is full: try again later, in order
      l.held_offset += h.length;
      any = true;
    }
    l.held.pop_front();
    l.held_offset = 0;
    any = true;
  }
  return any;
}

void FabricDaemon::on_put(uint32_t nic, const ItemPut& p, std::span<const uint8_t> data) {
  auto key = std::make_pair(p.initiator, p.op_id);
  Inbound& in = inbound_[key];
  NicSlot* slot = seg_->nic_of(nic);
  if (in.status == OpStatus::kSuccess) {
    AttEntry e{};
    const char* why = "";
    OpStatus st = check_att(*slot, p.remote_mh, p.op_base, p.op_length, kAccessWrite, &e, &why);
    if (st == OpStatus::kSuccess && p.offset + data.size() > p.op_length) {
      st = OpStatus::kAccessError;
      why = "chunk beyond the transfer";
    }
    if (st == OpStatus::kSuccess) {
      st = copy_with(e.pid, true, const_cast<uint8_t*>(data.data()), p.op_base + p.offset,
                     data.size());
      why = st == OpStatus::kPeerDead ? "target process is gone" : "target memory not mapped";
      stats_.rdma_bytes_written += data.size();
    }
    if (st != OpStatus::kSuccess) {
      in.status = st;
      in.reason = why;
      in.error_id = 4745;
    }
  }
  if (!(p.flags & kPutLast)) return;
  if (in.status == OpStatus::kSuccess && (p.flags & kPutEvent)) {
    const char* why = "";
    OpStatus st;
    if (!write_event(nic, p.event_mh, p.event_addr, p.event, &why, &st)) {
      in.status = st;
      in.reason = why;
      in.error_id = 4746;
    }
  }
  ItemResp r{p.op_id, p.initiator, static_cast<uint8_t>(in.status), 0, in.error_id, {}};
  set_reason(r.reason, sizeof r.reason, in.reason);
  inbound_.erase(key);
  route_item_from(nic, p.initiator, ItemType::kResp, &r, sizeof r);
}

void FabricDaemon::on_get_req(uint32_t nic, const ItemGetReq& g) {
  AttEntry e{};
  const char* why = "";
  OpStatus st =
      check_att(*seg_->nic_of(nic), g.remote_mh, g.remote_addr, g.length, kAccessRead, &e, &why);
  Forwarded f{};
  if (st == OpStatus::kSuccess) {
    f = forward(*seg_, nic, 0, g.initiator, wire::transfer_traffic(0, g.length));
    if (f.kind != Forwarded::Kind::kLeavesHost) {
      st = OpStatus::kUnreachable;
      why = "no route back to the initiator";
    }
  }
  if (st != OpStatus::kSuccess) {
    ItemResp r{g.op_id, g.initiator, static_cast<uint8_t>(st), 0, 4747, {}};
    set_reason(r.reason, sizeof r.reason, why);
    route_item_from(nic, g.initiator, ItemType::kResp, &r, sizeof r);
    return;
  }
  Stream& s = streams_.emplace_back(true, g.op_id, g.initiator, e.pid, g.remote_addr, g.length,
                                    link_at(f.chip, f.port), f.chip, f.port);
  s.target_nic = nic;
  s.event = g.flags & kPutEvent;
  s.event_addr = g.event_addr;
  s.event_mh = g.event_mh;
  s.event_data[0] = g.event[0];
  s.event_data[1] = g.event[1];
}

void FabricDaemon::on_get_resp(const ItemGetResp& g, std::span<const uint8_t> data) {
  auto it = ops_.find(g.op_id);
  if (it == ops_.end() || it->second.nic != g.initiator) return;  // timed out already
  PendingOp& op = it->second;
  if (g.offset + data.size() > op.length) {
    fail_op(g.op_id, OpStatus::kDescriptorError, 4748, "get response beyond the transfer");
    return;
  }
  OpStatus st = copy_with(op.pid, true, const_cast<uint8_t*>(data.data()), op.local_addr + g.offset,
                          data.size());
  if (st != OpStatus::kSuccess) {
    fail_op(g.op_id, st, 4749, "initiator memory not writable");
    return;
  }
  if (g.flags & kPutLast) fail_op(g.op_id, OpStatus::kSuccess, 0, "");
}

void FabricDaemon::on_resp(const ItemResp& r) {
  auto it = ops_.find(r.op_id);
  if (it == ops_.end() || it->second.nic != r.initiator) return;
  char reason[41];
  std::memcpy(reason, r.reason, 40);
  reason[40] = 0;
  fail_op(r.op_id, static_cast<OpStatus>(r.status), r.error_id, reason);
}

void FabricDaemon::on_mp_nack(const ItemMpNack& n) {
  NicSlot* slot = seg_->nic_of(n.sender);
  if (!slot || n.sender_vp >= kVps) return;
  char reason[41];
  std::memcpy(reason, n.reason, 40);
  reason[40] = 0;
  complete(n.sender, n.sender_vp, OpCode::kMp, static_cast<OpStatus>(n.status), 0, 0, n.error_id,
           reason);
}

// Completes a pending operation: a CQ entry when asked for or on error, and the VP's count of
// outstanding descriptors (fence) goes down.
void FabricDaemon::complete(uint32_t nic, uint8_t vp, OpCode op, OpStatus status, uint64_t cookie,
                            uint64_t bytes, uint16_t error_id, const char* reason) {
  NicSlot* slot = seg_->nic_of(nic);
  if (!slot || vp >= kVps) return;
  VpSlot& v = slot->vps[vp];
  // Behind earlier held ones of the same VP, or into a full CQ: hold it.
  bool behind = false;
  for (const HeldCompletion& h : held_completions_) behind |= h.nic == nic && h.vp == vp;
  if (!behind && push_completion(v, op, status, cookie, bytes, error_id, reason)) return;
  ++stats_.completions_held;
  held_completions_.push_back(
      {nic, vp, v.generation.load(), op, status, cookie, bytes, error_id, reason ? reason : ""});
}

bool FabricDaemon::retry_completions() {
  bool any = false;
  for (auto it = held_completions_.begin(); it != held_completions_.end();) {
    VpSlot& v = seg_->nic_of(it->nic)->vps[it->vp];
    bool earlier = false;  // keep the order of one VP's completions
    for (auto e = held_completions_.begin(); e != it; ++e)
      earlier |= e->nic == it->nic && e->vp == it->vp;
    if (v.generation.load() != it->vp_generation || !v.open.load()) {
      it = held_completions_.erase(it);  // the VP closed: no one to tell
      any = true;
    } else if (!earlier && push_completion(v, it->op, it->status, it->cookie, it->bytes,
                                           it->error_id, it->reason.c_str())) {
      it = held_completions_.erase(it);
      any = true;
    } else {
      ++it;
    }
  }
  return any;
}

bool FabricDaemon::write_event(uint32_t nic, uint64_t mh, uint64_t addr, const uint64_t data[2],
                               const char** why, OpStatus* st) {
  AttEntry e{};
  *st = check_att(*seg_->nic_of(nic), mh, addr, chip::kEventBytes, kAccessWrite, &e, why);
  if (*st == OpStatus::kSuccess) {
    *st =
        chip::write_event(addr, data[0], data[1], OpStatus::kSuccess,
                          [&](uint64_t a, uint64_t v) { return copy_with(e.pid, true, &v, a, 8); });
    if (*st != OpStatus::kSuccess) *why = "event write failed";
  }
  return *st == OpStatus::kSuccess;
}

void FabricDaemon::fail_op(uint64_t op_id, OpStatus status, uint16_t error_id, const char* reason) {
  auto it = ops_.find(op_id);
  if (it == ops_.end()) return;
  PendingOp op = it->second;
  ops_.erase(it);
  NicSlot* slot = seg_->nic_of(op.nic);
  if (!slot) return;
  VpSlot& vp = slot->vps[op.vp];
  if (status != OpStatus::kSuccess || (op.flags & kFlagLocalCq))
    complete(op.nic, op.vp, op.op, status, op.cookie, status == OpStatus::kSuccess ? op.length : 0,
             error_id, reason);
  vp.outstanding.fetch_sub(1, std::memory_order_release);
  futex_wake(&vp.cq.futex);
}

// ---- streams, links, timers ---------------------------------------------------------------

bool FabricDaemon::pump_streams() {
  bool any = false;
  std::vector<uint8_t> buf(kChunk);
  for (size_t i = 0; i < streams_.size();) {
    Stream& s = streams_[i];
    HostLink& l = links_[s.link];
    bool done = false;
    while (l.out_frames.size() < kMaxFramesQueued) {
      const uint64_t n = std::min<uint64_t>(kChunk - 128, s.length - s.offset);
      OpStatus st = copy_with(s.pid, false, buf.data(), s.read_addr + s.offset, n);
      const bool last = s.offset + n == s.length;
      if (st != OpStatus::kSuccess) {
        if (s.get_response) {
          ItemResp r{s.op_id, s.initiator, static_cast<uint8_t>(st), 0, 4750, {}};
          set_reason(r.reason, sizeof r.reason, "target memory not readable");
          queue_item(s.link, ItemType::kResp, s.from_chip, s.from_port, &r, sizeof r);
        } else {
          fail_op(s.op_id, st, 4751, "source memory not readable");
        }
        done = true;
        break;
      }
      if (s.get_response && last && s.event) {  // the data are read: the target's event
        const char* why = "";
        OpStatus est;
        if (!write_event(s.target_nic, s.event_mh, s.event_addr, s.event_data, &why, &est)) {
          ItemResp r{s.op_id, s.initiator, static_cast<uint8_t>(est), 0, 4755, {}};
          set_reason(r.reason, sizeof r.reason, why);
          queue_item(s.link, ItemType::kResp, s.from_chip, s.from_port, &r, sizeof r);
          done = true;
          break;
        }
      }
      if (s.get_response) {
        ItemGetResp g{s.op_id, s.initiator, 0, s.offset, last ? kPutLast : uint8_t{0}, {}};
        queue_item(s.link, ItemType::kGetResp, s.from_chip, s.from_port, &g, sizeof g, buf.data(),
                   n);
      } else {
        ItemPut p = s.put;
        p.offset = s.offset;
        if (last) p.flags |= kPutLast;
        queue_item(s.link, ItemType::kPut, s.from_chip, s.from_port, &p, sizeof p, buf.data(), n);
      }
      s.offset += n;
      any = true;
      if (last) {
        done = true;
        break;
      }
    }
    if (done) {
      streams_.erase(streams_.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
  return any;
}

bool FabricDaemon::flush_links(uint64_t now) {
  bool any = false;
  std::vector<uint8_t> dgram;
  std::vector<std::vector<uint8_t>> to_send;
  for (size_t i = 0; i < links_.size(); ++i) {
    HostLink& l = links_[i];
    if (!l.batch.empty()) {
      l.out_frames.push_back(std::move(l.batch));
      l.batch.clear();
    }
    while (!l.out_frames.empty() && l.link->can_send()) {
      if (!l.link->send(l.out_frames.front(), now).ok()) break;
      l.out_frames.pop_front();
      any = true;
    }
    while (l.link->pop_outgoing(&dgram)) {
      to_send.clear();
      if (impairments_[i])
        impairments_[i]->apply(std::move(dgram), &to_send);
      else
        to_send.push_back(std::move(dgram));
      dgram = {};
      for (auto& d : to_send) send_datagram(l, d);
      any = true;
    }
  }
  return any;
}

void FabricDaemon::send_datagram(const HostLink& l, std::span<const uint8_t> d) {
  if (sendto(sock_, d.data(), d.size(), 0, reinterpret_cast<const sockaddr*>(&l.peer_address),
             sizeof l.peer_address) < 0)
    ++stats_.udp_errors;  // the link layer retransmits what the kernel dropped
  ++stats_.frames_sent;
}

bool FabricDaemon::receive_udp(uint64_t now) {
  bool any = false;
  scratch_.resize(65536);
  for (int i = 0; i < 256; ++i) {
    ssize_t n = recv(sock_, scratch_.data(), scratch_.size(), 0);
    if (n <= 0) break;
    std::span<const uint8_t> d(scratch_.data(), static_cast<size_t>(n));
    auto id = peek_link_id(d);
    auto it = id ? link_by_id_.find(*id) : link_by_id_.end();
    if (it == link_by_id_.end()) {
      ++stats_.dropped;
      continue;
    }
    links_[it->second].link->on_datagram(d, now);
    any = true;
  }
  return any;
}

void FabricDaemon::timers(uint64_t now) {
  for (HostLink& l : links_)
    if (l.link->next_deadline_ns() <= now) l.link->on_timer(now);
  // A datagram held back to reorder it is released by a later one, or here.
  if (now >= next_impair_flush_) {
    next_impair_flush_ = now + 1'000'000;
    std::vector<std::vector<uint8_t>> held;
    for (size_t i = 0; i < links_.size(); ++i) {
      if (!impairments_[i]) continue;
      held.clear();
      impairments_[i]->flush(&held);
      for (auto& d : held) send_datagram(links_[i], d);
    }
  }
  if (now >= next_op_scan_) {
    next_op_scan_ = now + kOpScanNs;
    std::vector<uint64_t> expired;
    for (const auto& [id, op] : ops_)
      if (op.deadline <= now) expired.push_back(id);
    for (uint64_t id : expired) {
      ++stats_.ops_timed_out;
      fail_op(id, OpStatus::kTimeout, 4752, "no answer from the target within the timeout");
    }
  }
  if (now >= next_liveness_) {
    next_liveness_ = now + options_.liveness_interval_ns;
    scan_liveness();
  }
}

void FabricDaemon::scan_liveness() {
  const SegHeader& h = seg_->header();
  for (uint32_t s = 0; s < h.num_local_nics; ++s) {
    NicSlot& nic = seg_->nic_slot(s);
    for (VpSlot& vp : nic.vps) {
      int32_t pid = vp.owner_pid.load();
      if (!vp.open.load() || process_alive(pid)) continue;
      // The owner died: its VP closes, so senders get an error instead of filling its MPQ.
      vp.open.store(0, std::memory_order_release);
      vp.owner_pid.store(0);
      vp.generation.fetch_add(1);
      ++stats_.dead_processes;
    }
    for (AttEntry& e : nic.att)
      if (e.state.load() == 2 && !process_alive(e.pid)) {
        e.generation++;
        e.state.store(0, std::memory_order_release);
      }
  }
  std::vector<uint64_t> orphaned;
  for (const auto& [id, op] : ops_)
    if (!process_alive(op.pid)) orphaned.push_back(id);
  for (uint64_t id : orphaned) ops_.erase(id);
  std::erase_if(streams_, [](const Stream& s) { return !s.get_response && !process_alive(s.pid); });
}

void FabricDaemon::update_link_states() {
  const fabric::Topology& t = fabric_.topology;
  for (HostLink& l : links_) {
    LinkState st = l.link->state();
    if (st == l.last_state) continue;
    l.last_state = st;
    PeerInfo& pi = seg_->peer(l.chip, l.port);
    chip::Chip& c = *chips_[l.chip];
    if (st == LinkState::kUp) {
      pi.up.store(1, std::memory_order_release);
      c.link_up(l.port, {true, t.is_nic(l.peer_chip) ? wire::ChipType::kNic : wire::ChipType::kNrc,
                         static_cast<uint16_t>(l.peer_chip), l.peer_port,
                         static_cast<uint8_t>(t.num_ports(l.peer_chip))});
    } else {
      pi.up.store(0, std::memory_order_release);
      c.link_down(l.port);
    }
    seg_->header().route_generation.fetch_add(1, std::memory_order_release);  // paths change
    drain_nma(l.chip);
  }
}

}  // namespace galaxy::live
