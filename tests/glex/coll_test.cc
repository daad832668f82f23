// libglex's collectives (include/glex.h "Collectives") on the simulated engine: members are
// hosts in threads of this process, each a client of a simulation server (as separate programs
// are), running every collective offloaded and host-driven at sizes 1 to 64, and the errors: bad
// arguments, mismatched sizes, a member that never comes, a link taken down.
#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "../engine/sim_test_util.h"
#include "glex.h"
#include "glex/coll_plan.h"
#include "glex/sim_client.h"
#include "glex/sim_device.h"
#include "served_fabric.h"

namespace galaxy {
namespace {

using glex::testing::Served;

// A fabric of 128 NICs: every member has a NIC of its own.
constexpr const char* kFabric = "fattree:k=16,levels=2";

struct Member {
  uint32_t rank = 0;
  uint32_t size = 0;
  glex_device_handle_t dev = nullptr;
  glex_ep_handle_t ep = nullptr;
  std::vector<glex_ep_addr_t>* addrs = nullptr;
  std::string failure;  // the first check that failed
  void fail(std::string what) {
    if (failure.empty()) failure = fmt::format("rank {}: {}", rank, what);
  }
  bool ok(glex_ret_t r, const char* what) {
    if (r != GLEX_SUCCESS)
      fail(fmt::format("{}: {} ({})", what, glex_error_string(r), glex_last_error()));
    return r == GLEX_SUCCESS;
  }
};

// Runs `body` as `size` members, each on NIC i of `s`, after they exchanged their addresses.
std::vector<Member> run_members(Served& s, uint32_t size,
                                const std::function<void(Member&)>& body) {
  std::vector<Member> members(size);
  std::vector<glex_ep_addr_t> addrs(size);
  std::vector<std::unique_ptr<glex_device>> devices(size);
  std::barrier sync(size);
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      Member& m = members[r];
      m.rank = r;
      m.size = size;
      m.addrs = &addrs;
      auto d = glex::open_sim_client("sim:test", static_cast<int32_t>(s.nic(r)));
      if (!d.ok()) {
        m.fail(d.error().to_string());
        sync.arrive_and_drop();
        return;
      }
      devices[r] = std::move(*d);
      m.dev = devices[r].get();
      glex_ep_attr attr{-1};
      if (!m.ok(glex_create_ep(m.dev, &attr, &m.ep), "glex_create_ep")) {
        sync.arrive_and_drop();
        return;
      }
      addrs[r] = glex_ep_addr(m.ep);
      sync.arrive_and_wait();
      body(m);
      glex_destroy_ep(m.ep);
      // A host that is done leaves: while it stays connected, simulated time waits for it.
      devices[r].reset();
    });
  }
  for (auto& t : threads) t.join();
  return members;
}

void expect_all_ok(const std::vector<Member>& members) {
  for (const Member& m : members) EXPECT_TRUE(m.failure.empty()) << m.failure;
}

// Every collective, checked, on a group of `flags`.
void every_collective(Member& m, uint32_t flags, uint32_t degree = 0) {
  glex_coll_attr attr{flags, degree, 20000, 4096};
  glex_coll_handle_t g;
  if (!m.ok(glex_coll_create(m.ep, m.rank, m.size, m.addrs->data(), &attr, &g), "create")) return;
  for (int i = 0; i < 3; ++i)
    if (!m.ok(glex_barrier(g), "barrier")) return;
  // Broadcasts: 8 bytes from the last rank, 10,000 bytes (RDMA, through 4 KiB of scratch) from
  // rank 1.
  for (auto [len, root] :
       {std::pair<uint32_t, uint32_t>{8, m.size - 1}, {100, 0}, {10000, 1 % m.size}}) {
    std::vector<uint8_t> buf(len, 0);
    if (m.rank == root)
      for (uint32_t i = 0; i < len; ++i) buf[i] = static_cast<uint8_t>(i * 13 + root);
    if (!m.ok(glex_bcast(g, buf.data(), len, root), "bcast")) return;
    for (uint32_t i = 0; i < len; ++i)
      if (buf[i] != static_cast<uint8_t>(i * 13 + root))
        return m.fail(fmt::format("bcast of {} from {}: byte {} = {}", len, root, i, buf[i]));
  }
  // Allreduce: int64 sums of 3 values, double min and max of 20 (two pieces).
  const int64_t r = m.rank, n = m.size;
  int64_t in[3] = {r, 2 * r + 1, -r}, out[3] = {};
  if (!m.ok(glex_allreduce(g, in, out, 3, GLEX_TYPE_INT64, GLEX_SUM), "allreduce")) return;
  const int64_t s = n * (n - 1) / 2;
  if (out[0] != s || out[1] != 2 * s + n || out[2] != -s)
    return m.fail(fmt::format("allreduce sum: {} {} {}", out[0], out[1], out[2]));
  double din[20], dmin[20], dmax[20];
  for (int i = 0; i < 20; ++i) din[i] = static_cast<double>(r) + i * 0.5;
  if (!m.ok(glex_allreduce(g, din, dmin, 20, GLEX_TYPE_DOUBLE, GLEX_MIN), "allreduce min") ||
      !m.ok(glex_allreduce(g, din, dmax, 20, GLEX_TYPE_DOUBLE, GLEX_MAX), "allreduce max"))
    return;
  for (int i = 0; i < 20; ++i)
    if (dmin[i] != i * 0.5 || dmax[i] != static_cast<double>(n - 1) + i * 0.5)
      return m.fail(fmt::format("allreduce double [{}]: min {} max {}", i, dmin[i], dmax[i]));
  int64_t mx = 0;
  const int64_t mine = (r * 37) % 11;
  if (!m.ok(glex_reduce(g, &mine, &mx, 1, GLEX_TYPE_INT64, GLEX_MAX, 0), "reduce")) return;
  int64_t want = 0;
  for (int64_t k = 0; k < n; ++k) want = std::max(want, (k * 37) % 11);
  if (m.rank == 0 && mx != want) return m.fail(fmt::format("reduce max: {} want {}", mx, want));
  if (!m.ok(glex_barrier(g), "last barrier")) return;
  m.ok(glex_coll_destroy(g), "destroy");
}

class CollSizes : public ::testing::TestWithParam<uint32_t> {};

TEST_P(CollSizes, EveryCollectiveOffloadedAndHostDriven) {
  Served s(kFabric);
  for (uint32_t flags : {0u, uint32_t{GLEX_COLL_P2P}})
    expect_all_ok(run_members(s, GetParam(), [&](Member& m) { every_collective(m, flags); }));
  // Binary trees: as deep as they come.
  for (uint32_t flags : {0u, uint32_t{GLEX_COLL_P2P}})
    expect_all_ok(run_members(s, GetParam(), [&](Member& m) { every_collective(m, flags, 2); }));
}

INSTANTIATE_TEST_SUITE_P(Members, CollSizes, ::testing::Values(1, 2, 3, 7, 16, 64));

TEST(Coll, NonBlockingCollectivesCompleteThroughTheCq) {
  Served s(kFabric);
  expect_all_ok(run_members(s, 5, [](Member& m) {
    glex_coll_handle_t g;
    if (!m.ok(glex_coll_create(m.ep, m.rank, m.size, m.addrs->data(), nullptr, &g), "create"))
      return;
    struct {
      int64_t in[15], out[15];
      uint8_t bcast[120];
    } mem{};
    glex_mem_handle_t mh;
    if (!m.ok(glex_register_mem(m.dev, &mem, sizeof mem, GLEX_MEM_READ | GLEX_MEM_WRITE, &mh),
              "register"))
      return;
    for (int i = 0; i < 15; ++i) mem.in[i] = m.rank * 100 + i;
    if (m.rank == 2)
      for (int i = 0; i < 120; ++i) mem.bcast[i] = static_cast<uint8_t>(200 - i);
    if (!m.ok(glex_ibarrier(g, 11), "ibarrier") ||
        !m.ok(glex_iallreduce(g, mem.in, mem.out, mh, 15, GLEX_TYPE_INT64, GLEX_SUM, 12),
              "iallreduce") ||
        !m.ok(glex_ibcast(g, mem.bcast, mh, 120, 2, 13), "ibcast"))
      return;
    std::vector<uint64_t> seen;
    while (seen.size() < 3) {
      glex_cq_entry e;
      if (!m.ok(glex_wait_cq(m.ep, 10000, &e), "wait cq")) return;
      if (e.op != GLEX_OP_COLL || e.status != GLEX_SUCCESS)
        return m.fail(fmt::format("cq entry op {} status {} cookie {}", e.op,
                                  static_cast<int>(e.status), e.cookie));
      seen.push_back(e.cookie);
    }
    if (seen != std::vector<uint64_t>{11, 12, 13})
      return m.fail(fmt::format("cookies {} {} {}", seen[0], seen[1], seen[2]));
    for (int i = 0; i < 15; ++i)
      if (mem.out[i] != 100 * (0 + 1 + 2 + 3 + 4) + 5 * i)
        return m.fail(fmt::format("iallreduce [{}] = {}", i, mem.out[i]));
    for (int i = 0; i < 120; ++i)
      if (mem.bcast[i] != static_cast<uint8_t>(200 - i))
        return m.fail(fmt::format("ibcast [{}] = {}", i, mem.bcast[i]));
    m.ok(glex_coll_destroy(g), "destroy");
  }));
}

TEST(Coll, BadArgumentsAreRefusedNamingTheField) {
  Served s(kFabric);
  expect_all_ok(run_members(s, 2, [](Member& m) {
    glex_coll_handle_t g;
    auto refused = [&](glex_ret_t r, glex_ret_t want, const char* field) {
      if (r != want || std::string(glex_last_error()).find(field) == std::string::npos)
        m.fail(fmt::format("want {} naming '{}', got {}: {}", glex_error_string(want), field,
                           glex_error_string(r), glex_last_error()));
    };
    glex_coll_attr bad{0, 1, 0, 0};
    refused(glex_coll_create(m.ep, m.rank, 2, m.addrs->data(), &bad, &g), GLEX_INVALID_PARAM,
            "attr.degree = 1");
    refused(glex_coll_create(m.ep, 2, 2, m.addrs->data(), nullptr, &g), GLEX_INVALID_PARAM,
            "rank = 2");
    refused(glex_coll_create(m.ep, 1 - m.rank, 2, m.addrs->data(), nullptr, &g), GLEX_INVALID_PARAM,
            "is not this endpoint");
    if (!m.ok(glex_coll_create(m.ep, m.rank, 2, m.addrs->data(), nullptr, &g), "create")) return;
    int64_t v = 1;
    refused(glex_allreduce(g, &v, &v, 1, 9, GLEX_SUM), GLEX_INVALID_PARAM, "type = 9");
    refused(glex_allreduce(g, &v, &v, 1, GLEX_TYPE_INT64, 0), GLEX_INVALID_PARAM, "op = 0");
    refused(glex_bcast(g, &v, 8, 5), GLEX_INVALID_PARAM, "root = 5");
    refused(glex_iallreduce(g, &v, &v, 0, 16, GLEX_TYPE_INT64, GLEX_SUM, 1), GLEX_INVALID_PARAM,
            "count = 16");
    refused(glex_ibcast(g, &v, 0, 121, 0, 1), GLEX_INVALID_PARAM, "len = 121");
    // Nothing was posted: the group still works.
    m.ok(glex_barrier(g), "barrier after refusals");
    m.ok(glex_coll_destroy(g), "destroy");
  }));
}

TEST(Coll, MismatchedGroupSizesAreRefused) {
  Served s(kFabric);
  auto members = run_members(s, 3, [](Member& m) {
    std::vector<glex_ep_addr_t> addrs = *m.addrs;
    uint32_t size = 3;
    if (m.rank == 2) {  // says the group has 4 members
      addrs.push_back(addrs[0] + 1);
      size = 4;
    }
    glex_coll_attr attr{0, 0, 2000, 0};
    glex_coll_handle_t g;
    glex_ret_t r = glex_coll_create(m.ep, m.rank, size, addrs.data(), &attr, &g);
    if (r != GLEX_INVALID_PARAM || std::string(glex_last_error()).find("size") == std::string::npos)
      m.fail(fmt::format("create: {} {}", glex_error_string(r), glex_last_error()));
  });
  expect_all_ok(members);
}

TEST(Coll, AMemberThatNeverComesMakesTheOthersFailNotHang) {
  Served s(kFabric);
  for (uint32_t flags : {0u, uint32_t{GLEX_COLL_P2P}}) {
    auto members = run_members(s, 4, [&](Member& m) {
      glex_coll_attr attr{flags, 0, 3000, 0};
      glex_coll_handle_t g;
      if (!m.ok(glex_coll_create(m.ep, m.rank, m.size, m.addrs->data(), &attr, &g), "create"))
        return;
      if (m.rank == 3) {  // leaves without its barrier
        glex_coll_destroy(g);
        return;
      }
      glex_ret_t r = glex_barrier(g);
      if (r != GLEX_TIMEOUT) m.fail(fmt::format("barrier: {}", glex_error_string(r)));
      // The group is unusable after, and says why.
      r = glex_barrier(g);
      if (r != GLEX_PEER_DEAD ||
          std::string(glex_last_error()).find("unusable") == std::string::npos)
        m.fail(fmt::format("second barrier: {} {}", glex_error_string(r), glex_last_error()));
      glex_coll_destroy(g);
    });
    expect_all_ok(members);
  }
}

// The NICs run a posted barrier alone; a NIC whose link is down makes every member's barrier
// end in an error or a timeout — never a hang, never a false success.
TEST(Coll, ALinkTakenDownFailsTheOffloadedBarrier) {
  auto f = sim::testing::make("fattree:k=4,levels=2");
  sim::testing::program_minimal_routes(*f);
  const fabric::Topology& t = f->topology();
  constexpr uint32_t kMembers = 8;
  std::vector<std::unique_ptr<glex_device>> devs;
  std::vector<glex::coll::Peer> peers;
  for (uint32_t i = 0; i < kMembers; ++i) {
    devs.push_back(glex::open_sim_device(*f, t.nic_node(i)));
    ASSERT_TRUE(devs.back()->open_vp(0).ok());
    peers.push_back({devs.back()->chip_id(), 0});
  }
  ASSERT_TRUE(f->set_link({t.nic_node(5), 0}, false).ok());
  for (uint32_t r = 0; r < kMembers; ++r) {
    glex::coll::Member m;
    m.rank = r;
    m.tree = {kMembers, 2};
    m.peers = peers;
    for (const auto& p : glex::coll::offloaded(m))
      ASSERT_EQ(devs[r]->post_coll(0, p.coll, 7), GLEX_SUCCESS) << glex_last_error();
  }
  int unreachable = 0;
  for (uint32_t r = 0; r < kMembers; ++r) {
    glex_cq_entry e;
    glex_ret_t ret = devs[r]->poll_cq(0, 100, &e);
    if (ret == GLEX_SUCCESS) {
      EXPECT_NE(e.status, GLEX_SUCCESS) << "member " << r << " completed a barrier member 5 missed";
      unreachable += e.status == GLEX_UNREACHABLE;
    } else {
      EXPECT_EQ(ret, GLEX_TIMEOUT) << "member " << r;
    }
  }
  EXPECT_GE(unreachable, 1);  // member 5's CP to its parent was refused at its own port
}

}  // namespace
}  // namespace galaxy
