// The simulation server (glex/sim_server.h) with its clients (glex/sim_client.h): hosts in
// threads of this process, each waiting on the other as separate programs would, and requests
// that are malformed or out of turn, which are refused without disturbing anyone else.
#include "glex/sim_server.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <thread>

#include "../engine/sim_test_util.h"
#include "glex.h"
#include "glex/sim_client.h"
#include "glex/sim_protocol.h"
#include "served_fabric.h"

namespace galaxy {
namespace {

using glex::testing::Served;

glex::simwire::Response ask(int fd, const void* req, size_t len) {
  glex::simwire::Response r;
  EXPECT_EQ(send(fd, req, len, 0), static_cast<ssize_t>(len));
  EXPECT_EQ(recv(fd, &r, sizeof r, 0), static_cast<ssize_t>(sizeof r));
  return r;
}

TEST(SimServer, TwoHostsExchangeMpsAndAPutWithItsEvent) {
  Served s;
  auto da = glex::open_sim_client("sim:test", static_cast<int32_t>(s.nic(0)));
  auto db = glex::open_sim_client("sim:test", static_cast<int32_t>(s.nic(7)));
  ASSERT_TRUE(da.ok()) << da.error().to_string();
  ASSERT_TRUE(db.ok()) << db.error().to_string();
  glex_ep_handle_t ea, eb;
  ASSERT_EQ(glex_create_ep(da->get(), nullptr, &ea), GLEX_SUCCESS);
  ASSERT_EQ(glex_create_ep(db->get(), nullptr, &eb), GLEX_SUCCESS);
  std::vector<uint8_t> src(3000), dst(3000, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7);
  glex_event evt{};
  glex_mem_handle_t smh, dmh, emh;
  ASSERT_EQ(glex_register_mem(da->get(), src.data(), src.size(), GLEX_MEM_READ, &smh),
            GLEX_SUCCESS);
  ASSERT_EQ(glex_register_mem(db->get(), dst.data(), dst.size(), GLEX_MEM_WRITE, &dmh),
            GLEX_SUCCESS);
  ASSERT_EQ(glex_register_mem(db->get(), &evt, sizeof evt, GLEX_MEM_WRITE, &emh), GLEX_SUCCESS);
  const glex_ep_addr_t a = glex_ep_addr(ea), b = glex_ep_addr(eb);
  std::thread host_b([&] {
    glex_mp mp{};
    EXPECT_EQ(glex_recv_mp(eb, 1000, &mp), GLEX_SUCCESS) << glex_last_error();
    EXPECT_EQ(mp.src, a);
    EXPECT_EQ(glex_send_mp(eb, a, "pong", 4, 0), GLEX_SUCCESS);
    glex_event got{};
    EXPECT_EQ(glex_wait_event(&evt, 1000, &got), GLEX_SUCCESS) << glex_last_error();
    EXPECT_EQ(got.data[0], 9u);
    // Done: a host that stays connected without calling holds simulated time at its clock,
    // as a program still computing would; this one leaves, as a finished program does.
    glex_destroy_ep(eb);
    db->reset();
  });
  ASSERT_EQ(glex_send_mp(ea, b, "ping", 4, 0), GLEX_SUCCESS);
  glex_mp mp{};
  ASSERT_EQ(glex_recv_mp(ea, 1000, &mp), GLEX_SUCCESS) << glex_last_error();
  EXPECT_EQ(std::string(reinterpret_cast<char*>(mp.data), mp.len), "pong");
  glex_rdma_req r{};
  r.target = b;
  r.op = GLEX_OP_PUT;
  r.flags = GLEX_FLAG_REMOTE_EVT | GLEX_FLAG_LOCAL_CQ;
  r.local_addr = src.data() + 1;
  r.local_mh = smh;
  r.len = 2999;
  r.remote_addr = reinterpret_cast<uint64_t>(dst.data());
  r.remote_mh = dmh;
  r.event_addr = reinterpret_cast<uint64_t>(&evt);
  r.event_mh = emh;
  r.event.data[0] = 9;
  r.event.data[1] = 1;
  r.cookie = 3;
  ASSERT_EQ(glex_rdma(ea, &r), GLEX_SUCCESS) << glex_last_error();
  glex_cq_entry e{};
  ASSERT_EQ(glex_wait_cq(ea, 1000, &e), GLEX_SUCCESS) << glex_last_error();
  EXPECT_EQ(e.status, GLEX_SUCCESS);
  EXPECT_EQ(e.cookie, 3u);
  host_b.join();
  EXPECT_EQ(std::memcmp(dst.data(), src.data() + 1, 2999), 0);
  EXPECT_GT(da->get()->now_ps(), 0u);
  glex_destroy_ep(ea);
}

// A client names NICs, and finds chips' names, through the server, which holds the fabric's
// names; a name with a NUL in it is refused.
TEST(SimServer, NamesANicForItsClients) {
  Served s;
  auto dev = glex::open_sim_client("sim:test", static_cast<int32_t>(s.nic(0)));
  ASSERT_TRUE(dev.ok()) << dev.error().to_string();
  const fabric::Topology& t = s.fabric->topology();
  uint32_t chip = 0;
  ASSERT_EQ(glex_resolve_nic(dev->get(), t.name(s.nic(5)).c_str(), &chip), GLEX_SUCCESS)
      << glex_last_error();
  EXPECT_EQ(chip, s.nic(5));
  EXPECT_EQ(glex_resolve_nic(dev->get(), "nic:9999", &chip), GLEX_INVALID_PARAM);
  char name[64];
  ASSERT_EQ(glex_node_name(dev->get(), s.nic(5), name, sizeof name), GLEX_SUCCESS)
      << glex_last_error();
  EXPECT_EQ(std::string(name), t.name(s.nic(5)));
  EXPECT_EQ(glex_node_name(dev->get(), 1u << 31, name, sizeof name), GLEX_INVALID_PARAM);
  int fd = s.raw();
  glex::simwire::Request q;
  q.op = static_cast<uint32_t>(glex::simwire::Op::kHello);
  q.a[0] = static_cast<uint64_t>(getpid());
  q.a[1] = s.nic(3);
  ASSERT_EQ(ask(fd, &q, sizeof q).ret, GLEX_SUCCESS);
  q = {};
  q.op = static_cast<uint32_t>(glex::simwire::Op::kResolveNic);
  q.len = 3;
  std::memcpy(q.data, "a\0b", 3);
  auto r = ask(fd, &q, sizeof q);
  EXPECT_EQ(r.ret, GLEX_INVALID_PARAM);
  EXPECT_NE(std::string(r.error).find("E6211"), std::string::npos) << r.error;
  close(fd);
}

TEST(SimServer, BadRequestsAreRefusedAndTheServerServesOn) {
  Served s;
  // Garbage, and a request before hello: answered with an error naming it.
  int fd = s.raw();
  const char junk[10] = "xxxxxxxxx";
  auto r = ask(fd, junk, sizeof junk);
  EXPECT_EQ(r.ret, GLEX_INVALID_PARAM);
  EXPECT_NE(std::string(r.error).find("E6194"), std::string::npos) << r.error;
  glex::simwire::Request q;
  q.op = static_cast<uint32_t>(glex::simwire::Op::kNow);
  r = ask(fd, &q, sizeof q);
  EXPECT_NE(std::string(r.error).find("E6195"), std::string::npos) << r.error;
  q.op = 99;
  r = ask(fd, &q, sizeof q);
  EXPECT_NE(std::string(r.error).find("E6194"), std::string::npos) << r.error;
  // A node that is not a NIC, then a NIC another process holds.
  auto not_nic = glex::open_sim_client("sim:test", 100000);
  ASSERT_FALSE(not_nic.ok());
  EXPECT_NE(not_nic.error().message.find("E6196"), std::string::npos);
  auto first = glex::open_sim_client("sim:test", static_cast<int32_t>(s.nic(1)));
  ASSERT_TRUE(first.ok());
  auto second = glex::open_sim_client("sim:test", static_cast<int32_t>(s.nic(1)));
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find("in use"), std::string::npos);
  // A host that goes away in the middle of a wait leaves the others served.
  int waiting = s.raw();
  q = {};
  q.op = static_cast<uint32_t>(glex::simwire::Op::kHello);
  q.a[0] = static_cast<uint64_t>(getpid());
  q.a[1] = s.nic(2);
  r = ask(waiting, &q, sizeof q);
  ASSERT_EQ(r.ret, GLEX_SUCCESS);
  q = {};
  q.op = static_cast<uint32_t>(glex::simwire::Op::kOpenVp);
  q.a[0] = static_cast<uint64_t>(int64_t{-1});
  r = ask(waiting, &q, sizeof q);
  ASSERT_EQ(r.ret, GLEX_SUCCESS);
  // A VP beyond the NIC's, for a management wait (whose queue it would index) and one that a
  // byte would wrap to VP 40: refused, naming it.
  for (uint32_t bad : {200u, 296u}) {
    q = {};
    q.op = static_cast<uint32_t>(glex::simwire::Op::kWaitMgmt);
    q.vp = bad;
    auto w = ask(waiting, &q, sizeof q);
    EXPECT_EQ(w.ret, GLEX_INVALID_PARAM);
    EXPECT_NE(std::string(w.error).find(fmt::format("E6204 vp = {} exceeds", bad)),
              std::string::npos)
        << w.error;
  }
  q = {};
  q.op = static_cast<uint32_t>(glex::simwire::Op::kRecvMp);
  q.vp = static_cast<uint32_t>(r.a[0]);
  q.timeout_ms = -1;
  ASSERT_EQ(send(waiting, &q, sizeof q, 0), static_cast<ssize_t>(sizeof q));
  close(waiting);
  close(fd);
  glex_ep_handle_t ep;
  ASSERT_EQ(glex_create_ep(first->get(), nullptr, &ep), GLEX_SUCCESS);
  EXPECT_EQ(glex_send_mp(ep, glex_ep_addr(ep), "me", 2, 0), GLEX_SUCCESS);
  glex_mp mp{};
  EXPECT_EQ(glex_recv_mp(ep, 1000, &mp), GLEX_SUCCESS) << glex_last_error();
  EXPECT_EQ(mp.len, 2u);
  glex_destroy_ep(ep);
}

}  // namespace
}  // namespace galaxy
