// The per-item pipeline on the wire: AugmentOp (prep/augment.h) to and from the protocol's
// v1::AugmentOp (proto/joader.proto), one codec for the client that sends a job's pipeline and the
// daemon that checks and shows it.
#pragma once

#include <vector>

#include <google/protobuf/repeated_ptr_field.h>

#include "joader.pb.h"
#include "prep/augment.h"

namespace joader {

v1::AugmentOp to_wire(const AugmentOp& op);

// The ops of a request, checked as a pipeline (validate_pipeline): throws PrepError naming the op
// and field, also for a kind this build does not know or a malformed parameter list.
std::vector<AugmentOp> from_wire(const google::protobuf::RepeatedPtrField<v1::AugmentOp>& ops);

}  // namespace joader
