#include "glex/coll_plan.h"

#include <algorithm>
#include <cstring>

namespace galaxy::glex::coll {

using chip::CollData;
using chip::CollDescriptor;

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kBarrier:
      return "barrier";
    case Kind::kBcast:
      return "broadcast";
    case Kind::kAllreduce:
      return "allreduce";
  }
  return "?";
}

std::optional<uint32_t> Tree::parent(uint32_t rank) const {
  if (rank == 0 || rank >= size) return std::nullopt;
  return (rank - 1) / degree;
}

std::vector<uint32_t> Tree::children(uint32_t rank) const {
  std::vector<uint32_t> out;
  const uint64_t first = uint64_t{rank} * degree + 1;
  for (uint64_t c = first; c < first + degree && c < size; ++c)
    out.push_back(static_cast<uint32_t>(c));
  return out;
}

uint32_t Tree::depth() const {
  uint32_t levels = 0;
  uint64_t covered = 1, width = 1;
  while (covered < size) {
    width *= degree;
    covered += width;
    ++levels;
  }
  return levels;
}

uint32_t choose_degree(uint32_t size, uint64_t level_ps, uint64_t child_ps) {
  uint32_t best = 2;
  double best_cost = -1;
  for (uint32_t k = 2; k <= 64; ++k) {
    const Tree t{size, k};
    const double cost =
        2.0 * t.depth() * (static_cast<double>(level_ps) + k * static_cast<double>(child_ps));
    if (best_cost < 0 || cost < best_cost) {
      best = k;
      best_cost = cost;
    }
    if (k >= size) break;  // a wider tree is the same star
  }
  return best;
}

namespace {

CollDescriptor cp(const Peer& to, uint16_t trigger, CollData from, uint8_t flags) {
  CollDescriptor d;
  d.kind = CollDescriptor::Kind::kCp;
  d.dest_node = to.node;
  d.dest_vp = to.vp;
  d.trigger = trigger;
  d.data_from = from;
  d.cp_flags = flags;
  return d;
}

void set_data(CollDescriptor& d, std::span<const uint8_t> data) {
  d.length = static_cast<uint8_t>(std::min<size_t>(data.size(), d.data.size()));
  std::copy_n(data.begin(), d.length, d.data.begin());
}

CollDescriptor local(uint16_t trigger, CollData from, const Region& r, uint32_t length) {
  CollDescriptor d;
  d.kind = CollDescriptor::Kind::kLocal;
  d.trigger = trigger;
  d.data_from = from;
  d.notify = true;
  d.key = r.key;
  d.address = r.address;
  d.length = static_cast<uint8_t>(length);
  return d;
}

uint16_t count(size_t n) {
  return static_cast<uint16_t>(n);
}

// A large broadcast's CPs carry its length, which every member's local descriptor checks.
std::array<uint8_t, 8> length_bytes(uint64_t length) {
  std::array<uint8_t, 8> b{};
  std::memcpy(b.data(), &length, 8);
  return b;
}

}  // namespace

std::vector<Posting> offloaded(const Member& m) {
  const Tree& t = m.tree;
  const std::vector<uint32_t> kids = t.children(m.rank);
  const std::optional<uint32_t> parent = t.parent(m.rank);
  const uint16_t nk = count(kids.size());
  std::vector<Posting> out;
  auto add = [&](const CollDescriptor& d) { out.push_back({Posting::Kind::kColl, d, {}}); };
  auto put = [&](uint32_t to, uint16_t cp_count) {
    Posting p;
    p.kind = Posting::Kind::kPut;
    p.put = {to, m.peers[to], m.buffers[m.rank], m.buffers[to], m.length, cp_count};
    out.push_back(p);
  };
  switch (m.kind) {
    case Kind::kBarrier: {
      // Up: a member tells its parent once all its children have told it. Down: the root's
      // release goes back through the same tree.
      if (parent) add(cp(m.peers[*parent], nk, CollData::kOwn, 0));
      const uint16_t release = parent ? 1 : nk;
      for (size_t i = 0; i < kids.size(); ++i)
        add(cp(m.peers[kids[i]], i == 0 ? release : 0, CollData::kOwn, 0));
      add(local(kids.empty() ? release : 0, CollData::kOwn, {}, 0));
      return out;
    }
    case Kind::kBcast: {
      const bool large = m.length > kMaxInlineBytes;
      const auto len = length_bytes(m.length);
      const std::span<const uint8_t> own = large ? std::span<const uint8_t>(len) : m.data;
      // A root other than rank 0 hands its data to rank 0 first (Tree: one tree per group).
      if (m.rank == m.root && m.rank != 0) {
        if (large) put(0, 0);
        CollDescriptor d = cp(m.peers[0], 0, CollData::kOwn, chip::kCpFlagReplace);
        d.fence = large;  // the data are there before the CP says so
        set_data(d, own);
        add(d);
      }
      const bool receives = !(m.rank == 0 && m.root == 0);
      const uint16_t trigger = receives ? 1 : 0;
      const CollData from = receives ? CollData::kCp : CollData::kOwn;
      if (large)
        for (size_t i = 0; i < kids.size(); ++i) put(kids[i], i == 0 ? trigger : 0);
      for (size_t i = 0; i < kids.size(); ++i) {
        CollDescriptor d =
            cp(m.peers[kids[i]], !large && i == 0 ? trigger : 0, from, chip::kCpFlagReplace);
        d.fence = large && i == 0;
        set_data(d, own);
        add(d);
      }
      const uint16_t last = kids.empty() ? trigger : 0;
      if (!receives) {
        add(local(last, CollData::kOwn, {}, 0));
      } else {
        // A large broadcast's members get the root's length (their host compares it).
        add(local(last, CollData::kCp, m.result, large ? 8 : m.length));
      }
      return out;
    }
    case Kind::kAllreduce: {
      // Up: each member sends its vector combined with its children's; the parent's NIC
      // combines what arrives. Down: the root's result, as a broadcast.
      if (parent) {
        CollDescriptor d = cp(m.peers[*parent], nk, nk ? CollData::kCombined : CollData::kOwn, 0);
        d.op = m.op;
        d.cp_op = m.op;
        set_data(d, m.data);
        add(d);
      }
      const uint16_t release = parent ? 1 : nk;
      const CollData from = parent ? CollData::kCp : CollData::kCombined;
      for (size_t i = 0; i < kids.size(); ++i) {
        CollDescriptor d = cp(m.peers[kids[i]], i == 0 ? release : 0, from, chip::kCpFlagReplace);
        d.op = m.op;
        set_data(d, m.data);
        add(d);
      }
      CollDescriptor l = local(kids.empty() ? release : 0, from, m.result, m.length);
      l.op = m.op;
      set_data(l, m.data);
      l.length = static_cast<uint8_t>(m.length);
      add(l);
      return out;
    }
  }
  return out;
}

std::vector<Step> point_to_point(const Member& m) {
  const Tree& t = m.tree;
  const std::vector<uint32_t> kids = t.children(m.rank);
  const std::optional<uint32_t> parent = t.parent(m.rank);
  std::vector<Step> out;
  auto recv = [&](std::vector<uint32_t> from) {
    if (!from.empty()) out.push_back({Step::Kind::kRecv, std::move(from)});
  };
  auto send = [&](std::vector<uint32_t> to) {
    if (!to.empty()) out.push_back({Step::Kind::kSend, std::move(to)});
  };
  switch (m.kind) {
    case Kind::kBarrier:
    case Kind::kAllreduce:
      recv(kids);
      if (parent) {
        send({*parent});
        recv({*parent});
      }
      send(kids);
      return out;
    case Kind::kBcast: {
      const bool large = m.length > kMaxInlineBytes;
      const Step::Kind down = large ? Step::Kind::kPut : Step::Kind::kSend;
      if (m.rank == m.root && m.rank != 0) out.push_back({down, {0}});
      if (m.rank == 0 && m.root != 0) recv({m.root});
      if (parent) recv({*parent});
      if (!kids.empty()) out.push_back({down, kids});
      return out;
    }
  }
  return out;
}

}  // namespace galaxy::glex::coll
