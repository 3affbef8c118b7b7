#include "common/augment_wire.h"

#include <algorithm>
#include <string>

namespace joader {

v1::AugmentOp to_wire(const AugmentOp& op) {
  v1::AugmentOp m;
  m.set_kind(static_cast<v1::AugmentOp::Kind>(op.kind));
  m.set_size(op.size);
  m.set_scale_min(op.scale_min);
  m.set_scale_max(op.scale_max);
  m.set_ratio_min(op.ratio_min);
  m.set_ratio_max(op.ratio_max);
  m.set_p(op.p);
  for (double v : op.jitter) m.add_jitter(v);
  for (double v : op.params()) m.add_params(v);
  return m;
}

std::vector<AugmentOp> from_wire(const google::protobuf::RepeatedPtrField<v1::AugmentOp>& ops) {
  std::vector<AugmentOp> out;
  for (const v1::AugmentOp& m : ops) {
    if (!v1::AugmentOp::Kind_IsValid(m.kind())) {
      throw PrepError("unknown op kind " + std::to_string(m.kind()));
    }
    AugmentOp op;
    op.kind = static_cast<AugmentOp::Kind>(m.kind());
    op.size = m.size();
    op.scale_min = m.scale_min();
    op.scale_max = m.scale_max();
    op.ratio_min = m.ratio_min();
    op.ratio_max = m.ratio_max();
    op.p = m.p();
    if (m.jitter_size() == int(op.jitter.size())) std::copy(m.jitter().begin(), m.jitter().end(), op.jitter.begin());
    op.set_params(std::vector<double>(m.params().begin(), m.params().end()));
    out.push_back(op);
  }
  validate_pipeline(out);
  return out;
}

}  // namespace joader
