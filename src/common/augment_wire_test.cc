// The pipeline's codec, and the agreement of the three lists of ops: the protocol's
// AugmentOp.Kind, the C++ op table (prep/ops/list.h) and AugmentOp::Kind.
#include "common/augment_wire.h"

#include <cctype>
#include <string>

#include <gtest/gtest.h>

#include "prep/ops/op_family.h"

namespace joader {
namespace {

// "RandomResizedCrop" as the protocol spells it: "RANDOM_RESIZED_CROP".
std::string upper_snake(const std::string& camel) {
  std::string out;
  for (size_t i = 0; i < camel.size(); ++i) {
    if (i > 0 && std::isupper(static_cast<unsigned char>(camel[i]))) out += '_';
    out += static_cast<char>(std::toupper(static_cast<unsigned char>(camel[i])));
  }
  return out;
}

TEST(AugmentWire, TheProtocolAndTheOpTableListTheSameOpsWithTheSameNumbers) {
  const google::protobuf::EnumDescriptor* kinds = v1::AugmentOp::Kind_descriptor();
  ASSERT_EQ(size_t(kinds->value_count()), op_families().size());
  for (int i = 0; i < kinds->value_count(); ++i) {
    const int number = kinds->value(i)->number();
    ASSERT_LT(size_t(number), op_families().size());
    EXPECT_EQ(kinds->value(i)->name(), upper_snake(family_of(AugmentOp::Kind(number)).name)) << "kind " << number;
  }
}

TEST(AugmentWire, EveryOpCrossesTheWireUnchanged) {
  std::vector<AugmentOp> ops(op_families().size());
  for (size_t k = 0; k < ops.size(); ++k) ops[k].kind = AugmentOp::Kind(k);
  ops[AugmentOp::kRandomResizedCrop].size = 32;
  ops[AugmentOp::kRandomResizedCrop].interpolation = Interpolation::kBicubic;
  ops[AugmentOp::kResize].size = 40;
  ops[AugmentOp::kCenterCrop].size = 36;
  ops[AugmentOp::kColorJitter].jitter = {0.6, 1.4, 1, 1, 0.5, 1.5, -0.1, 0.1};
  ops[AugmentOp::kAutoAugment].policy.family = AutoAugmentSpec::kRandomApply;
  ops[AugmentOp::kAutoAugment].policy.entries = {{ImageOp::kPosterize, {4}, false, 0.3}};
  ops[AugmentOp::kRandomCrop].size = 24;
  ops[AugmentOp::kRandomCrop].padding = {4, 4, 4, 4};
  ops[AugmentOp::kRandomAffine].affine.degrees_min = -10;
  ops[AugmentOp::kRandomAffine].affine.degrees_max = 10;
  ops[AugmentOp::kPad].padding = {1, 2, 3, 4};
  ops[AugmentOp::kPad].fill = {9, 8, 7};
  ops.push_back(ops[AugmentOp::kCenterCrop]);  // a pipeline ends in one size
  google::protobuf::RepeatedPtrField<v1::AugmentOp> wire;
  for (const AugmentOp& op : ops) *wire.Add() = to_wire(op);
  const std::vector<AugmentOp> back = from_wire(wire);
  ASSERT_EQ(back.size(), ops.size());
  for (size_t k = 0; k < ops.size(); ++k) {
    EXPECT_EQ(back[k].describe(), ops[k].describe());
    EXPECT_EQ(back[k].params(), ops[k].params());
  }
}

TEST(AugmentWire, AKindThisBuildDoesNotKnowIsRefusedByNumber) {
  google::protobuf::RepeatedPtrField<v1::AugmentOp> wire;
  wire.Add()->set_kind(static_cast<v1::AugmentOp::Kind>(99));
  try {
    from_wire(wire);
    FAIL() << "kind 99 was taken";
  } catch (const PrepError& e) {
    EXPECT_STREQ(e.what(), "unknown op kind 99");
  }
}

}  // namespace
}  // namespace joader
