// libFuzzer target: data packets as a NIC's receive path takes them from a link
// (Nic::receive_packet_bytes: flits decoded, the packet checked, then delivered — an MP into
// its MPQ, a CP into its VP's counter, latch and accumulator, RDMA into registered memory). The
// NIC has CP-triggered descriptors queued, so CPs start them. Whatever the bytes: no crash, and
// the NIC's count of CPs received never exceeds the packets it took.
// Input: a sequence of packets, each a length byte (its flits: length x 25 bytes) and its bytes.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "chip/nic.h"
#include "chip/registers.h"
#include "wire/flit.h"

namespace {

class Memory final : public galaxy::chip::HostMemory {
 public:
  galaxy::Status read(uint64_t phys, std::span<uint8_t> out) override {
    if (phys + out.size() > bytes_.size())
      return galaxy::make_error(galaxy::Code::kOutOfRange, 1, "phys");
    std::copy_n(bytes_.begin() + static_cast<ptrdiff_t>(phys), out.size(), out.begin());
    return {};
  }
  galaxy::Status write(uint64_t phys, std::span<const uint8_t> in) override {
    if (phys + in.size() > bytes_.size())
      return galaxy::make_error(galaxy::Code::kOutOfRange, 1, "phys");
    std::copy(in.begin(), in.end(), bytes_.begin() + static_cast<ptrdiff_t>(phys));
    return {};
  }

 private:
  std::vector<uint8_t> bytes_ = std::vector<uint8_t>(2 * galaxy::chip::kAttPageBytes, 0);
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace galaxy::chip;
  Memory mem;
  Nic nic;
  nic.set_chip_id(1);
  nic.attach_host_memory(&mem);
  std::vector<uint64_t> frames{0, kAttPageBytes};
  const uint32_t key =
      nic.att()
          .register_region(0x1000, 2 * kAttPageBytes, kAccessWrite | kAccessRead, frames)
          .value();
  // VP 0 and 1: a forwarding CP and a local write, each waiting for CPs.
  for (uint8_t vp = 0; vp < 2; ++vp) {
    CollDescriptor cp;
    cp.dest_node = 2;
    cp.trigger = 2;
    cp.data_from = CollData::kCp;
    cp.cp_flags = kCpFlagReplace;
    (void)nic.post_coll(vp, cp);
    CollDescriptor l;
    l.kind = CollDescriptor::Kind::kLocal;
    l.trigger = 1;
    l.data_from = vp ? CollData::kCombined : CollData::kCp;
    l.op = CombineOp::kSumF64;
    l.key = key;
    l.address = 0x1000;
    l.length = 16;
    l.notify = true;
    (void)nic.post_coll(vp, l);
  }
  size_t off = 0;
  uint64_t arrived = 0;
  while (off < size) {
    const size_t n = size_t{data[off++]} * galaxy::wire::kFlitBytes;
    if (n == 0 || off + n > size) break;
    if (nic.receive_packet_bytes(std::span<const uint8_t>(data + off, n)) != NicRx::kDiscarded)
      ++arrived;
    off += n;
    while (auto w = nic.next_work()) nic.complete(w->vp, w->kind != NicWork::Kind::kRejected);
    while (nic.next_packet(DmaEngine::kWrite)) {
    }
  }
  uint64_t cps = 0;
  for (uint8_t vp = 0; vp < kNumVps; ++vp) {
    cps += nic.read_register(reg::vp_register(vp, reg::vp::kCpReceived)).value;
    while (nic.poll_mpq(vp)) {
    }
    while (nic.poll_eq(vp)) {
    }
  }
  if (cps > arrived) std::abort();
  return 0;
}
