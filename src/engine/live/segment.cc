#include "engine/live/segment.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <new>
#include <random>

#include "wire/mgmt.h"

namespace galaxy::live {

bool futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns) {
  timespec ts{};
  timespec* tp = nullptr;
  if (timeout_ns >= 0) {
    ts.tv_sec = timeout_ns / 1000000000;
    ts.tv_nsec = timeout_ns % 1000000000;
    tp = &ts;
  }
  long r =
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, tp, nullptr, 0);
  return !(r != 0 && errno == ETIMEDOUT);
}

void futex_wake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string Segment::shm_name(const std::string& fabric, const std::string& host) {
  return fmt::format("/galaxy.{}.{}", fabric, host);
}

namespace {

// Every region starts on a 128-byte pair of cache lines (the rings' alignment, segment.h).
uint64_t align_region(uint64_t v) {
  static_assert(alignof(NicSlot) <= 128 && alignof(EgressRing) <= 128);
  return (v + 127) & ~uint64_t{127};
}

}  // namespace

bool process_alive(int32_t pid) {
  if (pid <= 0 || (kill(pid, 0) != 0 && errno != EPERM)) return false;
  // A process killed but not yet waited for by its parent is a zombie: it still has a pid, but
  // nothing of it runs or will answer.
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (!f) return true;  // no /proc: as kill() says
  char buf[256];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* close = std::strrchr(buf, ')');  // "pid (comm) state ...": comm may hold ')'
  return !(close && close[1] == ' ' && close[2] == 'Z');
}

Result<std::unique_ptr<Segment>> Segment::create(const LiveFabric& f, int host) {
  const fabric::Topology& t = f.topology;
  if (host < 0 || static_cast<size_t>(host) >= f.hosts.size())
    return make_error(Code::kOutOfRange, 4710,
                      fmt::format("host index {} outside the {} hosts", host, f.hosts.size()));
  const std::string& host_name = f.hosts[static_cast<size_t>(host)].name;
  if (host_name.size() >= 32)
    return make_error(Code::kInvalidArgument, 4711,
                      fmt::format("host name '{}' is longer than 31 characters", host_name));
  uint32_t max_ports = 1, num_local = 0, num_local_nics = 0;
  for (uint32_t n = 0; n < t.num_nodes(); ++n) {
    max_ports = std::max(max_ports, t.num_ports(n));
    if (f.host_of[n] == host) {
      ++num_local;
      if (t.is_nic(n)) ++num_local_nics;
    }
  }
  SegHeader h{};
  uint64_t off = align_region(sizeof(SegHeader));
  h.off_chips = off;
  off = align_region(off + sizeof(ChipInfo) * t.num_nodes());
  h.off_peers = off;
  off = align_region(off + sizeof(PeerInfo) * t.num_nodes() * max_ports);
  h.off_routes = off;
  off = align_region(off + sizeof(RouteCell) * num_local * max_ports * t.num_nodes());
  h.off_counters = off;
  off = align_region(off + sizeof(PortCounters) * num_local * max_ports);
  h.off_nics = off;
  off = align_region(off + sizeof(NicSlot) * num_local_nics);
  h.off_egress = off;
  off = align_region(off + sizeof(EgressRing));
  h.off_hosts = off;
  off = align_region(off + sizeof(HostAddress) * f.hosts.size());
  h.off_names = off;
  uint64_t text_bytes = 0;
  for (uint32_t n = 0; n < t.num_nodes(); ++n)
    text_bytes += t.name(n).size() + t.identity(n).description.size();
  off = align_region(off + sizeof(ChipName) * t.num_nodes() + text_bytes);
  const uint64_t total = (off + 4095) & ~uint64_t{4095};

  const std::string name = shm_name(f.name, host_name);
  // A segment left by a daemon that died is replaced; a live daemon's is not.
  if (auto old = attach(f.name, host_name); old.ok()) {
    int32_t pid = (*old)->header().daemon_pid.load();
    if (process_alive(pid) && pid != getpid())
      return make_error(Code::kResourceExhausted, 4712,
                        fmt::format("host {} of fabric {} already has a daemon (pid {})", host_name,
                                    f.name, pid));
  }
  shm_unlink(name.c_str());
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0)
    return make_error(Code::kIoError, 4713,
                      fmt::format("shm_open {}: {}", name, std::strerror(errno)));
  if (ftruncate(fd, static_cast<off_t>(total)) != 0) {
    int e = errno;
    close(fd);
    shm_unlink(name.c_str());
    return make_error(Code::kIoError, 4714,
                      fmt::format("ftruncate {} to {} bytes: {}", name, total, std::strerror(e)));
  }
  void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(name.c_str());
    return make_error(Code::kIoError, 4715, fmt::format("mmap {}: {}", name, std::strerror(errno)));
  }
  std::unique_ptr<Segment> s(new Segment(base, total, name, true));
  auto* hdr = new (base) SegHeader();
  h.magic = kSegmentMagic;
  h.version = kSegmentVersion;
  h.host_index = static_cast<uint32_t>(host);
  h.total_size = total;
  h.epoch = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  std::snprintf(h.fabric, sizeof h.fabric, "%s", f.name.c_str());
  std::snprintf(h.host, sizeof h.host, "%s", host_name.c_str());
  h.num_hosts = static_cast<uint32_t>(f.hosts.size());
  h.num_chips = t.num_nodes();
  h.max_ports = max_ports;
  h.num_local = num_local;
  h.num_local_nics = num_local_nics;
  if (in_addr a{}; inet_pton(AF_INET, f.hosts[static_cast<size_t>(host)].ip.c_str(), &a) == 1)
    h.host_ip = a.s_addr;
  std::memcpy(static_cast<void*>(hdr), &h, offsetof(SegHeader, daemon_pid));
  auto* hosts = reinterpret_cast<HostAddress*>(static_cast<uint8_t*>(base) + h.off_hosts);
  for (size_t i = 0; i < f.hosts.size(); ++i) {
    in_addr a{};
    hosts[i].ip = inet_pton(AF_INET, f.hosts[i].ip.c_str(), &a) == 1 ? a.s_addr : 0;
    hosts[i].port = f.hosts[i].port;
  }
  hdr->daemon_pid.store(getpid());

  uint32_t local = 0, slot = 0;
  for (uint32_t n = 0; n < t.num_nodes(); ++n) {
    auto& c = const_cast<ChipInfo&>(s->chip(n));
    c.type = static_cast<uint8_t>(t.is_nic(n) ? wire::ChipType::kNic : wire::ChipType::kNrc);
    c.num_ports = static_cast<uint8_t>(t.num_ports(n));
    c.host = f.host_of[n];
    c.local = f.host_of[n] == host ? local++ : kNoLocal;
    c.nic_slot = f.host_of[n] == host && t.is_nic(n) ? slot++ : kNoLocal;
    for (uint32_t p = 0; p < max_ports; ++p) {
      PeerInfo& pi = s->peer(n, p);
      pi.chip = kNoChip;
      auto peer = p < t.num_ports(n) ? t.peer({n, static_cast<uint8_t>(p)}) : std::nullopt;
      if (peer) {
        pi.chip = peer->node;
        pi.port = peer->port;
        pi.crosses_hosts = f.host_of[peer->node] != f.host_of[n];
        // Links inside a host are up from the start; links to other hosts come up with the
        // link layer's handshake.
        pi.up.store(pi.crosses_hosts ? 0 : 1);
      }
    }
    if (c.nic_slot != kNoLocal) {
      NicSlot& ns = s->nic_slot(c.nic_slot);
      ns.node = n;
      for (VpSlot& vp : ns.vps) {
        vp.mpq.init();
        vp.cq.init();
      }
    }
  }
  s->egress().init();
  auto* names = reinterpret_cast<ChipName*>(static_cast<uint8_t*>(base) + h.off_names);
  uint64_t text = sizeof(ChipName) * t.num_nodes();
  for (uint32_t n = 0; n < t.num_nodes(); ++n) {
    const fabric::Identity& id = t.identity(n);
    names[n] = {id.guid, text, static_cast<uint32_t>(t.name(n).size()),
                static_cast<uint32_t>(id.description.size())};
    char* at = reinterpret_cast<char*>(names) + text;
    std::memcpy(at, t.name(n).data(), t.name(n).size());
    std::memcpy(at + t.name(n).size(), id.description.data(), id.description.size());
    text += t.name(n).size() + id.description.size();
  }
  return s;
}

Result<std::unique_ptr<Segment>> Segment::attach(const std::string& fabric,
                                                 const std::string& host) {
  const std::string name = shm_name(fabric, host);
  int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0)
    return make_error(Code::kNotFound, 4716,
                      fmt::format("no live fabric '{}' on host '{}' ({}: {}); is `galaxy fabricd` "
                                  "running? (`galaxy fabric up`)",
                                  fabric, host, name, std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(SegHeader)) {
    close(fd);
    return make_error(Code::kMalformed, 4717,
                      fmt::format("segment {} is too small ({} bytes)", name, st.st_size));
  }
  void* base =
      mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED)
    return make_error(Code::kIoError, 4718, fmt::format("mmap {}: {}", name, std::strerror(errno)));
  std::unique_ptr<Segment> s(new Segment(base, static_cast<size_t>(st.st_size), name, false));
  const SegHeader& h = s->header();
  if (h.magic != kSegmentMagic || h.version != kSegmentVersion ||
      h.total_size != static_cast<uint64_t>(st.st_size))
    return make_error(Code::kMalformed, 4719,
                      fmt::format("segment {}: magic {:#x} version {} size {}: not a Galaxy v{} "
                                  "segment",
                                  name, h.magic, h.version, h.total_size, kSegmentVersion));
  return s;
}

fabric::Topology Segment::chip_names() const {
  fabric::Topology t;
  const auto* names = at<ChipName>(header().off_names);
  const char* blob = reinterpret_cast<const char*>(names);
  const uint64_t room = size_ - header().off_names;  // the daemon wrote it; still, stay inside
  for (uint32_t n = 0; n < num_chips(); ++n) {
    const ChipName& c = names[n];
    const bool fits = c.text <= room && c.name_len <= room - c.text &&
                      c.description_len <= room - c.text - c.name_len;
    const ChipInfo& info = chip(n);
    const auto kind = info.type == static_cast<uint8_t>(wire::ChipType::kNic)
                          ? fabric::NodeKind::kNic
                          : fabric::NodeKind::kNrc;
    (void)t.add_node(kind, std::max<uint32_t>(info.num_ports, 1),
                     fits ? std::string(blob + c.text, c.name_len) : std::string());
    if (fits && (c.guid || c.description_len))
      t.set_identity(n, {c.guid, std::string(blob + c.text + c.name_len, c.description_len), {}});
  }
  return t;
}

bool Segment::cross_host_links_up() {
  for (uint32_t n = 0; n < num_chips(); ++n) {
    if (!is_local(n)) continue;
    for (uint32_t p = 0; p < chip(n).num_ports; ++p) {
      PeerInfo& pi = peer(n, p);
      if (pi.chip != kNoChip && pi.crosses_hosts && !pi.up.load()) return false;
    }
  }
  return true;
}

Segment::LinkTally Segment::links_to(const std::vector<bool>& to_host) {
  LinkTally t;
  for (uint32_t n = 0; n < num_chips(); ++n) {
    if (!is_local(n)) continue;
    for (uint32_t p = 0; p < chip(n).num_ports; ++p) {
      PeerInfo& pi = peer(n, p);
      if (pi.chip == kNoChip || pi.chip >= num_chips()) continue;
      const uint16_t h = chip(pi.chip).host;
      if (h >= to_host.size() || !to_host[h]) continue;
      ++t.total;
      t.up += pi.up.load() ? 1 : 0;
    }
  }
  return t;
}

std::string Segment::doorbell_name() const {
  return fmt::format("galaxy.{}.{}.doorbell", header().fabric, header().host);
}

bool Segment::post_egress(EgressKind kind, const void* body, size_t len, uint64_t* at) {
  EgressRing& ring = egress();
  uint64_t pos;
  EgressCell* c = ring.claim(&pos);
  if (!c) return false;
  if (at) *at = pos;
  c->kind = static_cast<uint8_t>(kind);
  c->length = static_cast<uint32_t>(len);
  std::memcpy(c->body, body, len);
  ring.publish(c, pos);
  kick_daemon();
  return true;
}

void Segment::kick_daemon() {
  SegHeader& h = header();
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!h.daemon_sleeping.load(std::memory_order_relaxed)) return;
  if (doorbell_fd_ < 0) {
    doorbell_fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (doorbell_fd_ < 0) return;
  }
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const std::string n = doorbell_name();
  std::memcpy(a.sun_path + 1, n.data(), std::min(n.size(), sizeof a.sun_path - 2));
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 +
                                               std::min(n.size(), sizeof a.sun_path - 2));
  const char ring = 1;
  sendto(doorbell_fd_, &ring, 1, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&a), len);
}

Segment::~Segment() {
  if (doorbell_fd_ >= 0) close(doorbell_fd_);
  munmap(base_, size_);
  if (owner_) shm_unlink(name_.c_str());
}

}  // namespace galaxy::live
