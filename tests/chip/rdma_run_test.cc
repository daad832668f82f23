// Runs of a transfer's packets (chip/rdma_transfer.h): the packets that follow one packet at
// once, carried as their payload alone. The target writes and counts them as it would the
// packets one by one, refuses a run that is not where the transfer is cut, and DMA engine 1
// reads a run of responses as it would read them one by one.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "chip/att.h"
#include "chip/rdma_transfer.h"

namespace galaxy::chip::rdma_run_test {

constexpr uint32_t kKey = 5;
constexpr uint64_t kBase = 0x10000;
constexpr uint64_t kSize = 0x4000;

// One region, physical address = virtual.
class Table final : public AttTable {
 public:
  Status check(uint32_t key, uint64_t vaddr, uint64_t length, uint32_t access) const override {
    if (key != kKey) return unknown_key(key);
    return check_region(key, kBase, kSize, kAccessRead | kAccessWrite, vaddr, length, access);
  }
  Status translate_pieces(uint32_t key, uint64_t vaddr, uint64_t length, uint32_t access,
                          const PieceFn& fn) const override {
    GALAXY_TRY(check(key, vaddr, length, access));
    return fn(vaddr, 0, length);
  }
};

struct Ack {
  wire::ChipId dest;
  uint8_t vp;
  uint16_t tag;
  uint16_t error_id;
  uint64_t bytes;
};

// The target's host: its memory, what it acked and discarded.
struct Host {
  Table table;
  std::vector<uint8_t> mem = std::vector<uint8_t>(kSize, 0xEE);
  std::vector<Ack> acks;
  std::vector<Error> discards;
  uint64_t written_bytes = 0;
  size_t writes = 0;
  const AttTable& att() const { return table; }
  uint16_t write(uint32_t key, uint64_t vaddr, std::span<const uint8_t> data, uint32_t access) {
    if (Status st = table.check(key, vaddr, data.size(), access); !st.ok()) return st.error().id;
    std::memcpy(mem.data() + (vaddr - kBase), data.data(), data.size());
    ++writes;
    return 0;
  }
  uint16_t read(uint32_t key, uint64_t vaddr, std::span<uint8_t> out, uint32_t access) {
    if (Status st = table.check(key, vaddr, out.size(), access); !st.ok()) return st.error().id;
    std::memcpy(out.data(), mem.data() + (vaddr - kBase), out.size());
    return 0;
  }
  uint16_t flush() { return 0; }
  bool mp(const wire::DataHead&, std::span<const uint8_t>) { return false; }
  void ack(wire::ChipId dest, uint8_t vp, uint16_t tag, uint16_t error_id, uint64_t bytes) {
    acks.push_back({dest, vp, tag, error_id, bytes});
  }
  void discard(const Error& why) { discards.push_back(why); }
  void written(uint64_t bytes) { written_bytes += bytes; }
};

// A put of `length` bytes to kBase + `at`, from node 3 VP 2 with tag 9, no completion notice.
wire::RdmaDescriptor put(uint64_t at, uint64_t length) {
  wire::RdmaDescriptor d;
  d.op = wire::RdmaOp::kWrite;
  d.remote_node = 7;
  d.remote_address = kBase + at;
  d.remote_key = kKey;
  d.length = static_cast<uint32_t>(length);
  d.completion = wire::Completion::kNone;
  return d;
}

uint8_t source_byte(uint64_t i) {
  return static_cast<uint8_t>(i * 7 + 1);
}

// Cuts put `d` into items of one packet and a run of at most `room` bytes, and hands each to
// the target; returns the items sent.
size_t send_in_runs(const wire::RdmaDescriptor& d, uint64_t room, RdmaTarget& target, Host& host) {
  size_t items = 0;
  std::vector<uint8_t> run;
  for (uint64_t sent = 0; sent < d.length;) {
    wire::DataPacket p;
    const uint64_t n = rdma_data_packet(d, 2, 9, sent, p);
    p.head.src_node = 3;
    for (uint64_t i = 0; i < n; ++i) p.payload[i] = source_byte(sent + i);
    const uint64_t m = rdma_run_bytes(d.length, sent + n, room);
    run.resize(m);
    for (uint64_t i = 0; i < m; ++i) run[i] = source_byte(sent + n + i);
    EXPECT_EQ(target.write(p, host, run), RdmaRx::kDelivered) << "at " << sent;
    sent += n + m;
    ++items;
  }
  return items;
}

TEST(RdmaRun, RunBytesAreWholePacketsWithinTheTransfer) {
  EXPECT_EQ(rdma_run_bytes(1000, 51, 512), 512u);
  EXPECT_EQ(rdma_run_bytes(1000, 51, 600), 512u);  // whole packets only
  EXPECT_EQ(rdma_run_bytes(1000, 947, 512), 53u);  // the transfer's last, short packet
  EXPECT_EQ(rdma_run_bytes(1000, 1000, 512), 0u);
  EXPECT_EQ(rdma_run_bytes(1000, 51, 127), 0u);
}

// Every size and alignment, in runs of several sizes: memory as the packets one by one leave
// it, one ack for the whole transfer, its bytes counted once.
TEST(RdmaRun, ATargetWritesARunAsItsPacketsAndAcksTheTransferOnce) {
  for (const uint64_t length : {1u, 127u, 128u, 129u, 1000u, 4096u, 5000u}) {
    for (const uint64_t at : {0u, 3u, 77u, 127u}) {
      for (const uint64_t room : {0u, 128u, 512u, 8192u}) {
        Host host;
        RdmaTarget target;
        const size_t items = send_in_runs(put(at, length), room, target, host);
        SCOPED_TRACE(::testing::Message() << length << " bytes at " << at << ", runs of " << room);
        EXPECT_TRUE(host.discards.empty());
        ASSERT_EQ(host.acks.size(), 1u) << items << " items";
        EXPECT_EQ(host.acks[0].error_id, 0);
        EXPECT_EQ(host.acks[0].bytes, length);
        EXPECT_EQ(host.acks[0].tag, 9);
        EXPECT_EQ(host.acks[0].dest, 3u);
        EXPECT_EQ(host.written_bytes, length);
        EXPECT_EQ(target.in_progress(), 0u);
        for (uint64_t i = 0; i < kSize; ++i)
          ASSERT_EQ(host.mem[i], i >= at && i < at + length ? source_byte(i - at) : 0xEE)
              << "byte " << i;
        if (room >= 8192) {
          EXPECT_EQ(items, 1u);
        }
      }
    }
  }
}

// A run that does not end where a packet ends, or that follows a packet not ending at a
// boundary, is not the transfer's cut: discarded (E2080), nothing written, no ack.
TEST(RdmaRun, ARunNotWhereTheTransferIsCutIsDiscarded) {
  Host host;
  RdmaTarget target;
  const wire::RdmaDescriptor d = put(77, 1000);
  wire::DataPacket p;
  const uint64_t n = rdma_data_packet(d, 2, 9, 0, p);
  ASSERT_EQ(n, 51u);
  const std::vector<uint8_t> ragged(100, 0x11);  // ends mid-packet
  EXPECT_EQ(target.write(p, host, ragged), RdmaRx::kDiscarded);
  ASSERT_EQ(host.discards.size(), 1u);
  EXPECT_EQ(host.discards[0].id, 2080);
  // The transfer's last packet has no run after it.
  wire::DataPacket last;
  const uint64_t sent = 1000 - 53;
  ASSERT_EQ(rdma_data_packet(d, 2, 9, sent, last), 53u);
  EXPECT_EQ(target.write(last, host, std::vector<uint8_t>(128, 0x11)), RdmaRx::kDiscarded);
  EXPECT_EQ(host.discards.back().id, 2080);
  EXPECT_EQ(host.writes, 0u);
  EXPECT_TRUE(host.acks.empty());
}

// A run repeated counts past the transfer's packets: discarded (E2081) before it is written
// again; the transfer completes once the packets it lacks arrive.
TEST(RdmaRun, ARunPastTheTransfersPacketsIsDiscarded) {
  Host host;
  RdmaTarget target;
  const wire::RdmaDescriptor d = put(77, 1000);  // 9 packets: 51 + 7 x 128 + 53
  wire::DataPacket p;
  const uint64_t n = rdma_data_packet(d, 2, 9, 0, p);
  const std::vector<uint8_t> run(rdma_run_bytes(1000, n, 512), 0x22);
  ASSERT_EQ(target.write(p, host, run), RdmaRx::kDelivered);  // 5 packets
  ASSERT_EQ(target.write(p, host, run), RdmaRx::kDiscarded);  // 10 > 9
  EXPECT_EQ(host.discards.back().id, 2081);
  EXPECT_TRUE(host.acks.empty());
  wire::DataPacket rest;
  const uint64_t next = n + run.size();
  const uint64_t k = rdma_data_packet(d, 2, 9, next, rest);
  const std::vector<uint8_t> tail(rdma_run_bytes(1000, next + k, 8192), 0x33);
  ASSERT_EQ(target.write(rest, host, tail), RdmaRx::kDelivered);
  ASSERT_EQ(host.acks.size(), 1u);
  EXPECT_EQ(host.acks[0].bytes, 1000u);
}

// A run after a notice is no part of any cut.
TEST(RdmaRun, ANoticeCarriesNoRun) {
  Host host;
  RdmaTarget target;
  wire::RdmaDescriptor d = put(0, 256);
  d.completion = wire::Completion::kEvent;
  d.notify_key = kKey;
  d.notify_address = kBase + 1024;
  wire::DataPacket notice;
  rdma_notice_packet(d, 2, 9, notice);
  EXPECT_EQ(target.write(notice, host, std::vector<uint8_t>(128, 1)), RdmaRx::kDiscarded);
  EXPECT_EQ(host.discards.back().id, 2080);
}

// DMA engine 1 answers a get in runs that hold what its packets would, and each response and
// its run answer the get (rdma_response_answers); a run of the wrong size does not.
TEST(RdmaRun, AGetIsAnsweredInRunsThatAnswerIt) {
  Host host;
  for (uint64_t i = 0; i < kSize; ++i) host.mem[i] = source_byte(i);
  wire::RdmaDescriptor get;
  get.op = wire::RdmaOp::kRead;
  get.remote_node = 7;
  get.local_address = 0x900000 + 5;  // the requester's: the responses are cut at its boundaries
  get.length = 3000;
  RdmaReadJob j;
  j.requester = 3;
  j.tag = 4;
  j.source = kBase + 100;
  j.source_key = kKey;
  j.dest = get.local_address;
  j.length = get.length;
  std::vector<uint8_t> got;
  std::vector<uint8_t> room(1024);
  size_t steps = 0;
  while (j.sent < j.length) {
    wire::DataPacket p;
    uint64_t m = 99;
    ASSERT_TRUE(RdmaTarget::answer_step(j, host, p, room, &m));
    p.head.src_node = 7;
    ASSERT_TRUE(rdma_response_answers(get, p, m)) << "step " << steps;
    EXPECT_FALSE(m >= 128 && rdma_response_answers(get, p, m - 1));
    got.insert(got.end(), p.data().begin(), p.data().end());
    got.insert(got.end(), room.begin(), room.begin() + static_cast<ptrdiff_t>(m));
    ++steps;
  }
  EXPECT_EQ(steps, 3u);  // 123 + 1024, 128 + 1024, 128 + 573
  ASSERT_EQ(got.size(), 3000u);
  for (uint64_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], source_byte(100 + i)) << i;
  EXPECT_TRUE(host.acks.empty());
}

}  // namespace galaxy::chip::rdma_run_test
