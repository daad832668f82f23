// Barrier and broadcast latency on the simulated engine at up to thousands of members, offloaded
// (the NICs run the tree of CP-triggered descriptors) beside point-to-point (the hosts run the
// same tree with MPs), from the same plans libglex posts (glex/coll_plan.h). Every member is a
// host of the timing model: it pays the calibrated cost of each descriptor it posts and of each
// entry it takes, and the NIC does the rest as the chip model says; nothing here knows the
// paper's figures.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/sim/sim_fabric.h"
#include "glex/coll_plan.h"

namespace galaxy::glex {

struct CollBenchOptions {
  std::vector<uint32_t> sizes = {2, 16, 64, 256, 1024, 4096};
  uint32_t iterations = 10;  // collectives back to back per figure
  uint32_t bcast_bytes = 8;  // 1-120
  uint8_t vp = 0;            // every member's group VP (a PIO VP: descriptors on the chip)
  uint32_t degree = 0;       // 0: each form's degree from the timing model
};

struct CollRow {
  uint32_t members = 0;
  coll::Kind kind = coll::Kind::kBarrier;
  double offloaded_us = 0;  // per collective, from the first member's start to the last's end
  double p2p_us = 0;
  uint32_t offloaded_degree = 0, p2p_degree = 0;
  double links = 0;  // mean links from member 0 to the others (the timing model's input)
};

// Members are the first `size` NICs of the fabric (routes must be loaded). `progress` is called
// after each row.
Result<std::vector<CollRow>> measure_coll(sim::SimFabric& f, const CollBenchOptions& o,
                                          const std::function<void(const CollRow&)>& progress = {});

}  // namespace galaxy::glex
