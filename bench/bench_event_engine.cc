// Event-engine throughput on the classic "hold" model: N events stay pending; each event, when it
// fires, schedules one new event a random delay later: exponential with mean 1 us, or with
// --delay uniform an integer uniform in [0, 2 us). Compares
//   ours      galaxy::sim::Simulator, an EventHandler per event (the engine's native path)
//   ours-fn   galaxy::sim::Simulator::schedule_fn_in with a capturing lambda (pooled slots)
//   baseline  what a naive simulator does: std::priority_queue of (time, seq, std::function)
// All three draw delays from the same Rng sequence, so they do identical simulated work.
//
// Usage: bench_event_engine [--events E] [--reps R] [--sizes 1000,1e5,...] [--delay exp|uniform]
//                           [--json]
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
using galaxy::sim::Rng;
using galaxy::sim::Simulator;
using galaxy::sim::Time;

constexpr double kMeanDelayPs = 1e6;  // 1 us
constexpr uint64_t kSeed = 42;

bool g_uniform_delay = false;  // --delay uniform: integer delays in [0, 2 us), no logarithm

Time draw_delay(Rng& rng) {
  if (g_uniform_delay) return rng.below(2 * static_cast<Time>(kMeanDelayPs));
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

class HoldHandler final : public EventHandler {
 public:
  HoldHandler(Simulator* sim, uint64_t budget) : sim_(sim), budget_(budget) {}
  void handle(Time /*now*/, uint64_t a, uint64_t /*b*/) override {
    if (++fired_ == budget_) sim_->stop();
    sim_->schedule_in(draw_delay(sim_->rng()), this, a);
  }

 private:
  Simulator* sim_;
  uint64_t budget_;
  uint64_t fired_ = 0;
};

// Each run_* measures the hold phase only, not the initial fill.
Rate run_ours(uint64_t pending, uint64_t events) {
  Simulator sim(kSeed);
  HoldHandler hold(&sim, events);
  for (uint64_t i = 0; i < pending; ++i) sim.schedule_in(draw_delay(sim.rng()), &hold, i);
  const Stopwatch watch;
  const uint64_t done = sim.run();
  const Rate rate = watch.rate(done);
  if (done != events) std::fprintf(stderr, "ours: ran %llu events\n", (unsigned long long)done);
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

struct Row {
  uint64_t pending;
  Rate ours, ours_fn, baseline;
};

// Repetitions interleave the three engines so that a burst of load on the shared machine hits
// all of them alike.
Row measure(uint64_t pending, uint64_t events, int reps) {
  std::vector<double> v[6];
  for (int r = 0; r < reps; ++r) {
    const Rate rates[3] = {run_ours(pending, events), run_ours_fn(pending, events),
                           run_baseline(pending, events)};
    for (int i = 0; i < 3; ++i) {
      v[2 * i].push_back(rates[i].cpu);
      v[2 * i + 1].push_back(rates[i].wall);
    }
  }
  return Row{pending,
             {median(v[0]), median(v[1])},
             {median(v[2]), median(v[3])},
             {median(v[4]), median(v[5])}};
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
               "                          [--delay exp|uniform] [--json]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t events = 20'000'000;
  int reps = 3;
  bool json = false;
  std::vector<uint64_t> sizes = {1'000, 100'000, 1'000'000, 10'000'000};
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
      if (d != "exp" && d != "uniform") return usage();
      g_uniform_delay = d == "uniform";
    } else {
      return usage();
    }
  }
  if (events == 0 || reps <= 0 || sizes.empty()) return usage();

  std::vector<Row> rows;
  for (uint64_t n : sizes) {
    const Row row = measure(n, events, reps);
    rows.push_back(row);
    if (!json) {
      if (rows.size() == 1) {
        std::printf(
            "hold model, %s delays, %llu events per run, median of %d, "
            "Mevents per CPU second\n",
            g_uniform_delay ? "uniform" : "exponential", (unsigned long long)events, reps);
        std::printf("%10s %10s %10s %10s %8s\n", "pending", "ours", "ours-fn", "baseline", "ratio");
      }
      std::printf("%10llu %10.2f %10.2f %10.2f %7.2fx\n", (unsigned long long)n, row.ours.cpu / 1e6,
                  row.ours_fn.cpu / 1e6, row.baseline.cpu / 1e6, row.ours.cpu / row.baseline.cpu);
      std::fflush(stdout);
    }
  }
  if (json) {
    std::printf(
        "{\"bench\":\"event_engine\",\"model\":\"hold\",\"delay\":\"%s\",\"events\":%llu,"
        "\"reps\":%d,\"unit\":\"events_per_cpu_second\",\"results\":[",
        g_uniform_delay ? "uniform" : "exp", (unsigned long long)events, reps);
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::printf(
          "%s{\"pending\":%llu,\"ours\":%.0f,\"ours_fn\":%.0f,\"baseline\":%.0f,"
          "\"ratio\":%.3f,\"wall\":{\"ours\":%.0f,\"ours_fn\":%.0f,\"baseline\":%.0f}}",
          i == 0 ? "" : ",", (unsigned long long)r.pending, r.ours.cpu, r.ours_fn.cpu,
          r.baseline.cpu, r.ours.cpu / r.baseline.cpu, r.ours.wall, r.ours_fn.wall,
          r.baseline.wall);
    }
    std::printf("]}\n");
  }
  return 0;
}
