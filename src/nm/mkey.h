// Management keys on a Galaxy fabric (docs/system.md 3 "Protection"; IBA 14.2.4): the server places
// a key in every chip it manages (M_KEY), the protection level (CHIP_CTRL [1:0]: 1 writes need
// the key, 2 reads too) and the lease (MKEY_LEASE, seconds): a request without the key is refused
// and counted by the chip, and a chip whose key holder says nothing for a lease after a refusal
// drops its protection, so that a successor server can take it over. The requester stamps every
// request with the key of the chip it goes to; one key for all chips, or a key per chip derived
// from the policy's key and the chip id (a stolen chip key then opens one chip, not the fabric).
#pragma once

#include <cstdint>
#include <functional>

#include "base/status.h"
#include "nm/mgmt_port.h"

namespace galaxy::nm {

class Requester;
struct FabricMap;

struct MKeyPolicy {
  uint64_t key = 0;       // 0: no key placed (protection left as it is)
  bool per_chip = false;  // each chip its own key, derived from `key` and its chip id
  unsigned level = 2;     // 1: writes need the key; 2: reads and writes
  uint16_t lease_s = 60;  // 0: protection never ends (a dead server's chips stay locked)
  bool enabled() const { return key != 0; }
};

// The key a request to chip `chip_id` carries under `p` (0 when no key is placed).
uint64_t mkey_of(const MKeyPolicy& p, wire::ChipId chip_id);

struct MKeyPlacement {
  uint32_t chips = 0;   // chips that now hold the key
  uint32_t failed = 0;  // chips that refused or did not answer (their first error in `first`)
  uint64_t requests = 0;
  Picoseconds elapsed = 0;
  Status first;
};

// Places `p` on every remote chip of `map` that `include` accepts (all when empty): key and
// lease, then the level (CHIP_CTRL read and written back with only [1:0] changed). The requester
// must already stamp `p`'s keys (Requester::set_m_key), so a chip that holds the same key takes
// it again, and one that holds another refuses (and counts the violation).
Result<MKeyPlacement> place_mkeys(Requester& req, const FabricMap& map, const MKeyPolicy& p,
                                  const std::function<bool(uint32_t node)>& include = {});

}  // namespace galaxy::nm
