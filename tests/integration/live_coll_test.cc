// The NIC's collective engine on the live engine (docs/system.md 1.1, "Offloaded collectives";
// chip/coll.h): descriptors posted through the device interface (glex_device::post_coll,
// rdma_triggered, reset_coll) run in the daemons' models of the NICs, with no thread of the
// posting process running. Four members, two NICs on each of two hosts, so CPs travel inside a
// host and between hosts: a barrier, a broadcast of data through replacing CPs into registered
// memory, CPs written into the MPQ, CP-triggered puts to this host and the other, refusals at
// posting, a collective that never completes and is reset, and a dead owner's state dropped.
// The test process holds every member itself: nothing but the daemons moves a collective.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "chip/coll.h"
#include "glex/device.h"
#include "live_fixture.h"
#include "wire/mp.h"

namespace galaxy::live::testing {
namespace {

using chip::CollData;
using chip::CollDescriptor;
using ::testing::AssertionFailure;
using ::testing::AssertionResult;
using ::testing::AssertionSuccess;

constexpr int kQuietMs = 60;  // how long "nothing happens" is watched

// A member of a group: a device on one NIC and an endpoint on it.
struct Member : Port {
  using Port::Port;
  uint16_t node() const { return static_cast<uint16_t>(GLEX_EP_ADDR_NODE(addr())); }
  uint8_t vp() const { return ep->vp; }
  glex_device* device() const { return ep->device; }
  glex_ret_t post(const CollDescriptor& d, uint64_t cookie) const {
    return device()->post_coll(vp(), d, cookie);
  }
};

// Memory of this process registered on a member's NIC for write (and read): from the heap, or
// shared (glex_alloc_mem).
struct Buffer {
  glex_device_handle_t dev;
  std::span<uint8_t> bytes;
  glex_mem_handle_t mh = 0;
  bool shared = false;
  bool ok = false;
  Buffer(const Member& m, size_t n, bool sh = false) : dev(m.dev), shared(sh) {
    void* p = nullptr;
    if (shared ? glex_alloc_mem(dev, n, &p) != GLEX_SUCCESS : (p = std::malloc(n)) == nullptr)
      return;
    bytes = std::span(static_cast<uint8_t*>(p), n);
    std::fill(bytes.begin(), bytes.end(), 0);
    ok = glex_register_mem(dev, p, n, GLEX_MEM_READ | GLEX_MEM_WRITE, &mh) == GLEX_SUCCESS;
  }
  ~Buffer() {
    if (ok) glex_deregister_mem(dev, mh);
    if (bytes.data() && shared) glex_free_mem(dev, bytes.data());
    if (bytes.data() && !shared) std::free(bytes.data());
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  uint64_t addr(uint64_t off = 0) const { return reinterpret_cast<uint64_t>(bytes.data()) + off; }
  uint32_t key() const { return dev->descriptor_key(mh); }
};

CollDescriptor cp_to(const Member& to, uint16_t trigger, uint16_t increment = 1) {
  CollDescriptor d;
  d.kind = CollDescriptor::Kind::kCp;
  d.trigger = trigger;
  d.dest_node = to.node();
  d.dest_vp = to.vp();
  d.increment = increment;
  return d;
}
CollDescriptor local(uint16_t trigger, bool notify = true) {
  CollDescriptor d;
  d.kind = CollDescriptor::Kind::kLocal;
  d.trigger = trigger;
  d.notify = notify;
  return d;
}

// The next CQ entry of `m` is a successful collective completion with `cookie`.
AssertionResult completes(const Member& m, uint64_t cookie, uint64_t bytes = 0,
                          uint32_t op = GLEX_OP_COLL) {
  glex_cq_entry e{};
  if (glex_ret_t r = glex_wait_cq(m.ep, kWaitMs, &e); r != GLEX_SUCCESS)
    return AssertionFailure() << "member on node " << m.node() << ": wait CQ "
                              << glex_error_string(r) << " " << glex_last_error();
  if (e.status != GLEX_SUCCESS || e.op != op || e.cookie != cookie || e.bytes != bytes)
    return AssertionFailure() << "member on node " << m.node() << ": entry op " << e.op << " "
                              << glex_error_string(e.status) << " cookie " << e.cookie << " bytes "
                              << e.bytes << " reason '" << e.reason << "'; expected op " << op
                              << " success cookie " << cookie << " bytes " << bytes;
  return AssertionSuccess();
}

// Nothing is in `m`'s CQ now.
AssertionResult cq_empty(const Member& m) {
  glex_cq_entry e{};
  glex_ret_t r = glex_poll_cq(m.ep, &e);
  if (r == GLEX_NO_ENTRY) return AssertionSuccess();
  return AssertionFailure() << "member on node " << m.node() << ": poll CQ " << glex_error_string(r)
                            << ", entry op " << e.op << " cookie " << e.cookie << " status "
                            << glex_error_string(e.status) << " '" << e.reason << "'";
}

void quiet() {
  std::this_thread::sleep_for(std::chrono::milliseconds(kQuietMs));
}

std::array<uint8_t, 120> pattern(uint8_t seed) {
  std::array<uint8_t, 120> p{};
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(seed * 31 + i * 7 + 1);
  return p;
}

// One brought-up two-host fabric per suite; four members per test (a fresh VP each, so what a
// test leaves behind goes with its endpoints): m[0], m[1] on host 0, m[2], m[3] on host 1.
class LiveColl : public LiveTwoHostSuite {
 protected:
  void SetUp() override {
    LiveTwoHostSuite::SetUp();
    if (HasFatalFailure()) return;
    for (int i = 0; i < 4; ++i) {
      m_[i] = std::make_unique<Member>(f(), i / 2, i % 2);
      ASSERT_TRUE(m_[i]->ok()) << "member " << i << ": " << glex_last_error();
    }
  }
  const Member& m(int i) const { return *m_[static_cast<size_t>(i)]; }

 private:
  std::array<std::unique_ptr<Member>, 4> m_;
};

// A gather-release barrier rooted at m[0]: each member sends the root a CP and waits for one
// back; the root's first release waits for all three. Every member's local descriptor notifies
// with its cookie, the CP descriptors (no notify) write nothing into the CQ, and nobody is
// released before the last member has posted its part.
TEST_F(LiveColl, ABarrierReleasesEveryMemberOnlyAfterTheLastHasPosted) {
  constexpr int kRounds = 20;
  auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < kRounds; ++r) {
    if (r == 1) t0 = std::chrono::steady_clock::now();  // round 0 watches for a while
    auto post_member = [&](int i) {
      ASSERT_EQ(m(i).post(cp_to(m(0), 0), 0), GLEX_SUCCESS) << glex_last_error();
      ASSERT_EQ(m(i).post(local(1), 1000 * i + r), GLEX_SUCCESS) << glex_last_error();
    };
    ASSERT_EQ(m(0).post(cp_to(m(1), 3), 0), GLEX_SUCCESS) << glex_last_error();
    ASSERT_EQ(m(0).post(cp_to(m(2), 0), 0), GLEX_SUCCESS) << glex_last_error();
    ASSERT_EQ(m(0).post(cp_to(m(3), 0), 0), GLEX_SUCCESS) << glex_last_error();
    ASSERT_EQ(m(0).post(local(0), r), GLEX_SUCCESS) << glex_last_error();
    post_member(1);
    post_member(2);
    if (r == 0) {  // three of four have arrived: the root holds everyone
      quiet();
      for (int i = 0; i < 4; ++i) EXPECT_TRUE(cq_empty(m(i))) << "round " << r;
      EXPECT_EQ(glex_fence(m(0).ep, 0), GLEX_TIMEOUT);  // its release waits in the NIC
    }
    post_member(3);
    EXPECT_TRUE(completes(m(0), r)) << "round " << r;
    for (int i = 1; i < 4; ++i) EXPECT_TRUE(completes(m(i), 1000 * i + r)) << "round " << r;
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(glex_fence(m(i).ep, kWaitMs), GLEX_SUCCESS) << glex_last_error();
      EXPECT_TRUE(cq_empty(m(i))) << "round " << r;
    }
    if (HasFailure()) return;
  }
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
  std::printf("barrier of 4 members on 2 hosts: %.0f us per round (%d rounds)\n",
              static_cast<double>(us.count()) / (kRounds - 1), kRounds - 1);
}

// m[0] sends 40 bytes in a replacing CP to m[1] (same host); m[1]'s triggered CP forwards the
// data it brought to m[2] (the other host), whose CP forwards them to m[3]; each of m[1..3]
// writes them into its registered memory with a local descriptor that takes the CP's data.
TEST_F(LiveColl, DataOfAReplacingCpAreForwardedByTriggeredCpsAndWrittenIntoRegisteredMemory) {
  constexpr uint8_t kLen = 40;
  const std::array<uint8_t, 120> data = pattern(3);
  std::vector<std::unique_ptr<Buffer>> buf;
  for (int i = 1; i < 4; ++i) {
    buf.push_back(std::make_unique<Buffer>(m(i), 64, i == 2));  // one in shared memory
    ASSERT_TRUE(buf.back()->ok) << glex_last_error();
  }
  for (int i = 1; i < 4; ++i) {
    const Buffer& b = *buf[static_cast<size_t>(i - 1)];
    if (i < 3) {
      CollDescriptor fwd = cp_to(m(i + 1), 1);
      fwd.data_from = CollData::kCp;
      fwd.cp_flags = chip::kCpFlagReplace;
      fwd.length = kLen;
      ASSERT_EQ(m(i).post(fwd, 0), GLEX_SUCCESS) << glex_last_error();
    }
    CollDescriptor put = local(i < 3 ? 0 : 1);
    put.data_from = CollData::kCp;
    put.key = b.key();
    put.address = b.addr(8);
    put.length = kLen;
    ASSERT_EQ(m(i).post(put, 10 + i), GLEX_SUCCESS) << glex_last_error();
  }
  quiet();
  for (int i = 1; i < 4; ++i) EXPECT_TRUE(cq_empty(m(i)));
  CollDescriptor root = cp_to(m(1), 0);
  root.cp_flags = chip::kCpFlagReplace;
  root.length = kLen;
  root.data = data;
  root.notify = true;
  ASSERT_EQ(m(0).post(root, 10), GLEX_SUCCESS) << glex_last_error();
  EXPECT_TRUE(completes(m(0), 10, kLen));
  for (int i = 1; i < 4; ++i) {
    ASSERT_TRUE(completes(m(i), 10 + i, kLen));
    const std::span<uint8_t> got = buf[static_cast<size_t>(i - 1)]->bytes;
    EXPECT_EQ(0, std::memcmp(got.data() + 8, data.data(), kLen)) << "member " << i;
    for (size_t k = 0; k < got.size(); ++k) {
      if (k < 8 || k >= 8u + kLen) {
        EXPECT_EQ(got[k], 0) << "member " << i << " byte " << k;
      }
    }
  }
}

// A CP flagged for the MPQ is counted and written into the target's MPQ as an MP of kind CP
// (its flags and increment in the header), which glex_recv_mp returns as it returns MPs.
TEST_F(LiveColl, ACpForTheMpqIsCountedAndArrivesAsAnMpOfKindCp) {
  for (int to : {1, 2}) {  // this host, the other
    SCOPED_TRACE(to == 1 ? "same host" : "other host");
    CollDescriptor d = cp_to(m(to), 0, 2);
    d.cp_flags = chip::kCpFlagToMpq;
    d.length = 8;
    std::memcpy(d.data.data(), "cp-data!", 8);
    ASSERT_EQ(m(0).post(d, 0), GLEX_SUCCESS) << glex_last_error();
    auto seg = Segment::attach(f().name(), f().host_name(to / 2));
    ASSERT_TRUE(seg.ok()) << seg.error().to_string();
    MpqRing& q = (*seg)->nic_of(m(to).node())->vps[m(to).vp()].mpq;
    MpqCell* c = q.wait(0, monotonic_ns() + kWaitMs * 1000000ull);
    ASSERT_NE(c, nullptr) << "no CP in the MPQ";
    const uint64_t w = c->header.load();
    EXPECT_EQ(wire::mp_word::kind(w), static_cast<uint8_t>(wire::MpKind::kCp));
    EXPECT_EQ(wire::mp_word::flags(w), 0x2);  // written to the MPQ (wire/cp.h)
    EXPECT_EQ(wire::mp_word::tag(w), 2);      // the increment
    glex_mp mp{};
    ASSERT_EQ(glex_recv_mp(m(to).ep, kWaitMs, &mp), GLEX_SUCCESS) << glex_last_error();
    EXPECT_EQ(mp.src, m(0).addr());
    ASSERT_EQ(mp.len, 8u);
    EXPECT_EQ(0, std::memcmp(mp.data, "cp-data!", 8));
    // ... and it counted: a descriptor waiting for two CPs starts at once.
    ASSERT_EQ(m(to).post(local(2), 5), GLEX_SUCCESS) << glex_last_error();
    EXPECT_TRUE(completes(m(to), 5));
  }
}

// A CP-triggered put waits in the initiator's NIC until its CPs have come, also towards a NIC
// of the same host (which a put otherwise reaches without the daemon), then moves its bytes.
TEST_F(LiveColl, ATriggeredPutWaitsForItsCpsThenWritesItsBytes) {
  for (int to : {1, 2}) {
    SCOPED_TRACE(to == 1 ? "same host" : "other host");
    constexpr uint64_t kLen = 1000;
    Buffer src(m(0), kLen), dst(m(to), kLen + 16, to == 1);
    ASSERT_TRUE(src.ok && dst.ok) << glex_last_error();
    for (uint64_t i = 0; i < kLen; ++i) src.bytes[i] = static_cast<uint8_t>(i * 13 + to);
    glex_rdma_req req{};
    req.target = m(to).addr();
    req.op = GLEX_OP_PUT;
    req.flags = GLEX_FLAG_LOCAL_CQ;
    req.local_addr = src.bytes.data();
    req.local_mh = src.mh;
    req.len = kLen;
    req.remote_addr = dst.addr(8);
    req.remote_mh = dst.mh;
    req.cookie = 77;
    ASSERT_EQ(m(0).device()->rdma_triggered(m(0).vp(), req, 2), GLEX_SUCCESS) << glex_last_error();
    ASSERT_EQ(m(to).post(cp_to(m(0), 0), 0), GLEX_SUCCESS) << glex_last_error();  // one of two
    quiet();
    EXPECT_TRUE(cq_empty(m(0)));
    EXPECT_EQ(glex_fence(m(0).ep, 0), GLEX_TIMEOUT);
    for (uint8_t b : dst.bytes) ASSERT_EQ(b, 0) << "written before its CPs came";
    ASSERT_EQ(m(to).post(cp_to(m(0), 0), 0), GLEX_SUCCESS) << glex_last_error();
    EXPECT_TRUE(completes(m(0), 77, kLen, GLEX_OP_PUT));
    EXPECT_EQ(glex_fence(m(0).ep, kWaitMs), GLEX_SUCCESS) << glex_last_error();
    EXPECT_EQ(0, std::memcmp(dst.bytes.data() + 8, src.bytes.data(), kLen));
    for (size_t k = 0; k < 8; ++k) EXPECT_EQ(dst.bytes[k], 0);
    for (size_t k = 8 + kLen; k < dst.bytes.size(); ++k) EXPECT_EQ(dst.bytes[k], 0);
  }
}

TEST_F(LiveColl, ADescriptorWithABadFieldIsRefusedAtPostingWithThatField) {
  CollDescriptor d = cp_to(m(1), 0);
  d.increment = 0;
  EXPECT_EQ(m(0).post(d, 1), GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has("increment = 0"));
  d = cp_to(m(1), 0);
  d.length = 121;
  EXPECT_EQ(m(0).post(d, 1), GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has("length = 121"));
  d = cp_to(m(1), 0);
  d.cp_flags = 0x40;
  EXPECT_EQ(m(0).post(d, 1), GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has("cp_flags = 0x40"));
  d = cp_to(m(1), 0);
  d.data_from = CollData::kCombined;  // without an op
  EXPECT_EQ(m(0).post(d, 1), GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has("data_from = combined"));
  // A CP for a switch, or for a VP the NIC does not have.
  const fabric::Topology& t = f().fabric().topology;
  uint16_t nrc = 0;
  while (t.is_nic(nrc)) ++nrc;
  d = cp_to(m(1), 0);
  d.dest_node = nrc;
  EXPECT_EQ(m(0).post(d, 1), GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has("E6127"));
  d = cp_to(m(1), 0);
  d.dest_vp = 45;
  EXPECT_EQ(m(0).post(d, 1), GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has("E6128"));
  // A local write goes only into memory this process registered on this NIC for write.
  Buffer mine(m(0), 64), other_nic(m(1), 64);
  ASSERT_TRUE(mine.ok && other_nic.ok) << glex_last_error();
  d = local(0);
  d.key = mine.key();
  d.address = mine.addr(32);
  d.length = 40;  // 8 bytes beyond the registration
  EXPECT_EQ(m(0).post(d, 1), GLEX_ACCESS_ERROR);
  EXPECT_TRUE(last_error_has("E6123"));
  d.key = other_nic.key();
  d.address = other_nic.addr();
  EXPECT_EQ(m(0).post(d, 1), GLEX_ACCESS_ERROR);
  // A VP this device does not hold.
  const uint8_t not_mine = static_cast<uint8_t>(m(0).vp() == 39 ? 38 : 39);
  EXPECT_EQ(m(0).device()->post_coll(not_mine, cp_to(m(1), 0), 1), GLEX_INVALID_PARAM);
  EXPECT_TRUE(last_error_has("E6124"));
  // Nothing was posted: nothing is outstanding, nothing completes.
  EXPECT_EQ(glex_fence(m(0).ep, kWaitMs), GLEX_SUCCESS) << glex_last_error();
  quiet();
  EXPECT_TRUE(cq_empty(m(0)));
}

// A member whose peer never sends its CP is not stuck: its wait times out, reset_coll drops the
// descriptors (glex_fence returns), the CP count and the triggered put, and the VP then runs
// the next collective from a count of zero.
TEST_F(LiveColl, ACollectiveThatNeverCompletesTimesOutAndResetLeavesTheVpUsable) {
  Buffer src(m(0), 64), dst(m(2), 64);
  ASSERT_TRUE(src.ok && dst.ok) << glex_last_error();
  std::fill(src.bytes.begin(), src.bytes.end(), 0x5A);
  ASSERT_EQ(m(0).post(local(2), 1), GLEX_SUCCESS) << glex_last_error();
  glex_rdma_req req{};
  req.target = m(2).addr();
  req.op = GLEX_OP_PUT;
  req.flags = GLEX_FLAG_LOCAL_CQ;
  req.local_addr = src.bytes.data();
  req.local_mh = src.mh;
  req.len = 64;
  req.remote_addr = dst.addr();
  req.remote_mh = dst.mh;
  req.cookie = 3;
  ASSERT_EQ(m(0).device()->rdma_triggered(m(0).vp(), req, 1), GLEX_SUCCESS) << glex_last_error();
  ASSERT_EQ(m(1).post(cp_to(m(0), 0), 0), GLEX_SUCCESS) << glex_last_error();  // 1 of 2
  glex_cq_entry e{};
  EXPECT_EQ(glex_wait_cq(m(0).ep, 200, &e), GLEX_TIMEOUT);
  EXPECT_EQ(glex_fence(m(0).ep, 20), GLEX_TIMEOUT);
  m(0).device()->reset_coll(m(0).vp());
  EXPECT_EQ(glex_fence(m(0).ep, kWaitMs), GLEX_SUCCESS) << glex_last_error();
  // The CP that came before the reset is gone: one more does not start a descriptor of 2.
  ASSERT_EQ(m(0).post(local(2), 2), GLEX_SUCCESS) << glex_last_error();
  ASSERT_EQ(m(1).post(cp_to(m(0), 0), 0), GLEX_SUCCESS) << glex_last_error();
  quiet();
  EXPECT_TRUE(cq_empty(m(0)));
  for (uint8_t b : dst.bytes) ASSERT_EQ(b, 0) << "the dropped put was written";
  ASSERT_EQ(m(1).post(cp_to(m(0), 0), 0), GLEX_SUCCESS) << glex_last_error();
  EXPECT_TRUE(completes(m(0), 2));
  EXPECT_EQ(glex_fence(m(0).ep, kWaitMs), GLEX_SUCCESS) << glex_last_error();
  quiet();
  EXPECT_TRUE(cq_empty(m(0)));
  for (uint8_t b : dst.bytes) ASSERT_EQ(b, 0) << "the dropped put was written";
}

// A process that dies with collective descriptors queued leaves nothing for the next owner of
// its VP: the daemon finds it dead and drops them, so they never start on the new owner's CPs.
TEST_F(LiveColl, ADeadOwnersQueuedDescriptorsNeverStartForTheNextOwner) {
  constexpr int32_t kVp = 35;
  ASSERT_NE(m(0).vp(), kVp);
  // m[1] waits for a CP: the dead process's, should its descriptors start.
  ASSERT_EQ(m(1).post(local(1), 99), GLEX_SUCCESS) << glex_last_error();
  pid_t child = fork();
  if (child == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    Member me(f(), 0, 0, kVp);
    if (!me.ok()) _exit(10);
    if (me.post(local(1), 1) != GLEX_SUCCESS) _exit(11);
    if (me.post(cp_to(m(1), 0), 0) != GLEX_SUCCESS) _exit(12);
    _exit(0);  // no glex_close_device: its VP stays open until the daemon finds it dead
  }
  ASSERT_GT(child, 0);
  ASSERT_EQ(wait_exit(child, 10), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the daemon's liveness scan
  Member next(f(), 0, 0, kVp);
  ASSERT_TRUE(next.ok()) << glex_last_error();
  ASSERT_EQ(next.post(local(1), 7), GLEX_SUCCESS) << glex_last_error();
  ASSERT_EQ(m(2).post(cp_to(next, 0), 0), GLEX_SUCCESS) << glex_last_error();
  EXPECT_TRUE(completes(next, 7));
  quiet();
  EXPECT_TRUE(cq_empty(next));
  EXPECT_TRUE(cq_empty(m(1)));  // the dead one's CP to m[1] never left
  m(1).device()->reset_coll(m(1).vp());
  EXPECT_EQ(glex_fence(m(1).ep, kWaitMs), GLEX_SUCCESS) << glex_last_error();
}

// libglex's collectives (glex/coll.cc) on the live engine, the four members in threads of their
// own as processes would be: barrier, broadcasts (in CPs, and by RDMA through 4 KiB of scratch in
// two pieces), allreduce and reduce, offloaded and host-driven.
TEST_F(LiveColl, TheLibglexCollectivesRunOnTheLiveEngine) {
  std::array<glex_ep_addr_t, 4> addrs;
  for (int i = 0; i < 4; ++i) addrs[static_cast<size_t>(i)] = m(i).addr();
  for (uint32_t flags : {0u, uint32_t{GLEX_COLL_P2P}}) {
    std::array<std::string, 4> failure;
    std::vector<std::thread> threads;
    for (uint32_t r = 0; r < 4; ++r) {
      threads.emplace_back([&, r] {
        auto fail = [&](const std::string& what) {
          if (failure[r].empty()) failure[r] = what + ": " + glex_last_error();
        };
        glex_coll_attr attr{flags, 2, kWaitMs, 4096};
        glex_coll_handle_t g;
        if (glex_coll_create(m(static_cast<int>(r)).ep, r, 4, addrs.data(), &attr, &g) !=
            GLEX_SUCCESS)
          return fail("create");
        for (int i = 0; i < 5; ++i)
          if (glex_barrier(g) != GLEX_SUCCESS) return fail("barrier");
        for (auto [len, root] : {std::pair<uint32_t, uint32_t>{8, 3}, {5000, 1}}) {
          std::vector<uint8_t> buf(len, 0);
          if (r == root)
            for (uint32_t i = 0; i < len; ++i) buf[i] = static_cast<uint8_t>(i * 7 + root);
          if (glex_bcast(g, buf.data(), len, root) != GLEX_SUCCESS) return fail("bcast");
          for (uint32_t i = 0; i < len; ++i)
            if (buf[i] != static_cast<uint8_t>(i * 7 + root))
              return fail(fmt::format("bcast of {} from {}: byte {} = {}", len, root, i, buf[i]));
        }
        const int64_t in[3] = {r, 10 * r, -1};
        int64_t out[3] = {};
        if (glex_allreduce(g, in, out, 3, GLEX_TYPE_INT64, GLEX_SUM) != GLEX_SUCCESS)
          return fail("allreduce");
        if (out[0] != 6 || out[1] != 60 || out[2] != -4)
          return fail(fmt::format("allreduce: {} {} {}", out[0], out[1], out[2]));
        const double v = 1.5 * r;
        double mx = 0;
        if (glex_reduce(g, &v, &mx, 1, GLEX_TYPE_DOUBLE, GLEX_MAX, 2) != GLEX_SUCCESS)
          return fail("reduce");
        if (r == 2 && mx != 4.5) return fail(fmt::format("reduce: {}", mx));
        if (glex_coll_destroy(g) != GLEX_SUCCESS) return fail("destroy");
      });
    }
    for (auto& t : threads) t.join();
    for (uint32_t r = 0; r < 4; ++r)
      EXPECT_TRUE(failure[r].empty())
          << (flags ? "host-driven" : "offloaded") << ", rank " << r << ": " << failure[r];
  }
}

// A member killed in the middle of a collective: the others' barrier fails within the group's
// timeout, offloaded and host-driven, and nothing hangs.
TEST_F(LiveColl, AMemberKilledMidCollectiveFailsTheOthersWithinTheTimeout) {
  for (uint32_t flags : {0u, uint32_t{GLEX_COLL_P2P}}) {
    int to_child[2], from_child[2];
    ASSERT_EQ(pipe(to_child), 0);
    ASSERT_EQ(pipe(from_child), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {  // rank 3, on host 1
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      glex_device_handle_t dev = f().open(1, 1);
      glex_ep_attr attr{-1};
      glex_ep_handle_t ep;
      glex_ep_addr_t addr = 0;
      if (dev && glex_create_ep(dev, &attr, &ep) == GLEX_SUCCESS) addr = glex_ep_addr(ep);
      if (write(from_child[1], &addr, sizeof addr) != sizeof addr || addr == 0) _exit(1);
      std::array<glex_ep_addr_t, 4> addrs;
      if (read(to_child[0], addrs.data(), sizeof addrs) != sizeof addrs) _exit(1);
      glex_coll_attr a{flags, 2, 2000, 0};
      glex_coll_handle_t g;
      if (glex_coll_create(ep, 3, 4, addrs.data(), &a, &g) != GLEX_SUCCESS) _exit(1);
      (void)glex_barrier(g);  // with the others
      char c = 1;
      if (write(from_child[1], &c, 1) != 1) _exit(1);
      pause();  // killed here, before the second barrier
      _exit(0);
    }
    glex_ep_addr_t child_addr = 0;
    ASSERT_EQ(read(from_child[0], &child_addr, sizeof child_addr),
              static_cast<ssize_t>(sizeof child_addr));
    ASSERT_NE(child_addr, 0u);
    std::array<glex_ep_addr_t, 4> addrs{m(0).addr(), m(1).addr(), m(2).addr(), child_addr};
    ASSERT_EQ(write(to_child[1], addrs.data(), sizeof addrs), static_cast<ssize_t>(sizeof addrs));
    std::array<glex_ret_t, 3> second{};
    std::array<double, 3> seconds{};
    std::vector<std::thread> threads;
    for (uint32_t r = 0; r < 3; ++r) {
      threads.emplace_back([&, r] {
        glex_coll_attr a{flags, 2, 2000, 0};
        glex_coll_handle_t g;
        if (glex_coll_create(m(static_cast<int>(r)).ep, r, 4, addrs.data(), &a, &g) !=
            GLEX_SUCCESS) {
          second[r] = GLEX_INVALID_PARAM;
          return;
        }
        if (glex_barrier(g) != GLEX_SUCCESS) {
          second[r] = GLEX_INVALID_PARAM;
          return;
        }
        if (r == 0) {  // the child passed the first barrier too: now it dies
          char c;
          if (read(from_child[0], &c, 1) == 1) kill(child, SIGKILL);
        }
        const auto t0 = std::chrono::steady_clock::now();
        second[r] = glex_barrier(g);
        seconds[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        glex_coll_destroy(g);
      });
    }
    for (auto& t : threads) t.join();
    int status = 0;
    waitpid(child, &status, 0);
    for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) close(fd);
    for (uint32_t r = 0; r < 3; ++r) {
      EXPECT_EQ(second[r], GLEX_TIMEOUT) << (flags ? "host-driven" : "offloaded") << ", rank " << r;
      EXPECT_LT(seconds[r], 6.0) << "rank " << r;  // the 2 s timeout, with room for a busy host
    }
  }
}

}  // namespace
}  // namespace galaxy::live::testing
