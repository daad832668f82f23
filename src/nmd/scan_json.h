// The summary of one status scan (docs/system.md 2.5.2) and of its changes since the scan before:
// one format for `galaxy scan`, the daemon's scan events and its POST /api/scans.
#pragma once

#include <nlohmann/json.hpp>

#include "nm/scan.h"
#include "nmd/session.h"

namespace galaxy::nmd {

// Chips scanned, requests, answers, the chips that did not answer (up to `top` by name), the
// simulated time beside the paper's model, the management traffic and its share of a link,
// and the hottest chip's temperature when the scan read them.
nlohmann::json scan_summary_json(const Session& s, const nm::ScanResult& r, unsigned top);
// Counter deltas over the interval, how many registers changed, chips that stopped or started
// answering; with `changes`, up to `top` changed registers by name.
nlohmann::json scan_diff_json(const Session& s, const nm::ScanDiff& d, unsigned top, bool changes);

}  // namespace galaxy::nmd
