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
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <map>
#include <optional>

#include "base/log.h"
#include "base/sysinfo.h"
#include "base/time_units.h"
#include "chip/event.h"
#include "chip/forwarding.h"
#include "chip/mgmt_step.h"
#include "chip/nic.h"
#include "chip/nma.h"
#include "chip/nrc.h"
#include "chip/registers.h"
#include "engine/live/bound_socket.h"
#include "engine/live/direct.h"
#include "engine/live/directory.h"
#include "engine/live/forward.h"
#include "engine/live/mpq_claim.h"
#include "engine/live/nic_host.h"
#include "wire/data_packet.h"
#include "wire/flit.h"
#include "wire/mgmt.h"
#include "wire/mp.h"

namespace galaxy::live {

namespace {
// The patterns go on the first data VC: management keeps its priority over them.
constexpr uint8_t kBistVc = 0;
constexpr uint64_t kBistPatternFlits =
    (sizeof(BistPattern) + wire::kFlitBytes - 1) / wire::kFlitBytes;
// Frames of the VC in flight or waiting at most while patterns are added: the test takes what
// the link carries without flooding the far end's socket (a datagram the kernel drops there
// would count as a link error), and other traffic on the VC waits behind no more than this.
constexpr size_t kBistMaxFramesOut = 4;
// How long a test that is over waits for the far end's report.
constexpr uint64_t kBistReportWaitNs = 1'000'000'000;
}  // namespace

namespace {

// queue_item starts a frame with any item, so the smallest frame must hold the largest one.
static_assert(kMinFrameBytes >= sizeof(ItemHead) + sizeof(BistPattern) &&
              kMinFrameBytes >= sizeof(ItemHead) + wire::kMaxDataPacketLinkBytes);

constexpr size_t kMaxFramesQueued = 8;  // per link, before the NICs' DMA engines pause
constexpr uint64_t kOpScanNs = 10'000'000;
constexpr uint16_t kErrOpTimeout = 4752;
constexpr uint16_t kErrNoRoute = 4741;
constexpr uint16_t kErrMpNoVp = 4742;
constexpr uint16_t kErrMpNotOpen = 4743;
constexpr uint16_t kErrMpOwnerGone = 4744;
constexpr uint16_t kErrRdmaMalformed = 4753;
constexpr uint16_t kErrHandleIndex = 4738;
constexpr uint16_t kErrHandleKey = 4739;
constexpr uint16_t kErrLocalNotOwned = 4754;
constexpr uint16_t kErrDqFull = 4737;
// chip/coll.h's ids of a collective descriptor that failed in the NIC (nic_coll.cc).
constexpr uint16_t kErrCollDqFull = 2114;
constexpr uint16_t kErrCollLocalWrite = 2115;
constexpr uint16_t kErrCollCpEncode = 2116;
constexpr uint16_t kErrCollLength = 2119;
// Packets a NIC's DMA engines put out per round of the daemon's loop (the others wait).
constexpr int kPacketsPerRound = 256;

// A descriptor the daemon's NIC runs for a process, by (NIC, VP, submission number): the key of
// FabricDaemon::nic_ops_ and back.
struct OpKey {
  uint32_t nic;
  uint8_t vp;
  uint64_t sequence;
  static constexpr uint64_t kSequenceMask = (uint64_t{1} << 40) - 1;
  uint64_t pack() const {
    return (uint64_t{nic & 0xFFFF} << 48) | (uint64_t{vp} << 40) | (sequence & kSequenceMask);
  }
  static OpKey unpack(uint64_t k) {
    return {static_cast<uint32_t>(k >> 48), static_cast<uint8_t>(k >> 40), k & kSequenceMask};
  }
};

// A data packet as it crosses a link.
struct LinkPacket {
  std::array<uint8_t, wire::kMaxDataPacketLinkBytes> bytes;
  size_t size = 0;
  std::span<uint8_t> view() { return std::span(bytes).first(size); }
};

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

// What an error id of a NIC's completion tells its owner (chip::failure_of, and the ids of
// this engine's memory port and timeouts), with the reason the CQ entry carries.
RdmaFailure rdma_failure(uint16_t id, OpCode op) {
  if (op == OpCode::kColl) {
    switch (id) {
      case kErrCollDqFull:
      case kErrDqFull:
        return {OpStatus::kBusy, "the NIC's descriptor queue is full"};
      case kErrCollLocalWrite:
        return {OpStatus::kAccessError, "local write refused by the ATT"};
      case kErrCollCpEncode:
        return {OpStatus::kDescriptorError, "CP could not be encoded"};
      case kErrCollLength:
        return {OpStatus::kDescriptorError, "members disagree on the data length"};
      case kErrLocalNotOwned:
        return {OpStatus::kAccessError, "memory not the VP owner's registration"};
      default:
        break;
    }
    if (chip::failure_of(id) == chip::Failure::kUnreachable)
      return {OpStatus::kUnreachable, "no such VP at the target"};
    return {OpStatus::kDescriptorError, "collective descriptor refused"};
  }
  switch (id) {
    case kErrOpTimeout:
      return {OpStatus::kTimeout, "no answer from the target within the timeout"};
    case kErrMemoryOwnerGone:
    case kErrMpOwnerGone:
      return {OpStatus::kPeerDead, "target process is gone"};
    case kErrDirectPeerGone:
      return {OpStatus::kPeerDead, "target process is gone (its direct link gave up)"};
    case kErrDirectNoAnswer:
      return {OpStatus::kTimeout, "no answer on the direct link within the timeout"};
    case kErrMemoryUnmapped:
      return {OpStatus::kAccessError, "memory not mapped"};
    case kErrMemoryDeregistered:
      return {OpStatus::kAccessError, "memory deregistered during the access"};
    case kErrNoRoute:
      return {OpStatus::kUnreachable, "no route to the target over the links"};
    case kErrRdmaMalformed:
      return {OpStatus::kDescriptorError, "malformed RDMA descriptor"};
    case kErrHandleIndex:
      return {OpStatus::kAccessError, "memory handle: ATT index out of range"};
    case kErrHandleKey:
      return {OpStatus::kAccessError, "wrong memory key"};
    case kErrLocalNotOwned:
      return {OpStatus::kAccessError, "local memory not registered by the VP's owner"};
    case kErrMpNoVp:
      return {OpStatus::kUnreachable, "no such VP"};
    case kErrMpNotOpen:
      return {OpStatus::kUnreachable, "target VP is not open"};
    case chip::kErrNoUsableRoute:
      return {OpStatus::kUnreachable, "no usable route on the way"};
    case chip::kErrNicPortDown:
      return {OpStatus::kUnreachable, "the sending NIC's port is down"};
    case chip::kErrHopLimit:
      return {OpStatus::kUnreachable, "passed the most NRCs a packet passes (a routing loop)"};
    default:
      break;
  }
  switch (chip::failure_of(id)) {
    case chip::Failure::kAccess:
      return {OpStatus::kAccessError, att_refusal(id, op != OpCode::kGet)};
    case chip::Failure::kUnreachable:
      return {OpStatus::kUnreachable, "no such VP at the target"};
    case chip::Failure::kDescriptor:
      break;
  }
  return {OpStatus::kDescriptorError, "RDMA descriptor refused by the NIC"};
}

Status rdma_descriptor(const EgressRdma& d, uint32_t num_chips, wire::RdmaDescriptor* out) {
  const OpCode op = static_cast<OpCode>(d.op);
  auto malformed = [] {
    return make_error(Code::kMalformed, kErrRdmaMalformed, "malformed RDMA descriptor");
  };
  if ((op != OpCode::kPut && op != OpCode::kGet && op != OpCode::kImm) ||
      (op == OpCode::kImm && (d.length == 0 || d.length > sizeof d.imm)) || d.length > UINT32_MAX ||
      d.dest_node >= num_chips || d.dest_node > UINT16_MAX || d.dest_vp >= kVps ||
      d.remote_addr + d.length < d.remote_addr ||
      std::any_of(std::begin(d.reserved), std::end(d.reserved), [](uint8_t b) { return b != 0; }))
    return malformed();
  // A handle the wire cannot carry names no registration at the target.
  for (uint64_t mh : {d.remote_mh, (d.flags & kFlagRemoteEvent) ? d.event_mh : 0}) {
    if ((mh >> 32) >= kAttEntries)
      return make_error(Code::kPermissionDenied, kErrHandleIndex,
                        "memory handle: ATT index out of range");
    if (!valid_handle(mh))
      return make_error(Code::kPermissionDenied, kErrHandleKey, "wrong memory key");
  }
  if (op != OpCode::kImm && !valid_handle(d.local_mh))
    return make_error(Code::kPermissionDenied, kErrLocalNotOwned,
                      "local memory not registered by the VP's owner");
  // Every field is set (no reset of the whole descriptor: the same-host path calls this for
  // every transfer, and its immediate data alone are 128 bytes).
  wire::RdmaDescriptor& w = *out;
  w.op = op == OpCode::kGet   ? wire::RdmaOp::kRead
         : op == OpCode::kImm ? wire::RdmaOp::kImmediate
                              : wire::RdmaOp::kWrite;
  w.fen = (d.flags & kFlagFence) != 0;
  w.completion = (d.flags & kFlagRemoteEvent) ? wire::Completion::kEvent : wire::Completion::kNone;
  w.local_cq = (d.flags & kFlagLocalCq) != 0;
  w.remote_vp = d.dest_vp;
  w.remote_node = d.dest_node;
  w.length = static_cast<uint32_t>(d.length);
  w.remote_address = d.remote_addr;
  w.remote_key = wire_key(d.remote_mh);
  w.local_address = 0;
  w.local_key = 0;
  if (op == OpCode::kImm) {
    std::memcpy(w.immediate_data.data(), d.imm, d.length);
  } else {
    w.local_address = d.local_addr;
    w.local_key = wire_key(d.local_mh);
  }
  w.notify_address = 0;
  w.notify_key = 0;
  w.notify_data = {};
  if (w.completion == wire::Completion::kEvent) {
    w.notify_address = d.event_addr;
    w.notify_key = wire_key(d.event_mh);
    std::memcpy(w.notify_data.data(), d.event, sizeof d.event);  // little-endian words
  }
  w.cp_count = d.cp_count;
  return {};
}

Status coll_descriptor(const EgressColl& c, const Segment& seg, chip::CollDescriptor* out) {
  static_assert(sizeof c.data == wire::kMpPayloadBytes);
  if (c.reserved0 != 0 || c.reserved1 != 0 || (c.flags & ~(kCollFlagFence | kCollFlagNotify)))
    return make_error(
        Code::kMalformed, 4763,
        fmt::format("collective descriptor: flags = {:#x} or reserved fields set", c.flags));
  chip::CollDescriptor& d = *out;
  d.kind = static_cast<chip::CollDescriptor::Kind>(c.kind);
  d.trigger = c.trigger;
  d.data_from = static_cast<chip::CollData>(c.data_from);
  d.op = static_cast<chip::CombineOp>(c.op);
  d.fence = (c.flags & kCollFlagFence) != 0;
  d.notify = (c.flags & kCollFlagNotify) != 0;
  d.dest_node = c.dest_node;
  d.dest_vp = c.dest_vp;
  d.increment = c.increment;
  d.cp_flags = c.cp_flags;
  d.cp_op = static_cast<chip::CombineOp>(c.cp_op);
  d.key = c.key;
  d.address = c.address;
  d.length = c.length;
  std::memcpy(d.data.data(), c.data, sizeof c.data);
  GALAXY_TRY(chip::check_coll_descriptor(d));
  // A CP goes to a VP of a NIC: a chip id beyond the fabric or a switch's would only be
  // discarded on the way.
  if (d.sends() && (c.dest_node >= seg.num_chips() ||
                    seg.chip(c.dest_node).type != static_cast<uint8_t>(wire::ChipType::kNic) ||
                    c.dest_vp >= kVps))
    return make_error(Code::kOutOfRange, 4764,
                      fmt::format("collective descriptor: a CP for node {} vp {}, which is not a "
                                  "VP of a NIC of this fabric",
                                  c.dest_node, c.dest_vp));
  return {};
}

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
  if ((mh >> 32) >= kAttEntries) {
    *reason = "memory handle: ATT index out of range";
    return OpStatus::kAccessError;
  }
  if (!valid_handle(mh)) {  // key bits no registration has
    *reason = att_refusal(2067, access == chip::kAccessWrite);
    return OpStatus::kAccessError;
  }
  Status st = lookup_att(nic, wire_key(mh), addr, length, access, entry);
  if (st.ok()) return OpStatus::kSuccess;
  *reason = att_refusal(st.error().id, access == chip::kAccessWrite);
  return OpStatus::kAccessError;
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
    flush_path_counters();
    seg_->header().ready.store(0);
    seg_->header().daemon_pid.store(0);
  }
  if (epfd_ >= 0) close(epfd_);
  if (efd_ >= 0) close(efd_);
  if (sock_ >= 0) close(sock_);
}

Result<std::unique_ptr<FabricDaemon>> FabricDaemon::start(const LiveFabric& f, int host,
                                                          const DaemonOptions& o) {
  if (o.frame_bytes != 0 && (o.frame_bytes < kMinFrameBytes || o.frame_bytes > kMaxLinkPayload))
    return make_error(Code::kOutOfRange, 4745,
                      fmt::format("daemon frame_bytes = {} is outside [{}, {}]", o.frame_bytes,
                                  kMinFrameBytes, kMaxLinkPayload));
  std::unique_ptr<FabricDaemon> d(new FabricDaemon(f, host, o));
  GALAXY_TRY(d->init());
  return d;
}

DaemonStats FabricDaemon::stats() const {
  DaemonStats s = stats_;
  for (uint32_t n = 0; n < chips_.size(); ++n)
    if (chips_[n] && fabric_.topology.is_nic(n))
      s.rdma_bytes_written += static_cast<const chip::Nic&>(*chips_[n]).rdma_bytes_written();
  return s;
}

Status FabricDaemon::init() {
  auto seg = Segment::create(fabric_, host_);
  if (!seg.ok()) return seg.error();
  seg_ = std::move(*seg);
  if (options_.impaired) {  // the host's processes impair their direct links alike
    seg_->header().impaired = 1;
    seg_->header().impairment = options_.impairment;
  }
  const fabric::Topology& t = fabric_.topology;
  chips_.resize(t.num_nodes());
  nic_ports_.resize(t.num_nodes());
  for (uint32_t n = 0; n < t.num_nodes(); ++n) {
    if (fabric_.host_of[n] != host_) continue;
    GALAXY_TRY(chip::check_model_ports(t.is_nic(n), t.num_ports(n), n, t.name(n)));
    uint16_t ports = static_cast<uint16_t>(t.num_ports(n));
    if (t.is_nic(n)) {
      auto nic = std::make_unique<chip::Nic>(ports);
      // The NIC reaches its host's memory through the registrations of the segment.
      NicSlot* slot = seg_->nic_of(n);
      if (!slot)
        return make_error(Code::kNotFound, 4736,
                          fmt::format("NIC {} of host {} has no slot in the segment", n, host_));
      NicPort& np = nic_ports_[n];
      np.att = std::make_unique<SegmentAtt>(*slot);
      np.memory = std::make_unique<SegmentHostMemory>(*slot);
      nic->attach_att(np.att.get());
      nic->attach_host_memory(np.memory.get());
      chips_[n] = std::move(nic);
      local_nics_.push_back(n);
    } else

      chips_[n] = std::make_unique<chip::Nrc>(ports);
    // Factory programming: the chip id in the EEPROM boot image (as the simulated engine).
    chip::BootImage img;
    img.registers.push_back({chip::reg::kChipId, chip::reg::encode_chip_id(n)});
    chips_[n]->eeprom().write_block(0, chip::encode_boot_image(img));
    GALAXY_TRY(chips_[n]->power_on());
    (void)chips_[n]->take_link_control_changes();  // the links start below
  }
  std::map<int, uint32_t> frame_bytes_of_host;  // by peer host: the path to each is read once
  for (uint32_t n = 0; n < t.num_nodes(); ++n) {
    if (!chips_[n]) continue;
    for (uint8_t p = 0; p < t.num_ports(n); ++p) {
      auto peer = t.peer({n, p});
      if (!peer) continue;
      if (fabric_.host_of[peer->node] == host_) {
        if (n < peer->node || (n == peer->node && p < peer->port)) update_local_link(n, p);
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
      // A port key fits 24 bits (16-bit chip ids, 8-bit ports); the VC takes the top 8.
      hl.link_id =
          static_cast<uint32_t>(std::min(port_key(n, p), port_key(peer->node, peer->port)));
      hl.frame_bytes = options_.frame_bytes;
      if (hl.frame_bytes == 0) {
        auto [it, fresh] = frame_bytes_of_host.try_emplace(hl.peer_host, 0);
        if (fresh) {
          const uint32_t mtu = path_mtu(hl.peer_address);
          it->second = frame_bytes_for_mtu(mtu != 0 ? mtu : kAssumedMtu);
          log::info(
              "link frames to host {}: up to {} bytes (path MTU {})", ph.name, it->second,
              mtu != 0 ? fmt::format("{}", mtu) : fmt::format("unknown, {} assumed", kAssumedMtu));
        }
        hl.frame_bytes = it->second;
      }
      for (uint8_t v = 0; v < wire::kNumVcs; ++v) {
        LinkConfig lc;
        lc.link_id = hl.link_id | uint32_t{v} << 24;
        lc.max_payload = hl.frame_bytes;
        hl.lanes[v].link = std::make_unique<Link>(lc);
        hl.lanes[v].link->set_disabled(chips_[n]->port_forced_down(p), monotonic_ns());
        link_by_id_[lc.link_id] = links_.size() * wire::kNumVcs + v;
      }
      link_by_port_[port_key(n, p)] = links_.size();
      if (options_.impaired) {
        impairments_.push_back(std::make_unique<Impairment>(
            options_.impairment.for_link(hl.link_id, static_cast<uint64_t>(host_))));
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
  open_board();
  seg_->header().ready.store(1, std::memory_order_release);
  return {};
}

// Without its board the fabric still runs: the failure is logged and out-of-band requests to
// this host find nobody listening.
void FabricDaemon::open_board() {
  board_ = std::make_unique<chip::MonitorBoard>();
  for (uint32_t n = 0; n < chips_.size(); ++n) {
    if (!chips_[n]) continue;
    if (Status st = board_->add_chip(n, chips_[n].get()); !st.ok()) {
      log::line(log::Level::kWarn, st.error().id, "{}", st.error().message);
      break;
    }
  }
  const LiveHost& me = fabric_.hosts[static_cast<size_t>(host_)];
  auto server = options_.board_fd >= 0
                    ? BoardServer::adopt(options_.board_fd, me.ip, me.port, epfd_)
                    : BoardServer::open(me.ip, me.port, epfd_);
  if (!server.ok()) {
    log::line(log::Level::kWarn, server.error().id, "{}", server.error().message);
    return;
  }
  board_server_ = std::move(*server);
}

wire::OobResponse FabricDaemon::execute_oob(const wire::OobRequest& r) {
  if (r.chip < chips_.size() && chips_[r.chip]) sync_counters(r.chip);
  auto out = board_->execute(r, monotonic_ns() * units::kNanosecond,
                             [&](uint32_t chip) { chip_changed(chip); });
  log::info("monitor board: {} chip {}: {}", wire::oob_op_name(r.op), r.chip,
            out.response.error_id ? fmt::format("E{}", out.response.error_id) : "done");
  return out.response;
}

void FabricDaemon::chip_changed(uint32_t chip) {
  if (!fabric_.topology.is_nic(chip)) export_routes(chip);
  apply_link_controls(chip);
  start_bists(chip);
  drain_nma(chip);
}

Status FabricDaemon::open_socket() {
  const LiveHost& me = fabric_.hosts[static_cast<size_t>(host_)];
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(me.port);
  if (inet_pton(AF_INET, me.ip.c_str(), &a.sin_addr) != 1)
    return make_error(Code::kInvalidArgument, 4732,
                      fmt::format("host {}: ip = '{}' is not an IPv4 address", me.name, me.ip));
  if (options_.socket_fd >= 0) {
    GALAXY_TRY(adopt_socket(a));
  } else {
    sock_ = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (sock_ < 0)
      return make_error(Code::kIoError, 4731, fmt::format("socket: {}", std::strerror(errno)));
    if (bind(sock_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      return make_error(
          Code::kIoError, 4733,
          fmt::format("host {}: bind {}:{}: {}", me.name, me.ip, me.port, std::strerror(errno)));
  }
  // Room for a whole window of frames; FORCE passes net.core.rmem_max when we may.
  int buf = 8 << 20;
  if (setsockopt(sock_, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) != 0)
    setsockopt(sock_, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  if (setsockopt(sock_, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf) != 0)
    setsockopt(sock_, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  return {};
}

// A socket handed over must be a UDP socket bound to exactly this host's address and port: the
// peers send there, and a socket bound elsewhere would leave the links down without a word.
// The daemon owns it from here on (closes it when it ends).
Status FabricDaemon::adopt_socket(const sockaddr_in& want) {
  const LiveHost& me = fabric_.hosts[static_cast<size_t>(host_)];
  sock_ = options_.socket_fd;
  const std::optional<sockaddr_in> bound = bound_ipv4(sock_, SOCK_DGRAM);
  if (!bound)
    return make_error(Code::kInvalidArgument, 4760,
                      fmt::format("host {}: socket_fd = {} is not a UDP/IPv4 socket", me.name,
                                  options_.socket_fd));
  if (!same_endpoint(*bound, want))
    return make_error(Code::kInvalidArgument, 4761,
                      fmt::format("host {}: socket_fd = {} is bound to {}, not {}:{}", me.name,
                                  options_.socket_fd, endpoint_text(*bound), me.ip, me.port));
  const int fl = fcntl(sock_, F_GETFL);
  if (fl < 0 || fcntl(sock_, F_SETFL, fl | O_NONBLOCK) != 0 ||
      fcntl(sock_, F_SETFD, FD_CLOEXEC) != 0)
    return make_error(Code::kIoError, 4762,
                      fmt::format("host {}: socket_fd = {}: {}", me.name, options_.socket_fd,
                                  std::strerror(errno)));
  return {};
}

LinkState FabricDaemon::HostLink::state() const {
  bool all_up = true;
  for (const Lane& lane : lanes) {
    if (lane.link->state() == LinkState::kDown) return LinkState::kDown;
    all_up = all_up && lane.link->state() == LinkState::kUp;
  }
  return all_up ? LinkState::kUp : LinkState::kTraining;
}

LinkStats FabricDaemon::HostLink::stats() const {
  LinkStats s;
  for (const Lane& lane : lanes) s += lane.link->stats();
  const LinkStats& m = lanes[wire::kMgmtVc].link->stats();
  s.handshakes = m.handshakes;
  s.link_downs = m.link_downs;
  s.peer_restarts = m.peer_restarts;
  return s;
}

std::vector<FabricDaemon::LinkView> FabricDaemon::links() const {
  std::vector<LinkView> v;
  for (const HostLink& l : links_)
    v.push_back({l.chip, l.port, l.peer_chip, l.peer_port, l.state(), l.stats(), l.link_id});
  return v;
}

// Polling before sleeping saves a wake-up only while a core is free. Where the machine has
// more runnable tasks than cores (processes busy-polling beside the daemons), a polling daemon
// holds a core they need and, when work comes, waits for its turn, while a sleeping one is woken
// ahead of them: between hosts on 2 cores, an 8-byte put took 292-303 us with the daemons
// polling and 125-133 us with them sleeping at once (bench/RESULTS.md). Judged at most once a
// millisecond (a read of /proc/loadavg); unknown counts as free.
bool FabricDaemon::spin_pays(uint64_t now_ns) {
  if (now_ns - spin_judged_ns_ >= 1'000'000) {
    spin_judged_ns_ = now_ns;
    static const unsigned cores = online_cores();
    const int runnable = runnable_tasks();
    spin_pays_ = runnable < 0 || static_cast<unsigned>(runnable) <= cores;
  }
  return spin_pays_;
}

void FabricDaemon::run(const std::atomic<bool>& stop) {
  uint64_t idle_since = monotonic_ns();
  bool counters_flushed = true;
  while (!stop.load(std::memory_order_relaxed)) {
    if (poll_once()) {
      idle_since = monotonic_ns();
      counters_flushed = false;
      continue;
    }
    if (!counters_flushed) {  // the ports' counters are up to date whenever the daemon idles
      flush_path_counters();
      counters_flushed = true;
    }
    uint64_t now = monotonic_ns();
    if (now - idle_since < options_.spin_ns && spin_pays(now)) {
      cpu_relax();
      continue;
    }
    // Sleep until a process kicks us, a datagram arrives, or the next timer: the links'
    // (retransmissions, delayed acks, keepalives), a self-test's or a monitor board answer's
    // end, the liveness scan, the scan for timed-out transfers. Work that waits for room (held
    // completions, backlogs) is tried again every 10 ms; with none, an idle daemon wakes for its
    // timers alone (at most every 100 ms).
    const bool waiting = !held_completions_.empty() || !rdma_backlog_.empty() ||
                         !mgmt_waiting_.empty() || !arrived_waiting_.empty();
    uint64_t next = now + (waiting ? 10'000'000 : 100'000'000);
    for (const HostLink& l : links_)
      for (const Lane& lane : l.lanes) next = std::min(next, lane.link->next_deadline_ns());
    for (const BistRun& b : bists_)
      next = std::min(next, b.ended ? b.end_ns + kBistReportWaitNs : b.end_ns);
    if (board_server_) next = std::min(next, board_server_->next_deadline_ns());
    next = std::min(next, next_liveness_);
    if (!nic_ops_.empty()) next = std::min(next, next_op_scan_);
    if (options_.impaired) next = std::min(next, next_impair_flush_);
    // To the nanosecond (a self-test's results are there when its duration is over, a monitor
    // board's answer leaves when its I2C time has passed).
    const uint64_t wait_ns = next <= now ? 0 : next - now;
    const timespec timeout{static_cast<time_t>(wait_ns / 1'000'000'000),
                           static_cast<long>(wait_ns % 1'000'000'000)};
    SegHeader& h = seg_->header();
    h.daemon_sleeping.store(1, std::memory_order_seq_cst);
    int events = 1;
    if (!seg_->egress().peek()) {
      epoll_event evs[4];
      events = epoll_pwait2(epfd_, evs, 4, &timeout, nullptr);
    }
    h.daemon_sleeping.store(0, std::memory_order_relaxed);
    char drain[64];
    while (recv(efd_, drain, sizeof drain, 0) > 0) {
    }
    // Woken by traffic: poll again for the spin time. Woken by a timer: its work is done in the
    // next poll, and the daemon sleeps again at once.
    idle_since = events != 0 ? monotonic_ns() : 0;
  }
}

bool FabricDaemon::poll_once() {
  const uint64_t now = monotonic_ns();
  for (uint32_t n : local_nics_)
    if (nic_ports_[n].memory) nic_ports_[n].memory->set_time(now);
  bool busy = drain_egress();
  if (!held_completions_.empty()) busy |= retry_completions();
  if (!rdma_backlog_.empty()) busy |= retry_rdma_backlog();
  if (!mgmt_waiting_.empty()) busy |= retry_mgmt_to_host();
  if (!arrived_waiting_.empty()) busy |= retry_arrived();
  if (!bists_.empty()) busy |= pump_bists(now);
  for (size_t i = 0; i < links_.size(); ++i) busy |= process_held(i);
  busy |= pump_nics();
  busy |= flush_links(now);
  busy |= receive_udp(now);
  if (board_server_)
    busy |= board_server_->poll(now, [&](const wire::OobRequest& r) { return execute_oob(r); });
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
          m.vp >= kVps || m.length > sizeof m.descriptor) {
        drop(4800,
             "a management descriptor from the egress ring names no NIC or VP of this host (nic "
             "{}, vp {}, {} bytes)",
             m.nic, m.vp, m.length);
        return;
      }
      auto& nic = static_cast<chip::Nic&>(*chips_[m.nic]);
      Status s = nic.post_mgmt(m.vp, std::span<const uint8_t>(m.descriptor, m.length));
      if (!s.ok()) {
        complete(m.nic, m.vp, OpCode::kMp, OpStatus::kDescriptorError, 0, 0, s.error().id,
                 s.error().message.c_str());
        return;
      }
      pump_nic(m.nic);
      return;
    }
    case EgressKind::kMp: {
      EgressMp m;
      std::memcpy(&m, cell.body, sizeof m);
      if (!seg_->nic_of(m.src_node) || m.src_vp >= kVps || m.length > 120 ||
          m.dest_node >= seg_->num_chips() || m.dest_vp >= kVps) {
        drop(4801,
             "an MP from the egress ring with a bad source or destination (node {} vp {} -> node "
             "{} vp {}, {} bytes)",
             m.src_node, m.src_vp, m.dest_node, m.dest_vp, m.length);
        return;
      }
      if ((m.kind_flags >> 4) != static_cast<uint8_t>(wire::MpKind::kUser)) {
        complete(m.src_node, m.src_vp, OpCode::kMp, OpStatus::kDescriptorError, 0, 0, 4748,
                 "an MP of a kind other than user data");
        return;
      }
      // The MP as the wire carries it (docs/system.md 1.1): a data packet of kind MP.
      const wire::DataPacket p =
          mp_packet(m.src_node, m.src_vp, m.dest_node, m.dest_vp, m.kind_flags, m.data, m.length);
      send_data(m.src_node, p);  // one that finds no way on is refused (chip/refusal.h)
      return;
    }
    case EgressKind::kRdma: {
      EgressRdma d;
      std::memcpy(&d, cell.body, sizeof d);
      const std::deque<EgressRdma>* waiting = rdma_backlog_.find(d.src_node, d.src_vp);
      if (!waiting ? rdma_has_room(d) : waiting->size() >= kMaxRdmaBacklog) {
        start_rdma(d);  // at its turn, or refused by the full NIC: it fails busy
      } else {
        rdma_backlog_.push(d.src_node, d.src_vp, d);
        ++stats_.rdma_backlogged;
      }
      return;
    }
    case EgressKind::kColl: {
      EgressColl c;
      std::memcpy(&c, cell.body, sizeof c);
      start_coll(c);
      return;
    }
    case EgressKind::kCollReset: {
      EgressCollReset r;
      std::memcpy(&r, cell.body, sizeof r);
      on_coll_reset(r);
      return;
    }
    case EgressKind::kArrived:
    case EgressKind::kLeaving:
      on_direct_item(
          static_cast<EgressKind>(cell.kind),
          std::span<const uint8_t>(cell.body, std::min<size_t>(cell.length, sizeof(EgressItem))));
      return;
  }
  drop(4802, "an egress cell of unknown kind {}", static_cast<int>(cell.kind));  // an unknown kind
}

// An item of a process's direct path (engine/live/direct.h): one that arrived and is the
// daemon's to handle, as if its own link had delivered it; or one whose direct link failed, sent
// on over the daemon's link out of the chip and port it names.
void FabricDaemon::on_direct_item(EgressKind kind, std::span<const uint8_t> item) {
  ItemHead h;
  if (!read_data_item_head(item, seg_->num_chips(), seg_->max_ports(), &h)) {
    drop(4893, "an item of a process's direct path from the egress ring with a bad head ({} bytes)",
         item.size());
    return;
  }
  if (kind == EgressKind::kArrived) {
    ++stats_.direct_items_arrived;
    if (!arrived_waiting_.empty() || !process_item(kNoLink, item))
      arrived_waiting_.emplace_back(item.begin(), item.end());  // its MPQ is full: in order
    return;
  }
  const auto link = link_by_port_.find(port_key(h.from_chip, h.from_port));
  if (!seg_->is_local(h.from_chip) || link == link_by_port_.end()) {
    drop(4894, "an item of a direct path to send out of chip {} port {}, not a link of this host",
         h.from_chip, h.from_port);
    return;
  }
  ++stats_.direct_items_rescued;
  queue_item(link->second, ItemType::kData, h.from_chip, h.from_port, item.data() + sizeof h,
             item.size() - sizeof h);
}

bool FabricDaemon::retry_arrived() {
  bool any = false;
  while (!arrived_waiting_.empty() && process_item(kNoLink, arrived_waiting_.front())) {
    arrived_waiting_.pop_front();
    any = true;
  }
  return any;
}

// An RDMA descriptor whose path leaves the host: the daemon posts it, in wire form, to the
// initiator's NIC (chip::Nic), whose DMA engines cut it into packets; the packets cross the
// links encoded and the target's NIC, run by the daemon there, checks and writes them.
void FabricDaemon::start_rdma(const EgressRdma& d) {
  NicSlot* slot = seg_->nic_of(d.src_node);
  if (!slot || d.src_vp >= kVps) {
    drop(4803,
         "an RDMA descriptor from the egress ring names no NIC or VP of this host (node {}, vp {})",
         d.src_node, d.src_vp);
    return;
  }
  VpSlot& vp = slot->vps[d.src_vp];
  const OpCode op = static_cast<OpCode>(d.op);
  auto fail = [&](OpStatus st, uint16_t id, const char* why) {
    complete(d.src_node, d.src_vp, op, st, d.cookie, 0, id, why);
    vp.outstanding.fetch_sub(1);
  };
  // A descriptor from a process is checked like one from the network: a bad one fails.
  wire::RdmaDescriptor w;
  if (Status st = rdma_descriptor(d, seg_->num_chips(), &w); !st.ok()) {
    const RdmaFailure f = rdma_failure(st.error().id, op);
    return fail(f.status, st.error().id, f.reason);
  }
  // The NIC reads and writes the initiator's memory for it: only memory that the VP's owner
  // registered, so no process can make the daemon touch another's memory.
  if (op != OpCode::kImm) {
    AttEntry e{};
    const char* why = "";
    if (vp.owner_pid.load() != d.pid ||
        check_att(*slot, d.local_mh, d.local_addr, d.length, 0, &e, &why) != OpStatus::kSuccess ||
        e.pid != d.pid)
      return fail(OpStatus::kAccessError, kErrLocalNotOwned,
                  "local memory not registered by the VP's owner");
  }
  w.local_cq = true;  // every completion reaches the daemon: it keeps the VP's count for fences
  if (w.cp_count != 0) mark_coll(d.src_node, d.src_vp);
  auto bytes = wire::encode_rdma_descriptor(w);
  if (!bytes.ok())
    return fail(OpStatus::kDescriptorError, kErrRdmaMalformed, "malformed RDMA descriptor");
  auto& nic = static_cast<chip::Nic&>(*chips_[d.src_node]);
  const uint64_t sequence = nic.next_sequence(d.src_vp);
  if (Status st = nic.post_rdma(d.src_vp, *bytes); !st.ok())
    return fail(OpStatus::kBusy, kErrDqFull, "the NIC's descriptor queue is full");
  const uint64_t key = OpKey{d.src_node, d.src_vp, sequence}.pack();
  NicOp& o = nic_ops_[key];
  o = {};
  o.op = op;
  o.flags = d.flags;
  o.pid = d.pid;
  o.cookie = d.cookie;
  o.length = d.length;
  // A triggered descriptor waiting for its CPs is queued, not waiting for its target: its
  // timeout (FabricDaemon::timers) starts once it is out.
  o.deadline = monotonic_ns() + options_.op_timeout_ns;
  o.generation = vp.generation.load(std::memory_order_relaxed);
  o.trigger = w.cp_count;
  pump_nic(d.src_node);
  // The timeout runs from here unless the transfer moves on (FabricDaemon::timers).
  if (auto it = nic_ops_.find(key); it != nic_ops_.end())
    it->second.answers = nic.awaited_answers(d.src_vp, sequence);
}

// A descriptor of the NIC's collective engine: the daemon posts it to its model of the VP's NIC,
// which runs it when its trigger's CPs have come, whether or not the process runs then.
void FabricDaemon::start_coll(const EgressColl& c) {
  NicSlot* slot = c.nic < chips_.size() && chips_[c.nic] ? seg_->nic_of(c.nic) : nullptr;
  if (!slot || c.vp >= kVps) {
    drop(4840,
         "a collective descriptor from the egress ring names no NIC or VP of this host (nic {}, vp "
         "{})",
         c.nic, c.vp);
    return;
  }
  VpSlot& vp = slot->vps[c.vp];
  // Only the VP's owner posts on it (its count of outstanding descriptors went up for this).
  if (c.pid <= 0 || !vp.open.load(std::memory_order_acquire) || vp.owner_pid.load() != c.pid) {
    drop(4841,
         "a collective descriptor for NIC {} VP {} from process {}, which does not own that VP",
         c.nic, c.vp, c.pid);
    return;
  }
  auto fail = [&](uint16_t id) {
    const RdmaFailure f = rdma_failure(id, OpCode::kColl);
    complete(c.nic, c.vp, OpCode::kColl, f.status, c.cookie, 0, id, f.reason);
    vp.outstanding.fetch_sub(1, std::memory_order_release);
    futex_wake(&vp.cq.futex);
  };
  chip::CollDescriptor d;
  if (Status st = coll_descriptor(c, *seg_, &d); !st.ok()) return fail(st.error().id);
  // A local descriptor writes into its owner's registered memory, no other process's.
  if (d.kind == chip::CollDescriptor::Kind::kLocal && d.length > 0) {
    AttEntry e{};
    if (!lookup_att(*slot, d.key, d.address, d.length, chip::kAccessWrite, &e).ok() ||
        e.pid != c.pid)
      return fail(kErrLocalNotOwned);
  }
  mark_coll(c.nic, c.vp);
  const bool notify = d.notify;
  d.notify = true;  // every completion reaches the daemon: it keeps the VP's count for fences
  auto& nic = static_cast<chip::Nic&>(*chips_[c.nic]);
  const uint64_t sequence = nic.next_sequence(c.vp);
  if (Status st = nic.post_coll(c.vp, d); !st.ok()) return fail(st.error().id);
  NicOp& o = nic_ops_[OpKey{c.nic, c.vp, sequence}.pack()];
  o = {};
  o.op = OpCode::kColl;
  o.flags = notify ? kFlagLocalCq : 0;
  o.pid = c.pid;
  o.cookie = c.cookie;
  o.length = d.length;
  o.deadline = UINT64_MAX;  // it waits for CPs as long as its members take: never timed out
  o.generation = vp.generation.load(std::memory_order_relaxed);
  pump_nic(c.nic);
}

void FabricDaemon::on_coll_reset(const EgressCollReset& r) {
  NicSlot* slot = r.nic < chips_.size() && chips_[r.nic] ? seg_->nic_of(r.nic) : nullptr;
  if (!slot || r.vp >= kVps || r.pid <= 0 || slot->vps[r.vp].owner_pid.load() != r.pid ||
      std::any_of(std::begin(r.reserved), std::end(r.reserved), [](uint8_t b) { return b != 0; })) {
    drop(4842,
         "a collective reset from the egress ring for NIC {} VP {} from process {}, which does not "
         "own that VP",
         r.nic, r.vp, r.pid);
    return;
  }
  reset_coll(r.nic, r.vp);
}

void FabricDaemon::mark_coll(uint32_t chip, uint8_t vp) {
  CollVp& c = nic_ports_[chip].coll[vp];
  const uint32_t g = seg_->nic_of(chip)->vps[vp].generation.load(std::memory_order_relaxed);
  if (c.active && c.generation != g) reset_coll(chip, vp);  // an earlier owner's leftovers
  c.active = true;
  c.generation = g;
}

// The NIC drops the VP's queued collective and CP-triggered descriptors (chip::Nic::reset_coll);
// their owner's count of outstanding descriptors goes down by those it posted, so glex_fence
// returns. A triggered RDMA descriptor whose CPs have come but that has not started yet (at the
// head of the queue, waiting for a transfer slot) stays: it is the oldest of those not started.
void FabricDaemon::reset_coll(uint32_t chip, uint8_t v) {
  auto& nic = static_cast<chip::Nic&>(*chips_[chip]);
  const size_t before = nic.outstanding(v);
  nic.reset_coll(v);
  const size_t dropped = before - nic.outstanding(v);
  std::vector<std::pair<uint64_t, uint64_t>> gone;  // (sequence, key), oldest first
  for (const auto& [key, op] : nic_ops_) {
    const OpKey k = OpKey::unpack(key);
    if (k.nic == chip && k.vp == v && (op.op == OpCode::kColl || (op.trigger != 0 && !op.started)))
      gone.emplace_back(k.sequence, key);
  }
  std::sort(gone.begin(), gone.end());
  if (gone.size() > dropped)
    gone.erase(gone.begin(), gone.begin() + static_cast<std::ptrdiff_t>(gone.size() - dropped));
  VpSlot& vp = seg_->nic_of(chip)->vps[v];
  const uint32_t generation = vp.generation.load(std::memory_order_relaxed);
  uint32_t owed = 0;
  for (const auto& g : gone) {
    auto it = nic_ops_.find(g.second);
    if (it->second.generation == generation) ++owed;
    nic_ops_.erase(it);
  }
  if (owed != 0) {
    vp.outstanding.fetch_sub(owed, std::memory_order_release);
    futex_wake(&vp.cq.futex);
  }
  nic_ports_[chip].coll[v].active = false;
}

// ---- the NICs' data path ------------------------------------------------------------------

void FabricDaemon::pump_nic(uint32_t chip) {
  auto& nic = static_cast<chip::Nic&>(*chips_[chip]);
  nic_ports_[chip].memory->begin_round();
  while (auto w = nic.next_work()) {
    switch (w->kind) {
      case chip::NicWork::Kind::kMgmtRequest:
        nic.complete(w->vp, true);
        ++stats_.mgmt_packets;
        send_mgmt(chip, nic.network_port(), w->mgmt);
        break;
      case chip::NicWork::Kind::kRejected:
        nic.complete(w->vp, false, w->error.id);  // an RDMA's error reaches the EQ (drain_eq)
        if (w->op == chip::DescriptorOp::kMgmt)
          complete(chip, w->vp, OpCode::kMp, OpStatus::kDescriptorError, 0, 0, w->error.id,
                   w->error.message.c_str());
        break;
      case chip::NicWork::Kind::kMp:
        nic.complete(w->vp, true);
        if (w->packet) send_data(chip, w->packet->packet);
        break;
      case chip::NicWork::Kind::kRdma:
        // started: its packets come from the DMA engines below. A triggered one is out of the
        // queue, so a reset of the VP's collectives (reset_coll) no longer drops it.
        if (nic_ports_[chip].coll[w->vp].active)
          if (auto it = nic_ops_.find(OpKey{chip, w->vp, w->sequence}.pack()); it != nic_ops_.end())
            it->second.started = true;
        break;
      case chip::NicWork::Kind::kLocal:
        nic.complete(w->vp, true);  // its data are written (chip/coll.h); the event follows
        break;
    }
  }
  // DMA engine 2 (acks, writes) always goes; the readers pause while a link's window is full.
  bool links_full = false;
  for (const HostLink& l : links_)
    for (const Lane& lane : l.lanes) links_full |= lane.out_frames.size() >= kMaxFramesQueued;
  for (int i = 0; i < kPacketsPerRound; ++i) {
    bool any = false;
    for (uint8_t e = 0; e < chip::kDmaEngines; ++e) {
      const auto engine = static_cast<chip::DmaEngine>(e);
      if (links_full && engine != chip::DmaEngine::kWrite) continue;
      if (nic.next_packet(engine, nic_packet_)) {
        // A transfer whose own packets find no way out of the source fails at once; a missing
        // way back (read responses, acks) leaves the initiator to its timeout.
        const uint16_t tag = nic_packet_.head.tag;
        if (!send_data(chip, nic_packet_.packet) && engine == chip::DmaEngine::kLocalRead)
          nic.abort_transfer_tag(tag, kErrNoRoute);
        any = true;
      }
    }
    if (!any) break;
  }
  drain_eq(chip);
}

bool FabricDaemon::pump_nics() {
  bool any = false;
  for (uint32_t n : local_nics_) {
    auto& nic = static_cast<chip::Nic&>(*chips_[n]);
    if (!nic.has_work() && !nic.has_packets()) continue;
    pump_nic(n);
    any = true;
  }
  return any;
}

// The NIC's completions: a CQ entry for the owner when it asked for one or on error, and the
// VP's count of outstanding descriptors (fence) goes down.
void FabricDaemon::drain_eq(uint32_t chip) {
  auto& nic = static_cast<chip::Nic&>(*chips_[chip]);
  NicSlot* slot = seg_->nic_of(chip);
  for (uint64_t busy = nic.eq_busy(); busy != 0; busy &= busy - 1) {
    const auto v = static_cast<uint8_t>(std::countr_zero(busy));
    while (nic.eq_count(v) > 0) {
      auto e = nic.poll_eq(v);
      if (!e) break;
      if (e->kind == chip::EventKind::kMpRefused) {  // names no descriptor (chip/refusal.h)
        const RdmaFailure f = rdma_failure(e->error_id, OpCode::kMp);
        complete(chip, v, OpCode::kMp, f.status, 0, 0, e->error_id, f.reason);
        continue;
      }
      auto it = nic_ops_.find(OpKey{chip, v, e->sequence}.pack());
      if (e->op == chip::DescriptorOp::kMgmt || it == nic_ops_.end()) continue;
      const NicOp op = it->second;
      nic_ops_.erase(it);
      VpSlot& vp = slot->vps[v];
      // The VP closed and opened again since: its new owner's CQ and count are not this one's.
      if (vp.generation.load(std::memory_order_relaxed) != op.generation) continue;
      // The NIC wrote every completion (the daemon counts them for fences); the owner's CQ gets
      // those the rule gives it.
      const bool failed = e->kind != chip::EventKind::kDescriptorDone;
      if (failed && e->error_id == kErrOpTimeout) ++stats_.ops_timed_out;
      if (chip::completes_locally((op.flags & kFlagLocalCq) != 0, failed)) {
        if (failed) {
          const RdmaFailure f = rdma_failure(e->error_id, op.op);
          complete(chip, v, op.op, f.status, op.cookie, 0, e->error_id, f.reason);
        } else {
          complete(chip, v, op.op, OpStatus::kSuccess, op.cookie, op.length, 0, "");
        }
      }
      vp.outstanding.fetch_sub(1, std::memory_order_release);
      futex_wake(&vp.cq.futex);
    }
  }
}

// A data packet leaving NIC `nic`: table-routed from its port, over the host's own chips
// (forward) and, where the path leaves the host, onto a link as encoded flits.
bool FabricDaemon::send_data(uint32_t nic, const wire::DataPacket& p) {
  LinkPacket lp;  // on the stack: delivering it at a NIC of this host may send others
  auto n = wire::encode_data_packet_bytes(p, lp.bytes);
  if (!n.ok()) {
    drop(4808, "a data packet from NIC {} could not be encoded: {}", nic, n.error().message);
    return false;
  }
  lp.size = *n;
  const std::span<uint8_t> bytes = lp.view();
  const wire::Traffic t{1, 0, *n / wire::kFlitBytes};
  const uint8_t port = static_cast<const chip::Nic&>(*chips_[nic]).network_port();
  PathCounters& path = sent_paths_.at(*seg_, nic, port, p.head.dest_node);
  Forwarded f = path.result;
  if (path_goes_through(f))
    path.add(t);
  else
    f = forward(*seg_, nic, port, p.head.dest_node, t);
  switch (f.kind) {
    case Forwarded::Kind::kLeavesHost:
      wire::set_data_hops(bytes, f.hops_passed);
      set_vc_class(bytes, f.vc_class);
      queue_item(link_at(f.chip, f.port), ItemType::kData, f.chip, f.port, bytes.data(),
                 bytes.size());
      return true;
    case Forwarded::Kind::kDelivered:
    case Forwarded::Kind::kMisrouted:
      if (seg_->nic_of(f.chip)) {  // a NIC of this host receives it (and checks it)
        if (!data_at_nic(f.chip, bytes))
          drop(4804, "a data packet for NIC {} that the NIC refused", f.chip);
        return true;
      }
      break;
    default:
      break;
  }
  discard_data(f, bytes);  // a transfer's own packet: the transfer fails or times out
  return false;
}

void FabricDaemon::discard_data(const Forwarded& f, std::span<const uint8_t> packet) {
  drop(4805,
       "a data packet stopped at chip {} port {}: no usable output, its port down or past the hop "
       "limit",
       f.chip, f.port);
  auto head = chip::routable_head(packet);
  if (!head) return;
  // Stopped at the sender's own NIC: its port is down; anywhere else an NRC had no usable output
  // or the packet had passed the hop limit.
  const bool at_nic = seg_->nic_of(f.chip) != nullptr;
  const uint16_t id = at_nic                                 ? chip::kErrNicPortDown
                      : f.kind == Forwarded::Kind::kHopLimit ? chip::kErrHopLimit
                                                             : chip::kErrNoUsableRoute;
  auto refusal = chip::refusal_of(*head, static_cast<wire::ChipId>(f.chip), id);
  if (refusal) send_from(f.chip, f.port, *refusal);
}

void FabricDaemon::send_from(uint32_t chip, uint8_t in_port, const wire::DataPacket& p) {
  LinkPacket lp;
  auto n = wire::encode_data_packet_bytes(p, lp.bytes);
  if (!n.ok()) {
    drop(4806, "a data packet leaving chip {} could not be encoded: {}", chip, n.error().message);
    return;
  }
  lp.size = *n;
  const std::span<uint8_t> bytes = lp.view();
  if (seg_->nic_of(chip)) {
    data_at_nic(chip, bytes);
    return;
  }
  const wire::Traffic t{1, 0, *n / wire::kFlitBytes};
  Forwarded f = originate(*seg_, chip, in_port, p.head.dest_node, t);
  switch (f.kind) {
    case Forwarded::Kind::kLeavesHost:
      wire::set_data_hops(bytes, f.hops_passed);
      set_vc_class(bytes, f.vc_class);
      queue_item(link_at(f.chip, f.port), ItemType::kData, f.chip, f.port, bytes.data(),
                 bytes.size());
      return;
    case Forwarded::Kind::kDelivered:
    case Forwarded::Kind::kMisrouted:
      if (seg_->nic_of(f.chip)) {
        data_at_nic(f.chip, bytes);
        return;
      }
      break;
    default:
      break;
  }
  drop(4807, "a data packet from chip {} port {} found no way on and is not answered", chip,
       in_port);  // a refusal that finds no way is not answered (chip/refusal.h)
}

// A data packet at a NIC of this host, as it crossed the last link. The NIC checks it
// (chip::Nic: a dirty one is discarded into its error buffer and counted). An MP enters the
// host's MPQ ring (chip/mpq.h); false means that ring is full and the packet waits, in order.
bool FabricDaemon::data_at_nic(uint32_t chip, std::span<const uint8_t> bytes) {
  auto& nic = static_cast<chip::Nic&>(*chips_[chip]);
  wire::DataPacket packet;  // on the stack: delivering it may send others, to this host too
  if (!nic.check_packet_bytes(bytes, &packet)) return true;
  const wire::DataPacket* p = &packet;
  const bool in_transfer = p->head.flags & wire::kDataFlagInTransfer;
  if (p->head.kind == wire::PacketKind::kMp && !in_transfer) return deliver_mp(chip, *p);
  if (p->head.kind == wire::PacketKind::kCp) {
    // A CP counts for the VP's collective engine (chip/coll.h); the descriptors it lets start
    // run when pump_nics next runs the NIC, in this round of the loop.
    mark_coll(chip, p->head.dest_vp);
    const chip::NicRx rx = nic.receive_checked(*p, bytes);
    if (rx != chip::NicRx::kDiscarded && (p->head.flags & chip::kCpFlagToMpq))
      nic_ports_[chip].cps_to_host.push_back(uint32_t{p->head.dest_vp} << 24 |
                                             uint32_t{p->head.flags} << 16 | p->head.tag);
    if (nic.mpq_count(p->head.dest_vp) > 0 && !mgmt_to_host(chip)) mgmt_waiting_.insert(chip);
    return true;
  }
  // Its acks and read responses go out when pump_nics next runs the NIC.
  nic.receive_checked(*p, bytes);
  drain_eq(chip);  // an ack or the last read response completed a descriptor
  if (nic.mpq_count(p->head.dest_vp) > 0 && !mgmt_to_host(chip)) mgmt_waiting_.insert(chip);
  return true;
}

// ---- management ---------------------------------------------------------------------------

void FabricDaemon::send_mgmt(uint32_t chip, uint8_t out_port, std::span<const uint8_t> packet) {
  // A response's port comes from the request's backward route: any value a requester chose.
  if (out_port >= seg_->chip(chip).num_ports) {
    drop(4809, "a management packet for port {} of chip {}, which has {} ports", out_port, chip,
         seg_->chip(chip).num_ports);
    return;
  }
  PeerInfo& l = seg_->peer(chip, out_port);
  if (l.chip == kNoChip || !l.up.load(std::memory_order_relaxed)) {
    drop(4810, "a management packet out of chip {} port {}, whose link is down", chip, out_port);
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
    drop(4811, "a management packet for chip {}, which is not on this host", chip);
    return;
  }
  count_rx(*seg_, chip, in_port, wire::kMgmtPacketTraffic);
  wire::MgmtPacketBytes bytes{};
  if (packet.size() != bytes.size()) {
    drop(4812, "a management packet of {} bytes at chip {} port {}", packet.size(), chip, in_port);
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
      drop(4813,
           "a management packet at chip {} port {} dropped by its forwarding (malformed, or for "
           "another chip)",
           chip, in_port);
      return;
  }
  auto& nic = static_cast<chip::Nic&>(c);
  if (nic.receive_mgmt(bytes) == chip::NicRx::kDiscarded) {
    drop(4814, "a management packet discarded by NIC {}", chip);
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
      uint64_t pos = 0;
      MpqCell* cell;
      const chip::MpqAdmit admit = claim_mpq(vp, &cell, &pos);
      if (admit == chip::MpqAdmit::kWait) {
        empty = false;
        break;
      }
      auto e = nic.poll_mpq(v);
      if (e->kind == wire::PacketKind::kCp) {
        cp_to_host(chip, v, *e, admit, cell, pos);
        continue;
      }
      if (admit != chip::MpqAdmit::kWrite) {
        drop(4815, "a management answer for NIC {} VP {}, which no process has open", chip,
             v);  // a response for an endpoint that closed or died: nobody to tell
        continue;
      }
      fill_mpq(vp, cell, pos,
               wire::mp_word::make(e->management ? wire::MpKind::kMgmt : wire::MpKind::kUser, 0, v,
                                   e->src_vp, e->src_node, e->length, 0),
               e->data.data());
    }
  }
  return empty;
}

// A CP the NIC writes into the MPQ (chip::kCpFlagToMpq): an MP of kind CP whose header carries
// the CP's flags (wire/cp.h: interrupt, written to the MPQ, replacing) and its increment.
void FabricDaemon::cp_to_host(uint32_t chip, uint8_t v, const chip::MpqEntry& e,
                              chip::MpqAdmit admit, MpqCell* cell, uint64_t pos) {
  // The oldest of this VP's: the VPs' entries leave the chip's MPQ VP by VP, not in the order
  // they came (one VP's host ring may be full).
  std::deque<uint32_t>& meta = nic_ports_[chip].cps_to_host;
  uint32_t m = uint32_t{chip::kCpFlagToMpq} << 16 | 1;  // never without its entry; in case
  for (auto it = meta.begin(); it != meta.end(); ++it)
    if ((*it >> 24) == v) {
      m = *it;
      meta.erase(it);
      break;
    }
  if (admit != chip::MpqAdmit::kWrite) {
    drop(4843, "a CP for the MPQ of NIC {} VP {}, which no process has open", chip, v);
    return;
  }
  const uint8_t f = static_cast<uint8_t>(m >> 16);
  const uint8_t flags = static_cast<uint8_t>(((f & chip::kCpFlagInterrupt) ? 0x1 : 0) | 0x2 |
                                             ((f & chip::kCpFlagReplace) ? 0x4 : 0));
  fill_mpq(seg_->nic_of(chip)->vps[v], cell, pos,
           wire::mp_word::make(wire::MpKind::kCp, flags, v, e.src_vp, e.src_node, e.length,
                               static_cast<uint16_t>(m)),
           e.data.data());
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

void FabricDaemon::flush_path_counters() {
  sent_paths_.flush();
  arrived_paths_.flush();
}

void FabricDaemon::sync_counters(uint32_t chip) {
  flush_path_counters();
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
      const HostLink& hl = links_[it->second];
      for (uint8_t v = 0; v < wire::kNumVcs; ++v)
        ps.vc.tx_packets[v] =
            hl.lanes[v].items_sent + pc.direct_vc_tx[v].load(std::memory_order_relaxed);
      const LinkStats ls = hl.stats();
      ps.retransmissions =
          ls.retransmissions + pc.direct_retransmissions.load(std::memory_order_relaxed);
      ps.crc_errors = ls.crc_errors + pc.direct_crc_errors.load(std::memory_order_relaxed);
      ps.handshakes = ls.handshakes;
    }
  }
}

void FabricDaemon::run_nma(uint32_t chip, std::span<const uint8_t> packet) {
  ++stats_.nma_requests;
  sync_counters(chip);
  chip::Chip& c = *chips_[chip];
  auto out = chip::serve_nma(c, packet, monotonic_ns() * units::kNanosecond);
  if (!out) {
    drop(4816, "a management packet chip {}'s NMA could not serve", chip);
    return;
  }
  c.nma().push_response(out->response);
  if (out->work.kind == chip::NmaWork::Kind::kRegWrite)
    chip_changed(chip);
  else
    drain_nma(chip);
}

// ---- link self-test -------------------------------------------------------------------------

void FabricDaemon::start_bists(uint32_t chip) {
  chip::Chip& c = *chips_[chip];
  const uint64_t now = monotonic_ns();
  for (uint8_t p = 0; p < c.num_ports(); ++p) {
    const chip::PortState& ps = c.port(p);
    if (!ps.bist_running) continue;
    bool known = false;
    for (const BistRun& b : bists_) known |= b.chip == chip && b.port == p;
    if (known) continue;
    BistRun b;
    b.chip = chip;
    b.port = p;
    b.start_ns = now;
    b.end_ns = now + ((ps.bist_ctrl >> 16) & 0xFFFF) * 1000;
    b.intensity = static_cast<double>((ps.bist_ctrl >> 32) & 0xFF) / 100.0;
    if (auto it = link_by_port_.find(uint64_t{chip} << 8 | p); it != link_by_port_.end())
      b.link = it->second;
    bists_.push_back(b);
  }
}

bool FabricDaemon::pump_bists(uint64_t now) {
  bool any = false;
  for (size_t i = 0; i < bists_.size();) {
    BistRun& b = bists_[i];
    chip::Chip& c = *chips_[b.chip];
    if (!c.port(b.port).bist_running) {  // stopped through BIST_CTRL
      bists_.erase(bists_.begin() + static_cast<long>(i));
      continue;
    }
    Lane* lane = b.link == SIZE_MAX ? nullptr : &links_[b.link].lanes[kBistVc];
    const bool up = lane && links_[b.link].state() == LinkState::kUp;
    // A link inside the host has no wire to test; nothing comes back over a cable that is down
    // (every flit, and at least one, failed), nor from a far end that never reports.
    const bool finish = now >= b.end_ns && (!lane || !up || now >= b.end_ns + kBistReportWaitNs);
    if (finish) {
      const uint64_t errors = lane ? std::max<uint64_t>(b.flits, 1) : 0;
      c.complete_bist(b.port, b.flits, errors, lane == nullptr);
      ++stats_.bists_completed;
      log::line(log::Level::kInfo, 4844, "BIST of chip {} port {}: {}", b.chip, b.port,
                !lane ? std::string("a link inside the host, no wire to test")
                      : fmt::format("{} flits, no report from the far end ({})", b.flits,
                                    up ? "it did not answer" : "the cable is down"));
      const uint32_t chip = b.chip;
      bists_.erase(bists_.begin() + static_cast<long>(i));
      drain_nma(chip);  // a failed test raises a fault report
      any = true;
      continue;
    }
    ++i;
    if (!up) continue;
    if (now >= b.end_ns) {
      if (!b.ended) {
        // Behind the last pattern on the same VC, so the far end has seen them all.
        const BistEnd e{b.sequence};
        queue_item(b.link, ItemType::kBistEnd, b.chip, b.port, &e, sizeof e);
        b.ended = true;
        any = true;
      }
      continue;
    }
    // As many patterns as the intensity's share of the link allows since the start, while the
    // link layer takes them.
    const double allowed = static_cast<double>(now - b.start_ns) * 1e-9 * wire::kLinkBitsPerSecond /
                           wire::kFlitBits * b.intensity;
    while (static_cast<double>(b.flits + kBistPatternFlits) <= allowed &&
           lane->link->in_flight() + lane->out_frames.size() < kBistMaxFramesOut) {
      BistPattern pattern;
      pattern.sequence = b.sequence++;
      fill_bist_pattern(pattern.sequence, pattern.bytes);
      queue_item(b.link, ItemType::kBist, b.chip, b.port, &pattern, sizeof pattern);
      b.flits += kBistPatternFlits;
      any = true;
    }
  }
  return any;
}

void FabricDaemon::bist_pattern_arrived(size_t link, uint32_t chip, uint8_t in_port,
                                        std::span<const uint8_t> body) {
  BistPattern got;
  if (body.size() != sizeof got) {
    drop(4845, "a BIST pattern of {} bytes at chip {} port {}", body.size(), chip, in_port);
    return;
  }
  std::memcpy(&got, body.data(), sizeof got);
  // The first pattern of a test: what the link layer discards from now on is the test's.
  auto [it, fresh] = bist_rx_.try_emplace(uint64_t{chip} << 8 | in_port);
  if (fresh || got.sequence == 0) {
    const LinkStats st = links_[link].lanes[kBistVc].link->stats();
    it->second = BistRx{0, 0, st.crc_errors, st.malformed};
  }
  ++stats_.bist_patterns_received;
  uint8_t want[kBistPatternBytes];
  fill_bist_pattern(got.sequence, want);
  // The link layer's CRC passed it: a pattern that differs was changed where no check sees it.
  if (std::memcmp(want, got.bytes, sizeof want) != 0) {
    ++it->second.mismatched;
    drop(4846, "a BIST pattern (sequence {}) at chip {} port {} differs from the one sent",
         got.sequence, chip, in_port);
  } else {
    ++it->second.patterns;
  }
}

void FabricDaemon::bist_end_arrived(size_t link, uint32_t chip, uint8_t in_port,
                                    std::span<const uint8_t> body) {
  BistEnd end;
  if (body.size() != sizeof end) {
    drop(4850, "a BIST end of {} bytes at chip {} port {}", body.size(), chip, in_port);
    return;
  }
  std::memcpy(&end, body.data(), sizeof end);
  BistReport r{};
  if (auto it = bist_rx_.find(uint64_t{chip} << 8 | in_port); it != bist_rx_.end()) {
    const LinkStats st = links_[link].lanes[kBistVc].link->stats();
    r = {it->second.patterns, it->second.mismatched, 0, st.crc_errors - it->second.crc_at_start,
         st.malformed - it->second.malformed_at_start};
    bist_rx_.erase(it);
  }
  // Patterns the sender counted that never came (the end comes behind them on the same VC).
  if (end.patterns > r.patterns + r.mismatched) r.lost = end.patterns - r.patterns - r.mismatched;
  queue_item(link, ItemType::kBistReport, chip, in_port, &r, sizeof r);
}

void FabricDaemon::bist_report_arrived(uint32_t chip, uint8_t in_port,
                                       std::span<const uint8_t> body) {
  BistReport r;
  if (body.size() != sizeof r) {
    drop(4847, "a BIST report of {} bytes at chip {} port {}", body.size(), chip, in_port);
    return;
  }
  std::memcpy(&r, body.data(), sizeof r);
  for (size_t i = 0; i < bists_.size(); ++i) {
    BistRun& b = bists_[i];
    if (b.chip != chip || b.port != in_port || !b.ended) continue;
    // Frames the far end discarded carried patterns that came again; a pattern lost outright
    // or changed past the CRC counts as the flits it had.
    const uint64_t errors =
        r.crc_errors + r.malformed + (r.mismatched + r.lost) * kBistPatternFlits;
    chips_[chip]->complete_bist(in_port, b.flits, errors);
    ++stats_.bists_completed;
    log::line(log::Level::kInfo, 4849,
              "BIST of chip {} port {}: {} flits, {} errors (far end: {} patterns, {} changed, "
              "{} CRC errors, {} malformed frames)",
              chip, in_port, b.flits, errors, r.patterns, r.mismatched, r.crc_errors, r.malformed);
    bists_.erase(bists_.begin() + static_cast<long>(i));
    drain_nma(chip);
    return;
  }
  drop(4848, "a BIST report at chip {} port {}, which runs no test", chip, in_port);
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
    RouteCell* row = seg_->route_row(local, p);
    for (uint32_t d = 0; d < n; ++d) row[d].store(nrc.allowed_ports(p, d));
    seg_->peer(chip, p).vc_rule.store(nrc.vc_rule(p), std::memory_order_relaxed);
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
  // Management on VC3, a data packet on the VC its head flit names (chip::data_link_vc), a
  // self-test's pattern, end marker and report on the test's VC (the end behind the patterns).
  const uint8_t vc =
      type == ItemType::kMgmt ? wire::kMgmtVc
      : type == ItemType::kData
          ? chip::data_link_vc(wire::flit_vc({static_cast<const uint8_t*>(body), body_len}))
          : kBistVc;
  Lane& l = links_[link].lanes[vc];
  ItemHead h{static_cast<uint16_t>(sizeof(ItemHead) + body_len + data_len),
             static_cast<uint8_t>(type), from_port, from_chip};
  const size_t max = links_[link].frame_bytes;
  if (!l.batch.empty() && l.batch.size() + h.length > max) {
    l.out_frames.push_back(std::move(l.batch));
    l.batch = {};
  }
  if (l.batch.capacity() < max) l.batch.reserve(max);  // a frame's room at once
  auto append = [&](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    l.batch.insert(l.batch.end(), b, b + n);
  };
  append(&h, sizeof h);
  append(body, body_len);
  if (data_len) append(data, data_len);
  ++l.items_sent;
  ++stats_.items_sent;
}

bool FabricDaemon::deliver_mp(uint32_t nic, const wire::DataPacket& mp) {
  NicSlot* slot = seg_->nic_of(nic);
  const wire::DataHead& h = mp.head;
  // A refused MP is answered by a refusal (chip/refusal.h).
  auto refuse = [&](uint16_t id) {
    ++stats_.mps_refused;
    send_data(nic, chip::mp_refusal(h, static_cast<wire::ChipId>(nic), id));
    return true;
  };
  if (!slot || h.dest_vp >= kVps) return refuse(kErrMpNoVp);
  switch (deliver_mp_packet(slot->vps[h.dest_vp], mp)) {
    case chip::MpqAdmit::kWrite:
      break;
    case chip::MpqAdmit::kNotOpen:
      return refuse(kErrMpNotOpen);
    case chip::MpqAdmit::kOwnerGone:
      return refuse(kErrMpOwnerGone);
    case chip::MpqAdmit::kWait:
      return false;  // hold the link's items, in order, until the receiver drains it
  }
  ++stats_.mps_delivered;
  return true;
}

bool FabricDaemon::process_item(size_t link, std::span<const uint8_t> item) {
  ItemHead h;
  if (!read_struct(item, 0, &h) || h.length != item.size() || h.from_chip >= seg_->num_chips() ||
      h.from_port >= seg_->max_ports()) {
    drop(4817, "an item from link {} with a bad head", link);
    return true;
  }
  PeerInfo& entry = seg_->peer(h.from_chip, h.from_port);
  if (entry.chip == kNoChip || !seg_->is_local(entry.chip)) {
    drop(4818, "an item for chip {} port {}, whose far end is not on this host", h.from_chip,
         h.from_port);
    return true;
  }
  const uint32_t chip = entry.chip;
  const uint8_t in_port = entry.port;
  std::span<const uint8_t> body = item.subspan(sizeof h);
  ++stats_.items_received;
  switch (static_cast<ItemType>(h.type)) {
    case ItemType::kMgmt:
      arrive_mgmt(chip, in_port, body);
      return true;
    case ItemType::kData:
      return arrive_data(chip, in_port, body);
    case ItemType::kBist:
      bist_pattern_arrived(link, chip, in_port, body);
      return true;
    case ItemType::kBistEnd:
      bist_end_arrived(link, chip, in_port, body);
      return true;
    case ItemType::kBistReport:
      bist_report_arrived(chip, in_port, body);
      return true;
    case ItemType::kDataRun:  // only processes' direct links carry runs: as an unknown type
      break;
  }
  drop(4819, "an item of unknown type {} for chip {} port {}", static_cast<int>(h.type), chip,
       in_port);  // a malformed item: counted and discarded, the rest of the frame goes on
  return true;
}

// A data packet that crossed a link into local chip `chip`. A NIC receives what its port
// gives it and checks it; an NRC reads the head flit to route it (a packet whose head does not
// decode cannot be routed and is discarded there, DIRTY_DISCARDS).
bool FabricDaemon::arrive_data(uint32_t chip, uint8_t in_port, std::span<const uint8_t> bytes) {
  const wire::Traffic t{1, 0, bytes.size() / wire::kFlitBytes};
  if (seg_->nic_of(chip)) {  // counted on the port it entered (a path of one port)
    arrived_paths_.at(*seg_, chip, in_port, chip, 0, 0).add(t);
    return data_at_nic(chip, bytes);
  }
  const std::optional<wire::DataHead> head = chip::routable_head(bytes);
  if (!head) {
    count_rx(*seg_, chip, in_port, t);
    count_discard(*seg_, chip, in_port, t);
    drop(4820, "a data item without a routable head at chip {} port {}", chip, in_port);
    return true;
  }
  const uint8_t vc_class = chip::vc_class_of(head->vc);
  PathCounters& path =
      arrived_paths_.at(*seg_, chip, in_port, head->dest_node, head->hops, vc_class);
  Forwarded f = path.result;
  if (path_goes_through(f))
    path.add(t);
  else
    f = forward_arrived(*seg_, chip, in_port, head->dest_node, t, nullptr, head->hops, vc_class);
  switch (f.kind) {
    case Forwarded::Kind::kLeavesHost:  // onwards to a third host, with the NRCs passed here
      packet_bytes_.assign(bytes.begin(), bytes.end());
      wire::set_data_hops(packet_bytes_, f.hops_passed);
      set_vc_class(packet_bytes_, f.vc_class);
      queue_item(link_at(f.chip, f.port), ItemType::kData, f.chip, f.port, packet_bytes_.data(),
                 packet_bytes_.size());
      return true;
    case Forwarded::Kind::kDelivered:
    case Forwarded::Kind::kMisrouted:
      if (seg_->nic_of(f.chip)) return data_at_nic(f.chip, bytes);
      break;
    default:
      break;
  }
  if (wire::decode_flit(bytes.first(wire::kFlitBytes)).ok())
    discard_data(f, bytes);
  else
    drop(4821, "a data item at chip {} whose head flit does not decode", f.chip);
  return true;
}

void FabricDaemon::feed_frame(size_t link, std::span<const uint8_t> payload) {
  if (link >= links_.size()) return;
  Lane& lane = links_[link].lanes[0];
  lane.held.emplace_back(payload.begin(), payload.end());
  unsigned budget = UINT32_MAX;
  process_lane(link, lane, &budget);
  lane.held.clear();  // items waiting on a full MPQ are dropped here, not retried
  lane.held_offset = 0;
}

// Items of each data VC one call of process_held takes at most: a management item that arrives
// meanwhile waits for these, not for everything the data VCs have delivered, and no data VC
// waits for another (acks on VC2 go on while write data streams on VC0).
constexpr unsigned kDataItemsPerPoll = 128;

bool FabricDaemon::process_held(size_t link) {
  HostLink& l = links_[link];
  unsigned budget = UINT32_MAX;
  bool any = process_lane(link, l.lanes[wire::kMgmtVc], &budget);
  for (uint8_t v = 0; v < wire::kNumVcs; ++v) {
    budget = kDataItemsPerPoll;
    if (v != wire::kMgmtVc) any |= process_lane(link, l.lanes[v], &budget);
  }
  return any;
}

bool FabricDaemon::process_lane(size_t link, Lane& l, unsigned* budget) {
  bool any = false;
  while (*budget > 0) {
    if (l.held.empty()) {
      std::vector<uint8_t> frame;
      if (!l.link->pop_delivered(&frame)) break;
      l.held.push_back(std::move(frame));
      l.held_offset = 0;
    }
    std::vector<uint8_t>& f = l.held.front();
    while (l.held_offset < f.size() && *budget > 0) {
      const std::span<const uint8_t> item = item_at(f, l.held_offset);
      if (item.empty()) {
        drop(4822, "a frame from link {} with a malformed item at byte {}", link, l.held_offset);
        l.held_offset = f.size();
        break;
      }
      if (!process_item(link, item)) return any;  // the receiver is full: try again later, in order
      l.held_offset += item.size();
      --*budget;
      any = true;
    }
    if (l.held_offset < f.size()) break;  // the budget ran out inside the frame
    l.held.pop_front();
    l.held_offset = 0;
    any = true;
  }
  return any;
}

// Completes a pending operation: a CQ entry when asked for or on error, and the VP's count of
// outstanding descriptors (fence) goes down.
void FabricDaemon::complete(uint32_t nic, uint8_t vp, OpCode op, OpStatus status, uint64_t cookie,
                            uint64_t bytes, uint16_t error_id, const char* reason) {
  NicSlot* slot = seg_->nic_of(nic);
  if (!slot || vp >= kVps) return;
  VpSlot& v = slot->vps[vp];
  // Behind earlier held ones of the same VP, or into a full CQ: hold it.
  if (!held_completions_.find(nic, vp) &&
      push_completion(v, op, status, cookie, bytes, error_id, reason))
    return;
  ++stats_.completions_held;
  held_completions_.push(
      nic, vp, {v.generation.load(), op, status, cookie, bytes, error_id, reason ? reason : ""});
}

bool FabricDaemon::rdma_has_room(const EgressRdma& d) const {
  // A descriptor that names no NIC of this host goes on at once: start_rdma refuses it.
  if (d.src_node >= chips_.size() || !chips_[d.src_node] || !seg_->nic_of(d.src_node) ||
      d.src_vp >= kVps)
    return true;
  return static_cast<const chip::Nic&>(*chips_[d.src_node]).has_room(d.src_vp);
}

bool FabricDaemon::retry_rdma_backlog() {
  return rdma_backlog_.drain([&](uint32_t, uint8_t, const EgressRdma& d) {
    if (!rdma_has_room(d)) return false;
    start_rdma(d);  // checks it again: a VP whose owner went fails it
    return true;
  });
}

bool FabricDaemon::retry_completions() {
  return held_completions_.drain([&](uint32_t nic, uint8_t vp, const HeldCompletion& h) {
    VpSlot& v = seg_->nic_of(nic)->vps[vp];
    if (v.generation.load() != h.vp_generation || !v.open.load()) return true;  // no one to tell
    return push_completion(v, h.op, h.status, h.cookie, h.bytes, h.error_id, h.reason.c_str());
  });
}

// ---- links, timers ---------------------------------------------------------------

bool FabricDaemon::flush_links(uint64_t now) {
  bool any = false;
  Link::Outgoing frame_out;
  std::vector<std::vector<uint8_t>> to_send;
  for (size_t i = 0; i < links_.size(); ++i) {
    HostLink& l = links_[i];
    auto put_on_wire = [&](Lane& lane) {
      while (lane.link->pop_outgoing(&frame_out)) {
        any = true;
        if (!impairments_[i]) {
          send_frame(l, frame_out);
          continue;
        }
        std::vector<uint8_t> dgram;
        frame_out.copy_to(&dgram);
        to_send.clear();
        impairments_[i]->apply(std::move(dgram), &to_send);
        for (auto& d : to_send) send_datagram(l, d);
      }
    };
    for (Lane& lane : l.lanes)
      if (!lane.batch.empty()) {
        lane.out_frames.push_back(std::move(lane.batch));
        lane.batch.clear();
      }
    // Frames in the order the output serves VCs: management first, then the data VCs in turn,
    // each while its own Link has window and the peer's credits.
    for (;;) {
      const int v = chip::next_vc(l.last_vc, [&](uint8_t vc) {
        const Lane& lane = l.lanes[vc];
        return !lane.out_frames.empty() && lane.link->can_send();
      });
      if (v < 0) break;
      Lane& lane = l.lanes[static_cast<size_t>(v)];
      std::vector<uint8_t>& frame = lane.out_frames.front();
      if (!lane.link->send(&frame, now).ok()) break;
      if (lane.batch.empty() && lane.batch.capacity() < frame.capacity())
        lane.batch.swap(frame);  // the buffer the link gave back holds the next frame
      lane.out_frames.pop_front();
      if (v != wire::kMgmtVc) l.last_vc = static_cast<uint8_t>(v);
      put_on_wire(lane);
      any = true;
    }
    // Acks, retransmissions and handshakes: management's first.
    put_on_wire(l.lanes[wire::kMgmtVc]);
    for (Lane& lane : l.lanes) put_on_wire(lane);
  }
  return any;
}

void FabricDaemon::send_datagram(const HostLink& l, std::span<const uint8_t> d) {
  iovec part{const_cast<uint8_t*>(d.data()), d.size()};
  send_parts(l, &part, 1);
}

// A frame as the link left it, header, payload and CRC gathered by the kernel (no copy here).
void FabricDaemon::send_frame(const HostLink& l, const Link::Outgoing& f) {
  iovec parts[3] = {{const_cast<uint8_t*>(f.header.data()), f.header.size()},
                    {const_cast<uint8_t*>(f.payload.data()), f.payload.size()},
                    {const_cast<uint8_t*>(f.crc.data()), f.crc.size()}};
  send_parts(l, parts, 3);
}

void FabricDaemon::send_parts(const HostLink& l, iovec* parts, size_t count) {
  msghdr m{};
  m.msg_name = const_cast<sockaddr_in*>(&l.peer_address);
  m.msg_namelen = sizeof l.peer_address;
  m.msg_iov = parts;
  m.msg_iovlen = count;
  if (sendmsg(sock_, &m, 0) < 0) {
    ++stats_.udp_errors;  // the link layer retransmits what the kernel dropped
    log::warn(4825, "a datagram to {} was not sent: {}", endpoint_text(l.peer_address),
              std::strerror(errno));
  }
  ++stats_.frames_sent;
}

bool FabricDaemon::receive_udp(uint64_t now) {
  bool any = false;
  scratch_.resize(65536);
  for (int i = 0; i < 256; ++i) {
    sockaddr_in from{};
    socklen_t from_len = sizeof from;
    ssize_t n = recvfrom(sock_, scratch_.data(), scratch_.size(), 0,
                         reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n <= 0) break;
    std::span<const uint8_t> d(scratch_.data(), static_cast<size_t>(n));
    if (is_directory_datagram(d)) {
      answer_directory(d, from);
      any = true;
      continue;
    }
    auto id = peek_link_id(d);
    auto it = id ? link_by_id_.find(*id) : link_by_id_.end();
    if (it == link_by_id_.end()) {
      drop(4823, "a datagram of {} bytes that names no link of this host", n);
      continue;
    }
    HostLink& l = links_[it->second / wire::kNumVcs];
    // Link ids follow from the topology, so another fabric of the same shape (a daemon given
    // a wrong port, say) sends frames with ids this host knows; only the peer's own socket
    // speaks for a link.
    if (!from_peer(l, from)) {
      ++stats_.foreign_datagrams;
      log::warn(4824, "dropped: a datagram for link {} from {}, not that link's peer daemon", *id,
                endpoint_text(from));
      continue;
    }
    l.lanes[it->second % wire::kNumVcs].link->on_datagram(d, now);
    any = true;
  }
  return any;
}

void FabricDaemon::answer_directory(std::span<const uint8_t> d, const sockaddr_in& from) {
  auto q = decode_directory_query(d);
  if (!q.ok()) {
    drop(4877, "a VP directory question from {}: {}", endpoint_text(from), q.error().to_string());
    return;
  }
  DirectoryAnswer a{
      .node = q->node, .vp = q->vp, .status = DirectoryStatus::kNotHere, .tag = q->tag};
  NicSlot* nic = seg_->is_local(q->node) ? seg_->nic_of(q->node) : nullptr;
  if (nic && q->vp < kVps) {
    const VpSlot& s = nic->vps[q->vp];
    a.generation = s.generation.load(std::memory_order_acquire);
    const int32_t owner = s.owner_pid.load(std::memory_order_acquire);
    if (s.open.load(std::memory_order_acquire) == 0 || owner == 0 || !process_alive(owner)) {
      a.status = DirectoryStatus::kNotOpen;
    } else {
      a.status = DirectoryStatus::kOpen;
      a.port = static_cast<uint16_t>(s.direct_port.load(std::memory_order_acquire));
    }
  }
  ++stats_.directory_queries;
  const auto bytes = encode_directory_answer(a);
  if (sendto(sock_, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&from),
             sizeof from) < 0) {
    ++stats_.udp_errors;  // the asker asks again
    log::warn(4878, "a VP directory answer to {} was not sent: {}", endpoint_text(from),
              std::strerror(errno));
  }
}

bool FabricDaemon::from_peer(const HostLink& l, const sockaddr_in& from) {
  const sockaddr_in& p = l.peer_address;
  return from.sin_family == AF_INET && from.sin_port == p.sin_port &&
         (from.sin_addr.s_addr == p.sin_addr.s_addr || p.sin_addr.s_addr == htonl(INADDR_ANY));
}

void FabricDaemon::timers(uint64_t now) {
  for (HostLink& l : links_)
    for (Lane& lane : l.lanes)
      if (lane.link->next_deadline_ns() <= now) lane.link->on_timer(now);
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
    // A transfer that has waited for its target the whole timeout with no answer from it (its
    // host or daemon gone) ends with an error; one still queued or sending, or whose target
    // answered meanwhile, gets more time.
    std::vector<uint64_t> expired;
    for (const auto& [key, op] : nic_ops_)
      if (op.deadline <= now) expired.push_back(key);
    for (uint64_t key : expired) {
      const OpKey k = OpKey::unpack(key);
      auto& n = static_cast<chip::Nic&>(*chips_[k.nic]);
      NicOp& op = nic_ops_[key];
      const std::optional<uint64_t> answers = n.awaited_answers(k.vp, k.sequence);
      if (!answers || answers != op.answers) {
        op.answers = answers;
        op.deadline = now + options_.op_timeout_ns;
        continue;
      }
      n.abort_transfer(k.vp, k.sequence, kErrOpTimeout);
      drain_eq(k.nic);
    }
  }
  if (now >= next_liveness_) {
    next_liveness_ = now + options_.liveness_interval_ns;
    scan_liveness();
  }
}

void FabricDaemon::scan_liveness() {
  const SegHeader& h = seg_->header();
  // Each owner asked once a scan: many VPs, registrations and transfers share a few processes,
  // and the question reads /proc (a zombie is not alive).
  std::unordered_map<int32_t, bool> known;
  auto alive = [&known](int32_t pid) {
    auto [it, fresh] = known.try_emplace(pid, false);
    if (fresh) it->second = process_alive(pid);
    return it->second;
  };
  for (uint32_t s = 0; s < h.num_local_nics; ++s) {
    NicSlot& nic = seg_->nic_slot(s);
    for (VpSlot& vp : nic.vps) {
      int32_t pid = vp.owner_pid.load();
      if (!vp.open.load() || alive(pid)) continue;
      // The owner died: its VP closes, so senders get an error instead of filling its MPQ.
      vp.open.store(0, std::memory_order_release);
      vp.direct_port.store(0);
      vp.owner_pid.store(0);
      vp.generation.fetch_add(1);
      ++stats_.dead_processes;
      log::warn(4826, "process {}, owner of NIC slot {} VP {}, died: the VP is closed", pid, s,
                &vp - nic.vps);
    }
    for (AttEntry& e : nic.att)
      if (e.state.load() == 2 && !alive(e.pid)) {
        e.generation++;
        e.state.store(0, std::memory_order_release);
      }
  }
  for (uint32_t n : local_nics_)
    if (nic_ports_[n].memory) nic_ports_[n].memory->drop_stale();
  // Collective state of a VP that closed, changed hands or lost its owner goes (its queued
  // descriptors would otherwise start on a later owner's CPs).
  for (uint32_t n : local_nics_) {
    NicSlot* slot = seg_->nic_of(n);
    for (uint8_t v = 0; v < kVps; ++v) {
      const CollVp& c = nic_ports_[n].coll[v];
      if (c.active && (!slot->vps[v].open.load() || slot->vps[v].generation.load() != c.generation))
        reset_coll(n, v);
    }
  }
  // Transfers of a process that died end now: nobody waits for them.
  std::vector<uint64_t> orphaned;
  for (const auto& [key, op] : nic_ops_)
    if (!alive(op.pid)) orphaned.push_back(key);
  for (uint64_t key : orphaned) {
    nic_ops_.erase(key);
    const OpKey k = OpKey::unpack(key);
    static_cast<chip::Nic&>(*chips_[k.nic]).abort_transfer(k.vp, k.sequence, kErrOpTimeout);
  }
}

// Ports whose PORT_CTRL "force link down" changed by a management write: a link between hosts
// tells the peer through its handshakes (Link::set_disabled) and update_link_states follows its
// state; a link inside this host changes at both ends at once.
void FabricDaemon::apply_link_controls(uint32_t chip) {
  chips_[chip]->take_link_control_changes().for_each([&](unsigned port) {
    const auto p = static_cast<uint8_t>(port);
    auto it = link_by_port_.find(port_key(chip, p));
    if (it != link_by_port_.end())
      for (Lane& lane : links_[it->second].lanes)
        lane.link->set_disabled(chips_[chip]->port_forced_down(p), monotonic_ns());
    else if (fabric_.topology.peer({chip, p}))
      update_local_link(chip, p);
  });
}

// A link inside this host is up while neither end holds it down (there is no cable to cut).
void FabricDaemon::update_local_link(uint32_t chip, uint8_t port) {
  const fabric::PortRef peer = *fabric_.topology.peer({chip, port});
  const bool up = chip::link_allowed(*chips_[chip], port, *chips_[peer.node], peer.port);
  set_port_link({chip, port}, up);
  set_port_link(peer, up);
  seg_->header().route_generation.fetch_add(1, std::memory_order_release);  // paths change
}

// One end of a link of this host changes state: the segment's senders see it, the chip model
// learns the identity at the other end (chip id = plan node, as its EEPROM programs it) or
// raises the link-down fault, and its reports leave.
void FabricDaemon::set_port_link(fabric::PortRef end, bool up) {
  const fabric::Topology& t = fabric_.topology;
  chip::Chip& c = *chips_[end.node];
  seg_->peer(end.node, end.port).up.store(up ? 1 : 0, std::memory_order_release);
  if (up) {
    const fabric::PortRef other = *t.peer(end);
    c.link_up(end.port, {true, t.is_nic(other.node) ? wire::ChipType::kNic : wire::ChipType::kNrc,
                         static_cast<wire::ChipId>(other.node), other.port,
                         static_cast<uint8_t>(t.num_ports(other.node))});
  } else {
    c.link_down(end.port);
  }
  drain_nma(end.node);
}

void FabricDaemon::update_link_states() {
  for (HostLink& l : links_) {
    LinkState st = l.state();
    if (st == l.last_state) continue;
    l.last_state = st;
    set_port_link({l.chip, l.port}, st == LinkState::kUp);
    seg_->header().route_generation.fetch_add(1, std::memory_order_release);  // paths change
  }
}

}  // namespace galaxy::live
