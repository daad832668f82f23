// libglex's collectives (include/glex.h "Collectives", docs/glex.md): groups, and barrier,
// broadcast and allreduce run by the NICs (the offloaded plans of glex/coll_plan.h) or by the
// hosts (its point-to-point plans), through any device.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "glex.h"
#include "glex/coll_plan.h"
#include "glex/device.h"

using galaxy::glex::set_error;
namespace coll = galaxy::glex::coll;
namespace chip = galaxy::chip;

namespace {

constexpr int32_t kDefaultTimeoutMs = 10000;
constexpr uint64_t kDefaultScratch = 256 * 1024;
constexpr uint64_t kMinScratch = 4096;
constexpr uint64_t kMaxScratch = uint64_t{1} << 30;
constexpr uint32_t kMaxDegree = 64;
// The result slot at the start of a member's scratch memory: where its NIC writes a collective's
// result (a broadcast's data, an allreduce's vector, a large broadcast's length).
constexpr uint64_t kSlotBytes = 128;
// Collectives of a blocking call are told from a user's by this cookie.
constexpr uint64_t kInternalCookie = 0x676c6578636f6c6cULL;  // "glexcoll"

// The MPs of a group's creation and of its host-driven collectives (first byte).
enum MsgType : uint8_t { kJoin = 1, kTable = 2, kRefuse = 3, kData = 4 };
constexpr uint32_t kTableEntries = 7;  // (address, handle) pairs per table MP
constexpr uint32_t kP2pHeader = 5;     // type, collective number (32 bits)
constexpr uint32_t kP2pValues = (GLEX_MP_PAYLOAD - kP2pHeader) / 8;  // 14
constexpr uint32_t kOffloadValues = chip::kMaxCombineElements;       // 15

template <class T>
void put(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof v);
}
template <class T>
T get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

int64_t elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               since)
      .count();
}

}  // namespace

struct glex_coll {
  glex_ep* ep = nullptr;
  uint32_t rank = 0, size = 0;
  bool p2p = false;
  int32_t timeout_ms = kDefaultTimeoutMs;
  coll::Tree tree;
  std::vector<coll::Peer> peers;
  std::vector<coll::Region> buffers;  // every member's scratch data (descriptor keys)
  std::vector<uint64_t> handles;      // ... and its memory handle
  std::vector<uint8_t> scratch;       // [result slot][data]
  glex_mem_handle_t scratch_mh = 0;
  uint64_t data_bytes = 0;      // scratch after the slot
  uint32_t seq = 0;             // collectives begun (host-driven MPs carry it)
  std::string broken;           // why the group can no longer be used
  std::deque<glex_mp> pending;  // host-driven MPs that came before their step

  glex_device* dev() const { return ep->device; }
  uint8_t vp() const { return ep->vp; }
  uint64_t slot_address() const { return reinterpret_cast<uint64_t>(scratch.data()); }
  uint8_t* data() { return scratch.data() + kSlotBytes; }
  coll::Region slot() const { return {dev()->descriptor_key(scratch_mh), slot_address()}; }
};

namespace {

glex_ret_t check_group(glex_coll* g, const char* fn) {
  if (!g) return set_error(GLEX_INVALID_PARAM, fmt::format("E6300 {}: group is NULL", fn));
  if (!g->broken.empty())
    return set_error(GLEX_PEER_DEAD,
                     fmt::format("E6301 {}: the group is unusable: {}", fn, g->broken));
  return GLEX_SUCCESS;
}

// A collective that failed leaves its NIC state behind: it goes, and so does the group.
glex_ret_t break_group(glex_coll* g, glex_ret_t ret, std::string why) {
  g->dev()->reset_coll(g->vp());
  g->broken = why;
  return set_error(ret, std::move(why));
}

// ---- creation -----------------------------------------------------------------------------

glex_ret_t send_msg(glex_coll* g, uint32_t to, const uint8_t* msg, uint32_t len) {
  const glex_ep_addr_t dest = GLEX_EP_ADDR(g->peers[to].node, g->peers[to].vp);
  for (;;) {
    glex_ret_t r = g->dev()->send_mp(g->vp(), dest, msg, len, 0);
    if (r != GLEX_BUSY) return r;
    glex_mp mp;  // the target's MPQ is full: take what waits for us meanwhile
    if (g->dev()->recv_mp(g->vp(), 1, &mp) == GLEX_SUCCESS) g->pending.push_back(mp);
  }
}

// The next MP for this group from the pending list or the endpoint, at most `deadline_ms`
// after `start`.
glex_ret_t next_msg(glex_coll* g, std::chrono::steady_clock::time_point start, int32_t limit_ms,
                    glex_mp* mp) {
  if (!g->pending.empty()) {
    *mp = g->pending.front();
    g->pending.pop_front();
    return GLEX_SUCCESS;
  }
  const int64_t left = limit_ms - elapsed_ms(start);
  if (left <= 0) return GLEX_TIMEOUT;
  return g->dev()->recv_mp(g->vp(), static_cast<int32_t>(left), mp);
}

uint32_t rank_of(const glex_coll* g, glex_ep_addr_t a) {
  for (uint32_t r = 0; r < g->size; ++r)
    if (g->peers[r].node == GLEX_EP_ADDR_NODE(a) && g->peers[r].vp == GLEX_EP_ADDR_VP(a)) return r;
  return UINT32_MAX;
}

// Rank 0 gathers every member's join (its size and scratch memory) and sends everyone the
// table; a member whose size differs is refused, and so is the whole group.
glex_ret_t join(glex_coll* g) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<uint8_t> joined(g->size, 0);
  joined[g->rank] = 1;
  g->buffers[g->rank] = {g->dev()->descriptor_key(g->scratch_mh), g->slot_address() + kSlotBytes};
  g->handles[g->rank] = g->scratch_mh;
  if (g->rank != 0) {
    uint8_t m[29] = {kJoin};
    put<uint32_t>(m + 1, g->rank);
    put<uint32_t>(m + 5, g->size);
    put<uint64_t>(m + 9, g->slot_address() + kSlotBytes);
    put<uint64_t>(m + 17, g->scratch_mh);
    if (glex_ret_t r = send_msg(g, 0, m, sizeof m); r != GLEX_SUCCESS) return r;
    uint32_t have = 1;
    std::deque<glex_mp> later;
    while (have < g->size) {
      glex_mp mp;
      glex_ret_t r = next_msg(g, start, g->timeout_ms, &mp);
      if (r == GLEX_TIMEOUT)
        return set_error(GLEX_TIMEOUT,
                         fmt::format("E6302 glex_coll_create: rank {}: {} of {} members known "
                                     "after {} ms: rank 0 or another member never joined",
                                     g->rank, have, g->size, g->timeout_ms));
      if (r != GLEX_SUCCESS) return r;
      if (rank_of(g, mp.src) != 0 || mp.len < 1) {
        later.push_back(mp);  // a member's first collective MP, ahead of the table
        continue;
      }
      if (mp.data[0] == kRefuse)
        return set_error(GLEX_INVALID_PARAM,
                         fmt::format("E6303 glex_coll_create: size = {} but rank 0's group has "
                                     "size {}",
                                     g->size, get<uint32_t>(mp.data + 1)));
      if (mp.data[0] != kTable || mp.len < 6) {
        later.push_back(mp);
        continue;
      }
      const uint32_t first = get<uint32_t>(mp.data + 1);
      const uint32_t n = mp.data[5];
      for (uint32_t i = 0; i < n && first + i < g->size && 6 + 16 * (i + 1) <= mp.len; ++i) {
        const uint32_t r2 = first + i;
        if (joined[r2]) continue;
        joined[r2] = 1;
        ++have;
        const uint64_t addr = get<uint64_t>(mp.data + 6 + 16 * i);
        const uint64_t mh = get<uint64_t>(mp.data + 14 + 16 * i);
        g->buffers[r2] = {g->dev()->descriptor_key(mh), addr};
        g->handles[r2] = mh;
      }
    }
    for (auto& mp : later) g->pending.push_back(mp);
    return GLEX_SUCCESS;
  }
  uint32_t have = 1;
  std::string mismatch;
  std::vector<uint32_t> refused;
  while (have < g->size) {
    glex_mp mp;
    glex_ret_t r = next_msg(g, start, g->timeout_ms, &mp);
    if (r == GLEX_TIMEOUT) {
      std::string missing;
      for (uint32_t i = 0; i < g->size && missing.size() < 60; ++i)
        if (!joined[i]) missing += fmt::format("{}{}", missing.empty() ? "" : ",", i);
      return set_error(GLEX_TIMEOUT,
                       fmt::format("E6304 glex_coll_create: {} of {} members joined within {} "
                                   "ms; missing ranks {}",
                                   have, g->size, g->timeout_ms, missing));
    }
    if (r != GLEX_SUCCESS) return r;
    if (mp.len < 25 || mp.data[0] != kJoin) continue;  // not a join: nothing else is due yet
    const uint32_t r2 = get<uint32_t>(mp.data + 1);
    const uint32_t size = get<uint32_t>(mp.data + 5);
    if (size != g->size) {
      if (mismatch.empty())
        mismatch = fmt::format("size = {} but rank {} says size = {}", g->size, r2, size);
      refused.push_back(
          static_cast<uint32_t>(GLEX_EP_ADDR_NODE(mp.src) << 8 | GLEX_EP_ADDR_VP(mp.src)));
      ++have;  // it will not come again
      continue;
    }
    if (r2 >= g->size || joined[r2] || rank_of(g, mp.src) != r2) continue;
    joined[r2] = 1;
    ++have;
    g->buffers[r2] = {g->dev()->descriptor_key(get<uint64_t>(mp.data + 17)),
                      get<uint64_t>(mp.data + 9)};
    g->handles[r2] = get<uint64_t>(mp.data + 17);
  }
  if (!mismatch.empty()) {
    uint8_t m[5] = {kRefuse};
    put<uint32_t>(m + 1, g->size);
    for (uint32_t r2 = 1; r2 < g->size; ++r2) (void)send_msg(g, r2, m, sizeof m);
    for (uint32_t a : refused)
      (void)g->dev()->send_mp(g->vp(), GLEX_EP_ADDR(a >> 8, a & 0xFF), m, sizeof m, 0);
    return set_error(GLEX_INVALID_PARAM, "E6305 glex_coll_create: " + mismatch);
  }
  for (uint32_t r2 = 1; r2 < g->size; ++r2) {
    for (uint32_t first = 0; first < g->size; first += kTableEntries) {
      uint8_t m[6 + 16 * kTableEntries] = {kTable};
      const uint32_t n = std::min(kTableEntries, g->size - first);
      put<uint32_t>(m + 1, first);
      m[5] = static_cast<uint8_t>(n);
      for (uint32_t i = 0; i < n; ++i) {
        put<uint64_t>(m + 6 + 16 * i, g->buffers[first + i].address);
        put<uint64_t>(m + 14 + 16 * i, g->handles[first + i]);
      }
      if (glex_ret_t r = send_msg(g, r2, m, 6 + 16 * n); r != GLEX_SUCCESS) return r;
    }
  }
  return GLEX_SUCCESS;
}

// ---- offloaded ------------------------------------------------------------------------------

// Posts a member's plan; every descriptor completes with `cookie` (the last one notifies).
glex_ret_t post_plan(glex_coll* g, const coll::Member& m, uint64_t cookie, const char* fn) {
  for (const coll::Posting& p : coll::offloaded(m)) {
    glex_ret_t r;
    if (p.kind == coll::Posting::Kind::kColl) {
      r = g->dev()->post_coll(g->vp(), p.coll, cookie);
    } else {
      glex_rdma_req req{};
      req.target = GLEX_EP_ADDR(p.put.to.node, p.put.to.vp);
      req.op = GLEX_OP_PUT;
      req.local_addr = reinterpret_cast<void*>(p.put.from.address);
      req.local_mh = g->handles[m.rank];
      req.len = p.put.length;
      req.remote_addr = p.put.into.address;
      req.remote_mh = g->handles[p.put.to_rank];
      req.cookie = cookie;
      r = g->dev()->rdma_triggered(g->vp(), req, p.put.cp_count);
    }
    if (r != GLEX_SUCCESS)
      return break_group(
          g, r,
          fmt::format("E6306 {}: posting the collective's descriptors: {}", fn, glex_last_error()));
  }
  return GLEX_SUCCESS;
}

// Waits for the completion of a blocking collective's plan.
glex_ret_t wait_plan(glex_coll* g, const char* fn) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    glex_cq_entry e;
    const int64_t left = g->timeout_ms - elapsed_ms(start);
    glex_ret_t r =
        left > 0 ? g->dev()->poll_cq(g->vp(), static_cast<int32_t>(left), &e) : GLEX_TIMEOUT;
    if (r == GLEX_TIMEOUT)
      return break_group(g, GLEX_TIMEOUT,
                         fmt::format("E6307 {}: rank {}: the collective did not complete within "
                                     "{} ms (a member died, left, or never called it)",
                                     fn, g->rank, g->timeout_ms));
    if (r != GLEX_SUCCESS) return break_group(g, r, glex_last_error());
    if (e.status != GLEX_SUCCESS)
      return break_group(g, e.status, fmt::format("E6308 {}: rank {}: {}", fn, g->rank, e.reason));
    if (e.op == GLEX_OP_COLL && e.cookie == kInternalCookie) return GLEX_SUCCESS;
  }
}

coll::Member member(glex_coll* g, coll::Kind kind) {
  coll::Member m;
  m.kind = kind;
  m.rank = g->rank;
  m.tree = g->tree;
  m.peers = g->peers;
  m.buffers = g->buffers;
  m.result = g->slot();
  return m;
}

glex_ret_t offloaded(glex_coll* g, const coll::Member& m, const char* fn) {
  if (glex_ret_t r = post_plan(g, m, kInternalCookie, fn); r != GLEX_SUCCESS) return r;
  ++g->seq;
  return wait_plan(g, fn);
}

// ---- host-driven ----------------------------------------------------------------------------

// Runs a member's point-to-point plan on `data` (`len` bytes; allreduce: combined by `op`).
glex_ret_t host_driven(glex_coll* g, const coll::Member& m, uint8_t* data, uint32_t len,
                       chip::CombineOp op, const char* fn) {
  const auto start = std::chrono::steady_clock::now();
  const uint32_t seq = g->seq++;
  const std::vector<uint32_t> kids = g->tree.children(g->rank);
  for (const coll::Step& s : coll::point_to_point(m)) {
    if (s.kind == coll::Step::Kind::kRecv) {
      std::vector<uint32_t> need = s.ranks;
      std::deque<glex_mp> later;
      while (!need.empty()) {
        glex_mp mp;
        glex_ret_t r = next_msg(g, start, g->timeout_ms, &mp);
        if (r == GLEX_TIMEOUT) {
          for (auto& x : later) g->pending.push_back(x);
          return break_group(g, GLEX_TIMEOUT,
                             fmt::format("E6309 {}: rank {}: waited {} ms for rank {} (a member "
                                         "died, left, or never called it)",
                                         fn, g->rank, g->timeout_ms, need.front()));
        }
        if (r != GLEX_SUCCESS) return break_group(g, r, glex_last_error());
        const uint32_t from = rank_of(g, mp.src);
        auto it = std::find(need.begin(), need.end(), from);
        if (mp.len < kP2pHeader || mp.data[0] != kData || get<uint32_t>(mp.data + 1) != seq ||
            it == need.end()) {
          later.push_back(mp);
          continue;
        }
        need.erase(it);
        const uint32_t n = std::min<uint32_t>(mp.len - kP2pHeader, len);
        const bool child = std::find(kids.begin(), kids.end(), from) != kids.end();
        if (m.kind == coll::Kind::kAllreduce && child)
          chip::combine(op, {data, n}, {mp.data + kP2pHeader, n});
        else if (m.kind != coll::Kind::kBarrier && len <= kP2pValues * 8)
          std::memcpy(data, mp.data + kP2pHeader, n);
      }
      for (auto& x : later) g->pending.push_back(x);
      continue;
    }
    uint8_t msg[GLEX_MP_PAYLOAD] = {kData};
    put<uint32_t>(msg + 1, seq);
    uint32_t n = 0;
    if (m.kind != coll::Kind::kBarrier && len <= kP2pValues * 8) {
      n = len;
      std::memcpy(msg + kP2pHeader, data, n);
    }
    for (uint32_t to : s.ranks) {
      if (s.kind == coll::Step::Kind::kPut) {
        glex_rdma_req req{};
        req.target = GLEX_EP_ADDR(g->peers[to].node, g->peers[to].vp);
        req.op = GLEX_OP_PUT;
        req.local_addr = g->data();
        req.local_mh = g->scratch_mh;
        req.len = len;
        req.remote_addr = g->buffers[to].address;
        req.remote_mh = g->handles[to];
        if (glex_ret_t r = g->dev()->rdma(g->vp(), req); r != GLEX_SUCCESS)
          return break_group(g, r, glex_last_error());
      }
      const glex_ep_addr_t dest = GLEX_EP_ADDR(g->peers[to].node, g->peers[to].vp);
      glex_ret_t r;
      while ((r = g->dev()->send_mp(g->vp(), dest, msg, kP2pHeader + n,
                                    s.kind == coll::Step::Kind::kPut ? GLEX_FLAG_FENCE : 0)) ==
             GLEX_BUSY) {
        glex_mp mp;
        if (g->dev()->recv_mp(g->vp(), 1, &mp) == GLEX_SUCCESS) g->pending.push_back(mp);
        if (elapsed_ms(start) > g->timeout_ms)
          return break_group(g, GLEX_TIMEOUT,
                             fmt::format("E6310 {}: rank {}: rank {}'s queue stayed full for {} "
                                         "ms",
                                         fn, g->rank, to, g->timeout_ms));
      }
      if (r != GLEX_SUCCESS) return break_group(g, r, glex_last_error());
    }
  }
  // A failure of an MP or a put that left is a CQ entry.
  glex_cq_entry e;
  while (g->dev()->poll_cq(g->vp(), 0, &e) == GLEX_SUCCESS)
    if (e.status != GLEX_SUCCESS)
      return break_group(g, e.status, fmt::format("E6311 {}: rank {}: {}", fn, g->rank, e.reason));
  return GLEX_SUCCESS;
}

glex_ret_t barrier(glex_coll* g, const char* fn) {
  coll::Member m = member(g, coll::Kind::kBarrier);
  if (g->p2p) return host_driven(g, m, nullptr, 0, chip::CombineOp::kNone, fn);
  return offloaded(g, m, fn);
}

glex_ret_t combine_op(uint32_t type, uint32_t op, chip::CombineOp* out, const char* fn) {
  static constexpr chip::CombineOp kOps[2][3] = {
      {chip::CombineOp::kSumI64, chip::CombineOp::kMinI64, chip::CombineOp::kMaxI64},
      {chip::CombineOp::kSumF64, chip::CombineOp::kMinF64, chip::CombineOp::kMaxF64}};
  if (type != GLEX_TYPE_INT64 && type != GLEX_TYPE_DOUBLE)
    return set_error(GLEX_INVALID_PARAM,
                     fmt::format("E6312 {}: type = {}, expected GLEX_TYPE_INT64 ({}) or "
                                 "GLEX_TYPE_DOUBLE ({})",
                                 fn, type, GLEX_TYPE_INT64, GLEX_TYPE_DOUBLE));
  if (op < GLEX_SUM || op > GLEX_MAX)
    return set_error(
        GLEX_INVALID_PARAM,
        fmt::format("E6313 {}: op = {}, expected GLEX_SUM, GLEX_MIN or GLEX_MAX", fn, op));
  *out = kOps[type - 1][op - 1];
  return GLEX_SUCCESS;
}

glex_ret_t check_root(glex_coll* g, uint32_t root, const char* fn) {
  if (root >= g->size)
    return set_error(
        GLEX_INVALID_PARAM,
        fmt::format("E6314 {}: root = {} is not a rank of the group of {}", fn, root, g->size));
  return GLEX_SUCCESS;
}

glex_ret_t allreduce(glex_coll* g, const void* in, void* out, uint32_t count, uint32_t type,
                     uint32_t op, const char* fn) {
  if (glex_ret_t r = check_group(g, fn); r != GLEX_SUCCESS) return r;
  chip::CombineOp cop;
  if (glex_ret_t r = combine_op(type, op, &cop, fn); r != GLEX_SUCCESS) return r;
  if (count > 0 && (!in || !out))
    return set_error(GLEX_INVALID_PARAM, fmt::format("E6315 {}: in and out must not be NULL", fn));
  const uint32_t chunk = g->p2p ? kP2pValues : kOffloadValues;
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  for (uint32_t done = 0; done < count || (count == 0 && done == 0); done += chunk) {
    const uint32_t n = std::min(chunk, count - done);
    uint8_t v[GLEX_MP_PAYLOAD] = {};
    if (n) std::memcpy(v, src + 8ull * done, 8ull * n);
    coll::Member m = member(g, coll::Kind::kAllreduce);
    m.op = cop;
    m.length = 8 * n;
    m.data = {v, 8ull * n};
    if (g->p2p) {
      if (glex_ret_t r = host_driven(g, m, v, 8 * n, cop, fn); r != GLEX_SUCCESS) return r;
      if (n) std::memcpy(dst + 8ull * done, v, 8ull * n);
    } else {
      if (glex_ret_t r = offloaded(g, m, fn); r != GLEX_SUCCESS) return r;
      if (n) std::memcpy(dst + 8ull * done, g->scratch.data(), 8ull * n);
    }
    if (count == 0) break;
  }
  return GLEX_SUCCESS;
}

glex_ret_t offload_only(glex_coll* g, const char* fn) {
  if (!g->p2p) return GLEX_SUCCESS;
  return set_error(GLEX_UNSUPPORTED,
                   fmt::format("E6327 {}: a host-driven group (GLEX_COLL_P2P) has no "
                               "non-blocking collectives: its hosts drive them",
                               fn));
}

glex_ret_t validate_attr(const glex_coll_attr* a) {
  if (!a) return GLEX_SUCCESS;
  if (a->flags & ~uint32_t{GLEX_COLL_P2P})
    return set_error(
        GLEX_INVALID_PARAM,
        fmt::format("E6316 glex_coll_create: attr.flags = {:#x} has unknown bits", a->flags));
  if (a->degree == 1 || a->degree > kMaxDegree)
    return set_error(GLEX_INVALID_PARAM,
                     fmt::format("E6317 glex_coll_create: attr.degree = {}, expected 0 (chosen) "
                                 "or 2-{}",
                                 a->degree, kMaxDegree));
  if (a->timeout_ms < 0)
    return set_error(GLEX_INVALID_PARAM,
                     fmt::format("E6318 glex_coll_create: attr.timeout_ms = {}, expected 0 "
                                 "(default) or a positive limit",
                                 a->timeout_ms));
  if (a->scratch_bytes != 0 && (a->scratch_bytes < kMinScratch || a->scratch_bytes > kMaxScratch))
    return set_error(GLEX_INVALID_PARAM,
                     fmt::format("E6319 glex_coll_create: attr.scratch_bytes = {}, expected 0 "
                                 "(default) or {}-{}",
                                 a->scratch_bytes, kMinScratch, kMaxScratch));
  return GLEX_SUCCESS;
}

}  // namespace

extern "C" {

glex_ret_t glex_coll_create(glex_ep_handle_t ep, uint32_t rank, uint32_t size,
                            const glex_ep_addr_t* addrs, const struct glex_coll_attr* attr,
                            glex_coll_handle_t* group) {
  if (!ep || !addrs || !group)
    return set_error(GLEX_INVALID_PARAM,
                     "E6320 glex_coll_create: ep, addrs and group must not be NULL");
  if (size == 0 || size > 65536)
    return set_error(GLEX_INVALID_PARAM,
                     fmt::format("E6321 glex_coll_create: size = {}, expected 1-65536", size));
  if (rank >= size)
    return set_error(
        GLEX_INVALID_PARAM,
        fmt::format("E6322 glex_coll_create: rank = {} is not below size = {}", rank, size));
  if (glex_ret_t r = validate_attr(attr); r != GLEX_SUCCESS) return r;
  if (addrs[rank] != glex_ep_addr(ep))
    return set_error(GLEX_INVALID_PARAM,
                     fmt::format("E6323 glex_coll_create: addrs[{}] = {:#x} is not this "
                                 "endpoint ({:#x})",
                                 rank, addrs[rank], glex_ep_addr(ep)));
  auto g = std::make_unique<glex_coll>();
  g->ep = ep;
  g->rank = rank;
  g->size = size;
  g->p2p = attr && (attr->flags & GLEX_COLL_P2P);
  g->timeout_ms = attr && attr->timeout_ms > 0 ? attr->timeout_ms : kDefaultTimeoutMs;
  g->data_bytes = attr && attr->scratch_bytes ? attr->scratch_bytes : kDefaultScratch;
  for (uint32_t r = 0; r < size; ++r) {
    if (GLEX_EP_ADDR_VP(addrs[r]) > 63 || GLEX_EP_ADDR_NODE(addrs[r]) > galaxy::wire::kMaxChipId)
      return set_error(GLEX_INVALID_PARAM,
                       fmt::format("E6324 glex_coll_create: addrs[{}] = {:#x} is not an "
                                   "endpoint address",
                                   r, addrs[r]));
    g->peers.push_back({static_cast<galaxy::wire::ChipId>(GLEX_EP_ADDR_NODE(addrs[r])),
                        static_cast<uint8_t>(GLEX_EP_ADDR_VP(addrs[r]))});
  }
  const glex_device::CollTiming t = ep->device->coll_timing();
  uint32_t degree = attr ? attr->degree : 0;
  if (degree == 0)
    degree = g->p2p ? coll::choose_degree(size, t.p2p_level_ps, t.p2p_child_ps)
                    : coll::choose_degree(size, t.offload_level_ps, t.offload_child_ps);
  g->tree = {size, degree};
  g->buffers.resize(size);
  g->handles.resize(size);
  g->scratch.assign(kSlotBytes + g->data_bytes, 0);
  if (glex_ret_t r = ep->device->register_mem(g->scratch.data(), g->scratch.size(),
                                              GLEX_MEM_READ | GLEX_MEM_WRITE, &g->scratch_mh);
      r != GLEX_SUCCESS)
    return r;
  if (glex_ret_t r = join(g.get()); r != GLEX_SUCCESS) {
    ep->device->deregister_mem(g->scratch_mh);
    return r;
  }
  *group = g.release();
  return GLEX_SUCCESS;
}

glex_ret_t glex_coll_destroy(glex_coll_handle_t g) {
  if (!g) return check_group(g, "glex_coll_destroy");
  g->dev()->reset_coll(g->vp());
  g->dev()->deregister_mem(g->scratch_mh);
  delete g;
  return GLEX_SUCCESS;
}

uint32_t glex_coll_degree(glex_coll_handle_t g) {
  return g ? g->tree.degree : 0;
}

glex_ret_t glex_barrier(glex_coll_handle_t g) {
  if (glex_ret_t r = check_group(g, "glex_barrier"); r != GLEX_SUCCESS) return r;
  return barrier(g, "glex_barrier");
}

glex_ret_t glex_bcast(glex_coll_handle_t g, void* buf, uint64_t len, uint32_t root) {
  const char* fn = "glex_bcast";
  if (glex_ret_t r = check_group(g, fn); r != GLEX_SUCCESS) return r;
  if (glex_ret_t r = check_root(g, root, fn); r != GLEX_SUCCESS) return r;
  if (len > 0 && !buf)
    return set_error(GLEX_INVALID_PARAM, fmt::format("E6325 {}: buf is NULL", fn));
  auto* b = static_cast<uint8_t*>(buf);
  const uint64_t inline_max = g->p2p ? kP2pValues * 8 : coll::kMaxInlineBytes;
  if (len <= inline_max) {
    coll::Member m = member(g, coll::Kind::kBcast);
    m.root = root;
    m.length = static_cast<uint32_t>(len);
    m.data = {b, len};
    if (g->p2p) return host_driven(g, m, b, static_cast<uint32_t>(len), {}, fn);
    if (glex_ret_t r = offloaded(g, m, fn); r != GLEX_SUCCESS) return r;
    if (g->rank != root && len) std::memcpy(b, g->scratch.data(), len);
    return GLEX_SUCCESS;
  }
  // Longer: through the members' scratch memory by RDMA, a piece at a time; a barrier after each
  // piece keeps the next from overwriting a member's scratch before it has copied it out.
  for (uint64_t off = 0; off < len; off += g->data_bytes) {
    const uint64_t n = std::min(g->data_bytes, len - off);
    const uint32_t piece = static_cast<uint32_t>(std::max<uint64_t>(n, inline_max + 1));
    if (g->rank == root) std::memcpy(g->data(), b + off, n);
    coll::Member m = member(g, coll::Kind::kBcast);
    m.root = root;
    m.length = piece;
    glex_ret_t r = g->p2p ? host_driven(g, m, g->data(), piece, {}, fn) : offloaded(g, m, fn);
    if (r != GLEX_SUCCESS) return r;
    if (!g->p2p && g->rank != root && get<uint64_t>(g->scratch.data()) != piece)
      return break_group(g, GLEX_INVALID_PARAM,
                         fmt::format("E6326 {}: len = {} but the root sends {} bytes", fn, len,
                                     get<uint64_t>(g->scratch.data())));
    if (g->rank != root) std::memcpy(b + off, g->data(), n);
    if (glex_ret_t r2 = barrier(g, fn); r2 != GLEX_SUCCESS) return r2;
  }
  return GLEX_SUCCESS;
}

glex_ret_t glex_allreduce(glex_coll_handle_t g, const void* in, void* out, uint32_t count,
                          uint32_t type, uint32_t op) {
  return allreduce(g, in, out, count, type, op, "glex_allreduce");
}

glex_ret_t glex_reduce(glex_coll_handle_t g, const void* in, void* out, uint32_t count,
                       uint32_t type, uint32_t op, uint32_t root) {
  if (glex_ret_t r = check_group(g, "glex_reduce"); r != GLEX_SUCCESS) return r;
  if (glex_ret_t r = check_root(g, root, "glex_reduce"); r != GLEX_SUCCESS) return r;
  // The tree's result reaches every member; only the root's out is written.
  std::vector<uint8_t> scratch(8ull * count);
  return allreduce(g, in, g->rank == root ? out : scratch.data(), count, type, op, "glex_reduce");
}

glex_ret_t glex_ibarrier(glex_coll_handle_t g, uint64_t cookie) {
  const char* fn = "glex_ibarrier";
  if (glex_ret_t r = check_group(g, fn); r != GLEX_SUCCESS) return r;
  if (glex_ret_t r = offload_only(g, fn); r != GLEX_SUCCESS) return r;
  ++g->seq;
  return post_plan(g, member(g, coll::Kind::kBarrier), cookie, fn);
}

glex_ret_t glex_ibcast(glex_coll_handle_t g, void* buf, glex_mem_handle_t mh, uint32_t len,
                       uint32_t root, uint64_t cookie) {
  const char* fn = "glex_ibcast";
  if (glex_ret_t r = check_group(g, fn); r != GLEX_SUCCESS) return r;
  if (glex_ret_t r = check_root(g, root, fn); r != GLEX_SUCCESS) return r;
  if (glex_ret_t r = offload_only(g, fn); r != GLEX_SUCCESS) return r;
  if (len > coll::kMaxInlineBytes)
    return set_error(GLEX_INVALID_PARAM,
                     fmt::format("E6328 {}: len = {} exceeds {} bytes (longer: glex_bcast)", fn,
                                 len, coll::kMaxInlineBytes));
  if (len > 0 && !buf)
    return set_error(GLEX_INVALID_PARAM, fmt::format("E6325 {}: buf is NULL", fn));
  coll::Member m = member(g, coll::Kind::kBcast);
  m.root = root;
  m.length = len;
  m.data = {static_cast<const uint8_t*>(buf), len};
  m.result = {g->dev()->descriptor_key(mh), reinterpret_cast<uint64_t>(buf)};
  ++g->seq;
  return post_plan(g, m, cookie, fn);
}

glex_ret_t glex_iallreduce(glex_coll_handle_t g, const void* in, void* out, glex_mem_handle_t mh,
                           uint32_t count, uint32_t type, uint32_t op, uint64_t cookie) {
  const char* fn = "glex_iallreduce";
  if (glex_ret_t r = check_group(g, fn); r != GLEX_SUCCESS) return r;
  if (glex_ret_t r = offload_only(g, fn); r != GLEX_SUCCESS) return r;
  chip::CombineOp cop;
  if (glex_ret_t r = combine_op(type, op, &cop, fn); r != GLEX_SUCCESS) return r;
  if (count > kOffloadValues)
    return set_error(GLEX_INVALID_PARAM,
                     fmt::format("E6329 {}: count = {} exceeds {} values (more: glex_allreduce)",
                                 fn, count, kOffloadValues));
  if (count > 0 && (!in || !out))
    return set_error(GLEX_INVALID_PARAM, fmt::format("E6315 {}: in and out must not be NULL", fn));
  coll::Member m = member(g, coll::Kind::kAllreduce);
  m.op = cop;
  m.length = 8 * count;
  m.data = {static_cast<const uint8_t*>(in), 8ull * count};
  m.result = {g->dev()->descriptor_key(mh), reinterpret_cast<uint64_t>(out)};
  ++g->seq;
  return post_plan(g, m, cookie, fn);
}

}  // extern "C"
