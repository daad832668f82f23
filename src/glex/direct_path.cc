#include "glex/direct_path.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <unordered_set>

#include "base/log.h"
#include "base/thread.h"
#include "engine/live/direct.h"
#include "engine/live/directory.h"
#include "engine/live/items.h"

namespace galaxy::glex {

namespace {

constexpr size_t kRxBatch = 16;
constexpr size_t kRxBytes = live::kLinkFrameOverhead + live::kMaxDefaultFrameBytes;
// How long closing waits for the peers to acknowledge what it sent, so that little is left for
// the daemon to send again.
constexpr uint64_t kCloseDrainNs = 200'000'000;
// A train's first frame when the link has nothing in flight (about ten MPs; measured with
// `galaxy bench mpi`: 4 KiB ping-pong 78 -> 66 us between hosts at the same bandwidth).
constexpr size_t kFirstTrainFrameBytes = 2048;

uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The direct paths of this process, for fork() (see DirectPath::quiesce_for_fork).
std::mutex g_paths_mu;
std::unordered_set<DirectPath*>& live_paths() {
  static auto* paths = new std::unordered_set<DirectPath*>;  // outlives every path
  return *paths;
}

}  // namespace

void DirectPath::quiesce_for_fork() {
  g_paths_mu.lock();
  for (DirectPath* p : live_paths()) p->mu_.lock();
}

void DirectPath::resume_after_fork() {
  for (DirectPath* p : live_paths()) p->mu_.unlock();
  g_paths_mu.unlock();
}

DirectPath::DirectPath(live::Segment& seg) : seg_(seg) {
  const uint32_t ip = seg_.header().host_ip;
  if (ip == 0) return;
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = ip;
  socklen_t len = sizeof a;
  const int buf = 4 << 20;  // bursts of a window's frames from several peers
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  const int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake < 0 || bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    if (wake >= 0) close(wake);
    return;
  }
  fd_ = fd;
  wake_fd_ = wake;
  ip_ = ip;
  port_ = ntohs(a.sin_port);
  rx_bufs_.assign(kRxBatch, std::vector<uint8_t>(kRxBytes));
  static std::once_flag registered;
  std::call_once(registered, [] {
    pthread_atfork(&DirectPath::quiesce_for_fork, &DirectPath::resume_after_fork,
                   &DirectPath::resume_after_fork);
  });
  std::lock_guard<std::mutex> g(g_paths_mu);
  live_paths().insert(this);
}

DirectPath::~DirectPath() {
  if (fd_ < 0) return;
  {
    std::lock_guard<std::mutex> g(g_paths_mu);
    live_paths().erase(this);
  }
  if (getpid() != owner_pid_) {  // a forked child: the thread and the links are the parent's
    // The handle names no thread of this process: left as it is, never joined.
    if (nic_thread_.joinable()) (void)new std::thread(std::move(nic_thread_));
    close(fd_);
    close(wake_fd_);
    return;
  }
  if (nic_thread_.joinable()) {
    stop_.store(true);
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
    lease_word_.fetch_add(1);
    live::futex_wake(&lease_word_);
    nic_thread_.join();
  }
  std::lock_guard<std::mutex> g(mu_);
  // What the peers have not acknowledged yet, they mostly will within a round trip or two; and
  // this end's delayed acknowledgements go out meanwhile.
  const uint64_t start = live::monotonic_ns();
  while (!peers_.empty()) {
    const uint64_t now = live::monotonic_ns();
    service(now);
    bool pending = false;
    for (auto& [k, p] : peers_)
      pending |= (p.link->in_flight() != 0 || !p.backlog.empty() || !p.pending.empty()) &&
                 p.link->state() == live::LinkState::kUp;
    if ((!pending && now - start > 2 * live::LinkConfig{}.ack_delay_ns) ||
        now - start > kCloseDrainNs)
      break;
    pollfd pf{fd_, POLLIN, 0};
    ::poll(&pf, 1, 1);
  }
  const uint64_t now = live::monotonic_ns();
  for (auto& [k, p] : peers_) {
    deliver(p, k);  // what arrived for VPs now closed goes to the daemon, which refuses it
    (void)rescue(p);
    p.link->set_disabled(true, now);
    flush(p);
  }
  arrivals_.flush();
  close(fd_);
  close(wake_fd_);
}

void DirectPath::start() {
  if (fd_ < 0 || nic_thread_.joinable()) return;
  nic_thread_ = start_running([this] { run(); });
}

uint32_t DirectPath::link_id(uint64_t peer_key) const {
  const uint64_t mine = address_key(ip_, port_);
  return static_cast<uint32_t>(
      mix64(std::min(mine, peer_key) * 0x100000001B3ull ^ mix64(std::max(mine, peer_key))));
}

DirectPath::Peer* DirectPath::peer_for(uint64_t key, const sockaddr_in& a, uint64_t now) {
  if (auto it = peers_.find(key); it != peers_.end()) return &it->second;
  if (peers_.size() >= kMaxPeers) return nullptr;
  Peer& p = peers_[key];
  p.address = a;
  live::LinkConfig c;
  c.link_id = link_id(key);
  c.closing_is_routine = true;  // processes close their links with them
  // Frames of one IP packet each, as the daemons' (a lost fragment would lose the frame).
  const uint32_t mtu = live::path_mtu(a);
  c.max_payload = live::frame_bytes_for_mtu(mtu != 0 ? mtu : live::kAssumedMtu);
  p.link = std::make_unique<live::Link>(c);
  p.created_ns = now;
  const live::SegHeader& h = seg_.header();
  if (h.impaired)
    p.impairment = std::make_unique<live::Impairment>(h.impairment.for_link(c.link_id, 1));
  active_.store(true, std::memory_order_relaxed);
  next_deadline_ = 0;  // its handshake starts at the next service
  return &p;
}

// The address key at which VP `vp` of NIC `node` receives, as its host's daemon answers the
// directory (the VP open and its owner alive); 0 when it does not, or no answer came.
uint64_t DirectPath::ask_where(uint32_t node, uint8_t vp) const {
  const live::HostAddress& host = seg_.host_address(seg_.chip(node).host);
  if (host.ip == 0 || host.port == 0) return 0;
  auto a = live::ask_directory(host.ip, host.port, node, vp, kDirectoryTimeoutMs);
  return a.ok() && a->status == live::DirectoryStatus::kOpen && a->port != 0
             ? address_key(host.ip, a->port)
             : 0;
}

DirectPath::Target DirectPath::lookup(uint32_t node, uint8_t vp, uint64_t now) {
  const uint64_t key = uint64_t{node} << 8 | vp;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (auto it = targets_.find(key); it != targets_.end()) {
      const Target& t = it->second;
      if (t.key != 0 || now - t.asked_ns < kNegativeAnswerNs) return t;
    }
  }
  Target t;
  t.asked_ns = now;
  t.key = ask_where(node, vp);
  std::lock_guard<std::mutex> g(mu_);
  targets_[key] = t;
  return t;
}

DirectPath::Sent DirectPath::send_mp(const wire::DataPacket& p, const live::Forwarded& f,
                                     bool more) {
  const uint32_t dest = p.head.dest_node;
  if (fd_ < 0 || !live::enters_target_host(seg_, f, dest)) return Sent::kNotDirect;
  const uint64_t now = live::monotonic_ns();
  const Target t = lookup(dest, p.head.dest_vp, now);
  if (t.key == 0) return Sent::kNotDirect;
  lease_until_.store(now + kLeaseNs, std::memory_order_relaxed);
  std::lock_guard<std::mutex> g(mu_);
  const sockaddr_in a = address_of(t.key);
  Peer* peer = peer_for(t.key, a, now);
  if (!peer) return Sent::kNotDirect;
  if (!peer->backlog.empty() || !peer->link->can_send()) {
    service(now);
    peer = peer_for(t.key, a, now);  // service may have given the link up
    if (!peer) return Sent::kNotDirect;
  }
  if (!live::leaving_item(p, f, &item_).ok()) return Sent::kNotDirect;  // the daemon reports it
  const bool up = peer->link->state() == live::LinkState::kUp;
  if (peer->backlog.empty() && (up || !peer->pending.empty())) {
    // The frame being filled: a full one goes first; with no room in the link for it, this MP
    // is refused busy (the frame waits in this process, never more than one). A link with
    // nothing in flight takes a train's first frame early, so that the receiver starts on it
    // while the rest is encoded.
    const size_t full =
        peer->link->in_flight() == 0 ? kFirstTrainFrameBytes : peer->link->config().max_payload;
    if (!peer->pending.empty() && peer->pending.size() + item_.size() > full &&
        !send_pending(*peer, now))
      return Sent::kBusy;
    if (peer->pending.empty() && !peer->link->can_send()) return Sent::kBusy;
    peer->pending.insert(peer->pending.end(), item_.begin(), item_.end());
    // More to follow at once: the frame waits for them (the NIC thread sends it at the latest
    // when the application's lease runs out).
    if (!more) send_pending(*peer, now);
  } else if (!up && peer->backlog.size() < kMaxBacklog) {
    // While the link trains, MPs wait behind each other; once it is up, what the peer has no
    // room for is refused busy (it would wait in this process, and die with it).
    peer->backlog.push_back(item_);
  } else {
    return Sent::kBusy;
  }
  count_tx(*peer, f, item_, 1);
  sent_to(*peer);
  return Sent::kSent;
}

DirectPath::Sent DirectPath::send_transfer(uint32_t dest, uint8_t dest_vp, const live::Forwarded& f,
                                           StartFn start) {
  if (fd_ < 0 || !transfers_ || !live::enters_target_host(seg_, f, dest)) return Sent::kNotDirect;
  const uint64_t now = live::monotonic_ns();
  const Target t = lookup(dest, dest_vp, now);
  if (t.key == 0) return Sent::kNotDirect;
  // No lease: the target's answer must reach memory whether or not this thread polls again
  // (a transfer's initiator may wait on memory, not in libglex), so the NIC thread keeps the
  // socket.
  std::lock_guard<std::mutex> g(mu_);
  const sockaddr_in a = address_of(t.key);
  Peer* peer = peer_for(t.key, a, now);
  if (!peer) return Sent::kNotDirect;
  if (!start(t.key, run_room(*peer),
             [&](uint64_t key, const live::Forwarded& leaving, std::vector<uint8_t>* items,
                 size_t count) { return send_items(key, leaving, items, count, now); })) {
    // The NIC's queue is full: the caller retries; meanwhile what the link brought (the answers
    // that make room) is taken.
    service(now);
    return Sent::kBusy;
  }
  sent_to(*peer);
  return Sent::kSent;
}

void DirectPath::sent_to(Peer& p) {
  flush(p);
  next_deadline_ = std::min(next_deadline_, p.link->next_deadline_ns());
  // A NIC thread asleep past the new deadline (a retransmission, a handshake) wakes for it.
  if (next_deadline_ < nic_sleep_until_.load(std::memory_order_acquire)) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
  }
}

bool DirectPath::send_items(uint64_t key, const live::Forwarded& f, std::vector<uint8_t>* items,
                            size_t count, uint64_t now) {
  const auto it = peers_.find(key);
  // A transfer's pieces go while few frames wait for the link (kAheadFrames), as answers do.
  if (it == peers_.end() || it->second.backlog.size() >= kAheadFrames) return false;
  Peer& p = it->second;
  // A piece that is a frame by itself, with nothing waiting before it, is the frame: its
  // buffer goes to the link as it is (the first item's head kept for the count).
  if (p.pending.empty() && p.backlog.empty() && p.link->state() == live::LinkState::kUp &&
      items->size() <= p.link->config().max_payload && p.link->can_send()) {
    std::array<uint8_t, sizeof(live::ItemHead) + wire::kFlitBytes> head{};
    std::copy_n(items->begin(), std::min(items->size(), head.size()), head.begin());
    if (p.link->send(items, now).ok()) {
      count_tx(p, f, head, count);
      return true;
    }
  }
  if (!enqueue_items(p, *items, now)) return false;
  count_tx(p, f, *items, count);
  return true;
}

// The VC items cross the cable in (the first's: a transfer's packets share it), for the port's
// VCn_TX_PACKETS, which the daemon adds to the counts of its own links.
void DirectPath::count_tx(Peer& p, const live::Forwarded& f, std::span<const uint8_t> items,
                          uint64_t packets) {
  p.port_chip = f.chip;
  p.port = f.port;
  seg_.counters(seg_.chip(f.chip).local, f.port)
      .direct_vc_tx[wire::flit_vc(items.subspan(sizeof(live::ItemHead)))]
      .fetch_add(packets, std::memory_order_relaxed);
}

// RETRANSMISSIONS and CRC_ERRORS of the port count the direct links over it too (the daemon
// adds these to its own link's), so management sees a bad cable whichever path its traffic
// takes.
void DirectPath::count_repairs(Peer& p) {
  if (p.port_chip == live::kNoChip) return;
  const live::LinkStats& st = p.link->stats();
  live::PortCounters& c = seg_.counters(seg_.chip(p.port_chip).local, p.port);
  c.direct_retransmissions.fetch_add(st.retransmissions - p.counted_retransmissions,
                                     std::memory_order_relaxed);
  c.direct_crc_errors.fetch_add(st.crc_errors - p.counted_crc_errors, std::memory_order_relaxed);
  p.counted_retransmissions = st.retransmissions;
  p.counted_crc_errors = st.crc_errors;
}

bool DirectPath::enqueue_items(Peer& p, std::span<const uint8_t> items, uint64_t now) {
  if (p.backlog.size() >= kMaxBacklog) return false;
  // What is older goes first: the frame being filled, then the backlog.
  if (!p.pending.empty() && !send_pending(p, now)) {
    p.backlog.push_front(std::move(p.pending));
    p.pending.clear();
  }
  if (!p.backlog.empty()) push_backlog(p, now);
  const size_t frame = p.link->config().max_payload;
  const bool up = p.link->state() == live::LinkState::kUp;
  while (!items.empty()) {
    // The whole items that fill what the last frame waiting has room for, or a new frame.
    const size_t room = !p.backlog.empty() && p.backlog.back().size() < frame
                            ? frame - p.backlog.back().size()
                            : frame;
    size_t n = 0;
    for (std::span<const uint8_t> item; n < items.size(); n += item.size()) {
      item = live::item_at(items, n);
      if (item.empty() || n + item.size() > room) break;
    }
    if (n == 0) {
      if (room < frame) {  // the next item opens a new frame
        p.backlog.emplace_back();
        continue;
      }
      return true;  // this end encoded them: cannot be malformed
    }
    const std::span<const uint8_t> part = items.first(n);
    if (p.backlog.empty() && up && p.link->can_send() && p.link->send(part, now).ok()) {
    } else if (!p.backlog.empty() && p.backlog.back().size() + n <= frame) {
      p.backlog.back().insert(p.backlog.back().end(), part.begin(), part.end());
    } else {
      p.backlog.emplace_back(part.begin(), part.end());
    }
    items = items.subspan(n);
  }
  return true;
}

size_t DirectPath::run_room(const Peer& p) {
  const size_t frame = p.link->config().max_payload;
  const size_t quarter = frame / 4;
  const size_t room = quarter >= live::kRunItemOverhead + 1024 ? quarter : frame;
  return room > live::kRunItemOverhead ? room - live::kRunItemOverhead : 0;
}

void DirectPath::reply(Peer& p, const wire::DataPacket& packet, std::span<const uint8_t> run,
                       uint32_t from_nic, uint64_t now) {
  const uint32_t dest = packet.head.dest_node;
  live::PathCounters& path = replies_.at(seg_, from_nic, 0, dest);
  if (path.result.kind != live::Forwarded::Kind::kLeavesHost ||
      !live::enters_target_host(seg_, path.result, dest)) {
    log::warn(6214,
              "an answer to a transfer from NIC {} to NIC {} dropped: its path does not lead "
              "straight back to the link it came by (the transfer times out at its initiator)",
              from_nic, dest);
    return;
  }
  auto count = [&](std::span<const uint8_t> item) {
    const wire::Traffic t = chip::rdma_run_traffic(packet, run.size());
    path.add(t);
    count_tx(p, path.result, item, t.packets);
  };
  // Answers share frames: the frame being filled (encoded in place) leaves once the arrivals
  // are handled, and behind a backlog they join its last frame.
  const size_t max_item = live::kRunItemOverhead + run.size();
  if (p.backlog.empty() && p.pending.size() + max_item <= p.link->config().max_payload) {
    const size_t at = p.pending.size();
    if (live::append_leaving_item(packet, path.result, &p.pending, run).ok())
      count(std::span<const uint8_t>(p.pending).subspan(at));
    return;
  }
  reply_item_.clear();
  if (!live::append_leaving_item(packet, path.result, &reply_item_, run).ok()) return;
  count(reply_item_);
  if (!enqueue_items(p, reply_item_, now)) {  // a backlog this long: the answer waits anyway
    if (p.backlog.back().size() + reply_item_.size() <= p.link->config().max_payload)
      p.backlog.back().insert(p.backlog.back().end(), reply_item_.begin(), reply_item_.end());
    else
      p.backlog.push_back(reply_item_);
  }
}

bool DirectPath::send_pending(Peer& p, uint64_t now) {
  if (p.pending.empty()) return true;
  // The frame's buffer goes to the link as it is (the link's old one comes back, emptied).
  return p.link->can_send() && p.link->send(&p.pending, now).ok();
}

bool DirectPath::poll() {
  if (fd_ < 0) return false;
  const uint64_t now = live::monotonic_ns();
  lease_until_.store(now + kLeaseNs, std::memory_order_relaxed);
  std::unique_lock<std::mutex> g(mu_, std::try_to_lock);
  if (!g.owns_lock()) return false;
  const uint64_t before = arrived_;
  service(now);
  return arrived_ != before;
}

void DirectPath::release() {
  if (lease_until_.load(std::memory_order_relaxed) == 0) return;
  if (mu_.try_lock()) {  // the counters of what arrived, before the thread sleeps
    arrivals_.flush();
    mu_.unlock();
  }
  lease_until_.store(0, std::memory_order_release);
  lease_word_.fetch_add(1, std::memory_order_release);
  live::futex_wake(&lease_word_);
}

void DirectPath::service(uint64_t now) {
  receive(now);
  for (auto& entry : peers_) {
    const uint64_t k = entry.first;
    Peer& p = entry.second;  // a name a lambda may capture (a structured binding may not)
    if (p.link->has_delivered()) deliver(p, k);
    if (now >= next_deadline_) p.link->on_timer(now);
    // The peer's gets are answered as the link takes the answers: a few frames wait at most.
    if (transfers_ && p.link->state() == live::LinkState::kUp)
      while (p.backlog.size() < kAheadFrames &&
             transfers_->answer(k, kAnswerPackets, run_room(p),
                                [&](const wire::DataPacket& a, std::span<const uint8_t> run,
                                    uint32_t from_nic) { reply(p, a, run, from_nic, now); })) {
      }
    // The frame being filled is older than what waits in the backlog.
    if (send_pending(p, now) && !p.backlog.empty()) push_backlog(p, now);
    flush(p);
    count_repairs(p);
  }
  if (now >= next_impair_flush_) {  // a datagram an impairment held back goes out now
    next_impair_flush_ = now + 1'000'000;
    for (auto& [k, p] : peers_)
      if (p.impairment) {
        to_send_.clear();
        p.impairment->flush(&to_send_);
        for (const auto& d : to_send_) send_datagram(p, d);
      }
  }
  reap(now);
  if (transfers_)
    transfers_->service(
        now, [&](uint64_t key, const live::Forwarded& leaving, std::vector<uint8_t>* items,
                 size_t count) { return send_items(key, leaving, items, count, now); });
  next_deadline_ = UINT64_MAX;
  for (auto& entry : peers_) {
    Peer& p = entry.second;
    if (transfers_) flush(p);  // what the transfers just sent
    next_deadline_ = std::min(next_deadline_, p.link->next_deadline_ns());
  }
  // Gets still to answer, transfers still to cut: the next look is at once (the NIC thread
  // does not sleep on them).
  if (transfers_ && (transfers_->answering() || transfers_->sending())) next_deadline_ = now;
}

void DirectPath::receive(uint64_t now) {
  // Most looks find nothing or one datagram: one plain receive first, the batch only after it.
  sockaddr_in one_from{};
  socklen_t one_len = sizeof one_from;
  const ssize_t got = recvfrom(fd_, rx_bufs_[0].data(), rx_bufs_[0].size(), MSG_DONTWAIT,
                               reinterpret_cast<sockaddr*>(&one_from), &one_len);
  if (got < 0) {
    rx_streak_ = 0;
    return;
  }
  on_datagram(std::span<const uint8_t>(rx_bufs_[0].data(), static_cast<size_t>(got)), one_from,
              now);
  // A lone datagram (a ping-pong's) is handled at once; when they keep coming, in batches.
  if (rx_streak_++ == 0) return;
  mmsghdr msgs[kRxBatch];
  iovec iov[kRxBatch];
  sockaddr_in from[kRxBatch];
  for (int round = 0; round < 8; ++round) {
    for (size_t i = 0; i < kRxBatch; ++i) {
      iov[i] = {rx_bufs_[i].data(), rx_bufs_[i].size()};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_name = &from[i];
      msgs[i].msg_hdr.msg_namelen = sizeof from[i];
    }
    const int n = recvmmsg(fd_, msgs, kRxBatch, MSG_DONTWAIT, nullptr);
    if (n <= 0) return;
    for (int i = 0; i < n; ++i)
      on_datagram(
          std::span<const uint8_t>(rx_bufs_[static_cast<size_t>(i)].data(), msgs[i].msg_len),
          from[i], now);
    if (static_cast<size_t>(n) < kRxBatch) return;
  }
}

void DirectPath::on_datagram(std::span<const uint8_t> d, const sockaddr_in& from, uint64_t now) {
  const uint64_t key = address_key(from.sin_addr.s_addr, ntohs(from.sin_port));
  Peer* p = nullptr;
  if (auto it = peers_.find(key); it != peers_.end()) {
    p = &it->second;
  } else if (live::decode_link_frame(d, link_id(key)).ok()) {
    p = peer_for(key, from, now);
    if (!p) {
      log::warn(6137, "a link frame from {}:{} dropped: this process already has {} direct links",
                inet_ntoa(from.sin_addr), ntohs(from.sin_port), kMaxPeers);
      return;
    }
  } else {
    return;  // not a direct link's frame for this process: nothing to answer
  }
  p->link->on_datagram(d, now);
}

void DirectPath::deliver(Peer& p, uint64_t key) {
  while (p.link->has_delivered()) {
    const std::span<const uint8_t> payload = p.link->peek_delivered();
    while (p.rx_offset < payload.size()) {
      const std::span<const uint8_t> item = live::item_at(payload, p.rx_offset);
      if (item.empty()) {
        log::warn(6138, "a direct link's frame with a malformed item at byte {} dropped",
                  p.rx_offset);
        break;
      }
      Error why;
      live::TransferArrival transfer;
      switch (live::arrive_direct(seg_, item, &arrivals_, &why, transfers_ ? &transfer : nullptr)) {
        case live::Arrival::kDelivered:
          ++arrived_;
          break;
        case live::Arrival::kTransfer: {
          const uint64_t now = live::monotonic_ns();
          transfers_->arrived(transfer, key,
                              [&](const wire::DataPacket& a, std::span<const uint8_t> run,
                                  uint32_t from_nic) { reply(p, a, run, from_nic, now); });
          ++arrived_;
          break;
        }
        case live::Arrival::kHold:
          return;  // the MPQ is full: this link's items wait, in order, for its reader
        case live::Arrival::kToDaemon:
          if (!to_daemon(live::EgressKind::kArrived, item)) return;
          ++arrived_;
          break;
        case live::Arrival::kDropped:
          log::warn(why.id, "dropped: {}", why.message);
          break;
      }
      p.rx_offset += item.size();
    }
    p.link->release_delivered();
    p.rx_offset = 0;
  }
  // The answers the arrivals made leave together.
  (void)send_pending(p, live::monotonic_ns());
}

// A datagram the kernel refuses (its buffer full) is as lost on the wire: the link layer sends
// it again.
void DirectPath::send_datagram(const Peer& p, std::span<const uint8_t> d) {
  (void)!sendto(fd_, d.data(), d.size(), 0, reinterpret_cast<const sockaddr*>(&p.address),
                sizeof p.address);
}

void DirectPath::flush(Peer& p) {
  live::Link::Outgoing out;
  while (!p.impairment && p.link->pop_outgoing(&out)) {
    // The frame's header, payload and CRC as one datagram, the payload from the link's buffer.
    iovec parts[3] = {{out.header.data(), out.header.size()},
                      {const_cast<uint8_t*>(out.payload.data()), out.payload.size()},
                      {out.crc.data(), out.crc.size()}};
    msghdr m{};
    m.msg_name = const_cast<sockaddr_in*>(&p.address);
    m.msg_namelen = sizeof p.address;
    m.msg_iov = parts;
    m.msg_iovlen = 3;
    (void)!sendmsg(fd_, &m, 0);  // refused (the kernel's buffer full): lost, sent again
  }
  while (p.impairment && p.link->pop_outgoing(&dgram_)) {
    to_send_.clear();
    p.impairment->apply(std::move(dgram_), &to_send_);
    dgram_ = {};
    for (const auto& d : to_send_) send_datagram(p, d);
  }
}

// Whether a peer whose link fell silent still holds, at the same address, a VP this process
// sends to, as its host's daemon answers the directory (which checks the owner is alive). A
// process stopped or starved past the link's dead time is not gone: what it received but had not
// acknowledged would reach it twice if the daemon carried it too, so its link waits, Down and
// handshaking, and resumes exactly once when it answers. Asked again each dead time.
bool DirectPath::still_there(Peer& p, uint64_t key, uint64_t now) {
  const uint64_t dead_ns = p.link->config().dead_after_ns;
  if (p.alive_ns != 0 && now - p.alive_ns < dead_ns) return true;
  for (const auto& [target, t] : targets_) {
    if (t.key != key ||
        ask_where(static_cast<uint32_t>(target >> 8), static_cast<uint8_t>(target & 0xFF)) != key)
      continue;
    p.alive_ns = now;
    return true;
  }
  return false;
}

// A link whose peer is gone (it said so, or fell silent for the link's dead time and its daemon
// no longer names it, or it never answered): what it did not acknowledge goes to the daemon,
// and the targets it served are asked about again.
void DirectPath::reap(uint64_t now) {
  for (auto it = peers_.begin(); it != peers_.end();) {
    Peer& p = it->second;
    const live::LinkStats& s = p.link->stats();
    const bool failed =
        p.link->state() == live::LinkState::kDown
            ? (p.link->peer_disabled() || (s.link_downs > 0 && !still_there(p, it->first, now)))
            : (s.handshakes == 0 && now - p.created_ns > p.link->config().dead_after_ns);
    if (!failed) {
      ++it;
      continue;
    }
    deliver(p, it->first);
    if (p.link->has_delivered() || !rescue(p)) {
      ++it;  // what arrived waits for room in its MPQ, or the egress ring is full: again later
      continue;
    }
    if (transfers_) transfers_->peer_gone(it->first);
    for (auto t = targets_.begin(); t != targets_.end();)
      t = t->second.key == it->first ? targets_.erase(t) : std::next(t);
    count_repairs(p);
    it = peers_.erase(it);
  }
  active_.store(!peers_.empty(), std::memory_order_relaxed);
}

void DirectPath::push_backlog(Peer& p, uint64_t now) {
  while (!p.backlog.empty() && p.link->can_send() && p.link->send(&p.backlog.front(), now).ok())
    p.backlog.pop_front();
}

namespace {
// The items of a link payload in order (this end wrote them: a malformed one ends the walk).
template <class F>
size_t for_each_item(std::span<const uint8_t> payload, F&& f) {
  size_t n = 0;
  for (std::span<const uint8_t> item; !(item = live::item_at(payload, 0)).empty(); ++n) {
    f(item);
    payload = payload.subspan(item.size());
  }
  return n;
}
}  // namespace

bool DirectPath::rescue(Peer& p) {
  if (p.link->in_flight() == 0 && p.backlog.empty() && p.pending.empty()) return true;
  // In order: what the link holds, the frame being filled, the backlog.
  rescued_.clear();
  p.link->unacknowledged(&rescued_);
  if (!p.pending.empty()) rescued_.push_back(p.pending);
  for (const auto& item : p.backlog) rescued_.push_back(item);
  // Room for every item first: they go in order or not at all (the next service tries again).
  size_t items = 0;
  for (const auto& payload : rescued_) items += for_each_item(payload, [](auto) {});
  if (seg_.egress().size() + items > live::kEgressDepth / 2) return false;
  p.pending.clear();
  p.backlog.clear();
  // Other processes share the egress ring: one that filled it since the count above is waited
  // for (the daemon empties it within a loop), and an MP that still finds no room is reported.
  for (const auto& payload : rescued_)
    for_each_item(payload, [&](std::span<const uint8_t> item) {
      // A transfer's packets fail with the link (DirectRdma::peer_gone): the daemons' NICs
      // know nothing of the transfer.
      if (!live::item_is_mp(item)) return;
      const uint64_t give_up = live::monotonic_ns() + 100'000'000;
      while (!to_daemon(live::EgressKind::kLeaving, item)) {
        if (live::monotonic_ns() > give_up) {
          log::error(6166,
                     "an MP of a direct link that gave up was lost: the egress ring "
                     "stayed full for 100 ms");
          break;
        }
        std::this_thread::yield();
      }
    });
  // Given up: the link is dropped (reap) or disabled (closing), so nothing is sent twice by it.
  return true;
}

bool DirectPath::to_daemon(live::EgressKind kind, std::span<const uint8_t> item) {
  if (item.size() > sizeof(live::EgressItem)) return true;  // cannot be ours: leaving_item fits
  return seg_.post_egress(kind, item.data(), item.size());
}

void DirectPath::run() {
  while (!stop_.load(std::memory_order_relaxed)) {
    uint64_t now = live::monotonic_ns();
    const uint64_t lease = lease_until_.load(std::memory_order_acquire);
    if (now < lease) {  // a thread of the application polls: leave the socket to it
      const uint32_t v = lease_word_.load(std::memory_order_acquire);
      if (lease_until_.load(std::memory_order_acquire) == lease)
        live::futex_wait(&lease_word_, v, static_cast<int64_t>(lease - now));
      continue;
    }
    uint64_t wait_ns;
    {
      std::lock_guard<std::mutex> g(mu_);
      service(now);
      arrivals_.flush();
      now = live::monotonic_ns();
      wait_ns = next_deadline_ <= now ? 0 : std::min<uint64_t>(next_deadline_ - now, 1'000'000'000);
      // Under the lock: a sender that moves the deadline earlier after this sees it and wakes
      // the thread (send_mp).
      nic_sleep_until_.store(now + wait_ns, std::memory_order_release);
    }
    timespec ts{static_cast<time_t>(wait_ns / 1'000'000'000),
                static_cast<long>(wait_ns % 1'000'000'000)};
    pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    ppoll(fds, 2, &ts, nullptr);
    nic_sleep_until_.store(0, std::memory_order_relaxed);
    uint64_t drained;
    while (read(wake_fd_, &drained, sizeof drained) > 0) {
    }
  }
}

}  // namespace galaxy::glex
