#include "glex/coll_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <unordered_map>

#include "glex/sim_host.h"

namespace galaxy::glex {

namespace {

using sim::Time;

constexpr uint64_t kResultAddress = 0x100000;

// One run of `iterations` collectives of one kind and form over `members` hosts.
class Run {
 public:
  Run(sim::SimFabric& f, const CollBenchOptions& o, coll::Kind kind, bool offload, uint32_t members,
      uint32_t degree)
      : f_(f), t_(f.timing()), o_(o), kind_(kind), offload_(offload) {
    const fabric::Topology& topo = f.topology();
    hosts_.resize(members);
    peers_.resize(members);
    for (uint32_t i = 0; i < members; ++i) {
      const uint32_t node = topo.nic_node(i);
      hosts_[i].node = node;
      peers_[i] = {f.chip(node).chip_id(), o.vp};
      member_of_[node] = i;
      rank_of_chip_[peers_[i].node] = i;
    }
    tree_ = {members, degree};
    data_.assign(o.bcast_bytes, 0x5A);
  }

  Result<double> measure() {
    const Time start = f_.sim().now();
    for (uint32_t i = 0; i < hosts_.size(); ++i) {
      // Where the member's NIC writes a broadcast's data: host memory of the timing model.
      if (!hosts_[i].result_key) {
        auto key = f_.register_memory(hosts_[i].node, kResultAddress, chip::kAttPageBytes,
                                      chip::kAccessWrite);
        if (!key.ok()) return key.error();
        hosts_[i].result_key = *key;
      }
      chip::Nic& n = f_.nic(hosts_[i].node);
      n.reset_coll(o_.vp);
      while (n.poll_mpq(o_.vp)) {
      }
      while (n.poll_eq(o_.vp)) {
      }
      hosts_[i].clock = start;
    }
    f_.set_mpq_listener([this](uint32_t node, uint8_t vp) { on_mp(node, vp); });
    f_.set_local_listener([this](uint32_t node, uint8_t vp) { on_local(node, vp); });
    begin_iteration(start);
    while (!all_done_ && error_.empty() && f_.sim().step()) {
    }
    f_.set_mpq_listener({});
    f_.set_local_listener({});
    if (!error_.empty()) return make_error(Code::kInvalidArgument, 6206, error_);
    if (!all_done_)
      return make_error(Code::kTimeout, 6207,
                        fmt::format("bench coll: {} {} of {} members: {} finished iteration {}; "
                                    "the fabric has nothing left to do",
                                    offload_ ? "offloaded" : "point-to-point",
                                    coll::kind_name(kind_), hosts_.size(), finished_, iteration_));
    return static_cast<double>(total_) / o_.iterations / 1e6;
  }

 private:
  struct Arrival {
    Time at;
    uint32_t from;
    uint32_t iteration;
  };
  struct Host {
    uint32_t node = 0;
    uint32_t result_key = 0;
    Time clock = 0;
    uint32_t iteration = 0;
    size_t pc = 0;               // point-to-point: the step
    std::vector<uint32_t> got;   // ... and who it has heard from in it
    std::deque<Arrival> inbox;   // MPs taken from the MPQ, not yet used
    bool waiting_local = false;  // offloaded: the local descriptor's completion is due
    bool done = false;
  };

  coll::Member member(uint32_t rank) const {
    coll::Member m;
    m.kind = kind_;
    m.rank = rank;
    m.tree = tree_;
    m.peers = peers_;
    m.root = 0;
    m.length = kind_ == coll::Kind::kBcast ? o_.bcast_bytes : 0;
    if (kind_ == coll::Kind::kBcast) m.data = data_;
    m.result = {hosts_[rank].result_key, kResultAddress};
    return m;
  }

  // Every member starts collective `iteration_` at `at` (as after a perfect barrier); its
  // latency is the time until the last member is done with it.
  void begin_iteration(Time at) {
    begun_ = at;
    finished_ = 0;
    last_ = at;
    for (uint32_t r = 0; r < hosts_.size(); ++r) {
      Host& h = hosts_[r];
      h.clock = at;
      h.iteration = iteration_;
      h.pc = 0;
      h.done = false;
    }
    for (uint32_t r = 0; r < hosts_.size(); ++r) advance(r);
  }

  void finish(Host& h) {
    h.done = true;
    last_ = std::max(last_, h.clock);
    if (++finished_ < hosts_.size()) return;
    total_ += last_ - begun_;
    if (++iteration_ == o_.iterations) {
      all_done_ = true;
      return;
    }
    // The next collective starts once this one is done everywhere.
    f_.sim().schedule_fn_at(last_, [this, at = last_] { begin_iteration(at); });
  }

  void advance(uint32_t rank) {
    Host& h = hosts_[rank];
    if (h.done) return;
    if (offload_) {
      if (h.waiting_local) return;
      // Posting is the host's only work: each descriptor costs its PIO write (calibration).
      for (const coll::Posting& p : coll::offloaded(member(rank))) {
        h.clock += post_cost(t_, o_.vp, SimHost::coll_descriptor_bytes(p.coll));
        f_.sim().schedule_fn_at(h.clock, [this, node = h.node, d = p.coll] {
          if (Status s = f_.post_coll(node, o_.vp, d); !s.ok() && error_.empty())
            error_ = s.error().to_string();
        });
      }
      h.waiting_local = true;
      return;
    }
    const std::vector<coll::Step> steps = coll::point_to_point(member(rank));
    while (!h.done) {
      if (h.pc == steps.size()) return finish(h);
      const coll::Step& s = steps[h.pc];
      if (s.kind == coll::Step::Kind::kRecv) {
        for (auto it = h.inbox.begin(); it != h.inbox.end();) {
          const bool wanted =
              it->iteration == h.iteration &&
              std::find(s.ranks.begin(), s.ranks.end(), it->from) != s.ranks.end() &&
              std::find(h.got.begin(), h.got.end(), it->from) == h.got.end();
          if (!wanted) {
            ++it;
            continue;
          }
          // The host takes the MP: at once if it was already there, else after waking up.
          const bool waited = it->at > h.clock;
          h.clock = std::max(h.clock, it->at) + take_cost(t_, waited);
          h.got.push_back(it->from);
          it = h.inbox.erase(it);
        }
        if (h.got.size() < s.ranks.size()) return;  // on_mp calls again
        h.got.clear();
        ++h.pc;
        continue;
      }
      // kSend: one MP per destination, each a descriptor the host writes.
      std::array<uint8_t, wire::kMpPayloadBytes> msg{};
      std::memcpy(msg.data(), &h.iteration, 4);
      const uint32_t len =
          4 + static_cast<uint32_t>(kind_ == coll::Kind::kBcast ? data_.size() : 0);
      std::copy(data_.begin(), data_.end(), msg.begin() + 4);
      for (uint32_t to : s.ranks) {
        h.clock += post_cost(t_, o_.vp, SimHost::mp_descriptor_bytes(len));
        f_.sim().schedule_fn_at(h.clock, [this, node = h.node, p = peers_[to], msg, len] {
          if (Status st = f_.post_mp(node, o_.vp, p.node, p.vp, std::span(msg).first(len));
              !st.ok() && error_.empty())
            error_ = st.error().to_string();
        });
      }
      ++h.pc;
    }
  }

  void on_mp(uint32_t node, uint8_t vp) {
    auto it = member_of_.find(node);
    if (it == member_of_.end() || vp != o_.vp) return;
    Host& h = hosts_[it->second];
    while (auto e = f_.nic(node).poll_mpq(vp)) {
      uint32_t iteration = 0;
      std::memcpy(&iteration, e->data.data(), 4);
      auto from = rank_of_chip_.find(e->src_node);
      h.inbox.push_back(
          {f_.sim().now(), from == rank_of_chip_.end() ? UINT32_MAX : from->second, iteration});
    }
    advance(it->second);
  }

  void on_local(uint32_t node, uint8_t vp) {
    auto it = member_of_.find(node);
    if (it == member_of_.end() || vp != o_.vp) return;
    Host& h = hosts_[it->second];
    while (auto e = f_.nic(node).poll_eq(vp)) {
      if (e->kind != chip::EventKind::kDescriptorDone) {
        if (error_.empty())
          error_ = fmt::format("bench coll: member {} (node {}): descriptor {} failed: E{}",
                               it->second, node, e->sequence, e->error_id);
        return;
      }
      if (e->op != chip::DescriptorOp::kLocal) continue;
      const bool waited = f_.sim().now() > h.clock;
      h.clock = std::max(h.clock, f_.sim().now()) + take_cost(t_, waited);
      h.waiting_local = false;
      finish(h);
    }
  }

  sim::SimFabric& f_;
  const sim::Timing& t_;
  const CollBenchOptions& o_;
  coll::Kind kind_;
  bool offload_;
  coll::Tree tree_;
  std::vector<Host> hosts_;
  std::vector<coll::Peer> peers_;
  std::unordered_map<uint32_t, uint32_t> member_of_;         // NIC node -> rank
  std::unordered_map<wire::ChipId, uint32_t> rank_of_chip_;  // NIC chip id -> rank
  std::vector<uint8_t> data_;
  uint32_t iteration_ = 0;  // the collective all members are in
  uint32_t finished_ = 0;   // members done with it
  Time begun_ = 0, last_ = 0;
  Time total_ = 0;  // sum of the collectives' latencies
  bool all_done_ = false;
  std::string error_;
};

}  // namespace

Result<std::vector<CollRow>> measure_coll(sim::SimFabric& f, const CollBenchOptions& o,
                                          const std::function<void(const CollRow&)>& progress) {
  const fabric::Topology& topo = f.topology();
  if (o.bcast_bytes < 1 || o.bcast_bytes > coll::kMaxInlineBytes - 4)
    return make_error(Code::kOutOfRange, 6208,
                      fmt::format("bench coll: bcast_bytes = {}, expected 1-{}", o.bcast_bytes,
                                  coll::kMaxInlineBytes - 4));
  if (o.iterations == 0)
    return make_error(Code::kOutOfRange, 6209, "bench coll: iterations = 0, expected 1 or more");
  std::vector<CollRow> rows;
  for (uint32_t n : o.sizes) {
    if (n < 1 || n > topo.num_nics())
      return make_error(
          Code::kOutOfRange, 6210,
          fmt::format("bench coll: {} members, but the fabric has {} NICs", n, topo.num_nics()));
    std::vector<uint32_t> nodes;
    for (uint32_t i = 0; i < n; ++i) nodes.push_back(topo.nic_node(i));
    const double links = mean_links(topo, nodes[0], nodes);
    const glex_device::CollTiming ct = coll_timing(f.timing(), links);
    const uint32_t off_degree =
        o.degree ? o.degree : coll::choose_degree(n, ct.offload_level_ps, ct.offload_child_ps);
    const uint32_t p2p_degree =
        o.degree ? o.degree : coll::choose_degree(n, ct.p2p_level_ps, ct.p2p_child_ps);
    for (coll::Kind kind : {coll::Kind::kBarrier, coll::Kind::kBcast}) {
      CollRow row;
      row.members = n;
      row.kind = kind;
      row.links = links;
      row.offloaded_degree = off_degree;
      row.p2p_degree = p2p_degree;
      auto off = Run(f, o, kind, true, n, off_degree).measure();
      if (!off.ok()) return off.error();
      auto p2p = Run(f, o, kind, false, n, p2p_degree).measure();
      if (!p2p.ok()) return p2p.error();
      row.offloaded_us = *off;
      row.p2p_us = *p2p;
      rows.push_back(row);
      if (progress) progress(row);
    }
  }
  return rows;
}

}  // namespace galaxy::glex
