// The per-item pipeline on the wire: AugmentOp (prep/augment.h) to and from the protocol's
// v1::AugmentOp (proto/joader.proto: one message per op family in its `op` oneof), one codec for
// the client that sends a job's pipeline and the daemon that checks and shows it. Each family
// writes and reads its own message (OpFamily::to_wire / from_wire); this file finds the family of
// a message by its field, the message being named as the family (checked at first use).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/repeated_ptr_field.h>

#include "joader.pb.h"
#include "prep/augment.h"

namespace joader {

v1::AugmentOp to_wire(const AugmentOp& op);

// The ops of a request, checked as a pipeline (validate_pipeline): throws PrepError naming the op
// and field, also for a message with no op (a client of another protocol, or one that sends an op
// this build does not know).
std::vector<AugmentOp> from_wire(const google::protobuf::RepeatedPtrField<v1::AugmentOp>& ops);

// One op from its message, as its family reads it (not checked: validate_pipeline does that).
// Throws PrepError for a message with no op this build knows.
AugmentOp op_from_wire(const v1::AugmentOp& m);

// Ops written as JSON (wire_from_json's form), each read as op_from_wire reads it: for C++
// programs and tests that write a pipeline.
std::vector<AugmentOp> ops_from_json(const std::vector<std::string>& json);

// One op's message from protobuf's JSON form of it (field names as in the proto):
// {"random_crop": {"size": 32, "padding": {"left": 4}}}, the form the Python package sends. Throws
// PrepError with the parser's words for what is not such a message.
v1::AugmentOp wire_from_json(std::string_view json);

// The field of AugmentOp's `op` that carries a family's message ("random_resized_crop").
const std::string& wire_field(AugmentOp::Kind kind);

}  // namespace joader
