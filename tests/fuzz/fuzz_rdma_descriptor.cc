// libFuzzer target: decode_rdma_descriptor; a decoded descriptor re-encodes to the same bytes and
// its announced size matches.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "wire/rdma_descriptor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace galaxy::wire;
  std::span<const uint8_t> in(data, size);
  auto peek = peek_rdma_descriptor_size(in);
  auto d = decode_rdma_descriptor(in);
  if (!d.ok()) return 0;
  auto out = encode_rdma_descriptor(*d);
  if (!out.ok() || out->size() != size || std::memcmp(out->data(), data, size) != 0) std::abort();
  if (!peek.ok() || *peek != size || rdma_descriptor_size(*d) != size) std::abort();
  return 0;
}
