// What the server knows of every link from the fault reports, and what it infers where reports
// were lost (docs/system.md 2.5.3). A report can be lost on the way: it travels the chip's fault
// route, which may cross the very link that just failed, or another one down at that moment.
// Nothing in the fabric resends it, so the server accounts for every report instead:
//
// * A link report carries the port's HANDSHAKES count (the link's training number n, chip.h):
//   up(n) is the n-th training, down(n) its end. Both ends of a link count alike, so the changes
//   of a link form one numbered sequence, up(1) down(1) up(2) ... Each change is recorded once,
//   from whichever end reports it first; the other end's report of it is merged. A report that
//   skips numbers proves the changes in between happened: they are recorded as inferred.
// * Reports carry the chip's report sequence number (the management packet's transaction id):
//   a gap, or a chip whose FAULTS_REPORTED count is ahead of what arrived, means reports of that
//   chip were lost; the server then reads the chip's ports (LINK_STATE, HANDSHAKES) and records
//   what the reads prove happened. Scans feed the same reads in for every port they read.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "fabric/topology.h"

namespace galaxy::nm {

struct LinkChange {
  uint32_t chip = 0;  // the end it was reported at or read at (plan node = chip id)
  uint8_t port = 0;
  bool up = false;
  uint64_t handshakes = 0;  // the link's training number
  bool inferred = false;    // no report of it arrived
};

// How many inferred changes one jump may produce; a longer run (a counter that restarted, or a
// link that flapped thousands of times unseen) is summarised by its last change.
inline constexpr uint64_t kMaxInferredChanges = 16;

class FaultLedger {
 public:
  explicit FaultLedger(const fabric::Topology& plan) : plan_(&plan) {}

  // A link_down or link_up report from (chip, port) whose detail is the port's handshakes.
  // Returns the changes to record: the reported one, preceded by any it proves were missed, or
  // nothing when the other end reported this change already.
  std::vector<LinkChange> report(uint32_t chip, uint8_t port, bool up, uint64_t handshakes);
  // A read of the port (a scan, or a check after lost reports): the changes it proves happened
  // that no report told of. The first read of a link only sets what is known.
  std::vector<LinkChange> observe(uint32_t chip, uint8_t port, bool up, uint64_t handshakes);

  // What discovery found: the link up or not, with no training number. A state other than the
  // believed one is one change no report told of; the first state of a link nothing was learnt
  // of only sets what is known (a server seeds its belief from its first discovery, so that a
  // change while no server managed the fabric is found by the next sweep).
  std::vector<LinkChange> observe_state(uint32_t chip, uint8_t port, bool up);

  // The chip's report sequence number: true when reports sent before it never arrived. A late
  // report (behind the expected number) is no gap.
  bool sequence_gap(uint32_t chip, uint16_t sequence);
  // The chip's FAULTS_REPORTED count: true when reports it sent have not arrived (yet). Makes
  // the count the next expected sequence number.
  bool missing_reports(uint32_t chip, uint64_t reported);

  // Whether the link at (chip, port) is believed up; nullopt until something was learnt.
  std::optional<bool> believed_up(uint32_t chip, uint8_t port) const;
  uint64_t merged() const { return merged_; }      // reports of changes already recorded
  uint64_t inferred() const { return inferred_; }  // changes recorded without a report

 private:
  using End = std::pair<uint32_t, uint8_t>;
  // The link's canonical end (the lower of its two), or the end itself when unlinked.
  End link_of(uint32_t chip, uint8_t port) const;
  // Position in the link's sequence: up(n) = 2n, down(n) = 2n + 1.
  static int64_t index(bool up, uint64_t handshakes) {
    return 2 * static_cast<int64_t>(handshakes) + (up ? 0 : 1);
  }
  // The link-level index of an end's own index (local): each end keeps an even offset, 0 while
  // both ends count alike; an end seen first behind the link, or whose count went back (its chip
  // restarted and counts from its power-on again), is renumbered onto the link's sequence.
  int64_t link_index(uint32_t chip, uint8_t port, int64_t local, int64_t known);
  // report() when `reported`, observe() otherwise.
  std::vector<LinkChange> take(uint32_t chip, uint8_t port, bool up, uint64_t handshakes,
                               bool reported);
  // Records the changes after the link's known index up to `to` (the last one as reported when
  // `reported`), at end (chip, port).
  std::vector<LinkChange> advance(int64_t& known, int64_t to, uint32_t chip, uint8_t port,
                                  bool reported);

  const fabric::Topology* plan_;
  std::map<End, int64_t> links_;  // link -> index of its last recorded change
  struct EndState {
    int64_t last = -1;  // the end's own index when last seen
    int64_t offset = 0;
  };
  std::map<End, EndState> ends_;
  // Links known only from discovery (observe_state), until a report or read numbers them.
  std::map<End, bool> states_;
  std::map<uint32_t, uint16_t> expected_;  // chip -> next report sequence number
  uint64_t merged_ = 0;
  uint64_t inferred_ = 0;
};

}  // namespace galaxy::nm
