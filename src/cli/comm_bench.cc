#include "cli/comm_bench.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "glex.h"

namespace galaxy::cli {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void send_retry(glex_ep_handle_t ep, glex_ep_addr_t to, const void* d, uint32_t n) {
  while (glex_send_mp(ep, to, d, n, 0) == GLEX_BUSY) {
  }
}

struct MemInfo {
  uint64_t addr;
  glex_mem_handle_t mh;
};

// Registers `bytes` of shared registered memory and tells the peer where it is.
MemInfo expose(glex_device_handle_t dev, glex_ep_handle_t ep, glex_ep_addr_t peer, size_t bytes,
               uint32_t access, void** buf) {
  glex_alloc_mem(dev, std::max<size_t>(bytes, 64), buf);
  std::memset(*buf, 0, std::max<size_t>(bytes, 64));
  MemInfo m{reinterpret_cast<uint64_t>(*buf), 0};
  glex_register_mem(dev, *buf, std::max<size_t>(bytes, 64), access, &m.mh);
  send_retry(ep, peer, &m, sizeof m);
  return m;
}

glex_rdma_req request(glex_ep_addr_t peer, uint32_t op, void* local, glex_mem_handle_t lmh,
                      size_t bytes, const MemInfo& target) {
  glex_rdma_req r{};
  r.target = peer;
  r.op = op;
  r.local_addr = local;
  r.local_mh = lmh;
  r.len = bytes;
  r.remote_addr = target.addr;
  r.remote_mh = target.mh;
  return r;
}

// Posts a put, retrying while the queue or the CQ is full (a full CQ is emptied: this test
// keeps no completion).
void post_put(glex_ep_handle_t ep, const glex_rdma_req& r) {
  glex_cq_entry e;
  while (glex_rdma(ep, &r) == GLEX_BUSY) {
    while (glex_poll_cq(ep, &e) == GLEX_SUCCESS) {
    }
  }
}

MemInfo learn(glex_ep_handle_t ep) {
  glex_mp mp;
  glex_recv_mp(ep, -1, &mp);
  MemInfo m;
  std::memcpy(&m, mp.data, sizeof m);
  return m;
}

// The body of one worker process; returns its figure (rank 0 reports).
double worker(const std::string& kind, size_t bytes, int iters, std::string* error) {
  glex_device_handle_t dev;
  glex_ep_handle_t ep;
  glex_ep_attr attr{-1};
  if (glex_open_device(nullptr, &dev) != GLEX_SUCCESS ||
      glex_create_ep(dev, &attr, &ep) != GLEX_SUCCESS) {
    *error = glex_last_error();
    return -1;
  }
  uint32_t rank, size;
  glex_ep_addr_t* addrs;
  if (glex_bootstrap(ep, &rank, &size, &addrs) != GLEX_SUCCESS) {
    *error = glex_last_error();
    return -1;
  }
  const glex_ep_addr_t peer = addrs[1 - rank];
  std::free(addrs);
  const int warm = std::max(10, iters / 10);
  double result = 0;
  std::vector<uint8_t> buf(std::max<size_t>(bytes, 128), 0x5a);
  if (kind == "mp_lat") {
    glex_mp mp;
    double t0 = 0;
    for (int i = 0; i < warm + iters; ++i) {
      if (i == warm) t0 = now_s();
      if (rank == 0) {
        send_retry(ep, peer, buf.data(), static_cast<uint32_t>(bytes));
        glex_recv_mp(ep, -1, &mp);
      } else {
        glex_recv_mp(ep, -1, &mp);
        send_retry(ep, peer, buf.data(), static_cast<uint32_t>(bytes));
      }
    }
    result = (now_s() - t0) / iters / 2 * 1e6;
  } else if (kind == "msg_rate") {
    glex_mp mp;
    if (rank == 0) {
      for (int i = 0; i < warm; ++i) send_retry(ep, peer, buf.data(), 8);
      glex_recv_mp(ep, -1, &mp);
      double t0 = now_s();
      for (int i = 0; i < iters; ++i)
        send_retry(ep, peer, buf.data(), static_cast<uint32_t>(bytes));
      glex_recv_mp(ep, -1, &mp);
      result = iters / (now_s() - t0) / 1e6;
    } else {
      for (int i = 0; i < warm; ++i) glex_recv_mp(ep, -1, &mp);
      send_retry(ep, peer, buf.data(), 8);
      for (int i = 0; i < iters; ++i) glex_recv_mp(ep, -1, &mp);
      send_retry(ep, peer, buf.data(), 8);
    }
  } else if (kind == "put_bw" || kind == "get_bw") {
    const bool put = kind == "put_bw";
    void* mine;
    if (rank == 1) {
      expose(dev, ep, peer, bytes, put ? GLEX_MEM_WRITE : GLEX_MEM_READ, &mine);
      glex_mp mp;
      glex_recv_mp(ep, -1, &mp);  // done
    } else {
      glex_alloc_mem(dev, bytes, &mine);
      std::memset(mine, 0x33, bytes);
      glex_mem_handle_t lmh;
      glex_register_mem(dev, mine, bytes, GLEX_MEM_READ | GLEX_MEM_WRITE, &lmh);
      glex_rdma_req r = request(peer, put ? GLEX_OP_PUT : GLEX_OP_GET, mine, lmh, bytes, learn(ep));
      double t0 = 0;
      for (int i = 0; i < warm + iters; ++i) {
        if (i == warm) t0 = now_s();
        while (glex_rdma(ep, &r) == GLEX_BUSY) {
        }
      }
      glex_fence(ep, -1);
      result = static_cast<double>(bytes) * iters / (now_s() - t0) / 1e6;
      glex_cq_entry e;
      if (glex_poll_cq(ep, &e) == GLEX_SUCCESS && e.status != GLEX_SUCCESS) {
        *error = fmt::format("RDMA failed: {} ({})", glex_error_string(e.status), e.reason);
        result = -1;
      }
      send_retry(ep, peer, buf.data(), 8);
    }
  } else if (kind == "put_lat") {
    // As ucx_perftest's put_lat: each side puts into the other's buffer and polls its own.
    void* mine;
    expose(dev, ep, peer, 64, GLEX_MEM_WRITE | GLEX_MEM_READ, &mine);
    MemInfo theirs = learn(ep);
    // A put's source may be read after glex_rdma returns (between hosts the daemon reads it),
    // so it is not rewritten until the put has surely been read: iteration i writes slot i % 2,
    // and by iteration i + 2 this side has seen the peer's answer to put i.
    glex_mem_handle_t lmh;
    uint64_t value[2] = {0, 0};
    glex_register_mem(dev, value, sizeof value, GLEX_MEM_READ, &lmh);
    glex_rdma_req r = request(peer, GLEX_OP_PUT, value, lmh, bytes, theirs);
    auto* flag = static_cast<volatile uint64_t*>(mine);
    // While it polls its buffer a side progresses the library, as ucx_perftest's put_lat
    // progresses its worker: between hosts the process's own NIC thread takes the peer's put
    // (glex/direct_rdma.h), and a poll takes it without waking that thread.
    glex_cq_entry e;
    auto await = [&](int i) {
      while (*flag != static_cast<uint64_t>(i)) (void)glex_poll_cq(ep, &e);
    };
    double t0 = 0;
    for (int i = 1; i <= warm + iters; ++i) {
      if (i == warm + 1) t0 = now_s();
      value[i % 2] = static_cast<uint64_t>(i);
      r.local_addr = &value[i % 2];
      if (rank == 0) {
        post_put(ep, r);
        await(i);
      } else {
        await(i);
        post_put(ep, r);
      }
    }
    result = (now_s() - t0) / iters / 2 * 1e6;
    glex_mp mp;
    if (rank == 0)
      send_retry(ep, peer, buf.data(), 8);
    else
      glex_recv_mp(ep, -1, &mp);
  } else if (kind == "get_lat") {
    void* mine;
    if (rank == 1) {
      expose(dev, ep, peer, 64, GLEX_MEM_READ, &mine);
      glex_mp mp;
      glex_recv_mp(ep, -1, &mp);
    } else {
      MemInfo theirs = learn(ep);
      uint64_t value = 0;
      glex_mem_handle_t lmh;
      glex_register_mem(dev, &value, sizeof value, GLEX_MEM_WRITE, &lmh);
      glex_rdma_req r = request(peer, GLEX_OP_GET, &value, lmh, bytes, theirs);
      double t0 = 0;
      for (int i = 0; i < warm + iters; ++i) {
        if (i == warm) t0 = now_s();
        glex_rdma(ep, &r);
        glex_fence(ep, -1);
      }
      result = (now_s() - t0) / iters * 1e6;
      send_retry(ep, peer, buf.data(), 8);
    }
  } else {
    *error = fmt::format("unknown test kind '{}'", kind);
    return -1;
  }
  glex_destroy_ep(ep);
  glex_close_device(dev);
  return result;
}

}  // namespace

int default_iterations(const std::string& kind, size_t bytes) {
  if (kind == "mp_lat" || kind == "put_lat" || kind == "get_lat") return 200000;
  if (kind == "msg_rate") return 2000000;
  return static_cast<int>(std::clamp<double>(2e10 / static_cast<double>(bytes), 200, 1e6));
}

Result<std::vector<double>> run_ours(const std::string& kind, size_t bytes, const OursOptions& o) {
  const int iters = o.iterations > 0 ? o.iterations : default_iterations(kind, bytes);
  std::vector<double> runs;
  for (int rep = 0; rep < o.repetitions; ++rep) {
    const std::string dir = fmt::format("/tmp/galaxy-bench-{}-{}-{}", getpid(), rep, std::rand());
    std::filesystem::remove_all(dir);
    int fds[2];
    if (pipe(fds) != 0)
      return make_error(Code::kIoError, 9420, fmt::format("pipe: {}", std::strerror(errno)));
    pid_t pids[2];
    for (int r = 0; r < 2; ++r) {
      pids[r] = fork();
      if (pids[r] == 0) {
        close(fds[0]);
        setenv("GLEX_FABRIC", o.fabric.c_str(), 1);
        setenv("GLEX_HOST", (r == 1 && !o.host_b.empty() ? o.host_b : o.host).c_str(), 1);
        setenv("GLEX_NIC", std::to_string(r == 0 ? o.nic_a : o.nic_b).c_str(), 1);
        setenv("GLEX_RANK", std::to_string(r).c_str(), 1);
        setenv("GLEX_SIZE", "2", 1);
        setenv("GLEX_RENDEZVOUS", dir.c_str(), 1);
        std::string err;
        double v = worker(kind, bytes, iters, &err);
        if (r == 0) {
          std::string line = v < 0 ? "error " + err : fmt::format("{:.9g}", v);
          ssize_t w = write(fds[1], line.data(), line.size());
          (void)w;
        }
        _exit(v < 0 ? 1 : 0);
      }
    }
    close(fds[1]);
    // Wait for both, killing them if the test hangs.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
    int done = 0;
    bool timed_out = false;
    while (done < 2) {
      int status;
      pid_t p = waitpid(-1, &status, WNOHANG);
      if (p == pids[0] || p == pids[1]) {
        ++done;
        continue;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pids[0], SIGKILL);
        kill(pids[1], SIGKILL);
        timed_out = true;
        waitpid(pids[0], nullptr, 0);
        waitpid(pids[1], nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    char out[512] = {0};
    ssize_t n = read(fds[0], out, sizeof out - 1);
    close(fds[0]);
    std::filesystem::remove_all(dir);
    if (timed_out)
      return make_error(
          Code::kTimeout, 9421,
          fmt::format("galaxy {} {} B: no result within {} s", kind, bytes, o.timeout_s));
    std::string text(out, n > 0 ? static_cast<size_t>(n) : 0);
    if (text.empty() || text.rfind("error", 0) == 0)
      return make_error(Code::kIoError, 9422,
                        fmt::format("galaxy {} {} B failed: {}", kind, bytes,
                                    text.empty() ? "worker died" : text));
    runs.push_back(std::strtod(text.c_str(), nullptr));
  }
  return runs;
}

}  // namespace galaxy::cli
