// SharedMaps: a registration in a process's memfd is reached in place; anything else (no
// memfd, another kind of file, a range beyond the memfd, a dead owner) is left to cross-memory
// attach, and a mapping goes when its registration does.
#include "engine/live/shared_maps.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace galaxy::live {
namespace {

constexpr uint64_t kLength = 3 * 4096;

// Memory as glex_alloc_mem gives it: a memfd mapped in this process.
struct Memfd {
  int fd = memfd_create("glex-mem", MFD_CLOEXEC);
  uint8_t* at = nullptr;
  Memfd() {
    if (fd >= 0 && ftruncate(fd, kLength) == 0) {
      void* p = mmap(nullptr, kLength, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p != MAP_FAILED) at = static_cast<uint8_t*>(p);
    }
  }
  ~Memfd() {
    if (at) munmap(at, kLength);
    if (fd >= 0) close(fd);
  }
  // The ATT entry of a registration of [base + offset, +length) in it, owned by `pid`.
  void fill(AttEntry* e, int32_t pid, uint64_t offset, uint64_t length,
            uint32_t generation = 1) const {
    e->key = 5;
    e->base = reinterpret_cast<uint64_t>(at) + offset;
    e->length = length;
    e->pid = pid;
    e->memfd = fd;
    e->memfd_base = reinterpret_cast<uint64_t>(at);
    e->access = 3;
    e->generation = generation;
  }
};

TEST(SharedMaps, ARegistrationInAMemfdIsReachedInPlaceBothWays) {
  Memfd m;
  ASSERT_NE(m.at, nullptr);
  SharedMaps maps;
  AttEntry e{};
  m.fill(&e, getpid(), 4096, 8192);
  const uint64_t vaddr = e.base + 100;
  uint8_t* p = maps.at(7, e, vaddr, 200, 1'000);
  ASSERT_NE(p, nullptr);
  EXPECT_NE(p, m.at + 4096 + 100) << "a mapping of its own, not the owner's address";
  std::memset(p, 0xA5, 200);  // a write through the NIC's mapping lands in the owner's memory
  EXPECT_EQ(m.at[4096 + 100], 0xA5);
  EXPECT_EQ(m.at[4096 + 299], 0xA5);
  EXPECT_EQ(m.at[4096 + 300], 0);
  m.at[4096 + 150] = 0x3C;  // and the owner's writes are read there
  EXPECT_EQ(p[50], 0x3C);
  EXPECT_EQ(maps.at(7, e, vaddr + 1000, 16, 2'000), p + 1000) << "the same mapping again";
  EXPECT_EQ(maps.size(), 1u);
}

TEST(SharedMaps, WhatIsNotAMemfdOrLiesBeyondItIsLeftToCrossMemoryAttach) {
  Memfd m;
  ASSERT_NE(m.at, nullptr);
  SharedMaps maps;
  AttEntry e{};
  m.fill(&e, getpid(), 0, kLength);
  EXPECT_EQ(maps.at(1, e, e.base + kLength - 8, 9, 0), nullptr) << "one byte past the memfd";
  EXPECT_EQ(maps.at(1, e, e.base - 1, 1, 0), nullptr) << "below it";
  EXPECT_NE(maps.at(1, e, e.base + kLength - 8, 8, 0), nullptr) << "its last bytes";
  AttEntry plain{};
  m.fill(&plain, getpid(), 0, kLength);
  plain.memfd = -1;  // malloc'd memory
  EXPECT_EQ(maps.at(2, plain, plain.base, 8, 0), nullptr);
  // Another kind of file under the number: a pipe, and a regular file, are never mapped.
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  AttEntry pipe_entry{};
  m.fill(&pipe_entry, getpid(), 0, kLength);
  pipe_entry.memfd = pipe_fds[0];
  EXPECT_EQ(maps.at(3, pipe_entry, pipe_entry.base, 8, 0), nullptr);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  char path[] = "/tmp/galaxy-shared-maps-XXXXXX";
  const int file = mkstemp(path);
  ASSERT_GE(file, 0);
  ASSERT_EQ(ftruncate(file, kLength), 0);
  AttEntry file_entry{};
  m.fill(&file_entry, getpid(), 0, kLength);
  file_entry.memfd = file;
  EXPECT_EQ(maps.at(4, file_entry, file_entry.base, 8, 0), nullptr);
  close(file);
  unlink(path);
  AttEntry closed{};
  m.fill(&closed, getpid(), 0, kLength);
  closed.memfd = 1000;  // no such descriptor
  EXPECT_EQ(maps.at(5, closed, closed.base, 8, 0), nullptr);
  EXPECT_EQ(maps.size(), 1u);
}

TEST(SharedMaps, ADeadOwnerIsNotWrittenToOnceItsCheckIsDue) {
  Memfd m;
  ASSERT_NE(m.at, nullptr);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();  // holds the memfd (inherited) until killed
    _exit(0);
  }
  SharedMaps maps;
  // The child's memfd under the same number, at the same address (a forked copy).
  AttEntry e{};
  m.fill(&e, child, 0, kLength);
  EXPECT_NE(maps.at(1, e, e.base, 8, 1'000'000), nullptr);
  kill(child, SIGKILL);
  // Dead but not reaped: no memory left, so refused too once the owner is checked again.
  usleep(20'000);
  EXPECT_NE(maps.at(1, e, e.base, 8, 1'500'000), nullptr) << "within 1 ms of the last check";
  EXPECT_EQ(maps.at(1, e, e.base, 8, 2'000'001), nullptr) << "a zombie";
  int status;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(maps.at(1, e, e.base, 8, 9'000'000), nullptr) << "gone";
}

TEST(SharedMaps, AMappingGoesWithItsRegistration) {
  Memfd m;
  ASSERT_NE(m.at, nullptr);
  SharedMaps maps;
  AttEntry a{};
  m.fill(&a, getpid(), 0, 4096, 1);
  AttEntry b{};
  m.fill(&b, getpid(), 4096, 4096, 1);
  ASSERT_NE(maps.at(1, a, a.base, 8, 0), nullptr);
  ASSERT_NE(maps.at(2, b, b.base, 8, 0), nullptr);
  // Entry 1 reused (a new generation): a new mapping, and the old one is stale.
  AttEntry a2{};
  m.fill(&a2, getpid(), 0, 4096, 2);
  ASSERT_NE(maps.at(1, a2, a2.base, 8, 0), nullptr);
  EXPECT_EQ(maps.size(), 3u);
  maps.drop_if(
      [](uint32_t index, int32_t, uint32_t generation) { return index == 1 && generation == 1; });
  EXPECT_EQ(maps.size(), 2u);
  maps.drop_if([](uint32_t, int32_t, uint32_t) { return true; });
  EXPECT_EQ(maps.size(), 0u);
  // Still reachable after a drop: mapped again at the next access.
  EXPECT_NE(maps.at(2, b, b.base, 8, 0), nullptr);
}

}  // namespace
}  // namespace galaxy::live
