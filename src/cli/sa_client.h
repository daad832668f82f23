// A client of an InfiniBand subnet's SA (IBA 15): one request to the master SM's SA, at the SM
// LID the local port knows, and its answer. Used by the commands that register with the SA
// (galaxy subscribe, galaxy service); any master SM's SA will do (Galaxy's, OpenSM's).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "ib/smp_port.h"
#include "wire/ib_mad.h"

namespace galaxy::cli {

// The local port a client of the SA talks through: `fabric` as "ib:[<adapter>[:<port>]]", each
// request waiting `timeout_ms` for its answer, sent once more if none came.
Result<std::unique_ptr<ib::SmpPort>> open_sa_client(const std::string& fabric, int timeout_ms);

// Sends `request` to the SA and waits up to `timeout_ms` for the answer of the same transaction
// id. `what` names the command in errors ("subscribe", "service register").
Result<wire::Mad> ask_sa(ib::SmpPort& port, const wire::Mad& request, int timeout_ms,
                         std::string_view what);

// The SA's status of an answer in words (IBA 15.2.1.2, Table 196; the common MAD codes).
std::string sa_status_text(uint16_t status);

}  // namespace galaxy::cli
