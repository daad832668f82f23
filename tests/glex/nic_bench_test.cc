// The TH-1A NIC figures on the simulated engine (glex/nic_bench.h) with config/th1a-timing.json:
// the two figures the file names as calibration inputs come back, and the two it does not are
// within 10% of the paper, out of the model alone.
#include "glex/nic_bench.h"

#include <gtest/gtest.h>

#include "../engine/sim_test_util.h"

namespace galaxy {
namespace {

const std::string kTh1a = std::string(GALAXY_SOURCE_DIR) + "/config/th1a-timing.json";

TEST(NicBench, Th1aFiguresComeOutOfTheModel) {
  auto timing = sim::load_timing(kTh1a);
  ASSERT_TRUE(timing.ok()) << timing.error().to_string();
  // At most two of the four figures may be fitted; the file says which.
  ASSERT_LE(timing->calibration_inputs.size(), 2u);
  for (const auto& [param, figure] : timing->calibration_inputs)
    EXPECT_TRUE(figure == "pio_latency" || figure == "dma_latency") << param << " -> " << figure;

  auto topo = fabric::build_topology("fattree:k=4,levels=2");
  ASSERT_TRUE(topo.ok());
  auto f = sim::SimFabric::create(*topo, *timing);
  ASSERT_TRUE(f.ok());
  sim::testing::program_minimal_routes(**f);
  auto pair = glex::nearest_nic_pair((*f)->topology());
  ASSERT_TRUE(pair.ok());
  glex::NicBenchOptions o;
  o.iterations = 20;
  o.bandwidth_sizes = {256 << 10};
  o.bandwidth_total = 1 << 20;
  auto n = glex::measure_nic(**f, pair->first, pair->second, o);
  ASSERT_TRUE(n.ok()) << n.error().to_string();
  // Fitted: these come back as the paper's.
  EXPECT_NEAR(n->pio_immediate_us, 1.57, 0.01);
  EXPECT_NEAR(n->dma_put_us, 2.5, 0.01);
  // Not fitted: the model's.
  EXPECT_NEAR(n->dma_immediate_us / 1.95, 1.0, 0.10);
  EXPECT_NEAR(n->peak_gbytes_per_s / 6.34, 1.0, 0.10);
  // The mechanism's identities: a put pays one DMA read more than an immediate RDMA, and a
  // DMA-submitted descriptor the fetch (a DMA read) instead of the PIO burst.
  const double read_us = sim::to_us(timing->nic_sdq_fetch);
  EXPECT_NEAR(n->dma_put_us - n->dma_immediate_us, read_us, 0.02);
  EXPECT_GT(n->pio_put_us, n->pio_immediate_us);
}

}  // namespace
}  // namespace galaxy
