#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "engine/sim/event_queue.h"
#include "engine/sim/rng.h"
#include "sim_test_util.h"

namespace galaxy::sim {
namespace {

TEST(EventQueue, PopsInTimeOrder) {
  EventQueue q;
  testing::NullHandler h;
  const std::vector<Time> times = {50, 10, 40, 30, 20, 60, 0, 70};
  for (size_t i = 0; i < times.size(); ++i) q.push(times[i], &h, i);
  EXPECT_EQ(q.size(), times.size());
  EXPECT_EQ(q.top_time(), 0u);
  Time last = 0;
  while (!q.empty()) {
    const Event e = q.pop();
    EXPECT_GE(e.time, last);
    EXPECT_EQ(e.time, times[e.a]);
    last = e.time;
  }
  EXPECT_EQ(last, 70u);
  EXPECT_EQ(q.top_time(), kNever);
}

TEST(EventQueue, TiesAreFifo) {
  EventQueue q;
  testing::NullHandler h;
  for (uint64_t i = 0; i < 100; ++i) q.push(i % 2 == 0 ? 5 : 3, &h, i);
  std::vector<uint64_t> order;
  while (!q.empty()) order.push_back(q.pop().a);
  ASSERT_EQ(order.size(), 100u);
  for (size_t i = 0; i < 50; ++i) EXPECT_EQ(order[i], 2 * i + 1) << i;  // time 3, pushed in order
  for (size_t i = 0; i < 50; ++i) EXPECT_EQ(order[50 + i], 2 * i) << i;
}

TEST(EventQueue, CarriesPayloadAndSequence) {
  EventQueue q;
  testing::NullHandler h1, h2;
  q.push(7, &h1, 11, 12);
  q.push(3, &h2, 21, 22);
  Event e = q.pop();
  EXPECT_EQ(e.time, 3u);
  EXPECT_EQ(e.seq, 1u);
  EXPECT_EQ(e.handler, &h2);
  EXPECT_EQ(e.a, 21u);
  EXPECT_EQ(e.b, 22u);
  e = q.pop();
  EXPECT_EQ(e.seq, 0u);
  EXPECT_EQ(e.handler, &h1);
  EXPECT_EQ(e.b, 12u);
}

TEST(EventQueue, ReplaceTopEqualsPopThenPush) {
  EventQueue q;
  testing::NullHandler h;
  q.push(10, &h, 1);
  q.push(20, &h, 2);
  q.push(30, &h, 3);
  q.replace_top(25, &h, 4);  // drops (10, 1)
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(q.pop().a, 2u);
  EXPECT_EQ(q.pop().a, 4u);
  EXPECT_EQ(q.pop().a, 3u);
}

TEST(EventQueue, ClearKeepsFifoAcrossIt) {
  EventQueue q;
  testing::NullHandler h;
  q.push(1, &h, 1);
  q.push(2, &h, 2);
  q.clear();
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.next_seq(), 2u);
  q.push(4, &h, 3);
  q.push(4, &h, 4);
  EXPECT_TRUE(q.valid());
  EXPECT_EQ(q.pop().seq, 2u);
  EXPECT_EQ(q.pop().a, 4u);
}

// 100k random push / pop / replace_top against an ordered map keyed by (time, push order).
// push_weight in 10 operations push, 2 in 10 replace the top, the rest pop.
void check_against_reference(EventQueue& q, uint64_t seed, Time time_range, uint64_t push_weight) {
  testing::NullHandler handlers[3];
  Rng rng(seed);
  std::map<std::pair<Time, uint64_t>, std::pair<EventHandler*, uint64_t>> ref;
  uint64_t pushed = 0;
  Time now = 0;
  for (int op = 0; op < 100'000; ++op) {
    const uint64_t dice = rng.below(10);
    if (dice < push_weight || ref.empty()) {
      // Events are never scheduled before the last popped time, as in the simulator.
      const Time t = now + rng.below(time_range);
      EventHandler* h = &handlers[rng.below(3)];
      q.push(t, h, pushed, ~pushed);
      ref.emplace(std::make_pair(t, pushed), std::make_pair(h, pushed));
      ++pushed;
    } else if (dice < 8) {  // pops: 8 - push_weight in 10
      const auto it = ref.begin();
      const Event e = q.pop();
      ASSERT_EQ(e.time, it->first.first) << "op " << op;
      ASSERT_EQ(e.seq, it->first.second) << "op " << op;
      ASSERT_EQ(e.handler, it->second.first);
      ASSERT_EQ(e.a, it->second.second);
      ASSERT_EQ(e.b, ~it->second.second);
      now = e.time;
      ref.erase(it);
    } else {
      now = ref.begin()->first.first;
      ref.erase(ref.begin());
      const Time t = now + rng.below(time_range);
      q.replace_top(t, &handlers[0], pushed, ~pushed);
      ref.emplace(std::make_pair(t, pushed), std::make_pair(&handlers[0], pushed));
      ++pushed;
    }
    ASSERT_EQ(q.size(), ref.size());
    ASSERT_EQ(q.top_time(), ref.empty() ? kNever : ref.begin()->first.first);
    if (op % 4096 == 0) {
      ASSERT_TRUE(q.valid()) << "op " << op;
    }
  }
  ASSERT_TRUE(q.valid());
  while (!ref.empty()) {
    ASSERT_EQ(q.pop().seq, ref.begin()->first.second);
    ref.erase(ref.begin());
  }
  EXPECT_TRUE(q.empty());
}

TEST(EventQueue, MatchesReferenceWithDistinctTimes) {
  EventQueue q;
  check_against_reference(q, 1, 1'000'000'000, 5);
}

TEST(EventQueue, MatchesReferenceWithManyTies) {
  EventQueue q;
  check_against_reference(q, 2, 4, 5);
}

// Fields of 2 slot bits and 6 rank bits force the queue to widen its slot field and to renumber
// ranks over and over (pushes and pops balance, so few events are pending); order must not change.
TEST(EventQueue, MatchesReferenceThroughRenumbering) {
  EventQueue q(2, 6);
  check_against_reference(q, 3, 16, 4);
  EXPECT_GT(q.rebuilds(), 100u);
}

}  // namespace
}  // namespace galaxy::sim
