#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/sim/event_queue.h"
#include "engine/sim/ladder_queue.h"
#include "engine/sim/rng.h"
#include "engine/sim/simulator.h"
#include "sim_test_util.h"

namespace galaxy::sim {
namespace {

// Narrow rungs, tiny buckets and an eager front spill: every restructuring path runs within a few
// hundred events.
LadderQueue::Tuning tiny_tuning() {
  LadderQueue::Tuning t;
  t.per_bucket = 1;
  t.small = 2;
  t.top_buckets = 8;
  t.max_buckets = 8;
  t.spill_moves = 2;
  return t;
}

void expect_same(const Event& heap, const Event& ladder, const std::string& where) {
  ASSERT_EQ(heap.time, ladder.time) << where;
  ASSERT_EQ(heap.seq, ladder.seq) << where;
  ASSERT_EQ(heap.handler, ladder.handler) << where;
  ASSERT_EQ(heap.a, ladder.a) << where;
  ASSERT_EQ(heap.b, ladder.b) << where;
}

// now + d, saturating at kNever.
Time later(Time now, Time d) {
  return d < kNever - now ? now + d : kNever;
}

// Times for the next push, given the time of the last pop.
using Draw = std::function<Time(Rng&, Time now)>;

struct Model {
  const char* name;
  Draw draw;
};

std::vector<Model> models() {
  return {
      {"wide", [](Rng& r, Time now) { return later(now, r.below(1'000'000'000)); }},
      {"exponential",
       [](Rng& r, Time now) { return later(now, static_cast<Time>(r.exponential(1e6))); }},
      {"many ties", [](Rng& r, Time now) { return later(now, r.below(4)); }},
      {"one time", [](Rng&, Time now) { return now; }},
      {"huge delays",
       [](Rng& r, Time now) {
         return later(now, r.below(2) == 0 ? r.below(1000) : r.below(uint64_t{1} << 62));
       }},
      {"near kNever",
       [](Rng& r, Time now) {
         switch (r.below(4)) {
           case 0:
             return kNever;
           case 1:
             return kNever - r.below(3);
           default:
             return later(now, r.below(100));
         }
       }},
      {"bimodal 1 ns / 1 ms",
       [](Rng& r, Time now) {
         return later(now, r.below(2) == 0 ? r.below(2 * kNanosecond) : r.below(2 * kMillisecond));
       }},
      {"bursts",
       [](Rng& r, Time now) {
         // Long runs at one time, then a scatter: buckets that are one block, then fronts that
         // grow in the middle.
         return later(now, r.below(8) < 6 ? 5 : r.below(10'000));
       }},
      // The queues accept any time, also before the last pop; the simulator never does this.
      {"before now", [](Rng& r, Time) { return r.below(1'000'000); }},
  };
}

struct Stats {
  uint64_t rungs_made = 0, spills = 0, transfers = 0;
  int max_depth = 0;
};

// Random interleaving of push, pop, replace_top and the odd clear() on the heap and a ladder;
// every pop must give the same event. `check_every` > 0 also checks the ladder's invariants that
// often.
void run_against_heap(const Model& model, const LadderQueue::Tuning& tuning, uint64_t seed, int ops,
                      int check_every, Stats* stats) {
  EventQueue heap;
  LadderQueue ladder(tuning);
  testing::NullHandler handlers[3];
  Rng rng(seed);
  Time now = 0;
  uint64_t payload = 0;
  for (int op = 0; op < ops; ++op) {
    const std::string where =
        std::string(model.name) + " seed " + std::to_string(seed) + " op " + std::to_string(op);
    const uint64_t dice = rng.below(100);
    // Phases of growth and shrinkage, so that the pending count sweeps up and down.
    const uint64_t push_weight = (op / 2000) % 2 == 0 ? 55 : 35;
    if (dice < push_weight || heap.empty()) {
      const Time t = model.draw(rng, now);
      EventHandler* h = &handlers[rng.below(3)];
      heap.push(t, h, payload, ~payload);
      ladder.push(t, h, payload, ~payload);
      ++payload;
    } else if (dice < 85) {
      const Event want = heap.pop();
      expect_same(want, ladder.pop(), where);
      now = want.time;
    } else if (dice < 99) {
      const Event want = heap.top();
      expect_same(want, ladder.top(), where);
      now = want.time;
      Time t = model.draw(rng, now);
      if (t < now && std::string(model.name) != "before now") t = now;
      heap.replace_top(t, &handlers[0], payload, payload * 3);
      ladder.replace_top(t, &handlers[0], payload, payload * 3);
      ++payload;
    } else if (rng.below(20) == 0) {
      heap.clear();
      ladder.clear();
    }
    ASSERT_EQ(heap.size(), ladder.size()) << where;
    ASSERT_EQ(heap.top_time(), ladder.top_time()) << where;
    ASSERT_EQ(heap.next_seq(), ladder.next_seq()) << where;
    if (check_every > 0 && op % check_every == 0) {
      ASSERT_TRUE(ladder.valid()) << where;
    }
  }
  ASSERT_TRUE(ladder.valid());
  while (!heap.empty()) expect_same(heap.pop(), ladder.pop(), std::string(model.name) + " drain");
  EXPECT_TRUE(ladder.empty());
  EXPECT_EQ(ladder.top_time(), kNever);
  EXPECT_TRUE(ladder.valid());
  stats->rungs_made += ladder.stats().rungs_made;
  stats->spills += ladder.stats().front_spills;
  stats->transfers += ladder.stats().top_transfers;
  stats->max_depth = std::max(stats->max_depth, ladder.stats().max_depth);
}

TEST(LadderQueue, SameOrderAsHeapDefaultTuning) {
  Stats stats;
  uint64_t seed = 100;
  for (const Model& m : models()) {
    run_against_heap(m, LadderQueue::Tuning{}, ++seed, 30'000, 0, &stats);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(stats.rungs_made, 10u);
  EXPECT_GT(stats.transfers, 10u);
}

TEST(LadderQueue, SameOrderAsHeapTinyTuning) {
  Stats stats;
  uint64_t seed = 200;
  for (const Model& m : models()) {
    run_against_heap(m, tiny_tuning(), ++seed, 30'000, 0, &stats);
    if (HasFatalFailure()) return;
  }
  // Rungs split from rungs, fronts turned into rungs, tops emptied: all resize paths ran.
  EXPECT_GT(stats.rungs_made, 1000u);
  EXPECT_GT(stats.spills, 10u);
  EXPECT_GT(stats.transfers, 100u);
  EXPECT_GE(stats.max_depth, 4);
}

TEST(LadderQueue, InvariantsHoldAfterEveryStep) {
  Stats stats;
  uint64_t seed = 300;
  for (const Model& m : models()) {
    run_against_heap(m, tiny_tuning(), ++seed, 1'500, 1, &stats);
    if (HasFatalFailure()) return;
    run_against_heap(m, LadderQueue::Tuning{}, ++seed, 1'500, 1, &stats);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(stats.spills, 0u);
  EXPECT_GE(stats.max_depth, 3);
}

// The hold model of bench_event_engine at a size that needs two rungs: each pop schedules one
// event a random delay later.
TEST(LadderQueue, HoldModelMatchesHeap) {
  EventQueue heap;
  LadderQueue ladder;
  testing::NullHandler h;
  Rng rng(7);
  for (uint64_t i = 0; i < 20'000; ++i) {
    const Time t = static_cast<Time>(rng.exponential(1e6));
    heap.push(t, &h, i);
    ladder.push(t, &h, i);
  }
  for (int i = 0; i < 200'000; ++i) {
    const Event want = heap.top();
    expect_same(want, ladder.top(), "hold " + std::to_string(i));
    const Time t = want.time + static_cast<Time>(rng.exponential(1e6));
    heap.replace_top(t, &h, want.a);
    ladder.replace_top(t, &h, want.a);
  }
  EXPECT_TRUE(ladder.valid());
  EXPECT_GE(ladder.stats().max_depth, 2);
}

TEST(LadderQueue, EmptyQueueAndClear) {
  LadderQueue q;
  testing::NullHandler h;
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.top_time(), kNever);
  EXPECT_TRUE(q.valid());
  q.push(5, &h, 1);
  q.push(5, &h, 2);
  q.push(kNever, &h, 3);
  q.push(kNever - 1, &h, 4);
  q.push(0, &h, 5);
  EXPECT_EQ(q.size(), 5u);
  EXPECT_EQ(q.pop().a, 5u);
  q.clear();
  EXPECT_TRUE(q.empty());
  EXPECT_TRUE(q.valid());
  EXPECT_EQ(q.next_seq(), 5u);  // keeps counting, so FIFO holds across the clear
  q.push(9, &h, 6);
  q.push(9, &h, 7);
  EXPECT_EQ(q.pop().seq, 5u);
  EXPECT_EQ(q.pop().seq, 6u);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.top_time(), kNever);
}

TEST(LadderQueue, KNeverEventsFireLastInPushOrder) {
  LadderQueue q;
  testing::NullHandler h;
  q.push(kNever, &h, 1);
  q.push(kNever - 1, &h, 2);
  q.push(kNever, &h, 3);
  EXPECT_EQ(q.pop().a, 2u);
  EXPECT_EQ(q.pop().a, 1u);  // the front now holds the kNever events
  q.push(kNever, &h, 4);     // waits behind them
  q.push(kNever - 5, &h, 5);
  EXPECT_TRUE(q.valid());
  EXPECT_EQ(q.pop().a, 5u);
  EXPECT_EQ(q.pop().a, 3u);
  EXPECT_EQ(q.pop().a, 4u);
  EXPECT_TRUE(q.empty());
}

TEST(LadderQueue, TopIsUsableThroughConstReference) {
  LadderQueue q;
  testing::NullHandler h;
  for (uint64_t i = 0; i < 1000; ++i) q.push(1000 - i, &h, i);
  const LadderQueue& view = q;
  EXPECT_EQ(view.top_time(), 1u);
  EXPECT_EQ(view.top().a, 999u);
  EXPECT_EQ(view.size(), 1000u);
}

// Both future-event lists the simulator runs on.
template <class Queue>
class EitherQueue : public ::testing::Test {};
using Queues = ::testing::Types<EventQueue, LadderQueue>;
TYPED_TEST_SUITE(EitherQueue, Queues);

TYPED_TEST(EitherQueue, ReserveKeepsContents) {
  TypeParam q;
  testing::NullHandler h;
  for (uint64_t i = 0; i < 10; ++i) q.push(100 - i, &h, i);
  q.reserve(100'000);
  EXPECT_TRUE(q.valid());
  EXPECT_EQ(q.pop().a, 9u);
  EXPECT_EQ(q.size(), 9u);
}

// The simulator on either queue: a branching model whose trace depends on every event's order.
template <class Sim>
class Branching final : public EventHandler {
 public:
  explicit Branching(Sim* sim) : sim_(sim) {}
  void handle(Time now, uint64_t a, uint64_t) override {
    trace.push_back(now ^ (a << 20) ^ sim_->pending());
    if (trace.size() > 30'000) return;
    const Time delay =
        sim_->rng().below(3) == 0 ? sim_->rng().below(4) : sim_->rng().below(50 * kNanosecond);
    sim_->schedule_in(delay, this, a * 3 + 1);
    if (sim_->rng().bernoulli(0.45)) sim_->schedule_in(sim_->rng().below(2), this, a * 3 + 2);
    if (sim_->rng().bernoulli(0.05)) {
      sim_->schedule_fn_in(sim_->rng().below(1000), [this, a] { trace.push_back(a); });
    }
  }
  std::vector<uint64_t> trace;

 private:
  Sim* sim_;
};

template <class Sim>
std::vector<uint64_t> run_branching(uint64_t seed) {
  Sim sim(seed);
  Branching<Sim> model(&sim);
  for (uint64_t i = 0; i < 64; ++i) sim.schedule_at(i % 3, &model, i);
  sim.run();
  return model.trace;
}

TEST(LadderQueue, SimulatorTraceIsTheHeapSimulators) {
  for (uint64_t seed : {1, 2, 3}) {
    const std::vector<uint64_t> heap = run_branching<HeapSimulator>(seed);
    EXPECT_GT(heap.size(), 30'000u);
    EXPECT_EQ(run_branching<Simulator>(seed), heap) << "seed " << seed;
  }
}

}  // namespace
}  // namespace galaxy::sim
