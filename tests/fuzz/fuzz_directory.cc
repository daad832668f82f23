// libFuzzer target: the VP directory's datagrams (engine/live/directory.h), which a fabric
// daemon takes from any sender and a process takes from the network. A datagram that decodes
// re-encodes to the same bytes; whatever the bytes, nothing crashes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "engine/live/directory.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace galaxy::live;
  std::span<const uint8_t> in(data, size);
  (void)is_directory_datagram(in);
  if (auto q = decode_directory_query(in); q.ok()) {
    auto out = encode_directory_query(*q);
    if (size != out.size() || std::memcmp(out.data(), data, size) != 0) std::abort();
  }
  if (auto a = decode_directory_answer(in); a.ok()) {
    auto out = encode_directory_answer(*a);
    if (size != out.size() || std::memcmp(out.data(), data, size) != 0) std::abort();
    if (directory_status_name(a->status) == "unknown") std::abort();
  }
  return 0;
}
