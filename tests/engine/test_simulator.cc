#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "engine/sim/rng.h"
#include "engine/sim/simulator.h"
#include "engine/sim/time.h"

namespace galaxy::sim {
namespace {

struct Fired {
  Time time;
  uint64_t a;
  uint64_t b;
  bool operator==(const Fired&) const = default;
};

class Recorder final : public EventHandler {
 public:
  void handle(Time now, uint64_t a, uint64_t b) override { trace.push_back({now, a, b}); }
  std::vector<Fired> trace;
};

TEST(Simulator, RunsInTimeOrderAndFifoOnTies) {
  Simulator sim;
  Recorder r;
  sim.schedule_at(30, &r, 1);
  sim.schedule_at(10, &r, 2);
  sim.schedule_at(20, &r, 3);
  sim.schedule_at(10, &r, 4);
  sim.schedule_in(10, &r, 5, 99);
  EXPECT_EQ(sim.pending(), 5u);
  EXPECT_EQ(sim.run(), 5u);
  const std::vector<Fired> want = {{10, 2, 0}, {10, 4, 0}, {10, 5, 99}, {20, 3, 0}, {30, 1, 0}};
  EXPECT_EQ(r.trace, want);
  EXPECT_EQ(sim.now(), 30u);
  EXPECT_EQ(sim.events_processed(), 5u);
  EXPECT_EQ(sim.pending(), 0u);
}

// A small branching model: each event draws a random delay and sometimes a second child. Its
// trace depends on the order of events and on every random draw.
class Cascade final : public EventHandler {
 public:
  explicit Cascade(Simulator* sim) : sim_(sim) {}
  void handle(Time now, uint64_t a, uint64_t /*b*/) override {
    trace.push_back({now, a, sim_->pending()});
    if (trace.size() > 20'000) return;
    sim_->schedule_in(sim_->rng().below(1000), this, a * 2);
    if (sim_->rng().bernoulli(0.3)) sim_->schedule_in(sim_->rng().below(3), this, a * 2 + 1);
  }
  std::vector<Fired> trace;

 private:
  Simulator* sim_;
};

std::vector<Fired> run_cascade(uint64_t seed) {
  Simulator sim(seed);
  Cascade c(&sim);
  for (uint64_t i = 0; i < 16; ++i) sim.schedule_at(0, &c, i + 1);
  sim.run();
  return c.trace;
}

TEST(Simulator, SameSeedSameTraceOtherSeedOtherTrace) {
  const std::vector<Fired> first = run_cascade(7);
  EXPECT_GT(first.size(), 20'000u);
  EXPECT_EQ(run_cascade(7), first);
  EXPECT_NE(run_cascade(8), first);
}

TEST(Simulator, RunUntilStopsAndLeavesLaterEventsPending) {
  Simulator sim;
  Recorder r;
  for (Time t : {5, 10, 15, 20, 25}) sim.schedule_at(t * kNanosecond, &r, t);
  EXPECT_EQ(sim.run(15 * kNanosecond), 3u);  // events at exactly `until` run
  EXPECT_EQ(sim.now(), 15 * kNanosecond);
  EXPECT_EQ(sim.pending(), 2u);
  EXPECT_EQ(sim.next_event_time(), 20 * kNanosecond);

  EXPECT_EQ(sim.run(22 * kNanosecond), 1u);
  EXPECT_EQ(sim.now(), 22 * kNanosecond);  // time advances to `until`
  sim.schedule_in(1 * kNanosecond, &r, 23);
  EXPECT_EQ(sim.run(), 2u);
  ASSERT_EQ(r.trace.size(), 6u);
  EXPECT_EQ(r.trace[4], (Fired{23 * kNanosecond, 23, 0}));
  EXPECT_EQ(r.trace[5], (Fired{25 * kNanosecond, 25, 0}));
  EXPECT_EQ(sim.run(), 0u);
}

class Stopper final : public EventHandler {
 public:
  explicit Stopper(Simulator* sim) : sim_(sim) {}
  void handle(Time now, uint64_t a, uint64_t) override {
    fired.push_back(now);
    if (a == 1) sim_->stop();
  }
  std::vector<Time> fired;

 private:
  Simulator* sim_;
};

TEST(Simulator, StopReturnsAfterCurrentEvent) {
  Simulator sim;
  Stopper s(&sim);
  sim.schedule_at(1, &s, 0);
  sim.schedule_at(2, &s, 1);
  sim.schedule_at(2, &s, 0);
  sim.schedule_at(3, &s, 0);
  EXPECT_EQ(sim.run(100), 2u);
  EXPECT_EQ(sim.now(), 2u);  // not advanced to `until` after a stop
  EXPECT_EQ(sim.pending(), 2u);
  EXPECT_EQ(sim.run(100), 2u);  // a new run() is not stopped by the old request
  EXPECT_EQ(s.fired, (std::vector<Time>{1, 2, 2, 3}));
  EXPECT_EQ(sim.now(), 100u);
}

TEST(Simulator, StepHandlesOneEvent) {
  Simulator sim;
  Recorder r;
  EXPECT_FALSE(sim.step());
  sim.schedule_at(4, &r, 1);
  sim.schedule_at(2, &r, 2);
  EXPECT_TRUE(sim.step());
  EXPECT_EQ(sim.now(), 2u);
  EXPECT_EQ(sim.pending(), 1u);
  EXPECT_TRUE(sim.step());
  EXPECT_FALSE(sim.step());
  EXPECT_EQ(sim.events_processed(), 2u);
}

// Queries made from inside a handler must not see the event being handled.
class Inspector final : public EventHandler {
 public:
  explicit Inspector(Simulator* sim) : sim_(sim) {}
  void handle(Time, uint64_t a, uint64_t) override {
    if (a != 0) return;
    pending_before = sim_->pending();
    next_before = sim_->next_event_time();
    sim_->schedule_in(3, this, 1);
    pending_after = sim_->pending();
    next_after = sim_->next_event_time();
  }
  size_t pending_before = 0, pending_after = 0;
  Time next_before = 0, next_after = 0;

 private:
  Simulator* sim_;
};

TEST(Simulator, QueriesInsideHandlerExcludeTheFiringEvent) {
  Simulator sim;
  Inspector in(&sim);
  sim.schedule_at(10, &in, 0);
  sim.schedule_at(50, &in, 2);
  sim.run();
  EXPECT_EQ(in.pending_before, 1u);
  EXPECT_EQ(in.next_before, 50u);
  EXPECT_EQ(in.pending_after, 2u);
  EXPECT_EQ(in.next_after, 13u);
  EXPECT_EQ(sim.events_processed(), 3u);
}

TEST(Simulator, CallablesRunInOrderWithTheirState) {
  Simulator sim;
  std::vector<std::pair<Time, int>> trace;
  sim.schedule_fn_in(20, [&trace, &sim] { trace.push_back({sim.now(), 1}); });
  sim.schedule_fn_at(10, [&trace](Time now) { trace.push_back({now, 2}); });
  sim.schedule_fn_in(10, [&trace, &sim] {
    trace.push_back({sim.now(), 3});
    sim.schedule_fn_in(5, [&trace](Time now) { trace.push_back({now, 4}); });
  });
  // Larger than the inline slot: boxed on the heap, same behaviour.
  std::array<uint64_t, 16> big{};
  big[15] = 5;
  sim.schedule_fn_in(30, [&trace, big](Time now) { trace.push_back({now, int(big[15])}); });
  EXPECT_EQ(sim.run(), 5u);
  const std::vector<std::pair<Time, int>> want = {{10, 2}, {10, 3}, {15, 4}, {20, 1}, {30, 5}};
  EXPECT_EQ(trace, want);
}

TEST(Simulator, ManyCallablesReuseSlots) {
  Simulator sim;
  uint64_t sum = 0;
  for (uint64_t i = 1; i <= 5000; ++i) sim.schedule_fn_in(i % 7, [&sum, i] { sum += i; });
  EXPECT_EQ(sim.run(), 5000u);
  EXPECT_EQ(sum, 5000u * 5001u / 2);
}

TEST(Simulator, PendingCallablesAreDestroyedWithTheSimulator) {
  auto token = std::make_shared<int>(0);
  auto big_token = std::make_shared<int>(0);
  {
    Simulator sim;
    sim.schedule_fn_in(5, [token] { ++*token; });
    std::array<uint64_t, 16> pad{};
    sim.schedule_fn_in(6, [big_token, pad] { *big_token += int(pad[0]); });
    sim.schedule_fn_in(1, [token] { ++*token; });
    sim.run(2);
    EXPECT_EQ(*token, 1);
    EXPECT_EQ(token.use_count(), 2);
    EXPECT_EQ(big_token.use_count(), 2);
  }
  EXPECT_EQ(token.use_count(), 1);
  EXPECT_EQ(big_token.use_count(), 1);
}

// A checked invariant in every build (base/check.h), release included.
TEST(SimulatorDeathTest, SchedulingInThePastAborts) {
  Simulator sim;
  Recorder r;
  sim.schedule_at(10, &r);
  sim.run();
  EXPECT_DEATH(sim.schedule_at(9, &r), "invariant broken: schedule_at: time is in the past");
}

TEST(Rng, MatchesReferenceSequence) {
  // xoshiro256** seeded by splitmix64(1), computed independently of this code.
  Rng rng(1);
  EXPECT_EQ(rng.next(), 0xb3f2af6d0fc710c5ULL);
  EXPECT_EQ(rng.next(), 0x853b559647364ceaULL);
  EXPECT_EQ(rng.next(), 0x92f89756082a4514ULL);
}

TEST(Rng, SeedsGiveDistinctReproducibleStreams) {
  Rng a(3), b(3), c(4), zero(0);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.next(), b.next());
  EXPECT_NE(a.next(), c.next());
  EXPECT_NE(zero.next(), zero.next());  // seed 0 still gives a live state
}

TEST(Rng, UniformIsInRangeWithMeanOneHalf) {
  Rng rng(11);
  constexpr int kDraws = 200'000;
  double sum = 0;
  for (int i = 0; i < kDraws; ++i) {
    const double u = rng.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  // Standard error of the mean is 0.29 / sqrt(200000) = 0.00065; allow about 8 of them.
  EXPECT_NEAR(sum / kDraws, 0.5, 0.005);
}

TEST(Rng, BelowStaysInRangeAndCoversIt) {
  Rng rng(12);
  std::vector<int> counts(10, 0);
  for (int i = 0; i < 100'000; ++i) {
    const uint64_t v = rng.below(10);
    ASSERT_LT(v, 10u);
    ++counts[v];
  }
  for (int c : counts) EXPECT_NEAR(c, 10'000, 600);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(rng.below(1), 0u);
  // A bound just above 2^63 rejects almost half the draws; results must still be below it.
  const uint64_t big = (uint64_t{1} << 63) + 12345;
  for (int i = 0; i < 1000; ++i) EXPECT_LT(rng.below(big), big);
}

TEST(Rng, BernoulliAndExponentialMeans) {
  Rng rng(13);
  constexpr int kDraws = 200'000;
  int heads = 0;
  double sum = 0;
  for (int i = 0; i < kDraws; ++i) {
    heads += rng.bernoulli(0.25) ? 1 : 0;
    const double x = rng.exponential(3.0);
    ASSERT_GE(x, 0.0);
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
  }
  EXPECT_NEAR(double(heads) / kDraws, 0.25, 0.005);
  EXPECT_NEAR(sum / kDraws, 3.0, 0.05);  // standard error 3 / sqrt(200000) = 0.0067
  EXPECT_FALSE(rng.bernoulli(0.0));
  EXPECT_TRUE(rng.bernoulli(1.0));
}

TEST(Time, UnitsAndMicrosecondConversion) {
  EXPECT_EQ(kNanosecond, 1000u);
  EXPECT_EQ(kSecond, 1'000'000'000'000u);
  EXPECT_EQ(from_us(1.0), kMicrosecond);
  EXPECT_EQ(from_us(1.5), 1'500'000u);
  EXPECT_EQ(from_us(0.0000004), 0u);          // 0.4 ps
  EXPECT_EQ(from_us(0.0000006), 1u);          // 0.6 ps
  EXPECT_EQ(from_us(2.0000015), 2'000'002u);  // 2000001.5 ps, nearest double just above .5
  EXPECT_EQ(from_us(-3.0), 0u);
  EXPECT_EQ(from_us(1e300), kNever);
  EXPECT_DOUBLE_EQ(to_us(2'500'000), 2.5);
  EXPECT_DOUBLE_EQ(to_us(1), 1e-6);
  for (Time t : {Time{0}, Time{1}, Time{999}, 123'456'789 * kNanosecond}) {
    EXPECT_EQ(from_us(to_us(t)), t) << t;
  }
}

}  // namespace
}  // namespace galaxy::sim

namespace galaxy::sim {
namespace {

// The binomial draw a BIST's errors come from: its mean and variance are n p and n p (1 - p),
// for rare and for frequent successes, and its edges are exact.
TEST(RngBinomial, MeanAndVarianceAreTheBinomials) {
  Rng r(7);
  for (const auto& [n, p] : std::vector<std::pair<uint64_t, double>>{
           {14'000, 1e-3}, {1'000, 0.3}, {1'000, 0.9}, {50, 0.5}}) {
    const int draws = 4000;
    double sum = 0, sq = 0;
    for (int i = 0; i < draws; ++i) {
      const auto k = static_cast<double>(r.binomial(n, p));
      ASSERT_LE(k, static_cast<double>(n));
      sum += k;
      sq += k * k;
    }
    const double mean = sum / draws, var = sq / draws - mean * mean;
    const double want = static_cast<double>(n) * p, want_var = want * (1 - p);
    EXPECT_NEAR(mean, want, 5 * std::sqrt(want_var / draws)) << n << " " << p;
    EXPECT_NEAR(var, want_var, 0.15 * want_var) << n << " " << p;
  }
  EXPECT_EQ(r.binomial(0, 0.5), 0u);
  EXPECT_EQ(r.binomial(100, 0), 0u);
  EXPECT_EQ(r.binomial(100, 1), 100u);
  EXPECT_EQ(r.binomial(100, -1), 0u);
}

}  // namespace
}  // namespace galaxy::sim
