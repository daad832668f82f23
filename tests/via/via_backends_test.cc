// The VIA API (include/via.h) over every back end that can answer it: a simulated fabric served
// by a simulation server (each side a host in its own thread, as two programs would be), two
// NICs of one live host, and NICs on two live hosts. One test body, each back end a parameter.
// Every call is tested with its results and with the errors VIA 1.0 gives it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "../glex/served_fabric.h"
#include "../integration/live_fixture.h"
#include "via.h"

namespace galaxy::via::testing {
namespace {

constexpr VIP_ULONG kTimeout = 10000;
constexpr VIP_RELIABILITY_LEVEL kRd = VIP_SERVICE_RELIABLE_DELIVERY;
constexpr VIP_RELIABILITY_LEVEL kRr = VIP_SERVICE_RELIABLE_RECEPTION;
constexpr VIP_RELIABILITY_LEVEL kUnrel = VIP_SERVICE_UNRELIABLE;

// An address of `chip`'s connection manager with a discriminator.
struct Address {
  alignas(8) uint8_t bytes[VIP_NET_ADDRESS_BYTES] = {};
  VIP_NET_ADDRESS* get() { return reinterpret_cast<VIP_NET_ADDRESS*>(bytes); }
  Address(VIP_NIC_HANDLE nic, uint32_t chip, const std::string& disc) {
    std::string name = std::to_string(chip);
    EXPECT_EQ(VipNSGetHostByName(nic, name.data(), get(), 0), VIP_SUCCESS) << VipLastError();
    get()->DiscriminatorLen = static_cast<VIP_UINT16>(disc.size());
    std::memcpy(get()->HostAddress + get()->HostAddressLen, disc.data(), disc.size());
  }
};

// One side: a NIC, a tag, a VI, and a registered block of descriptor slots and data.
struct Side {
  static constexpr size_t kSlots = 64, kSlotBytes = 256, kData = 1 << 20;
  VIP_NIC_HANDLE nic = nullptr;
  VIP_PROTECTION_HANDLE tag = nullptr;
  VIP_VI_HANDLE vi = nullptr;
  VIP_CQ_HANDLE cq = nullptr;
  uint8_t* mem = nullptr;
  VIP_MEM_HANDLE mh = 0;
  int errors = 0;  // asynchronous errors reported
  VIP_ERROR_CODE first_error{}, last_error{};

  void open(const std::string& device, VIP_RELIABILITY_LEVEL level = kRd, bool with_cq = false,
            VIP_BOOLEAN rdma = VIP_TRUE) {
    ASSERT_EQ(VipOpenNic(device.c_str(), &nic), VIP_SUCCESS) << VipLastError();
    ASSERT_EQ(VipErrorCallback(nic, this, &Side::on_error), VIP_SUCCESS);
    ASSERT_EQ(VipCreatePtag(nic, &tag), VIP_SUCCESS);
    if (with_cq) {
      ASSERT_EQ(VipCreateCQ(nic, 256, &cq), VIP_SUCCESS);
    }
    ASSERT_EQ(VipCreateVi(nic, attrs(level, rdma).get(), cq, cq, &vi), VIP_SUCCESS)
        << VipLastError();
    mem = static_cast<uint8_t*>(std::aligned_alloc(4096, kSlots * kSlotBytes + kData));
    std::memset(mem, 0, kSlots * kSlotBytes + kData);
    VIP_MEM_ATTRIBUTES ma{tag, rdma, rdma};
    ASSERT_EQ(VipRegisterMem(nic, mem, kSlots * kSlotBytes + kData, &ma, &mh), VIP_SUCCESS)
        << VipLastError();
  }
  std::unique_ptr<VIP_VI_ATTRIBUTES> attrs(VIP_RELIABILITY_LEVEL level, VIP_BOOLEAN rdma) const {
    auto a = std::make_unique<VIP_VI_ATTRIBUTES>();
    a->ReliabilityLevel = level;
    a->MaxTransferSize = 1 << 20;
    a->Ptag = tag;
    a->EnableRdmaWrite = rdma;
    a->EnableRdmaRead = rdma;
    return a;
  }
  // A further VI of this NIC, of the tag open() made (no CQ); nullptr if refused.
  VIP_VI_HANDLE another_vi(VIP_RELIABILITY_LEVEL level) {
    VIP_VI_HANDLE v = nullptr;
    EXPECT_EQ(VipCreateVi(nic, attrs(level, VIP_TRUE).get(), nullptr, nullptr, &v), VIP_SUCCESS)
        << VipLastError();
    return v;
  }
  static void on_error(VIP_PVOID ctx, VIP_ERROR_DESCRIPTOR* e) {
    auto* s = static_cast<Side*>(ctx);
    if (s->errors++ == 0) s->first_error = e->ErrorCode;
    s->last_error = e->ErrorCode;
  }
  ~Side() {
    if (!nic) return;
    VIP_VI_STATE st{};
    if (vi && VipQueryVi(vi, &st, nullptr, nullptr, nullptr) == VIP_SUCCESS && st != VIP_STATE_IDLE)
      VipDisconnect(vi);
    VipCloseNic(nic);
    std::free(mem);
  }
  VIP_DESCRIPTOR* desc(size_t i) { return reinterpret_cast<VIP_DESCRIPTOR*>(mem + i * kSlotBytes); }
  uint8_t* data(size_t off = 0) { return mem + kSlots * kSlotBytes + off; }
  // A descriptor of `op` whose local segments are the given (offset, length) pieces of data().
  VIP_DESCRIPTOR* make(size_t slot, uint16_t control,
                       std::vector<std::pair<size_t, uint32_t>> pieces, uint32_t imm = 0) {
    VIP_DESCRIPTOR* d = desc(slot);
    std::memset(d, 0, kSlotBytes);
    const uint16_t op = control & VIP_CONTROL_OP_MASK;
    const int first = op == VIP_CONTROL_OP_RDMAWRITE || op == VIP_CONTROL_OP_RDMAREAD ? 1 : 0;
    d->CS.Control = control;
    d->CS.ImmediateData = imm;
    d->CS.SegCount = static_cast<VIP_UINT16>(first + pieces.size());
    auto* ds = d->DS;
    for (size_t i = 0; i < pieces.size(); ++i) {
      ds[first + i].Local.Data.Address = data(pieces[i].first);
      ds[first + i].Local.Handle = mh;
      ds[first + i].Local.Length = pieces[i].second;
      d->CS.Length += pieces[i].second;
    }
    return d;
  }
};

VIP_DESCRIPTOR* remote(VIP_DESCRIPTOR* d, uint64_t addr, VIP_MEM_HANDLE h) {
  d->DS[0].Remote.Data.AddressBits = addr;
  d->DS[0].Remote.Handle = h;
  return d;
}

class ViaBackends : public ::testing::TestWithParam<std::string> {
 public:
  static void TearDownTestSuite() {
    delete live_;
    live_ = nullptr;
  }

 protected:
  void SetUp() override {
    if (GetParam() == "sim") {
      served_ = std::make_unique<glex::testing::Served>();
      return;
    }
    if (!live_) {
      live_ = new live::testing::LiveFabricUnderTest(2);
      Status s = live_->bring_up();
      live_error_ = s.ok() ? "" : s.error().to_string();
    }
    ASSERT_TRUE(live_error_.empty()) << "bring-up: " << live_error_;
  }
  void TearDown() override { served_.reset(); }

  // Side 0 is the server, side 1 the client.
  uint32_t chip(int side) const {
    if (served_) return served_->nic(side == 0 ? 0 : 7);
    if (GetParam() == "live_same_host") return live_->nic(0, side);
    return live_->nic(side, 0);
  }
  std::string device(int side) const {
    if (served_) return fmt::format("sim:fattree:k=4,levels=2#nic={}", chip(side));
    const int host = GetParam() == "live_same_host" ? 0 : side;
    return fmt::format("{}#host={}#nic={}", live_->name(), live_->host_name(host), chip(side));
  }
  // The server runs in a thread of its own, the client here.
  void both(const std::function<void()>& server, const std::function<void()>& client) {
    std::thread t(server);
    client();
    t.join();
  }
  // Connects `c`'s VI to `s`'s, discriminator `disc`.
  void accept(Side& s, const std::string& disc, VIP_VI_ATTRIBUTES* theirs = nullptr,
              VIP_VI_HANDLE vi = nullptr) {
    Address local(s.nic, chip(0), disc);
    alignas(8) uint8_t rbuf[VIP_NET_ADDRESS_BYTES];
    auto* r = reinterpret_cast<VIP_NET_ADDRESS*>(rbuf);
    VIP_VI_ATTRIBUTES ra{};
    VIP_CONN_HANDLE conn = nullptr;
    ASSERT_EQ(VipConnectWait(s.nic, local.get(), kTimeout, r, &ra, &conn), VIP_SUCCESS)
        << VipLastError();
    EXPECT_EQ(r->HostAddressLen, VIP_HOST_ADDRESS_LEN);
    ASSERT_EQ(VipConnectAccept(conn, vi ? vi : s.vi), VIP_SUCCESS) << VipLastError();
    if (theirs) *theirs = ra;
  }
  void request(Side& c, const std::string& disc, VIP_VI_ATTRIBUTES* theirs = nullptr,
               VIP_VI_HANDLE vi = nullptr) {
    Address local(c.nic, chip(1), "client");
    Address server(c.nic, chip(0), disc);
    VIP_VI_ATTRIBUTES ra{};
    ASSERT_EQ(VipConnectRequest(vi ? vi : c.vi, local.get(), server.get(), kTimeout, &ra),
              VIP_SUCCESS)
        << VipLastError();
    if (theirs) *theirs = ra;
  }

  std::unique_ptr<glex::testing::Served> served_;
  static inline live::testing::LiveFabricUnderTest* live_ = nullptr;
  static inline std::string live_error_;
};

// A message of every kind of length, gathered from and scattered over several segments, with
// and without immediate data: the receive gets exactly the bytes, its length and its immediate.
TEST_P(ViaBackends, SendsOfEveryShapeArriveWholeAndInOrder) {
  const std::vector<uint32_t> sizes = {0, 1, 112, 113, 4096, 65537, 300000};
  both(
      [&] {
        Side s;
        s.open(device(0));
        // Receives posted before the connection, each over two segments.
        size_t off = 0;
        for (size_t i = 0; i < sizes.size(); ++i) {
          const uint32_t half = sizes[i] / 2 + 1;
          ASSERT_EQ(VipPostRecv(s.vi, s.make(i, 0, {{off, half}, {off + half, sizes[i]}}), s.mh),
                    VIP_SUCCESS);
          off += half + sizes[i] + 64;
        }
        accept(s, "shapes");
        off = 0;
        for (size_t i = 0; i < sizes.size(); ++i) {
          VIP_DESCRIPTOR* d = nullptr;
          ASSERT_EQ(VipRecvWait(s.vi, kTimeout, &d), VIP_SUCCESS) << i << " " << VipLastError();
          EXPECT_EQ(d, s.desc(i));
          EXPECT_EQ(d->CS.Status & VIP_STATUS_OP_MASK,
                    static_cast<uint32_t>(VIP_STATUS_OP_RECEIVE));
          EXPECT_EQ(d->CS.Length, sizes[i]);
          EXPECT_EQ((d->CS.Status & VIP_STATUS_IMMEDIATE) != 0, i % 2 == 1) << i;
          if (i % 2 == 1) {
            EXPECT_EQ(d->CS.ImmediateData, 1000u + i);
          }
          const uint32_t half = sizes[i] / 2 + 1;
          std::vector<uint8_t> got(s.data(off), s.data(off) + half);
          got.insert(got.end(), s.data(off + half), s.data(off + half) + sizes[i]);
          got.resize(sizes[i]);
          for (uint32_t b = 0; b < sizes[i]; ++b)
            ASSERT_EQ(got[b], static_cast<uint8_t>(b * 7 + i)) << "message " << i << " byte " << b;
          off += half + sizes[i] + 64;
        }
      },
      [&] {
        Side c;
        c.open(device(1));
        request(c, "shapes");
        size_t off = 0;
        for (size_t i = 0; i < sizes.size(); ++i) {
          for (uint32_t b = 0; b < sizes[i]; ++b) c.data(off)[b] = static_cast<uint8_t>(b * 7 + i);
          // Three segments where the message allows.
          const uint32_t a = sizes[i] / 3, b = sizes[i] / 3;
          const uint16_t imm = i % 2 ? VIP_CONTROL_IMMEDIATE : 0;
          ASSERT_EQ(
              VipPostSend(c.vi,
                          c.make(i, imm, {{off, a}, {off + a, b}, {off + a + b, sizes[i] - a - b}},
                                 static_cast<uint32_t>(1000 + i)),
                          c.mh),
              VIP_SUCCESS);
          off += sizes[i] + 64;
        }
        for (size_t i = 0; i < sizes.size(); ++i) {
          VIP_DESCRIPTOR* d = nullptr;
          ASSERT_EQ(VipSendWait(c.vi, kTimeout, &d), VIP_SUCCESS) << i << " " << VipLastError();
          EXPECT_EQ(d, c.desc(i));  // in order
          EXPECT_EQ(d->CS.Status, static_cast<uint32_t>(VIP_STATUS_DONE | VIP_STATUS_OP_SEND));
        }
        VIP_DESCRIPTOR* d = nullptr;
        EXPECT_EQ(VipSendDone(c.vi, &d), VIP_NOT_DONE);
        EXPECT_EQ(d, nullptr);
      });
}

// RDMA write with immediate data consumes a receive at the target and writes exactly its bytes
// at any alignment; RDMA read brings them back. The target's handle reaches the initiator as a
// message, as a VIA program passes it.
TEST_P(ViaBackends, RdmaWriteWithImmediateAndRdmaRead) {
  struct Where {
    uint64_t addr;
    VIP_MEM_HANDLE handle;
  };
  both(
      [&] {
        Side s;
        s.open(device(0), kRr);
        std::memset(s.data(8192), 0xEE, 8192);
        ASSERT_EQ(VipPostRecv(s.vi, s.make(0, 0, {{0, 64}}), s.mh), VIP_SUCCESS);  // the write's
        ASSERT_EQ(VipPostRecv(s.vi, s.make(2, 0, {{0, 64}}), s.mh), VIP_SUCCESS);  // the last
        accept(s, "rdma");
        Where w{reinterpret_cast<uint64_t>(s.data(8192)), s.mh};
        std::memcpy(s.data(4096), &w, sizeof w);
        ASSERT_EQ(VipPostSend(s.vi, s.make(1, 0, {{4096, sizeof w}}), s.mh), VIP_SUCCESS);
        VIP_DESCRIPTOR* d = nullptr;
        ASSERT_EQ(VipSendWait(s.vi, kTimeout, &d), VIP_SUCCESS) << VipLastError();
        ASSERT_EQ(VipRecvWait(s.vi, kTimeout, &d), VIP_SUCCESS) << VipLastError();
        EXPECT_EQ(d->CS.Status & VIP_STATUS_OP_MASK,
                  static_cast<uint32_t>(VIP_STATUS_OP_REMOTE_RDMA_WRITE));
        EXPECT_TRUE(d->CS.Status & VIP_STATUS_IMMEDIATE);
        EXPECT_EQ(d->CS.ImmediateData, 0xC0FFEEu);
        for (size_t i = 0; i < 8192; ++i) {
          const bool inside = i >= 3 && i < 3 + 5001;
          ASSERT_EQ(s.data(8192)[i], inside ? static_cast<uint8_t>(i - 3 + 1) : 0xEE) << i;
        }
        // Wait for the client's read to finish before this side goes away.
        ASSERT_EQ(VipRecvWait(s.vi, kTimeout, &d), VIP_SUCCESS) << VipLastError();
      },
      [&] {
        Side c;
        c.open(device(1), kRr);
        ASSERT_EQ(VipPostRecv(c.vi, c.make(0, 0, {{0, 64}}), c.mh), VIP_SUCCESS);
        request(c, "rdma");
        VIP_DESCRIPTOR* d = nullptr;
        ASSERT_EQ(VipRecvWait(c.vi, kTimeout, &d), VIP_SUCCESS) << VipLastError();
        Where w;
        std::memcpy(&w, c.data(0), sizeof w);
        for (size_t i = 0; i < 5001; ++i) c.data(4096)[i] = static_cast<uint8_t>(i + 1);
        // Written from two segments to target address + 3.
        auto* wr = c.make(1, VIP_CONTROL_OP_RDMAWRITE | VIP_CONTROL_IMMEDIATE,
                          {{4096, 2000}, {4096 + 2000, 3001}}, 0xC0FFEE);
        ASSERT_EQ(VipPostSend(c.vi, remote(wr, w.addr + 3, w.handle), c.mh), VIP_SUCCESS);
        ASSERT_EQ(VipSendWait(c.vi, kTimeout, &d), VIP_SUCCESS) << VipLastError();
        EXPECT_EQ(d->CS.Status & ~VIP_STATUS_OP_MASK, static_cast<uint32_t>(VIP_STATUS_DONE));
        // Read back 5,003 bytes from address + 1 (two bytes of 0xEE around).
        auto* rd = c.make(2, VIP_CONTROL_OP_RDMAREAD, {{65536, 5003}});
        ASSERT_EQ(VipPostSend(c.vi, remote(rd, w.addr + 2, w.handle), c.mh), VIP_SUCCESS);
        ASSERT_EQ(VipSendWait(c.vi, kTimeout, &d), VIP_SUCCESS) << std::hex << d->CS.Status;
        EXPECT_EQ(d->CS.Status & VIP_STATUS_OP_MASK,
                  static_cast<uint32_t>(VIP_STATUS_OP_RDMA_READ));
        EXPECT_EQ(c.data(65536)[0], 0xEE);
        for (size_t i = 0; i < 5001; ++i)
          ASSERT_EQ(c.data(65536)[1 + i], static_cast<uint8_t>(i + 1)) << i;
        EXPECT_EQ(c.data(65536)[5002], 0xEE);
        ASSERT_EQ(VipPostSend(c.vi, c.make(3, 0, {{0, 1}}), c.mh), VIP_SUCCESS);
        ASSERT_EQ(VipSendWait(c.vi, kTimeout, &d), VIP_SUCCESS) << VipLastError();
      });
}

// Protection: memory of another tag, a segment past its registration, RDMA a VI does not
// allow. Each completes with VIA's status and writes nothing; an unreliable VI stays connected.
TEST_P(ViaBackends, ProtectionErrorsCompleteWithTheirStatusAndWriteNothing) {
  struct Where {
    uint64_t addr;
    VIP_MEM_HANDLE other_tag, own_tag;
  };
  both(
      [&] {
        Side s;
        s.open(device(0), kUnrel);
        VIP_PROTECTION_HANDLE other = nullptr;
        ASSERT_EQ(VipCreatePtag(s.nic, &other), VIP_SUCCESS);
        std::vector<uint8_t> foreign(4096, 0x11);
        VIP_MEM_ATTRIBUTES ma{other, VIP_TRUE, VIP_TRUE};
        VIP_MEM_HANDLE fh = 0;
        ASSERT_EQ(VipRegisterMem(s.nic, foreign.data(), foreign.size(), &ma, &fh), VIP_SUCCESS);
        EXPECT_EQ(VipDestroyPtag(s.nic, other), VIP_INVALID_STATE);  // a region holds it
        std::memset(s.data(8192), 0x22, 4096);
        ASSERT_EQ(VipPostRecv(s.vi, s.make(0, 0, {{0, 64}}), s.mh), VIP_SUCCESS);
        accept(s, "prot");
        Where w{reinterpret_cast<uint64_t>(foreign.data()), fh, s.mh};
        std::memcpy(s.data(4096), &w, sizeof w);
        ASSERT_EQ(VipPostSend(s.vi, s.make(1, 0, {{4096, sizeof w}}), s.mh), VIP_SUCCESS);
        VIP_DESCRIPTOR* d = nullptr;
        ASSERT_EQ(VipSendWait(s.vi, kTimeout, &d), VIP_SUCCESS) << VipLastError();
        ASSERT_EQ(VipRecvWait(s.vi, kTimeout, &d), VIP_SUCCESS) << VipLastError();  // "done"
        EXPECT_TRUE(
            std::all_of(foreign.begin(), foreign.end(), [](uint8_t b) { return b == 0x11; }));
        for (size_t i = 0; i < 4096; ++i) ASSERT_EQ(s.data(8192)[i], 0x22) << i;
        ASSERT_EQ(VipDeregisterMem(s.nic, foreign.data(), fh), VIP_SUCCESS);
        EXPECT_EQ(VipDestroyPtag(s.nic, other), VIP_SUCCESS);
      },
      [&] {
        Side c;
        c.open(device(1), kUnrel);
        ASSERT_EQ(VipPostRecv(c.vi, c.make(0, 0, {{0, 64}}), c.mh), VIP_SUCCESS);
        request(c, "prot");
        VIP_DESCRIPTOR* d = nullptr;
        ASSERT_EQ(VipRecvWait(c.vi, kTimeout, &d), VIP_SUCCESS) << VipLastError();
        Where w;
        std::memcpy(&w, c.data(0), sizeof w);
        std::memset(c.data(4096), 0x33, 4096);
        // 1. Memory registered under another tag than the target VI's: the NIC refuses it.
        auto* wr = c.make(1, VIP_CONTROL_OP_RDMAWRITE, {{4096, 100}});
        ASSERT_EQ(VipPostSend(c.vi, remote(wr, w.addr, w.other_tag), c.mh), VIP_SUCCESS);
        EXPECT_EQ(VipSendWait(c.vi, kTimeout, &d), VIP_DESCRIPTOR_ERROR);
        ASSERT_NE(d, nullptr);
        EXPECT_TRUE(d->CS.Status & VIP_STATUS_RDMA_PROT_ERROR) << std::hex << d->CS.Status;
        // 2. A local segment past the registered block.
        auto* bad = c.make(2, 0, {{Side::kData - 10, 100}});
        ASSERT_EQ(VipPostSend(c.vi, bad, c.mh), VIP_SUCCESS);
        EXPECT_EQ(VipSendWait(c.vi, kTimeout, &d), VIP_DESCRIPTOR_ERROR);
        ASSERT_NE(d, nullptr);
        EXPECT_EQ(d->CS.Status & VIP_STATUS_ERROR_MASK,
                  static_cast<uint32_t>(VIP_STATUS_PROTECTION_ERROR));
        // 3. A local segment whose handle names no registration.
        auto* nohandle = c.make(3, 0, {{0, 8}});
        nohandle->DS[0].Local.Handle = c.mh ^ 0x5A5A5A5A;
        ASSERT_EQ(VipPostSend(c.vi, nohandle, c.mh), VIP_SUCCESS);
        EXPECT_EQ(VipSendWait(c.vi, kTimeout, &d), VIP_DESCRIPTOR_ERROR);
        ASSERT_NE(d, nullptr);
        EXPECT_TRUE(d->CS.Status & VIP_STATUS_PROTECTION_ERROR);
        // 4. A reserved opcode: a format error.
        auto* fmt_bad = c.make(4, VIP_CONTROL_OP_RESERVED, {{0, 8}});
        ASSERT_EQ(VipPostSend(c.vi, fmt_bad, c.mh), VIP_SUCCESS);
        EXPECT_EQ(VipSendWait(c.vi, kTimeout, &d), VIP_DESCRIPTOR_ERROR);
        ASSERT_NE(d, nullptr);
        EXPECT_TRUE(d->CS.Status & VIP_STATUS_FORMAT_ERROR);
        // The unreliable connection survives all four: a message still goes through.
        VIP_VI_STATE st{};
        ASSERT_EQ(VipQueryVi(c.vi, &st, nullptr, nullptr, nullptr), VIP_SUCCESS);
        EXPECT_EQ(st, VIP_STATE_CONNECTED);
        EXPECT_EQ(c.errors, 0);
        ASSERT_EQ(VipPostSend(c.vi, c.make(5, 0, {{0, 1}}), c.mh), VIP_SUCCESS);
        ASSERT_EQ(VipSendWait(c.vi, kTimeout, &d), VIP_SUCCESS) << VipLastError();
      });
}

// A VI that does not allow RDMA write refuses it at the initiator (the attributes it announced
// on connection), and on a reliable connection the error breaks the connection at both ends.
TEST_P(ViaBackends, RdmaAVIDoesNotAllowBreaksAReliableConnection) {
  both(
      [&] {
        Side s;
        s.open(device(0), kRd, false, VIP_FALSE);
        ASSERT_EQ(VipPostRecv(s.vi, s.make(0, 0, {{0, 64}}), s.mh), VIP_SUCCESS);
        accept(s, "noread");
        VIP_DESCRIPTOR* d = nullptr;
        // The peer's error reaches this VI: the receive posted is flushed.
        EXPECT_EQ(VipRecvWait(s.vi, kTimeout, &d), VIP_DESCRIPTOR_ERROR);
        ASSERT_NE(d, nullptr);
        EXPECT_TRUE(d->CS.Status & VIP_STATUS_DESC_FLUSHED_ERROR);
        VIP_VI_STATE st{};
        ASSERT_EQ(VipQueryVi(s.vi, &st, nullptr, nullptr, nullptr), VIP_SUCCESS);
        EXPECT_EQ(st, VIP_STATE_ERROR);
        EXPECT_EQ(s.last_error, VIP_ERROR_CONN_LOST);
        EXPECT_EQ(VipDestroyVi(s.vi), VIP_INVALID_STATE);
        ASSERT_EQ(VipDisconnect(s.vi), VIP_SUCCESS);
        EXPECT_EQ(VipDestroyVi(s.vi), VIP_SUCCESS);
        s.vi = nullptr;
      },
      [&] {
        Side c;
        c.open(device(1), kRd);
        VIP_VI_ATTRIBUTES theirs{};
        request(c, "noread", &theirs);
        EXPECT_EQ(theirs.EnableRdmaWrite, VIP_FALSE);
        EXPECT_EQ(theirs.ReliabilityLevel, kRd);
        auto* wr = c.make(1, VIP_CONTROL_OP_RDMAWRITE, {{0, 8}});
        ASSERT_EQ(VipPostSend(c.vi, remote(wr, 0x1000, 1), c.mh), VIP_SUCCESS);
        VIP_DESCRIPTOR* d = nullptr;
        EXPECT_EQ(VipSendWait(c.vi, kTimeout, &d), VIP_DESCRIPTOR_ERROR);
        ASSERT_NE(d, nullptr);
        EXPECT_TRUE(d->CS.Status & VIP_STATUS_RDMA_PROT_ERROR);
        VIP_VI_STATE st{};
        ASSERT_EQ(VipQueryVi(c.vi, &st, nullptr, nullptr, nullptr), VIP_SUCCESS);
        EXPECT_EQ(st, VIP_STATE_ERROR);
        // Later posts complete flushed.
        ASSERT_EQ(VipPostSend(c.vi, c.make(2, 0, {{0, 8}}), c.mh), VIP_SUCCESS);
        EXPECT_EQ(VipSendWait(c.vi, kTimeout, &d), VIP_DESCRIPTOR_ERROR);
        ASSERT_NE(d, nullptr);
        EXPECT_TRUE(d->CS.Status & VIP_STATUS_DESC_FLUSHED_ERROR);
      });
}

// A message for which no receive is posted: an unreliable VI drops it and reports
// VIP_ERROR_RECVQ_EMPTY, and the connection goes on; a reliable one breaks the connection at
// both ends (VIP_ERROR_RECVQ_EMPTY, then VIP_ERROR_CONN_LOST).
TEST_P(ViaBackends, AMessageWithNoReceivePosted) {
  for (VIP_RELIABILITY_LEVEL level : {kUnrel, kRd}) {
    SCOPED_TRACE(level);
    both(
        [&] {
          Side s;
          s.open(device(0), level);
          accept(s, "norecv");
          // Waiting on the empty receive queue takes in what arrives (a wait, not a loop of
          // polls: on a simulated fabric time passes while a host waits).
          VIP_DESCRIPTOR* d = nullptr;
          for (int i = 0; i < 50 && s.errors == 0; ++i)
            EXPECT_EQ(VipRecvWait(s.vi, 100, &d), VIP_TIMEOUT);
          EXPECT_EQ(s.first_error, VIP_ERROR_RECVQ_EMPTY);
          VIP_VI_STATE st{};
          ASSERT_EQ(VipQueryVi(s.vi, &st, nullptr, nullptr, nullptr), VIP_SUCCESS);
          ASSERT_EQ(VipPostRecv(s.vi, s.make(0, 0, {{0, 64}}), s.mh), VIP_SUCCESS);
          if (level == kUnrel) {
            EXPECT_EQ(st, VIP_STATE_CONNECTED);
            EXPECT_EQ(s.errors, 1);
            ASSERT_EQ(VipPostSend(s.vi, s.make(1, 0, {{128, 2}}), s.mh), VIP_SUCCESS);  // "go"
            ASSERT_EQ(VipSendWait(s.vi, kTimeout, &d), VIP_SUCCESS);
            ASSERT_EQ(VipRecvWait(s.vi, kTimeout, &d), VIP_SUCCESS) << VipLastError();
            EXPECT_EQ(s.data(0)[0], 2);
          } else {
            EXPECT_EQ(st, VIP_STATE_ERROR);
            EXPECT_EQ(s.errors, 2);
            EXPECT_EQ(s.last_error, VIP_ERROR_CONN_LOST);
            EXPECT_EQ(VipRecvWait(s.vi, kTimeout, &d), VIP_DESCRIPTOR_ERROR);
            ASSERT_NE(d, nullptr);
            EXPECT_TRUE(d->CS.Status & VIP_STATUS_DESC_FLUSHED_ERROR);
          }
        },
        [&] {
          Side c;
          c.open(device(1), level);
          ASSERT_EQ(VipPostRecv(c.vi, c.make(0, 0, {{256, 64}}), c.mh), VIP_SUCCESS);
          request(c, "norecv");
          c.data(0)[0] = 1;
          ASSERT_EQ(VipPostSend(c.vi, c.make(1, 0, {{0, 1}}), c.mh), VIP_SUCCESS);
          VIP_DESCRIPTOR* d = nullptr;
          ASSERT_EQ(VipSendWait(c.vi, kTimeout, &d), VIP_SUCCESS) << VipLastError();
          if (level == kUnrel) {
            ASSERT_EQ(VipRecvWait(c.vi, kTimeout, &d), VIP_SUCCESS) << VipLastError();  // "go"
            EXPECT_EQ(c.errors, 0);  // (the server disconnects once it has the next one)
            c.data(64)[0] = 2;
            ASSERT_EQ(VipPostSend(c.vi, c.make(2, 0, {{64, 1}}), c.mh), VIP_SUCCESS);
            ASSERT_EQ(VipSendWait(c.vi, kTimeout, &d), VIP_SUCCESS);
          } else {
            // The receive posted for a reply is flushed when the server's error arrives.
            EXPECT_EQ(VipRecvWait(c.vi, kTimeout, &d), VIP_DESCRIPTOR_ERROR);
            ASSERT_NE(d, nullptr);
            EXPECT_TRUE(d->CS.Status & VIP_STATUS_DESC_FLUSHED_ERROR);
            VIP_VI_STATE st{};
            ASSERT_EQ(VipQueryVi(c.vi, &st, nullptr, nullptr, nullptr), VIP_SUCCESS);
            EXPECT_EQ(st, VIP_STATE_ERROR);
            EXPECT_EQ(c.last_error, VIP_ERROR_CONN_LOST);
          }
        });
  }
}

// Disconnecting: the side that disconnects is idle; the other falls into the error state
// (VIP_ERROR_CONN_LOST) and the sends it had posted complete flushed, none lost, none hung.
TEST_P(ViaBackends, APeerThatDisconnectsMidStream) {
  both(
      [&] {
        Side s;
        s.open(device(0), kRd);
        ASSERT_EQ(VipPostRecv(s.vi, s.make(0, 0, {{0, 200000}}), s.mh), VIP_SUCCESS);
        accept(s, "midstream");
        VIP_DESCRIPTOR* d = nullptr;
        ASSERT_EQ(VipRecvWait(s.vi, kTimeout, &d), VIP_SUCCESS) << VipLastError();
        EXPECT_EQ(d->CS.Length, 150000u);
        ASSERT_EQ(VipDisconnect(s.vi), VIP_SUCCESS);
        VIP_VI_STATE st{};
        ASSERT_EQ(VipQueryVi(s.vi, &st, nullptr, nullptr, nullptr), VIP_SUCCESS);
        EXPECT_EQ(st, VIP_STATE_IDLE);
        EXPECT_EQ(VipDisconnect(s.vi), VIP_INVALID_STATE);
      },
      [&] {
        Side c;
        c.open(device(1), kRd);
        request(c, "midstream");
        ASSERT_EQ(VipPostSend(c.vi, c.make(0, 0, {{0, 150000}}), c.mh), VIP_SUCCESS);
        VIP_DESCRIPTOR* d = nullptr;
        ASSERT_EQ(VipSendWait(c.vi, kTimeout, &d), VIP_SUCCESS) << VipLastError();
        // A stream the server no longer takes.
        for (size_t i = 1; i < 8; ++i)
          ASSERT_EQ(VipPostSend(c.vi, c.make(i, 0, {{0, 150000}}), c.mh), VIP_SUCCESS);
        for (size_t i = 1; i < 8; ++i) {
          ASSERT_EQ(VipSendWait(c.vi, kTimeout, &d), VIP_DESCRIPTOR_ERROR) << i;
          EXPECT_EQ(d, c.desc(i));
          EXPECT_TRUE(d->CS.Status & VIP_STATUS_DESC_FLUSHED_ERROR) << i;
        }
        VIP_VI_STATE st{};
        ASSERT_EQ(VipQueryVi(c.vi, &st, nullptr, nullptr, nullptr), VIP_SUCCESS);
        EXPECT_EQ(st, VIP_STATE_ERROR);
        EXPECT_EQ(c.last_error, VIP_ERROR_CONN_LOST);
      });
}

// A send whose message the peer took, and the peer gone before this side looked: the send
// completes as done, and only what follows finds the connection lost. (A bounced send's MP
// reaches the peer before the completion of its put comes back to the sender.) A second
// connection tells the server the client has left, so that it waits without looking at the first.
TEST_P(ViaBackends, ASendThePeerTookCompletesThoughThePeerLeftFirst) {
  both(
      [&] {
        Side s;
        s.open(device(0), kRd);
        VIP_VI_HANDLE news = s.another_vi(kRd);
        ASSERT_NE(news, nullptr);
        ASSERT_EQ(VipPostRecv(s.vi, s.make(0, 0, {{0, 4096}}), s.mh), VIP_SUCCESS);
        ASSERT_EQ(VipPostRecv(news, s.make(3, 0, {{16384, 64}}), s.mh), VIP_SUCCESS);
        accept(s, "took");
        accept(s, "news", nullptr, news);
        VIP_DESCRIPTOR* d = nullptr;
        ASSERT_EQ(VipRecvWait(s.vi, kTimeout, &d), VIP_SUCCESS) << VipLastError();
        for (uint32_t i = 0; i < 4096; ++i) s.data(8192)[i] = static_cast<uint8_t>(i * 7);
        ASSERT_EQ(VipPostSend(s.vi, s.make(1, 0, {{8192, 4096}}), s.mh), VIP_SUCCESS);
        ASSERT_EQ(VipRecvWait(news, kTimeout, &d), VIP_SUCCESS) << VipLastError();  // gone
        ASSERT_EQ(VipSendWait(s.vi, kTimeout, &d), VIP_SUCCESS) << VipLastError();
        EXPECT_EQ(d, s.desc(1));
        EXPECT_EQ(d->CS.Status & VIP_STATUS_ERROR_MASK, 0u);
        // What comes after finds the connection lost.
        ASSERT_EQ(VipPostSend(s.vi, s.make(2, 0, {{8192, 64}}), s.mh), VIP_SUCCESS);
        ASSERT_EQ(VipSendWait(s.vi, kTimeout, &d), VIP_DESCRIPTOR_ERROR);
        EXPECT_TRUE(d->CS.Status & VIP_STATUS_DESC_FLUSHED_ERROR);
        VIP_VI_STATE st{};
        ASSERT_EQ(VipQueryVi(s.vi, &st, nullptr, nullptr, nullptr), VIP_SUCCESS);
        EXPECT_EQ(st, VIP_STATE_ERROR);
        EXPECT_EQ(s.last_error, VIP_ERROR_CONN_LOST);
        ASSERT_EQ(VipDisconnect(news), VIP_SUCCESS);
        ASSERT_EQ(VipDestroyVi(news), VIP_SUCCESS);
      },
      [&] {
        Side c;
        c.open(device(1), kRd);
        VIP_VI_HANDLE news = c.another_vi(kRd);
        ASSERT_NE(news, nullptr);
        ASSERT_EQ(VipPostRecv(c.vi, c.make(0, 0, {{0, 4096}}), c.mh), VIP_SUCCESS);
        request(c, "took");
        request(c, "news", nullptr, news);
        ASSERT_EQ(VipPostSend(c.vi, c.make(1, 0, {{0, 64}}), c.mh), VIP_SUCCESS);
        VIP_DESCRIPTOR* d = nullptr;
        ASSERT_EQ(VipRecvWait(c.vi, kTimeout, &d), VIP_SUCCESS) << VipLastError();
        ASSERT_EQ(d->CS.Length, 4096u);
        for (uint32_t i = 0; i < 4096; ++i)
          ASSERT_EQ(c.data(0)[i], static_cast<uint8_t>(i * 7)) << i;
        ASSERT_EQ(VipDisconnect(c.vi), VIP_SUCCESS);
        ASSERT_EQ(VipPostSend(news, c.make(2, 0, {{8192, 8}}), c.mh), VIP_SUCCESS);
        ASSERT_EQ(VipSendWait(news, kTimeout, &d), VIP_SUCCESS) << VipLastError();
        ASSERT_EQ(VipDisconnect(news), VIP_SUCCESS);
        ASSERT_EQ(VipDestroyVi(news), VIP_SUCCESS);
      });
}

// Peer-to-peer connections (VipConnectPeerRequest/Done/Wait): two VI pairs asked for at once
// in opposite orders on the two sides, as a program connecting to all its peers does; each VI
// is connected to its own peer, with the peer's attributes, and a message of each size crosses
// each pair both ways.
TEST_P(ViaBackends, PeerConnectionsMeetWhicheverSideAsksFirst) {
  // Each pair carries 8 B, 4 KiB and 100 KB each way; the bytes say which pair and side. Every
  // receive is posted before the connection is asked for, as VIA requires.
  const uint32_t sizes[] = {8, 4096, 100000};
  auto recv_at = [](int pair, int k) { return static_cast<size_t>(pair * 3 + k) * 100000; };
  auto side = [&](int me) {
    Side s;
    s.open(device(me), kRr);
    VIP_VI_HANDLE vis[2] = {s.vi, s.another_vi(kRr)};
    ASSERT_NE(vis[1], nullptr);
    const int other = 1 - me;
    for (int pair = 0; pair < 2; ++pair)
      for (int k = 0; k < 3; ++k)
        ASSERT_EQ(
            VipPostRecv(vis[pair], s.make(pair * 3 + k, 0, {{recv_at(pair, k), sizes[k]}}), s.mh),
            VIP_SUCCESS);
    for (int k = 0; k < 2; ++k) {
      const int pair = me == 0 ? k : 1 - k;  // side 1 asks in the other order
      Address local(s.nic, chip(me), fmt::format("pair{}-side{}", pair, me));
      Address remote(s.nic, chip(other), fmt::format("pair{}-side{}", pair, other));
      ASSERT_EQ(VipConnectPeerRequest(vis[pair], local.get(), remote.get(), kTimeout), VIP_SUCCESS)
          << VipLastError();
      VIP_VI_STATE st{};
      ASSERT_EQ(VipQueryVi(vis[pair], &st, nullptr, nullptr, nullptr), VIP_SUCCESS);
      EXPECT_TRUE(st == VIP_STATE_CONNECT_PENDING || st == VIP_STATE_CONNECTED) << st;
      // A second request on a VI that already asked is refused.
      EXPECT_EQ(VipConnectPeerRequest(vis[pair], local.get(), remote.get(), kTimeout),
                VIP_INVALID_STATE);
    }
    for (int pair = 0; pair < 2; ++pair) {
      VIP_VI_ATTRIBUTES ra{};
      ASSERT_EQ(VipConnectPeerWait(vis[pair], &ra), VIP_SUCCESS) << VipLastError();
      EXPECT_EQ(ra.ReliabilityLevel, kRr);
      EXPECT_EQ(ra.MaxTransferSize, 1u << 20);
      EXPECT_EQ(VipConnectPeerDone(vis[pair], &ra), VIP_SUCCESS);  // made stays made
    }
    for (int pair = 0; pair < 2; ++pair) {
      for (int k = 0; k < 3; ++k) {
        const uint32_t n = sizes[k];
        uint8_t* out = s.data(700000 + static_cast<size_t>(k) * 100000);
        for (uint32_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(i + pair * 31 + me * 7);
        ASSERT_EQ(
            VipPostSend(vis[pair], s.make(10 + pair * 3 + k, 0, {{700000 + k * 100000, n}}), s.mh),
            VIP_SUCCESS);
      }
      for (int k = 0; k < 3; ++k) {
        VIP_DESCRIPTOR* d = nullptr;
        ASSERT_EQ(VipRecvWait(vis[pair], kTimeout, &d), VIP_SUCCESS) << VipLastError();
        ASSERT_EQ(d, s.desc(pair * 3 + k));
        ASSERT_EQ(d->CS.Length, sizes[k]);
        const uint8_t* in = s.data(recv_at(pair, k));
        for (uint32_t i = 0; i < sizes[k]; ++i)
          ASSERT_EQ(in[i], static_cast<uint8_t>(i + pair * 31 + other * 7))
              << "pair " << pair << " size " << sizes[k] << " byte " << i;
        ASSERT_EQ(VipSendWait(vis[pair], kTimeout, &d), VIP_SUCCESS) << VipLastError();
      }
    }
    // Side 0 leaves last: it waits for side 1's disconnect, which flushes its receive.
    for (int pair = 0; pair < 2; ++pair) {
      if (me == 0) {
        VIP_DESCRIPTOR* d = nullptr;
        ASSERT_EQ(VipPostRecv(vis[pair], s.make(20, 0, {{0, 64}}), s.mh), VIP_SUCCESS);
        EXPECT_EQ(VipRecvWait(vis[pair], kTimeout, &d), VIP_DESCRIPTOR_ERROR);
      }
      VipDisconnect(vis[pair]);
    }
    ASSERT_EQ(VipDestroyVi(vis[1]), VIP_SUCCESS);
  };
  both([&] { side(0); }, [&] { side(1); });
}

// Peer requests that cannot meet: attributes that differ (both sides told, with the spec's
// code), nobody asking back (VIP_TIMEOUT, the VI idle again), a request withdrawn by
// VipDisconnect, and bad arguments named.
TEST_P(ViaBackends, PeerRequestsThatDoNotMeet) {
  // Side `me` asks with its own level: the mismatch is found when it asks (the peer's request
  // was here first) or while it waits.
  auto mismatch = [&](Side& s, int me, VIP_RELIABILITY_LEVEL level) {
    s.open(device(me), level);
    Address local(s.nic, chip(me), fmt::format("mismatch-{}", me));
    Address remote(s.nic, chip(1 - me), fmt::format("mismatch-{}", 1 - me));
    VIP_VI_ATTRIBUTES ra{};
    VIP_RETURN r = VipConnectPeerRequest(s.vi, local.get(), remote.get(), kTimeout);
    if (r == VIP_SUCCESS) r = VipConnectPeerWait(s.vi, &ra);
    EXPECT_EQ(r, VIP_INVALID_RELIABILITY_LEVEL) << VipLastError();
    EXPECT_NE(std::string(VipLastError()).find("ReliabilityLevel"), std::string::npos);
  };
  both(
      [&] {
        Side s;
        mismatch(s, 0, kRd);
        Address local(s.nic, chip(0), "mismatch-0"), remote(s.nic, chip(1), "mismatch-1");
        VIP_VI_ATTRIBUTES ra{};
        VIP_VI_STATE st{};
        ASSERT_EQ(VipQueryVi(s.vi, &st, nullptr, nullptr, nullptr), VIP_SUCCESS);
        EXPECT_EQ(st, VIP_STATE_IDLE);
        EXPECT_EQ(VipConnectPeerDone(s.vi, &ra), VIP_INVALID_STATE);
        // Nobody asks back.
        Address alone(s.nic, chip(1), "nobody");
        ASSERT_EQ(VipConnectPeerRequest(s.vi, local.get(), alone.get(), 300), VIP_SUCCESS);
        EXPECT_EQ(VipConnectPeerWait(s.vi, &ra), VIP_TIMEOUT);
        EXPECT_NE(std::string(VipLastError()).find("300 ms"), std::string::npos) << VipLastError();
        ASSERT_EQ(VipQueryVi(s.vi, &st, nullptr, nullptr, nullptr), VIP_SUCCESS);
        EXPECT_EQ(st, VIP_STATE_IDLE);
        // Withdrawn.
        ASSERT_EQ(VipConnectPeerRequest(s.vi, local.get(), alone.get(), kTimeout), VIP_SUCCESS);
        EXPECT_EQ(VipConnectPeerDone(s.vi, &ra), VIP_NOT_DONE);
        ASSERT_EQ(VipDisconnect(s.vi), VIP_SUCCESS);
        ASSERT_EQ(VipQueryVi(s.vi, &st, nullptr, nullptr, nullptr), VIP_SUCCESS);
        EXPECT_EQ(st, VIP_STATE_IDLE);
        // Bad arguments.
        EXPECT_EQ(VipConnectPeerRequest(nullptr, local.get(), remote.get(), kTimeout),
                  VIP_INVALID_PARAMETER);
        EXPECT_EQ(VipConnectPeerRequest(s.vi, local.get(), remote.get(), 0), VIP_INVALID_PARAMETER);
        EXPECT_NE(std::string(VipLastError()).find("Timeout = 0"), std::string::npos);
        remote.get()->HostAddressLen = 3;
        EXPECT_EQ(VipConnectPeerRequest(s.vi, local.get(), remote.get(), kTimeout),
                  VIP_INVALID_PARAMETER);
        EXPECT_EQ(VipConnectPeerDone(nullptr, &ra), VIP_INVALID_PARAMETER);
        EXPECT_EQ(VipConnectPeerWait(nullptr, &ra), VIP_INVALID_PARAMETER);
      },
      [&] {
        Side c;
        mismatch(c, 1, kRr);
      });
}

// Connections refused: a server that rejects, attributes that do not match (the accept fails
// and sends nothing; the server rejects after), nobody waiting for the discriminator.
TEST_P(ViaBackends, ConnectionsRejectedMismatchedAndUnanswered) {
  both(
      [&] {
        Side s;
        s.open(device(0), kRd);
        Address local(s.nic, chip(0), "reject");
        VIP_CONN_HANDLE conn = nullptr;
        ASSERT_EQ(VipConnectWait(s.nic, local.get(), kTimeout, nullptr, nullptr, &conn),
                  VIP_SUCCESS)
            << VipLastError();
        ASSERT_EQ(VipConnectReject(conn), VIP_SUCCESS);
        Address other(s.nic, chip(0), "level");
        VIP_VI_ATTRIBUTES theirs{};
        ASSERT_EQ(VipConnectWait(s.nic, other.get(), kTimeout, nullptr, &theirs, &conn),
                  VIP_SUCCESS);
        EXPECT_EQ(theirs.ReliabilityLevel, kRr);
        EXPECT_EQ(VipConnectAccept(conn, s.vi), VIP_INVALID_RELIABILITY_LEVEL);
        // The server may change its VI and accept again: the level now agrees, the size not.
        auto rr = s.attrs(kRr, VIP_TRUE);
        rr->MaxTransferSize = 4096;
        ASSERT_EQ(VipSetViAttributes(s.vi, rr.get()), VIP_SUCCESS);
        EXPECT_EQ(VipConnectAccept(conn, s.vi), VIP_INVALID_MTU);
        ASSERT_EQ(VipConnectReject(conn), VIP_SUCCESS);
        Address none(s.nic, chip(0), "nobody");
        EXPECT_EQ(VipConnectWait(s.nic, none.get(), 300, nullptr, nullptr, &conn), VIP_TIMEOUT);
      },
      [&] {
        Side c;
        c.open(device(1), kRd);
        Address server(c.nic, chip(0), "reject");
        EXPECT_EQ(VipConnectRequest(c.vi, nullptr, server.get(), kTimeout, nullptr), VIP_REJECT);
        VIP_VI_STATE st{};
        ASSERT_EQ(VipQueryVi(c.vi, &st, nullptr, nullptr, nullptr), VIP_SUCCESS);
        EXPECT_EQ(st, VIP_STATE_IDLE);
        auto rr = c.attrs(kRr, VIP_TRUE);
        ASSERT_EQ(VipSetViAttributes(c.vi, rr.get()), VIP_SUCCESS);
        Address level(c.nic, chip(0), "level");
        EXPECT_EQ(VipConnectRequest(c.vi, nullptr, level.get(), kTimeout, nullptr), VIP_REJECT);
        Address nobody(c.nic, chip(0), "elsewhere");
        EXPECT_EQ(VipConnectRequest(c.vi, nullptr, nobody.get(), 200, nullptr), VIP_TIMEOUT);
        EXPECT_EQ(VipConnectRequest(c.vi, nullptr, nobody.get(), 0, nullptr),
                  VIP_INVALID_PARAMETER);
      });
}

// Completion queues: completions of both queues of a VI, in order, naming the VI and queue; the
// descriptor is then taken with Done. A send on an idle VI completes flushed; a receive waits.
TEST_P(ViaBackends, CompletionQueuesAndPostingBeforeAConnection) {
  both(
      [&] {
        Side s;
        s.open(device(0), kRd, true);
        VIP_DESCRIPTOR* d = nullptr;
        // Before a connection: the send completes flushed, the receive stays posted.
        ASSERT_EQ(VipPostSend(s.vi, s.make(10, 0, {{0, 8}}), s.mh), VIP_SUCCESS);
        ASSERT_EQ(VipPostRecv(s.vi, s.make(0, 0, {{0, 64}}), s.mh), VIP_SUCCESS);
        VIP_VI_HANDLE vi = nullptr;
        VIP_BOOLEAN recv = VIP_TRUE;
        ASSERT_EQ(VipCQWait(s.cq, kTimeout, &vi, &recv), VIP_SUCCESS);
        EXPECT_EQ(vi, s.vi);
        EXPECT_EQ(recv, VIP_FALSE);
        EXPECT_EQ(VipSendDone(s.vi, &d), VIP_DESCRIPTOR_ERROR);
        ASSERT_NE(d, nullptr);
        EXPECT_TRUE(d->CS.Status & VIP_STATUS_DESC_FLUSHED_ERROR);
        EXPECT_EQ(VipCQDone(s.cq, &vi, &recv), VIP_NOT_DONE);
        EXPECT_EQ(VipCQWait(s.cq, 20, &vi, &recv), VIP_TIMEOUT);
        EXPECT_EQ(VipRecvDone(s.vi, &d), VIP_NOT_DONE);
        EXPECT_EQ(VipDestroyCQ(s.cq), VIP_INVALID_STATE);
        // Two completions queued: the CQ is not resized below them.
        ASSERT_EQ(VipPostSend(s.vi, s.make(11, 0, {{0, 8}}), s.mh), VIP_SUCCESS);
        ASSERT_EQ(VipPostSend(s.vi, s.make(12, 0, {{0, 8}}), s.mh), VIP_SUCCESS);
        EXPECT_EQ(VipResizeCQ(s.cq, 1), VIP_INVALID_PARAMETER);
        EXPECT_NE(std::string(VipLastError()).find("below the 2 entries"), std::string::npos)
            << VipLastError();
        EXPECT_EQ(VipResizeCQ(s.cq, 0), VIP_INVALID_PARAMETER);
        EXPECT_EQ(VipResizeCQ(nullptr, 8), VIP_INVALID_PARAMETER);
        ASSERT_EQ(VipResizeCQ(s.cq, 2), VIP_SUCCESS);
        for (size_t i = 11; i <= 12; ++i) {
          ASSERT_EQ(VipCQDone(s.cq, &vi, &recv), VIP_SUCCESS);
          EXPECT_EQ(recv, VIP_FALSE);
          EXPECT_EQ(VipSendDone(s.vi, &d), VIP_DESCRIPTOR_ERROR);
          EXPECT_EQ(d, s.desc(i));
        }
        ASSERT_EQ(VipResizeCQ(s.cq, 1024), VIP_SUCCESS);
        accept(s, "cq");
        auto again = s.attrs(kRd, VIP_TRUE);
        EXPECT_EQ(VipSetViAttributes(s.vi, again.get()), VIP_INVALID_STATE);  // connected
        ASSERT_EQ(VipCQWait(s.cq, kTimeout, &vi, &recv), VIP_SUCCESS);
        EXPECT_EQ(recv, VIP_TRUE);
        ASSERT_EQ(VipRecvDone(s.vi, &d), VIP_SUCCESS);
        EXPECT_EQ(d, s.desc(0));
        ASSERT_EQ(VipPostSend(s.vi, s.make(1, 0, {{0, 8}}), s.mh), VIP_SUCCESS);
        ASSERT_EQ(VipCQWait(s.cq, kTimeout, &vi, &recv), VIP_SUCCESS);
        EXPECT_EQ(recv, VIP_FALSE);
        ASSERT_EQ(VipSendDone(s.vi, &d), VIP_SUCCESS);
        EXPECT_EQ(d, s.desc(1));
      },
      [&] {
        Side c;
        c.open(device(1), kRd);
        ASSERT_EQ(VipPostRecv(c.vi, c.make(0, 0, {{0, 64}}), c.mh), VIP_SUCCESS);
        request(c, "cq");
        ASSERT_EQ(VipPostSend(c.vi, c.make(1, 0, {{64, 8}}), c.mh), VIP_SUCCESS);
        VIP_DESCRIPTOR* d = nullptr;
        ASSERT_EQ(VipSendWait(c.vi, kTimeout, &d), VIP_SUCCESS);
        ASSERT_EQ(VipRecvWait(c.vi, kTimeout, &d), VIP_SUCCESS);
      });
}

// What a notification handler was called with, and a wait for the next call.
struct Seen {
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  VIP_NIC_HANDLE nic = nullptr;
  VIP_VI_HANDLE vi = nullptr;
  VIP_DESCRIPTOR* d = nullptr;
  VIP_BOOLEAN recv = VIP_FALSE;
  void record(VIP_NIC_HANDLE n, VIP_VI_HANDLE v, VIP_DESCRIPTOR* desc, VIP_BOOLEAN r) {
    std::lock_guard lock(mu);
    nic = n;
    vi = v;
    d = desc;
    recv = r;
    ++calls;
    cv.notify_all();
  }
  static void on_descriptor(VIP_PVOID ctx, VIP_NIC_HANDLE nic, VIP_VI_HANDLE vi,
                            VIP_DESCRIPTOR* d) {
    static_cast<Seen*>(ctx)->record(nic, vi, d, VIP_FALSE);
  }
  static void on_entry(VIP_PVOID ctx, VIP_NIC_HANDLE nic, VIP_VI_HANDLE vi, VIP_BOOLEAN recv) {
    static_cast<Seen*>(ctx)->record(nic, vi, nullptr, recv);
  }
  bool wait_calls(int n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(60), [&] { return calls >= n; });
  }
};

// VipCQNotify, VipRecvNotify and VipSendNotify: each handler is called once, on the provider's
// thread, with the completion taken off its queue; a notification never answered is dropped
// when the NIC closes.
TEST_P(ViaBackends, NotificationsCallTheirHandlerOncePerCompletion) {
  Seen never;
  both(
      [&] {
        {
          Side s;
          s.open(device(0), kRd, true);
          ASSERT_EQ(VipPostRecv(s.vi, s.make(0, 0, {{0, 64}}), s.mh), VIP_SUCCESS);
          ASSERT_EQ(VipPostRecv(s.vi, s.make(1, 0, {{64, 64}}), s.mh), VIP_SUCCESS);
          accept(s, "notify");
          VIP_DESCRIPTOR* d = nullptr;
          VIP_VI_HANDLE vi = nullptr;
          VIP_BOOLEAN recv = VIP_FALSE;
          // The CQ's entry of the first message.
          Seen cq;
          ASSERT_EQ(VipCQNotify(s.cq, &cq, &Seen::on_entry), VIP_SUCCESS);
          ASSERT_TRUE(cq.wait_calls(1));
          EXPECT_EQ(cq.nic, s.nic);
          EXPECT_EQ(cq.vi, s.vi);
          EXPECT_EQ(cq.recv, VIP_TRUE);
          ASSERT_EQ(VipRecvDone(s.vi, &d), VIP_SUCCESS);
          EXPECT_EQ(d, s.desc(0));
          // The second receive itself, taken off the queue.
          Seen rq;
          ASSERT_EQ(VipRecvNotify(s.vi, &rq, &Seen::on_descriptor), VIP_SUCCESS);
          ASSERT_TRUE(rq.wait_calls(1));
          EXPECT_EQ(rq.vi, s.vi);
          ASSERT_EQ(rq.d, s.desc(1));
          EXPECT_EQ(rq.d->CS.Length, 64u);
          EXPECT_EQ(s.data(64)[63], 63);
          EXPECT_EQ(VipRecvDone(s.vi, &d), VIP_NOT_DONE);
          ASSERT_EQ(VipCQDone(s.cq, &vi, &recv), VIP_SUCCESS);  // its CQ entry stays
          // A send.
          Seen sq;
          ASSERT_EQ(VipPostSend(s.vi, s.make(5, 0, {{0, 8}}), s.mh), VIP_SUCCESS);
          ASSERT_EQ(VipSendNotify(s.vi, &sq, &Seen::on_descriptor), VIP_SUCCESS);
          ASSERT_TRUE(sq.wait_calls(1));
          ASSERT_EQ(sq.d, s.desc(5));
          EXPECT_EQ(sq.d->CS.Status & VIP_STATUS_ERROR_MASK, 0u);
          EXPECT_EQ(VipSendDone(s.vi, &d), VIP_NOT_DONE);
          // Bad arguments.
          EXPECT_EQ(VipSendNotify(nullptr, &sq, &Seen::on_descriptor), VIP_INVALID_PARAMETER);
          EXPECT_EQ(VipRecvNotify(s.vi, &sq, nullptr), VIP_INVALID_PARAMETER);
          EXPECT_EQ(VipCQNotify(nullptr, &sq, &Seen::on_entry), VIP_INVALID_PARAMETER);
          EXPECT_NE(std::string(VipLastError()).find("E6599"), std::string::npos);
          // Never answered: no receive is posted, and the NIC closes.
          ASSERT_EQ(VipRecvNotify(s.vi, &never, &Seen::on_descriptor), VIP_SUCCESS);
          EXPECT_EQ(cq.calls + rq.calls + sq.calls, 3);
        }
        EXPECT_EQ(never.calls, 0);
      },
      [&] {
        Side c;
        c.open(device(1), kRd);
        ASSERT_EQ(VipPostRecv(c.vi, c.make(0, 0, {{0, 64}}), c.mh), VIP_SUCCESS);
        request(c, "notify");
        for (uint32_t i = 0; i < 64; ++i) c.data(128)[i] = static_cast<uint8_t>(i);
        VIP_DESCRIPTOR* d = nullptr;
        for (size_t k = 1; k <= 2; ++k) {
          ASSERT_EQ(VipPostSend(c.vi, c.make(k, 0, {{128, 64}}), c.mh), VIP_SUCCESS);
          ASSERT_EQ(VipSendWait(c.vi, kTimeout, &d), VIP_SUCCESS) << VipLastError();
        }
        ASSERT_EQ(VipRecvWait(c.vi, kTimeout, &d), VIP_SUCCESS) << VipLastError();
        EXPECT_EQ(d->CS.Length, 8u);
      });
}

// A handler may close its own NIC (the notifier thread then ends without touching it).
TEST_P(ViaBackends, ANotificationHandlerMayCloseItsNic) {
  Side s;
  s.open(device(0), kRd);
  struct Closer {
    Seen seen;
    static void close(VIP_PVOID ctx, VIP_NIC_HANDLE nic, VIP_VI_HANDLE vi, VIP_DESCRIPTOR* d) {
      EXPECT_EQ(VipCloseNic(nic), VIP_SUCCESS);
      static_cast<Closer*>(ctx)->seen.record(nic, vi, d, VIP_FALSE);
    }
  } closer;
  // A send on a VI not connected completes flushed at once.
  ASSERT_EQ(VipPostSend(s.vi, s.make(0, 0, {{0, 8}}), s.mh), VIP_SUCCESS);
  ASSERT_EQ(VipSendNotify(s.vi, &closer, &Closer::close), VIP_SUCCESS);
  ASSERT_TRUE(closer.seen.wait_calls(1));
  EXPECT_EQ(closer.seen.d, s.desc(0));
  s.nic = nullptr;  // closed by the handler
  std::free(s.mem);
  s.mem = nullptr;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the notifier thread ends
}

// Calls refused with the error VIA names, and nothing changed.
TEST_P(ViaBackends, BadArgumentsAreRefusedByName) {
  Side s;
  s.open(device(0), kRd, true);
  VIP_VI_HANDLE vi = nullptr;
  auto a = s.attrs(3, VIP_TRUE);
  EXPECT_EQ(VipCreateVi(s.nic, a.get(), nullptr, nullptr, &vi), VIP_INVALID_RELIABILITY_LEVEL);
  EXPECT_NE(std::string(VipLastError()).find("ReliabilityLevel = 3"), std::string::npos);
  a = s.attrs(kRd, VIP_TRUE);
  a->MaxTransferSize = 0;
  EXPECT_EQ(VipCreateVi(s.nic, a.get(), nullptr, nullptr, &vi), VIP_INVALID_MTU);
  a = s.attrs(kRd, VIP_TRUE);
  a->Ptag = reinterpret_cast<VIP_PROTECTION_HANDLE>(&s);
  EXPECT_EQ(VipCreateVi(s.nic, a.get(), nullptr, nullptr, &vi), VIP_INVALID_PTAG);
  EXPECT_EQ(VipCreateVi(s.nic, nullptr, nullptr, nullptr, &vi), VIP_INVALID_PARAMETER);
  VIP_MEM_ATTRIBUTES ma{nullptr, VIP_FALSE, VIP_FALSE};
  VIP_MEM_HANDLE mh = 0;
  EXPECT_EQ(VipRegisterMem(s.nic, s.data(), 64, &ma, &mh), VIP_INVALID_PTAG);
  ma.Ptag = s.tag;
  EXPECT_EQ(VipRegisterMem(s.nic, s.data(), 0, &ma, &mh), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipDeregisterMem(s.nic, s.data(), s.mh), VIP_INVALID_PARAMETER);  // wrong address
  VIP_MEM_ATTRIBUTES got{};
  ASSERT_EQ(VipQueryMem(s.nic, s.mem, s.mh, &got), VIP_SUCCESS);
  EXPECT_EQ(got.Ptag, s.tag);
  EXPECT_EQ(VipDestroyPtag(s.nic, s.tag), VIP_INVALID_STATE);
  // Descriptors: misaligned, outside the handle's memory, NULL.
  auto* odd = reinterpret_cast<VIP_DESCRIPTOR*>(s.mem + 8);
  EXPECT_EQ(VipPostRecv(s.vi, odd, s.mh), VIP_INVALID_PARAMETER);
  VIP_DESCRIPTOR outside{};
  EXPECT_EQ(VipPostRecv(s.vi, &outside, s.mh), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipPostSend(s.vi, nullptr, s.mh), VIP_INVALID_PARAMETER);
  VIP_BOOLEAN send_empty = VIP_FALSE, recv_empty = VIP_FALSE;
  ASSERT_EQ(VipQueryVi(s.vi, nullptr, nullptr, &send_empty, &recv_empty), VIP_SUCCESS);
  EXPECT_TRUE(send_empty && recv_empty);
  VIP_DESCRIPTOR* d = nullptr;
  EXPECT_EQ(VipRecvDone(s.vi, &d), VIP_NOT_DONE);
  EXPECT_EQ(VipRecvWait(s.vi, 20, &d), VIP_TIMEOUT);
  EXPECT_EQ(VipCreateCQ(s.nic, 0, &s.cq), VIP_INVALID_PARAMETER);
  // Name service: a hosts file, a name it lacks, a bad line.
  const std::string hosts = fmt::format("/tmp/galaxy-via-hosts-{}", getpid());
  { std::ofstream(hosts) << "# test hosts\nserver " << chip(0) << "\n"; }
  ASSERT_EQ(VipNSInit(s.nic, const_cast<char*>(hosts.c_str())), VIP_SUCCESS) << VipLastError();
  Address by_number(s.nic, chip(0), "");
  alignas(8) uint8_t buf[VIP_NET_ADDRESS_BYTES];
  auto* by_name = reinterpret_cast<VIP_NET_ADDRESS*>(buf);
  char server[] = "server", nobody[] = "nobody";
  ASSERT_EQ(VipNSGetHostByName(s.nic, server, by_name, 0), VIP_SUCCESS);
  EXPECT_EQ(std::memcmp(by_name->HostAddress, by_number.get()->HostAddress, VIP_HOST_ADDRESS_LEN),
            0);
  EXPECT_EQ(VipNSGetHostByName(s.nic, nobody, by_name, 0), VIP_ERROR_NAMESERVICE);
  EXPECT_EQ(VipNSGetHostByName(s.nic, server, by_name, 1), VIP_ERROR_NAMESERVICE);
  // Without a hosts file, the fabric's own names: the NIC's name and its index; a router is not
  // a host.
  ASSERT_EQ(VipNSInit(s.nic, nullptr), VIP_SUCCESS);
  const fabric::Topology& t = served_ ? served_->fabric->topology() : live_->fabric().topology;
  for (std::string name : {t.name(chip(0)), fmt::format("nic:{}", t.nic_index(chip(0)))}) {
    std::memset(buf, 0, sizeof buf);
    ASSERT_EQ(VipNSGetHostByName(s.nic, name.data(), by_name, 0), VIP_SUCCESS)
        << name << ": " << VipLastError();
    EXPECT_EQ(std::memcmp(by_name->HostAddress, by_number.get()->HostAddress, VIP_HOST_ADDRESS_LEN),
              0)
        << name;
  }
  // And back, an address to its name: the fabric's (no hosts file now), then the file's.
  char name_got[64];
  VIP_ULONG name_len = sizeof name_got;
  ASSERT_EQ(VipNSGetHostByAddr(s.nic, by_number.get(), name_got, &name_len), VIP_SUCCESS)
      << VipLastError();
  EXPECT_EQ(std::string(name_got), t.name(chip(0)));
  EXPECT_EQ(name_len, t.name(chip(0)).size() + 1);
  name_len = 2;
  EXPECT_EQ(VipNSGetHostByAddr(s.nic, by_number.get(), name_got, &name_len), VIP_INVALID_PARAMETER);
  EXPECT_EQ(name_len, t.name(chip(0)).size() + 1);
  ASSERT_EQ(VipNSInit(s.nic, const_cast<char*>(hosts.c_str())), VIP_SUCCESS) << VipLastError();
  name_len = sizeof name_got;
  ASSERT_EQ(VipNSGetHostByAddr(s.nic, by_number.get(), name_got, &name_len), VIP_SUCCESS);
  EXPECT_STREQ(name_got, "server");
  ASSERT_EQ(VipNSInit(s.nic, nullptr), VIP_SUCCESS);
  uint32_t r = 0;
  while (t.is_nic(r)) ++r;
  std::string router = t.name(r);
  EXPECT_EQ(VipNSGetHostByName(s.nic, router.data(), by_name, 0), VIP_ERROR_NAMESERVICE);
  EXPECT_NE(std::string(VipLastError()).find("not a NIC"), std::string::npos) << VipLastError();
  { std::ofstream(hosts) << "server 12 extra\n"; }
  EXPECT_EQ(VipNSInit(s.nic, const_cast<char*>(hosts.c_str())), VIP_ERROR_NAMESERVICE);
  EXPECT_NE(std::string(VipLastError()).find("line 1"), std::string::npos);
  std::remove(hosts.c_str());
  EXPECT_EQ(VipOpenNic("galaxy#nic=zz", &s.nic), VIP_INVALID_PARAMETER);
  VIP_NIC_ATTRIBUTES na{};
  ASSERT_EQ(VipQueryNic(s.nic, &na), VIP_SUCCESS);
  EXPECT_EQ(na.ReliabilityLevelSupport, kUnrel | kRd | kRr);
  EXPECT_EQ(na.NicAddressLen, VIP_HOST_ADDRESS_LEN);
  EXPECT_STREQ(VipErrorString(VIP_INVALID_PTAG), "VIP_INVALID_PTAG");
}

INSTANTIATE_TEST_SUITE_P(Engines, ViaBackends,
                         ::testing::Values("sim", "live_same_host", "live_two_hosts"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace galaxy::via::testing
