// The management daemon's REST API with untrusted requests (docs/api.md): method, path, query and
// body go through the same dispatch as the HTTP server (nmd/api.h), against a daemon on a small
// simulated fabric. Input: byte 0 = method (low 2 bits) and whether the write token is good
// (bit 2); then "path\nquery\nbody", query as k=v&k=v. Every answer must be a JSON object with
// a status the API documents, and an error must carry an id.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "nmd/api.h"
#include "nmd/daemon.h"

using namespace galaxy;

namespace {

nmd::Daemon& daemon_under_test() {
  static std::unique_ptr<nmd::Daemon> d = [] {
    nmd::DaemonOptions o;
    o.session.fabric = "sim:fattree:k=4,levels=2";
    o.db_path = ":memory:";
    o.scan_interval_s = 0;
    o.sweep_interval_s = 0;
    auto r = nmd::Daemon::create(o);
    if (!r.ok()) std::abort();
    return std::move(*r);
  }();
  return *d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const char* kMethods[] = {"GET", "POST", "PUT", "DELETE"};
  nmd::ApiCall call;
  call.method = kMethods[data[0] & 3];
  if (!(data[0] & 4)) call.write_auth = make_error(Code::kPermissionDenied, 8302, "no token");
  std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  auto nl = rest.find('\n');
  call.path = "/api/" + rest.substr(0, nl);
  std::string tail = nl == std::string::npos ? "" : rest.substr(nl + 1);
  auto nl2 = tail.find('\n');
  std::string query = tail.substr(0, nl2);
  call.body = nl2 == std::string::npos ? "" : tail.substr(nl2 + 1);
  size_t pos = 0;
  while (pos < query.size()) {
    size_t amp = query.find('&', pos);
    if (amp == std::string::npos) amp = query.size();
    std::string kv = query.substr(pos, amp - pos);
    auto eq = kv.find('=');
    call.query[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
    pos = amp + 1;
  }
  nmd::ApiResult r = nmd::dispatch(daemon_under_test(), call);
  if (!r.body.is_object()) std::abort();
  if (r.status != 200) {
    if (r.status < 400 || r.status > 503) std::abort();
    if (!r.body.contains("error") || !r.body["error"].contains("id")) std::abort();
  }
  (void)r.body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return 0;
}
