// A live process's end of the direct path between hosts (engine/live/direct.h; docs/live.md
// "The direct path"): its own datagram socket on its host's address, one Link (the chip link
// layer: CRC, retransmission, credits) to each process it exchanges MPs with on other hosts, and
// the VP directory's answers about where those processes receive.
//
// Who drives it: the application's threads while they are inside libglex (every wait polls the
// socket while it spins, every non-blocking call polls it once), and otherwise the process's NIC
// thread, which sleeps in poll() on the socket and the links' next deadline. A thread that
// polls holds a lease of kLeaseNs; while the lease holds, the NIC thread sleeps and leaves the
// socket to it, so a busy application is never interrupted by a second thread and an idle one
// costs a wake-up per link timer only.
#pragma once

#include <netinet/in.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/live/direct.h"
#include "engine/live/forward.h"
#include "engine/live/link.h"
#include "engine/live/segment.h"
#include "glex/direct_rdma.h"
#include "wire/data_packet.h"

namespace galaxy::glex {

class DirectPath {
 public:
  // How long a thread that polled keeps the socket from the NIC thread.
  static constexpr uint64_t kLeaseNs = 1'000'000;
  // How long a directory question waits for the target host's daemon, and how long an
  // unanswered or negative answer stands before the target is asked again.
  static constexpr int kDirectoryTimeoutMs = 50;
  static constexpr uint64_t kNegativeAnswerNs = 100'000'000;
  // Peers a process keeps links to; a link frame from one more is dropped (E6137).
  static constexpr size_t kMaxPeers = 4096;
  // Items waiting for a link that is not up yet; beyond, a send is busy.
  static constexpr size_t kMaxBacklog = 1024;
  // A peer's gets are answered kAnswerPackets response packets at a time (about two frames over
  // loopback), and transfers to it cut a piece at a time, while fewer than kAheadFrames frames
  // wait for its link.
  static constexpr size_t kAnswerPackets = 512;
  static constexpr size_t kAheadFrames = 4;

  // Opens the socket on the host's address (the segment's); without an address, or when the
  // socket is refused, port() is 0 and nothing goes direct.
  explicit DirectPath(live::Segment& seg);
  // Tells every peer the link is going (a disabled handshake) and hands what they have not
  // acknowledged to the daemon, which sends it on.
  ~DirectPath();
  DirectPath(const DirectPath&) = delete;
  DirectPath& operator=(const DirectPath&) = delete;

  uint16_t port() const { return port_; }
  // Starts the NIC thread (when the process opens a VP the directory names with port()).
  void start();

  enum class Sent : uint8_t {
    kSent,       // on its way: the link layer delivers it or, failing, the daemon does
    kBusy,       // the link's window, the peer's credits and the backlog are full: retry
    kNotDirect,  // no direct path to the target: the daemon's path takes it
  };
  // An MP whose path from this process's NIC leaves the host where `f` (kLeavesHost) says.
  // `more`: more MPs to the same target follow at once (GLEX_FLAG_MORE); this one may wait to
  // share their frame, at most until the caller's lease runs out.
  Sent send_mp(const wire::DataPacket& p, const live::Forwarded& f, bool more = false);

  // An RDMA transfer to VP `dest_vp` of NIC `dest` whose path from this process's NIC leaves the
  // host where `f` says: `start(peer, run_room, send)` (DirectRdma::start) starts or queues it
  // for the link to the process at address key `peer`, handing its packets to `send` in runs of
  // at most `run_room` bytes (run_room()); kBusy when the NIC's queue is full.
  using StartFn = FunctionRef<bool(uint64_t peer, size_t run_room, DirectRdma::SendFn send)>;
  Sent send_transfer(uint32_t dest, uint8_t dest_vp, const live::Forwarded& f, StartFn start);
  // The transfers of this process's direct links (set once, before start()).
  void set_transfers(DirectRdma* t) { transfers_ = t; }

  // Whether any link exists (a wait then polls the socket).
  bool active() const { return active_.load(std::memory_order_relaxed); }
  // From the application's threads: takes what arrived, runs the links' timers, without blocking
  // (a thread that finds another polling returns at once). Renews the lease. True when something
  // arrived or was sent.
  bool poll();
  // The calling thread is about to sleep: the NIC thread takes the socket over at once.
  void release();

 private:
  struct Peer {
    sockaddr_in address{};
    std::unique_ptr<live::Link> link;
    std::unique_ptr<live::Impairment> impairment;
    std::vector<uint8_t> pending;              // items of the frame being filled, in order
    std::deque<std::vector<uint8_t>> backlog;  // items the link has not taken yet, in order
    size_t rx_offset = 0;                      // into the payload whose items are being delivered
    uint64_t created_ns = 0;
    uint64_t alive_ns = 0;  // when its daemon last said it still holds a VP we send to
    // The port its link crosses (where what is sent to it leaves the host), whose counters
    // count what the link layer repaired, and how much of that is counted.
    uint32_t port_chip = live::kNoChip;
    uint8_t port = 0;
    uint64_t counted_retransmissions = 0;
    uint64_t counted_crc_errors = 0;
  };
  struct Target {
    uint64_t key = 0;  // the peer's address key, 0: not direct
    uint64_t asked_ns = 0;
  };

  static uint64_t address_key(uint32_t ip, uint16_t port) { return uint64_t{ip} << 16 | port; }
  static sockaddr_in address_of(uint64_t key) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = static_cast<uint32_t>(key >> 16);
    a.sin_port = htons(static_cast<uint16_t>(key & 0xFFFF));
    return a;
  }
  uint32_t link_id(uint64_t peer_key) const;
  Peer* peer_for(uint64_t key, const sockaddr_in& a, uint64_t now);
  uint64_t ask_where(uint32_t node, uint8_t vp) const;
  Target lookup(uint32_t node, uint8_t vp, uint64_t now);
  bool still_there(Peer& p, uint64_t key, uint64_t now);  // mu_ held
  void service(uint64_t now);                             // mu_ held
  void receive(uint64_t now);
  void on_datagram(std::span<const uint8_t> d, const sockaddr_in& from, uint64_t now);
  void deliver(Peer& p, uint64_t key);
  // A transfer's answer (an ack, a read response) from local NIC `from_nic` back on `p`'s link.
  void reply(Peer& p, const wire::DataPacket& packet, std::span<const uint8_t> run,
             uint32_t from_nic, uint64_t now);
  // The payload bytes of a run item (live::kDataRun) on `p`'s link: a quarter of a frame, so that
  // four share one, or one per frame on a path of small frames; 0 where not even a packet fits.
  static size_t run_room(const Peer& p);
  // Items for `p`'s link, in order behind what waits: what the link takes now goes, the rest
  // waits in the backlog. False (nothing queued) when the backlog is full.
  bool enqueue_items(Peer& p, std::span<const uint8_t> items, uint64_t now);
  // A transfer's items for the link to the peer of address key `key`, leaving where `f` says,
  // counted on that port; false when there is no such link or no room (mu_ held).
  bool send_items(uint64_t key, const live::Forwarded& f, std::vector<uint8_t>* items, size_t count,
                  uint64_t now);
  void flush(Peer& p);
  // After a send to `p`: its datagrams out, and the NIC thread woken if `p`'s link now has an
  // earlier deadline than the thread sleeps to (mu_ held).
  void sent_to(Peer& p);
  void count_tx(Peer& p, const live::Forwarded& f, std::span<const uint8_t> items,
                uint64_t packets);
  // What `p`'s link layer repaired since the last count, into its port's counters.
  void count_repairs(Peer& p);
  void send_datagram(const Peer& p, std::span<const uint8_t> d);
  void reap(uint64_t now);
  bool rescue(Peer& p);
  void push_backlog(Peer& p, uint64_t now);
  bool send_pending(Peer& p, uint64_t now);  // false: the link has no room for it yet
  bool to_daemon(live::EgressKind kind, std::span<const uint8_t> item);
  void run();
  // fork() handlers: the child gets every path's state whole, none half-changed by the NIC
  // thread (which allocates only under mu_), and no lock held by a thread it does not have.
  static void quiesce_for_fork();
  static void resume_after_fork();

  live::Segment& seg_;
  pid_t owner_pid_ = getpid();
  int fd_ = -1;
  int wake_fd_ = -1;  // eventfd: stops the NIC thread
  uint32_t ip_ = 0;
  uint16_t port_ = 0;
  std::atomic<bool> active_{false};
  std::atomic<uint64_t> lease_until_{0};
  std::atomic<uint32_t> lease_word_{0};  // futex the NIC thread sleeps on while a lease holds
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> nic_sleep_until_{0};  // when the NIC thread's poll times out, 0: awake
  std::thread nic_thread_;

  std::mutex mu_;  // everything below
  std::unordered_map<uint64_t, Peer> peers_;
  std::unordered_map<uint64_t, Target> targets_;  // by node << 8 | vp
  uint64_t next_deadline_ = 0;
  uint64_t next_impair_flush_ = 0;
  uint32_t rx_streak_ = 0;       // consecutive looks at the socket that found something
  live::ArrivalPaths arrivals_;  // the counters of the ports arriving MPs passed
  live::SendPaths replies_;      // of the ports transfers' answers pass
  DirectRdma* transfers_ = nullptr;
  std::vector<uint8_t> reply_item_;
  std::vector<uint8_t> item_;
  std::vector<uint8_t> dgram_;
  std::vector<std::vector<uint8_t>> to_send_;
  std::vector<std::vector<uint8_t>> rx_bufs_;
  std::vector<std::vector<uint8_t>> rescued_;
  uint64_t arrived_ = 0;  // items taken off the links (delivered here or handed to the daemon)
};

}  // namespace galaxy::glex
