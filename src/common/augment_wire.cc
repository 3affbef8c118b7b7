#include "common/augment_wire.h"

#include <stdexcept>
#include <unordered_map>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>

#include "prep/ops/op_family.h"

namespace joader {
namespace {

// The op oneof's field of each family, by kind, and each field number's kind.
struct WireTable {
  std::vector<const google::protobuf::FieldDescriptor*> field_of;
  std::unordered_map<int, AugmentOp::Kind> kind_of;
};

const WireTable& wire_table() {
  static const WireTable table = [] {
    WireTable t;
    const auto& families = op_families();
    t.field_of.assign(families.size(), nullptr);
    const google::protobuf::OneofDescriptor* op = v1::AugmentOp::descriptor()->FindOneofByName("op");
    for (int i = 0; op && i < op->field_count(); ++i) {
      const google::protobuf::FieldDescriptor* field = op->field(i);
      size_t k = 0;
      while (k < families.size() && (!field->message_type() || field->message_type()->name() != families[k]->name)) ++k;
      if (k == families.size() || t.field_of[k]) {
        throw std::logic_error("the protocol's AugmentOp." + field->name() + " is no op family's own message");
      }
      t.field_of[k] = field;
      t.kind_of.emplace(field->number(), AugmentOp::Kind(k));
    }
    for (size_t k = 0; k < families.size(); ++k) {
      if (!t.field_of[k]) throw std::logic_error(std::string("op family ") + families[k]->name + " has no message");
    }
    return t;
  }();
  return table;
}

}  // namespace

v1::AugmentOp to_wire(const AugmentOp& op) {
  v1::AugmentOp m;
  family_of(op).to_wire(op, m);
  return m;
}

AugmentOp op_from_wire(const v1::AugmentOp& m) {
  const WireTable& table = wire_table();
  const auto it = table.kind_of.find(m.op_case());
  if (it == table.kind_of.end()) throw PrepError("an op this build does not know (no op message it reads is set)");
  AugmentOp op;
  op.kind = it->second;
  family_of(op).from_wire(m, op);
  return op;
}

std::vector<AugmentOp> from_wire(const google::protobuf::RepeatedPtrField<v1::AugmentOp>& ops) {
  std::vector<AugmentOp> out;
  for (const v1::AugmentOp& m : ops) out.push_back(op_from_wire(m));
  validate_pipeline(out);
  return out;
}

std::vector<AugmentOp> ops_from_json(const std::vector<std::string>& json) {
  std::vector<AugmentOp> out;
  for (const std::string& op : json) out.push_back(op_from_wire(wire_from_json(op)));
  return out;
}

v1::AugmentOp wire_from_json(std::string_view json) {
  v1::AugmentOp m;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &m, google::protobuf::util::JsonParseOptions());
  if (!status.ok()) throw PrepError("not an op: " + std::string(status.message()));
  return m;
}

const std::string& wire_field(AugmentOp::Kind kind) { return wire_table().field_of.at(size_t(kind))->name(); }

}  // namespace joader
