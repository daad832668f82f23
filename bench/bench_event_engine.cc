// Event-engine throughput on the classic "hold" model: N events stay pending; each event, when it
// fires, schedules one new event a random delay later: exponential with mean 1 us; with --delay
// uniform an integer uniform in [0, 2 us); with --delay bimodal, skewed: half the delays integer
// uniform in [0, 2 ns), half in [0, 2 ms). Compares
//   ours      galaxy::sim::Simulator (ladder queue), an EventHandler per event (the native path)
//   ours-fn   galaxy::sim::Simulator::schedule_fn_in with a capturing lambda (pooled slots)
//   heap      galaxy::sim::HeapSimulator: the same simulator on the 4-ary heap EventQueue
//   baseline  what a naive simulator does: std::priority_queue of (time, seq, std::function)
// All draw delays from the same Rng sequence, so they do identical simulated work.
//
// Usage: bench_event_engine [--events E] [--reps R] [--sizes 1000,1e5,...]
//                           [--delay exp|uniform|bimodal] [--json]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <queue>
#include <string>
#include <vector>

#include "engine/sim/rng.h"
#include "engine/sim/simulator.h"
#include "engine/sim/time.h"

namespace {

using galaxy::sim::EventHandler;
using galaxy::sim::HeapSimulator;
using galaxy::sim::Rng;
using galaxy::sim::Simulator;
using galaxy::sim::Time;

constexpr double kMeanDelayPs = 1e6;  // 1 us
constexpr uint64_t kSeed = 42;

enum class Delay { kExp, kUniform, kBimodal };
Delay g_delay = Delay::kExp;

const char* delay_name() {
  switch (g_delay) {
    case Delay::kUniform:
      return "uniform";
    case Delay::kBimodal:
      return "bimodal";
    case Delay::kExp:
      break;
  }
  return "exp";
}

Time draw_delay(Rng& rng) {
  switch (g_delay) {
    case Delay::kUniform:
      return rng.below(2 * static_cast<Time>(kMeanDelayPs));
    case Delay::kBimodal:
      return rng.below(2 *
                       (rng.next() >> 63 ? galaxy::sim::kNanosecond : galaxy::sim::kMillisecond));
    case Delay::kExp:
      break;
  }
  return static_cast<Time>(rng.exponential(kMeanDelayPs));
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Events per second by the CPU time of this thread (what the table shows: the machine is shared,
// and time-slicing with other processes would otherwise land in the figure) and by wall clock.
struct Rate {
  double cpu = 0;
  double wall = 0;
};

class Stopwatch {
 public:
  Stopwatch() : wall_(std::chrono::steady_clock::now()), cpu_(thread_cpu_seconds()) {}
  Rate rate(uint64_t events) const {
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_).count();
    const double cpu = thread_cpu_seconds() - cpu_;
    return Rate{static_cast<double>(events) / cpu, static_cast<double>(events) / wall};
  }

 private:
  std::chrono::steady_clock::time_point wall_;
  double cpu_;
};

template <class Sim>
class HoldHandler final : public EventHandler {
 public:
  HoldHandler(Sim* sim, uint64_t budget) : sim_(sim), budget_(budget) {}
  void handle(Time /*now*/, uint64_t a, uint64_t /*b*/) override {
    if (++fired_ == budget_) sim_->stop();
    sim_->schedule_in(draw_delay(sim_->rng()), this, a);
  }

 private:
  Sim* sim_;
  uint64_t budget_;
  uint64_t fired_ = 0;
};

// Each run_* measures the hold phase only, not the initial fill.
template <class Sim>
Rate run_native(const char* name, uint64_t pending, uint64_t events) {
  Sim sim(kSeed);
  HoldHandler<Sim> hold(&sim, events);
  for (uint64_t i = 0; i < pending; ++i) sim.schedule_in(draw_delay(sim.rng()), &hold, i);
  const Stopwatch watch;
  const uint64_t done = sim.run();
  const Rate rate = watch.rate(done);
  if (done != events) std::fprintf(stderr, "%s: ran %llu events\n", name, (unsigned long long)done);
  return rate;
}

struct FnHold {
  Simulator* sim;
  uint64_t budget;
  uint64_t fired = 0;
  void fire(uint64_t id) {
    if (++fired == budget) sim->stop();
    sim->schedule_fn_in(draw_delay(sim->rng()), [this, id] { fire(id); });
  }
};

Rate run_ours_fn(uint64_t pending, uint64_t events) {
  Simulator sim(kSeed);
  FnHold hold{&sim, events};
  for (uint64_t i = 0; i < pending; ++i) {
    sim.schedule_fn_in(draw_delay(sim.rng()), [&hold, i] { hold.fire(i); });
  }
  const Stopwatch watch;
  const uint64_t done = sim.run();
  const Rate rate = watch.rate(done);
  if (done != events) std::fprintf(stderr, "ours-fn: ran %llu events\n", (unsigned long long)done);
  return rate;
}

// The peer: the textbook simulator built from the standard library.
class NaiveSimulator {
 public:
  explicit NaiveSimulator(uint64_t seed) : rng_(seed) {}
  Time now() const { return now_; }
  Rng& rng() { return rng_; }
  void schedule_in(Time dt, std::function<void()> fn) {
    queue_.push(Item{{now_ + dt, seq_++}, std::move(fn)});
  }
  uint64_t run(uint64_t max_events) {
    uint64_t n = 0;
    while (!queue_.empty() && n < max_events) {
      Item item = queue_.top();
      queue_.pop();
      now_ = item.first.first;
      item.second();
      ++n;
    }
    return n;
  }

 private:
  using Item = std::pair<std::pair<Time, uint64_t>, std::function<void()>>;
  struct Later {
    bool operator()(const Item& x, const Item& y) const { return x.first > y.first; }
  };
  std::priority_queue<Item, std::vector<Item>, Later> queue_;
  Rng rng_;
  Time now_ = 0;
  uint64_t seq_ = 0;
};

struct NaiveHold {
  NaiveSimulator* sim;
  void fire(uint64_t id) {
    sim->schedule_in(draw_delay(sim->rng()), [this, id] { fire(id); });
  }
};

Rate run_baseline(uint64_t pending, uint64_t events) {
  NaiveSimulator sim(kSeed);
  NaiveHold hold{&sim};
  for (uint64_t i = 0; i < pending; ++i) {
    sim.schedule_in(draw_delay(sim.rng()), [&hold, i] { hold.fire(i); });
  }
  const Stopwatch watch;
  const uint64_t done = sim.run(events);
  return watch.rate(done);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

constexpr int kEngines = 4;
const char* const kEngineNames[kEngines] = {"ours", "ours-fn", "heap", "baseline"};

struct Row {
  uint64_t pending;
  Rate rate[kEngines];  // by kEngineNames; zero if not run
};

Rate run_engine(int engine, uint64_t pending, uint64_t events) {
  switch (engine) {
    case 0:
      return run_native<Simulator>("ours", pending, events);
    case 1:
      return run_ours_fn(pending, events);
    case 2:
      return run_native<HeapSimulator>("heap", pending, events);
    default:
      return run_baseline(pending, events);
  }
}

// Repetitions interleave the engines so that a burst of load on the shared machine hits all of
// them alike.
Row measure(uint64_t pending, uint64_t events, int reps, const bool (&enabled)[kEngines]) {
  std::vector<double> cpu[kEngines], wall[kEngines];
  for (int r = 0; r < reps; ++r) {
    for (int i = 0; i < kEngines; ++i) {
      if (!enabled[i]) continue;
      const Rate rate = run_engine(i, pending, events);
      cpu[i].push_back(rate.cpu);
      wall[i].push_back(rate.wall);
    }
  }
  Row row{pending, {}};
  for (int i = 0; i < kEngines; ++i) {
    if (enabled[i]) row.rate[i] = Rate{median(cpu[i]), median(wall[i])};
  }
  return row;
}

// "ours,heap" -> which engines run; false on an unknown name.
bool parse_engines(const std::string& list, bool (&enabled)[kEngines]) {
  for (bool& e : enabled) e = false;
  size_t at = 0;
  while (at <= list.size()) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string name = list.substr(at, comma - at);
    int found = -1;
    for (int i = 0; i < kEngines; ++i) {
      if (name == kEngineNames[i]) found = i;
    }
    if (found < 0) return false;
    enabled[found] = true;
    at = comma + 1;
  }
  return true;
}

// ours / other, or 0 when either did not run.
double ratio(const Row& row, int other) {
  return row.rate[0].cpu > 0 && row.rate[other].cpu > 0 ? row.rate[0].cpu / row.rate[other].cpu : 0;
}

// "1000,1e5,1e6" -> {1000, 100000, 1000000}; empty on a malformed list.
std::vector<uint64_t> parse_sizes(const char* s) {
  std::vector<uint64_t> out;
  for (;;) {
    char* end = nullptr;
    const double v = std::strtod(s, &end);
    if (end == s || v < 1) return {};
    out.push_back(static_cast<uint64_t>(v));
    if (*end == '\0') return out;
    if (*end != ',') return {};
    s = end + 1;
  }
}

int usage() {
  std::fprintf(stderr,
               "usage: bench_event_engine [--events E] [--reps R] [--sizes N1,N2,...]\n"
               "                          [--delay exp|uniform|bimodal]\n"
               "                          [--engines ours,ours-fn,heap,baseline] [--json]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t events = 20'000'000;
  int reps = 3;
  bool json = false;
  std::vector<uint64_t> sizes = {1'000, 10'000, 100'000, 1'000'000, 10'000'000};
  bool enabled[kEngines] = {true, true, true, true};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--json") {
      json = true;
    } else if (arg == "--events" && has_value) {
      events = static_cast<uint64_t>(std::strtod(argv[++i], nullptr));
    } else if (arg == "--reps" && has_value) {
      reps = std::atoi(argv[++i]);
    } else if (arg == "--sizes" && has_value) {
      sizes = parse_sizes(argv[++i]);
    } else if (arg == "--delay" && has_value) {
      const std::string d = argv[++i];
      if (d == "exp") {
        g_delay = Delay::kExp;
      } else if (d == "uniform") {
        g_delay = Delay::kUniform;
      } else if (d == "bimodal") {
        g_delay = Delay::kBimodal;
      } else {
        return usage();
      }
    } else if (arg == "--engines" && has_value) {
      if (!parse_engines(argv[++i], enabled)) return usage();
    } else {
      return usage();
    }
  }
  if (events == 0 || reps <= 0 || sizes.empty()) return usage();

  std::vector<Row> rows;
  for (uint64_t n : sizes) {
    const Row row = measure(n, events, reps, enabled);
    rows.push_back(row);
    if (!json) {
      if (rows.size() == 1) {
        std::printf(
            "hold model, %s delays, %llu events per run, median of %d, "
            "Mevents per CPU second\n",
            delay_name(), (unsigned long long)events, reps);
        std::printf("%10s %10s %10s %10s %10s %10s %10s\n", "pending", "ours", "ours-fn", "heap",
                    "baseline", "ours/heap", "ours/base");
      }
      std::printf("%10llu", (unsigned long long)n);
      for (const Rate& r : row.rate) std::printf(" %10.2f", r.cpu / 1e6);
      std::printf(" %9.2fx %9.2fx\n", ratio(row, 2), ratio(row, 3));
      std::fflush(stdout);
    }
  }
  if (json) {
    std::printf(
        "{\"bench\":\"event_engine\",\"model\":\"hold\",\"delay\":\"%s\",\"events\":%llu,"
        "\"reps\":%d,\"unit\":\"events_per_cpu_second\",\"results\":[",
        delay_name(), (unsigned long long)events, reps);
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::printf(
          "%s{\"pending\":%llu,\"ours\":%.0f,\"ours_fn\":%.0f,\"heap\":%.0f,\"baseline\":%.0f,"
          "\"ratio_heap\":%.3f,\"ratio\":%.3f,"
          "\"wall\":{\"ours\":%.0f,\"ours_fn\":%.0f,\"heap\":%.0f,\"baseline\":%.0f}}",
          i == 0 ? "" : ",", (unsigned long long)r.pending, r.rate[0].cpu, r.rate[1].cpu,
          r.rate[2].cpu, r.rate[3].cpu, ratio(r, 2), ratio(r, 3), r.rate[0].wall, r.rate[1].wall,
          r.rate[2].wall, r.rate[3].wall);
    }
    std::printf("]}\n");
  }
  return 0;
}
