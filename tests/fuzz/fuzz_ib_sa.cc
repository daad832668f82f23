// libFuzzer target: subnet administration requests (any port of a subnet may send the SA
// anything). The bytes as a MAD go to the SA of a master that swept a small modelled subnet:
// every request that decodes gets an answer of the request's transaction, no longer than a MAD,
// with a status or (a table) whole records of the attribute's size, and the SA goes on answering;
// the SA header and each record decoder take any bytes and re-encode what they decoded
// (ServiceRecord Sets and Deletes among the requests: the registry stays bounded).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>

#include "../ib/ib_model_subnet.h"
#include "fabric/builders.h"
#include "nm/ib_sm.h"
#include "wire/ib_sa.h"

namespace {

struct Swept {
  galaxy::fabric::Topology topo;
  std::unique_ptr<galaxy::test::ModelSubnet> model;
  std::unique_ptr<galaxy::nm::IbSubnetManager> sm;
  Swept() {
    topo = std::move(*galaxy::fabric::build_topology("fattree:k=4,levels=2"));
    model = std::make_unique<galaxy::test::ModelSubnet>(topo, topo.nic_node(0));
    sm = std::make_unique<galaxy::nm::IbSubnetManager>(*model, galaxy::nm::IbSmOptions{});
    if (!sm->serve_sm_info().ok() || !sm->sweep().ok()) std::abort();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace galaxy::wire;
  static Swept swept;
  if (size < kMadBytes) return 0;
  auto m = decode_mad(std::span<const uint8_t>(data, kMadBytes));
  if (!m.ok()) return 0;
  m->mgmt_class = MgmtClass::kSubnAdm;
  if (is_response(m->method)) m->method = MadMethod::kGetTable;
  auto a = swept.model->ask_class(*m, {swept.model->lid(swept.topo.nic_node(1), 1), 1});
  if (!a || a->mad.transaction_id != m->transaction_id || a->length > kMadBytes ||
      a->length < kSaDataOffset || !is_response(a->mad.method))
    std::abort();
  if (a->mad.status == 0 && a->mad.method == MadMethod::kGetTableResp) {
    const unsigned stride = decode_sa_header(a->mad).attribute_offset * 8u;
    if (stride == 0 || (a->length - kSaDataOffset) % stride != 0) std::abort();
  }
  // The decoders on the data: what they decode re-encodes to the same record.
  const SaHeader h = decode_sa_header(*m);
  Mad again = *m;
  encode_sa_header(again, h);
  if (!(decode_sa_header(again) == h)) std::abort();
  const auto rec = sa_data(*m);
  std::array<uint8_t, 112> buf{};
  const PathRecord pr = decode_path_record(rec);
  encode_path_record(pr, buf);
  if (!(decode_path_record(buf) == pr)) std::abort();
  const NodeRecord nr = decode_node_record(rec);
  encode_node_record(nr, buf);
  if (!(decode_node_record(buf) == nr)) std::abort();
  const PortInfoRecord pir = decode_port_info_record(rec);
  encode_port_info_record(pir, buf);
  if (std::memcmp(buf.data(), rec.data(), 68) != 0) std::abort();
  std::array<uint8_t, kServiceRecordBytes> sb{};
  const ServiceRecord sr = decode_service_record(rec);
  encode_service_record(sr, sb);
  if (!(decode_service_record(sb) == sr)) std::abort();
  const LinkRecord lr = decode_link_record(rec);
  encode_link_record(lr, buf);
  if (!(decode_link_record(buf) == lr) || std::memcmp(buf.data(), rec.data(), 6) != 0)
    std::abort();
  return 0;
}
