// Two hosts whose links drop, duplicate, reorder and corrupt frames: every MP arrives exactly
// once and in order per VP, and every byte of the RDMA verifies (issue "Live fabric and
// libglex", acceptance). The volume defaults to the issue's figures (100,000 MPs, 1 GiB);
// GALAXY_LIVE_STRESS_MPS / GALAXY_LIVE_STRESS_MIB scale it (the sanitizer build uses less).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "chip/registers.h"
#include "live_fixture.h"

namespace galaxy::live::testing {
namespace {

uint8_t pattern(uint64_t round, uint64_t offset) {
  uint64_t x = (round + 1) * 0x9E3779B97F4A7C15ull ^ (offset >> 3) * 0xC2B2AE3D27D4EB4Full;
  return static_cast<uint8_t>((x >> 29) ^ offset);
}

// The two hosts on loopback, or in two network namespaces joined by veth.
class LiveStress : public ::testing::TestWithParam<bool> {};

TEST_P(LiveStress, LossyLinksLoseNothing) {
  const uint64_t mps = env_or("GALAXY_LIVE_STRESS_MPS", 100000);
  const uint64_t mib = env_or("GALAXY_LIVE_STRESS_MIB", 1024);
  DaemonOptions o;
  o.impaired = true;
  o.impairment = parse_impairment("drop=0.05,dup=0.01,reorder=0.02,corrupt=0.01,seed=7").value();
  o.op_timeout_ns = 60'000'000'000;
  const bool netns = GetParam();
  LiveFabricUnderTest f(2, "fattree:k=4,levels=2", o, netns);
  if (netns && !f.namespaces_ok()) GTEST_SKIP() << f.namespace_error();
  ASSERT_TRUE(f.enter_host(0));  // the management server is a process of host h1
  ASSERT_TRUE(f.bring_up().ok());
  char tmpl[] = "/tmp/galaxy-stress-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  constexpr uint64_t kBuffer = 64ull << 20;
  const uint64_t rounds = std::max<uint64_t>(1, (mib << 20) / kBuffer);
  const uint64_t round_bytes = std::min<uint64_t>(kBuffer, mib << 20);

  // Receiver on host h2: checks the MP stream, then each round of RDMA data.
  pid_t receiver = spawn([&] {
    Job j = join(f, 1, 1, dir);
    if (!j.ok) return false;
    for (uint64_t i = 0; i < mps; ++i) {
      glex_mp mp;
      if (glex_recv_mp(j.ep, 30000, &mp) != GLEX_SUCCESS) {
        std::fprintf(stderr, "receiver: MP %llu: %s\n", static_cast<unsigned long long>(i),
                     glex_last_error());
        return false;
      }
      uint64_t seq;
      std::memcpy(&seq, mp.data, 8);
      const uint32_t want_len = 8 + static_cast<uint32_t>(i % 113);
      if (seq != i || mp.len != want_len ||
          (mp.len > 8 && mp.data[mp.len - 1] != static_cast<uint8_t>(i))) {
        std::fprintf(stderr, "receiver: MP %llu got seq %llu len %u\n",
                     static_cast<unsigned long long>(i), static_cast<unsigned long long>(seq),
                     mp.len);
        return false;
      }
    }
    std::vector<uint8_t> buf(round_bytes);
    glex_mem_handle_t mh;
    if (glex_register_mem(j.dev, buf.data(), buf.size(), GLEX_MEM_WRITE, &mh)) return false;
    uint64_t where[2] = {reinterpret_cast<uint64_t>(buf.data()), mh};
    if (!send_mp(j, where, sizeof where)) return false;
    for (uint64_t r = 0; r < rounds; ++r) {
      glex_mp mp;
      if (glex_recv_mp(j.ep, 120000, &mp) != GLEX_SUCCESS) return false;  // round r written
      for (uint64_t i = 0; i < round_bytes; ++i)
        if (buf[i] != pattern(r, i)) {
          std::fprintf(stderr, "receiver: round %llu byte %llu differs\n",
                       static_cast<unsigned long long>(r), static_cast<unsigned long long>(i));
          return false;
        }
      if (!send_mp(j, &r, sizeof r)) return false;
    }
    return true;
  });
  // Sender on host h1.
  pid_t sender = spawn([&] {
    Job j = join(f, 0, 0, dir);
    if (!j.ok) return false;
    uint8_t data[120];
    for (uint64_t i = 0; i < mps; ++i) {
      const uint32_t len = 8 + static_cast<uint32_t>(i % 113);
      std::memcpy(data, &i, 8);
      std::memset(data + 8, static_cast<int>(i), len - 8);
      if (!send_mp(j, data, len)) return false;
    }
    glex_mp mp;
    if (glex_recv_mp(j.ep, 60000, &mp) != GLEX_SUCCESS) return false;
    uint64_t where[2];
    std::memcpy(where, mp.data, sizeof where);
    std::vector<uint8_t> buf(round_bytes);
    glex_mem_handle_t mh;
    if (glex_register_mem(j.dev, buf.data(), buf.size(), GLEX_MEM_READ, &mh)) return false;
    for (uint64_t r = 0; r < rounds; ++r) {
      for (uint64_t i = 0; i < round_bytes; ++i) buf[i] = pattern(r, i);
      // Odd sizes and offsets: the round is written in pieces of 1 MiB + 3 bytes.
      for (uint64_t off = 0; off < round_bytes;) {
        const uint64_t n = std::min<uint64_t>((1 << 20) + 3, round_bytes - off);
        glex_rdma_req q{};
        q.target = j.peer;
        q.op = GLEX_OP_PUT;
        q.local_addr = buf.data() + off;
        q.local_mh = mh;
        q.len = n;
        q.remote_addr = where[0] + off;
        q.remote_mh = where[1];
        if (glex_rdma(j.ep, &q) != GLEX_SUCCESS) return false;
        off += n;
      }
      if (glex_fence(j.ep, 120000) != GLEX_SUCCESS) return false;
      glex_cq_entry e;
      if (glex_poll_cq(j.ep, &e) == GLEX_SUCCESS) {
        std::fprintf(stderr, "sender: completion error %d %s\n", e.status, e.reason);
        return false;
      }
      if (!send_mp(j, &r, sizeof r)) return false;
      if (glex_recv_mp(j.ep, 120000, &mp) != GLEX_SUCCESS) return false;  // verified
    }
    return true;
  });
  EXPECT_EQ(wait_exit(sender, 600), 0);
  EXPECT_EQ(wait_exit(receiver, 600), 0);
  std::filesystem::remove_all(dir);
  // The impairment did bite: the link layer retransmitted and saw corrupt frames, and the
  // management server reads that from the ports' registers.
  uint64_t retransmissions = 0, crc_errors = 0;
  for (fabric::PortRef p : f.crossing_ports()) {
    const uint16_t base = chip::reg::kPortBase + p.port * chip::reg::kPortStride;
    retransmissions += f.read_register(p.node, base + chip::reg::port::kRetransmissions);
    crc_errors += f.read_register(p.node, base + chip::reg::port::kCrcErrors);
  }
  EXPECT_GT(retransmissions, 0u);
  EXPECT_GT(crc_errors, 0u);
  std::printf("link layer: %llu retransmissions, %llu CRC errors on %zu crossing ports\n",
              static_cast<unsigned long long>(retransmissions),
              static_cast<unsigned long long>(crc_errors), f.crossing_ports().size());
}

INSTANTIATE_TEST_SUITE_P(Hosts, LiveStress, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? std::string("netns_veth") : std::string("loopback");
                         });

}  // namespace
}  // namespace galaxy::live::testing
