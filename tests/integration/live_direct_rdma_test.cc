// RDMA between processes of different hosts on their direct links (glex/direct_rdma.h;
// docs/live.md "RDMA on the direct path"): transfers of any size go from process to process with
// both daemons stopped, land byte for byte at any alignment, complete once in the initiator's CQ,
// write the target's event; the target's ATT refuses a wrong key or a region it does not cover
// with nothing written.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "glex/direct_rdma.h"
#include "live_fixture.h"

namespace galaxy::live::testing::direct_rdma {
namespace {

using Clock = std::chrono::steady_clock;

// Registered memory filled with `fill`.
struct Buffer {
  std::vector<uint8_t> bytes;
  glex_mem_handle_t mh{};
  bool ok = false;
  Buffer(glex_device_handle_t dev, size_t n, uint8_t fill) : bytes(n, fill) {
    ok = glex_register_mem(dev, bytes.data(), n, GLEX_MEM_READ | GLEX_MEM_WRITE, &mh) ==
         GLEX_SUCCESS;
  }
  uint64_t at(size_t offset) const { return reinterpret_cast<uint64_t>(bytes.data()) + offset; }
};

glex_rdma_req request(const Port& to, uint32_t op, void* local, glex_mem_handle_t lmh, size_t len,
                      uint64_t remote, glex_mem_handle_t rmh, uint64_t cookie) {
  glex_rdma_req r{};
  r.target = to.addr();
  r.op = op;
  r.flags = GLEX_FLAG_LOCAL_CQ;
  r.local_addr = local;
  r.local_mh = lmh;
  r.len = len;
  r.remote_addr = remote;
  r.remote_mh = rmh;
  r.cookie = cookie;
  return r;
}

// Posts `r` on `from` and takes its completion.
::testing::AssertionResult run(const Port& from, const glex_rdma_req& r, glex_cq_entry* e,
                               int32_t timeout_ms = 5000) {
  glex_ret_t ret;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while ((ret = glex_rdma(from.ep, &r)) == GLEX_BUSY && Clock::now() < deadline) {
  }
  if (ret != GLEX_SUCCESS) return ::testing::AssertionFailure() << "post: " << glex_last_error();
  if (glex_wait_cq(from.ep, timeout_ms, e) != GLEX_SUCCESS)
    return ::testing::AssertionFailure() << "no completion: " << glex_last_error();
  if (e->cookie != r.cookie)
    return ::testing::AssertionFailure()
           << "completion of cookie " << e->cookie << ", not " << r.cookie;
  return ::testing::AssertionSuccess();
}

class LiveDirectRdma : public LiveTwoHostSuite {};

// With both daemons stopped, puts, gets and immediates of 1 byte to 64 KiB at odd alignments
// cross between the hosts (a puts into b, b gets from a, b sends a an immediate), each completing
// once with every byte where it belongs and nothing beside it touched; a put's event is written at
// the target.
TEST_F(LiveDirectRdma, TransfersCrossBetweenHostsWhileBothDaemonsAreStopped) {
  Port a(f(), 0, 0), b(f(), 1, 0);
  ASSERT_TRUE(a.ok() && b.ok()) << glex_last_error();
  constexpr size_t kSpan = 70000;
  Buffer src_a(a.dev, kSpan, 0), dst_a(a.dev, kSpan, 0xEE), src_b(b.dev, kSpan, 0),
      dst_b(b.dev, kSpan, 0xEE);
  ASSERT_TRUE(src_a.ok && dst_a.ok && src_b.ok && dst_b.ok) << glex_last_error();
  for (size_t i = 0; i < kSpan; ++i) {
    src_a.bytes[i] = static_cast<uint8_t>(i * 7 + 1);
    src_b.bytes[i] = static_cast<uint8_t>(i * 13 + 5);
  }
  glex_cq_entry e{};
  // The first transfer each way asks the target host's daemon where the owner receives.
  ASSERT_TRUE(run(
      a, request(b, GLEX_OP_PUT, src_a.bytes.data(), src_a.mh, 8, dst_b.at(0), dst_b.mh, 1), &e));
  ASSERT_TRUE(run(
      b, request(a, GLEX_OP_PUT, src_b.bytes.data(), src_b.mh, 8, dst_a.at(0), dst_a.mh, 1), &e));
  std::fill(dst_a.bytes.begin(), dst_a.bytes.end(), 0xEE);
  std::fill(dst_b.bytes.begin(), dst_b.bytes.end(), 0xEE);
  DaemonsStopped stopped(f());
  uint64_t cookie = 10;
  for (const size_t len :
       {size_t{1}, size_t{8}, size_t{127}, size_t{129}, size_t{4097}, size_t{65536}}) {
    for (const size_t at : {size_t{0}, size_t{3}, size_t{77}}) {
      // a puts into b; b gets from a into its own buffer.
      ASSERT_TRUE(run(a,
                      request(b, GLEX_OP_PUT, src_a.bytes.data() + 5, src_a.mh, len, dst_b.at(at),
                              dst_b.mh, ++cookie),
                      &e))
          << len << " at " << at;
      EXPECT_EQ(e.status, GLEX_SUCCESS) << e.reason;
      EXPECT_EQ(e.op, static_cast<uint32_t>(GLEX_OP_PUT));
      EXPECT_EQ(e.bytes, len);
      for (size_t i = 0; i < kSpan; ++i)
        ASSERT_EQ(dst_b.bytes[i], i >= at && i < at + len ? src_a.bytes[5 + i - at] : 0xEE)
            << "put of " << len << " at " << at << ", byte " << i;
      std::fill(dst_b.bytes.begin(), dst_b.bytes.end(), 0xEE);
      ASSERT_TRUE(run(b,
                      request(a, GLEX_OP_GET, dst_b.bytes.data() + at, dst_b.mh, len, src_a.at(11),
                              src_a.mh, ++cookie),
                      &e))
          << len << " at " << at;
      EXPECT_EQ(e.status, GLEX_SUCCESS) << e.reason;
      EXPECT_EQ(e.op, static_cast<uint32_t>(GLEX_OP_GET));
      for (size_t i = 0; i < kSpan; ++i)
        ASSERT_EQ(dst_b.bytes[i], i >= at && i < at + len ? src_a.bytes[11 + i - at] : 0xEE)
            << "get of " << len << " at " << at << ", byte " << i;
      std::fill(dst_a.bytes.begin(), dst_a.bytes.end(), 0xEE);
      std::fill(dst_b.bytes.begin(), dst_b.bytes.end(), 0xEE);
    }
  }
  // An immediate of 1..128 bytes carried in the descriptor.
  uint8_t imm[128];
  for (int i = 0; i < 128; ++i) imm[i] = static_cast<uint8_t>(200 + i);
  ASSERT_TRUE(run(b, request(a, GLEX_OP_IMM, imm, 0, 128, dst_a.at(1000), dst_a.mh, ++cookie), &e));
  EXPECT_EQ(e.status, GLEX_SUCCESS) << e.reason;
  EXPECT_EQ(std::memcmp(dst_a.bytes.data() + 1000, imm, 128), 0);
  EXPECT_EQ(dst_a.bytes[999], 0xEE);
  EXPECT_EQ(dst_a.bytes[1128], 0xEE);
  // A put whose event the target's memory receives once its data are written.
  alignas(16) static glex_event event{};
  glex_mem_handle_t emh;
  ASSERT_EQ(glex_register_mem(b.dev, &event, sizeof event, GLEX_MEM_WRITE, &emh), GLEX_SUCCESS);
  glex_rdma_req r =
      request(b, GLEX_OP_PUT, src_a.bytes.data(), src_a.mh, 300, dst_b.at(64), dst_b.mh, ++cookie);
  r.flags |= GLEX_FLAG_REMOTE_EVT;
  r.event_addr = reinterpret_cast<uint64_t>(&event);
  r.event_mh = emh;
  r.event.data[0] = 0x1234;
  r.event.data[1] = 0x5678;
  ASSERT_TRUE(run(a, r, &e));
  EXPECT_EQ(e.status, GLEX_SUCCESS) << e.reason;
  glex_event got{};
  ASSERT_EQ(glex_wait_event(&event, 2000, &got), GLEX_SUCCESS);
  EXPECT_EQ(got.data[0], 0x1234u);
  EXPECT_EQ(got.data[1], 0x5678u);
  EXPECT_EQ(std::memcmp(dst_b.bytes.data() + 64, src_a.bytes.data(), 300), 0);
  EXPECT_EQ(glex_poll_cq(a.ep, &e), GLEX_NO_ENTRY);
  EXPECT_EQ(glex_poll_cq(b.ep, &e), GLEX_NO_ENTRY);
}

// The target process's NIC checks the whole transfer against its ATT before a byte moves: a
// wrong key, a region past the registration and a get of memory not registered for reading
// complete with an access error at the initiator, and nothing is written on either side.
TEST_F(LiveDirectRdma, TheTargetsAttRefusesAndNothingIsWritten) {
  Port a(f(), 0, 0), b(f(), 1, 0);
  ASSERT_TRUE(a.ok() && b.ok()) << glex_last_error();
  Buffer src(a.dev, 8192, 0x5A), local(a.dev, 8192, 0xEE), target(b.dev, 4096, 0xEE);
  ASSERT_TRUE(src.ok && local.ok && target.ok) << glex_last_error();
  std::vector<uint8_t> write_only(4096, 0x77);
  glex_mem_handle_t wmh;
  ASSERT_EQ(glex_register_mem(b.dev, write_only.data(), write_only.size(), GLEX_MEM_WRITE, &wmh),
            GLEX_SUCCESS);
  glex_cq_entry e{};
  ASSERT_TRUE(
      run(a, request(b, GLEX_OP_PUT, src.bytes.data(), src.mh, 8, target.at(0), target.mh, 1), &e));
  std::fill(target.bytes.begin(), target.bytes.end(), 0xEE);
  DaemonsStopped stopped(f());
  const glex_mem_handle_t wrong_key = target.mh ^ 0x1;
  struct Case {
    const char* what;
    glex_rdma_req r;
  };
  const Case cases[] = {
      {"put with a wrong key",
       request(b, GLEX_OP_PUT, src.bytes.data(), src.mh, 256, target.at(0), wrong_key, 2)},
      {"put past the registration",
       request(b, GLEX_OP_PUT, src.bytes.data(), src.mh, 4096, target.at(128), target.mh, 3)},
      {"get past the registration",
       request(b, GLEX_OP_GET, local.bytes.data(), local.mh, 8192, target.at(0), target.mh, 4)},
      {"get of write-only memory", request(b, GLEX_OP_GET, local.bytes.data(), local.mh, 64,
                                           reinterpret_cast<uint64_t>(write_only.data()), wmh, 5)},
  };
  for (const Case& c : cases) {
    ASSERT_TRUE(run(a, c.r, &e)) << c.what;
    EXPECT_EQ(e.status, GLEX_ACCESS_ERROR) << c.what << ": " << e.reason;
    EXPECT_EQ(e.bytes, 0u) << c.what;
  }
  for (uint8_t v : target.bytes) ASSERT_EQ(v, 0xEE);
  for (uint8_t v : local.bytes) ASSERT_EQ(v, 0xEE);
  for (uint8_t v : write_only) ASSERT_EQ(v, 0x77);
}

// Puts of many mebibytes go direct too, DMA engine 0 cutting them a piece at a time as the link
// takes them: with the daemons stopped, an 8 MiB put at an odd alignment lands whole, completes
// once, and its event follows every byte; one behind it in the engine completes after it.
TEST_F(LiveDirectRdma, PutsOfManyMebibytesAreCutAPieceAtATime) {
  Port a(f(), 0, 0), b(f(), 1, 0);
  ASSERT_TRUE(a.ok() && b.ok()) << glex_last_error();
  constexpr size_t kLen = 8 << 20;
  Buffer src(a.dev, kLen, 0), dst(b.dev, kLen + 4096, 0xEE);
  ASSERT_TRUE(src.ok && dst.ok) << glex_last_error();
  for (size_t i = 0; i < kLen; ++i) src.bytes[i] = static_cast<uint8_t>(i * 29 + (i >> 13));
  glex_cq_entry e{};
  ASSERT_TRUE(
      run(a, request(b, GLEX_OP_PUT, src.bytes.data(), src.mh, 8, dst.at(0), dst.mh, 1), &e));
  std::fill(dst.bytes.begin(), dst.bytes.end(), 0xEE);
  DaemonsStopped stopped(f());
  glex_rdma_req big =
      request(b, GLEX_OP_PUT, src.bytes.data() + 3, src.mh, kLen - 3, dst.at(77), dst.mh, 2);
  big.flags |= GLEX_FLAG_REMOTE_EVT;
  big.event_addr = dst.at(kLen + 1024);
  big.event_mh = dst.mh;
  big.event.data[0] = 0x1234;
  big.event.data[1] = 0x5678;
  const glex_rdma_req small =
      request(b, GLEX_OP_PUT, src.bytes.data(), src.mh, 100, dst.at(kLen + 2048), dst.mh, 3);
  ASSERT_EQ(glex_rdma(a.ep, &big), GLEX_SUCCESS) << glex_last_error();
  ASSERT_EQ(glex_rdma(a.ep, &small), GLEX_SUCCESS) << glex_last_error();
  for (const uint64_t cookie : {2u, 3u}) {
    ASSERT_EQ(glex_wait_cq(a.ep, 10000, &e), GLEX_SUCCESS) << glex_last_error();
    EXPECT_EQ(e.cookie, cookie);
    EXPECT_EQ(e.status, GLEX_SUCCESS) << e.reason;
  }
  EXPECT_EQ(std::memcmp(dst.bytes.data() + 77, src.bytes.data() + 3, kLen - 3), 0);
  for (size_t i = 0; i < 77; ++i) ASSERT_EQ(dst.bytes[i], 0xEE) << i;
  uint64_t event[2];
  std::memcpy(event, dst.bytes.data() + kLen + 1024, sizeof event);
  EXPECT_EQ(event[0], 0x1234u);
  EXPECT_EQ(event[1], 0x5678u);
  EXPECT_EQ(std::memcmp(dst.bytes.data() + kLen + 2048, src.bytes.data(), 100), 0);
}

// A put whose source is deregistered while DMA engine 0 still cuts it ends with the read's
// failure, as the NIC's does: it completes once, with an error, and what was sent stays sent;
// the link and the NIC go on (a put after it lands whole).
TEST_F(LiveDirectRdma, APutWhoseSourceGoesWhileItIsCutFailsOnce) {
  Port a(f(), 0, 0), b(f(), 1, 0);
  ASSERT_TRUE(a.ok() && b.ok()) << glex_last_error();
  constexpr size_t kLen = 32 << 20;
  Buffer src(a.dev, kLen, 0x5A), dst(b.dev, kLen, 0xEE), small(a.dev, 256, 0x77);
  ASSERT_TRUE(src.ok && dst.ok && small.ok) << glex_last_error();
  glex_cq_entry e{};
  ASSERT_TRUE(
      run(a, request(b, GLEX_OP_PUT, small.bytes.data(), small.mh, 8, dst.at(0), dst.mh, 1), &e));
  const glex_rdma_req big =
      request(b, GLEX_OP_PUT, src.bytes.data(), src.mh, kLen, dst.at(0), dst.mh, 2);
  ASSERT_EQ(glex_rdma(a.ep, &big), GLEX_SUCCESS) << glex_last_error();
  ASSERT_EQ(glex_deregister_mem(a.dev, src.mh), GLEX_SUCCESS) << glex_last_error();
  ASSERT_EQ(glex_wait_cq(a.ep, 10000, &e), GLEX_SUCCESS) << glex_last_error();
  EXPECT_EQ(e.cookie, 2u);
  // Cut whole before the deregistration took hold (a fast machine) or failed reading: never
  // both, never twice.
  if (e.status != GLEX_SUCCESS) {
    EXPECT_EQ(e.status, GLEX_ACCESS_ERROR) << e.reason;
  }
  EXPECT_EQ(glex_poll_cq(a.ep, &e), GLEX_NO_ENTRY);
  ASSERT_TRUE(run(
      a, request(b, GLEX_OP_PUT, small.bytes.data(), small.mh, 256, dst.at(kLen - 256), dst.mh, 3),
      &e));
  EXPECT_EQ(e.status, GLEX_SUCCESS) << e.reason;
  for (size_t i = kLen - 256; i < kLen; ++i) ASSERT_EQ(dst.bytes[i], 0x77) << i;
}

// Gets go direct too, the target answering them a piece at a time as its link takes the
// answers: two of a mebibyte back to back with the daemons stopped land whole.
TEST_F(LiveDirectRdma, GetsOfAMebibyteAreAnsweredAPieceAtATime) {
  Port a(f(), 0, 0), b(f(), 1, 0);
  ASSERT_TRUE(a.ok() && b.ok()) << glex_last_error();
  constexpr size_t kLen = 1 << 20;
  Buffer src(a.dev, kLen, 0), dst(b.dev, 2 * kLen, 0xEE);
  ASSERT_TRUE(src.ok && dst.ok) << glex_last_error();
  for (size_t i = 0; i < kLen; ++i) src.bytes[i] = static_cast<uint8_t>(i * 31 + (i >> 12));
  glex_cq_entry e{};
  ASSERT_TRUE(
      run(b, request(a, GLEX_OP_GET, dst.bytes.data(), dst.mh, 8, src.at(0), src.mh, 1), &e));
  DaemonsStopped stopped(f());
  for (uint64_t k = 0; k < 2; ++k) {
    glex_rdma_req r = request(a, GLEX_OP_GET, dst.bytes.data() + k * kLen, dst.mh, kLen, src.at(0),
                              src.mh, 10 + k);
    glex_ret_t ret;
    while ((ret = glex_rdma(b.ep, &r)) == GLEX_BUSY) {
    }
    ASSERT_EQ(ret, GLEX_SUCCESS) << glex_last_error();
  }
  for (uint64_t k = 0; k < 2; ++k) {
    ASSERT_EQ(glex_wait_cq(b.ep, 10000, &e), GLEX_SUCCESS) << glex_last_error();
    EXPECT_EQ(e.cookie, 10 + k);
    EXPECT_EQ(e.status, GLEX_SUCCESS) << e.reason;
    EXPECT_EQ(e.bytes, kLen);
  }
  EXPECT_EQ(std::memcmp(dst.bytes.data(), src.bytes.data(), kLen), 0);
  EXPECT_EQ(std::memcmp(dst.bytes.data() + kLen, src.bytes.data(), kLen), 0);
}

// Over a lossy wire (5% drop, 1% duplication, 2% reordering, 1% corruption) the link layer
// repairs what the transfers' packets meet: every put and get lands exactly once, in order of
// completion, each completes once and no completion comes beyond them.
TEST(LiveDirectRdmaLossy, EveryTransferLandsAndCompletesOnceOverALossyDirectLink) {
  DaemonOptions o;
  o.impaired = true;
  o.impairment = parse_impairment("drop=0.05,dup=0.01,reorder=0.02,corrupt=0.01,seed=17").value();
  LiveFabricUnderTest f(2, "fattree:k=4,levels=2", o);
  ASSERT_TRUE(f.bring_up().ok());
  Port a(f, 0, 0), b(f, 1, 0);
  ASSERT_TRUE(a.ok() && b.ok()) << glex_last_error();
  constexpr size_t kSpan = 20000;
  Buffer src(a.dev, kSpan, 0), back(a.dev, kSpan, 0xEE), dst(b.dev, kSpan, 0xEE);
  ASSERT_TRUE(src.ok && back.ok && dst.ok) << glex_last_error();
  glex_cq_entry e{};
  ASSERT_TRUE(run(a, request(b, GLEX_OP_PUT, src.bytes.data(), src.mh, 8, dst.at(0), dst.mh, 0), &e,
                  20000));
  DaemonsStopped stopped(f);
  const int rounds = static_cast<int>(env_or("GALAXY_LIVE_STRESS_MPS", 20000) / 100);
  for (int i = 1; i <= rounds; ++i) {
    const size_t len = 1 + static_cast<size_t>(i * 997) % (kSpan - 64);
    const size_t at = static_cast<size_t>(i) % 61;
    for (size_t k = 0; k < len; ++k) src.bytes[k] = static_cast<uint8_t>(i + k * 3);
    ASSERT_TRUE(run(a,
                    request(b, GLEX_OP_PUT, src.bytes.data(), src.mh, len, dst.at(at), dst.mh,
                            2 * static_cast<uint64_t>(i)),
                    &e, 20000))
        << "put " << i;
    ASSERT_EQ(e.status, GLEX_SUCCESS) << "put " << i << ": " << e.reason;
    ASSERT_EQ(std::memcmp(dst.bytes.data() + at, src.bytes.data(), len), 0) << "put " << i;
    ASSERT_TRUE(run(a,
                    request(b, GLEX_OP_GET, back.bytes.data(), back.mh, len, dst.at(at), dst.mh,
                            2 * static_cast<uint64_t>(i) + 1),
                    &e, 20000))
        << "get " << i;
    ASSERT_EQ(e.status, GLEX_SUCCESS) << "get " << i << ": " << e.reason;
    ASSERT_EQ(std::memcmp(back.bytes.data(), src.bytes.data(), len), 0) << "get " << i;
  }
  EXPECT_EQ(glex_wait_cq(a.ep, 100, &e), GLEX_TIMEOUT) << "a completion beyond the transfers";
}

}  // namespace
}  // namespace galaxy::live::testing::direct_rdma
