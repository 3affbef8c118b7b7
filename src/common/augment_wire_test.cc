// The pipeline's codec, and the agreement of the lists of ops: the protocol's AugmentOp messages
// (its `op` oneof), the C++ op table (prep/ops/list.h) and AugmentOp::Kind.
#include "common/augment_wire.h"

#include <cmath>
#include <string>

#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include "prep/ops/op_family.h"

namespace joader {
namespace {

TEST(AugmentWire, TheProtocolHasOneMessagePerOpFamilyInTheTablesOrder) {
  const google::protobuf::OneofDescriptor* op = v1::AugmentOp::descriptor()->FindOneofByName("op");
  ASSERT_NE(op, nullptr);
  ASSERT_EQ(size_t(op->field_count()), op_families().size());
  for (int k = 0; k < op->field_count(); ++k) {
    ASSERT_NE(op->field(k)->message_type(), nullptr);
    EXPECT_EQ(op->field(k)->message_type()->name(), op_families()[k]->name) << "field " << k;
    EXPECT_EQ(wire_field(AugmentOp::Kind(k)), op->field(k)->name());
  }
  const google::protobuf::EnumDescriptor* image_ops = v1::AugmentOp::AutoAugment::ImageOp_descriptor();
  ASSERT_EQ(image_ops->value_count(), kImageOpCount);
  for (int k = 0; k < kImageOpCount; ++k) EXPECT_EQ(image_ops->value(k)->number(), k);
  EXPECT_EQ(image_ops->FindValueByNumber(int(ImageOp::kVerticalFlip))->name(), "VERTICAL_FLIP");
}

// Each family's message with every field set away from its default, in the table's order, then a
// CenterCrop (a pipeline ends in one size).
const std::vector<std::string> kOneOfEach = {
    R"({"random_resized_crop": {"size": 32, "scale": {"min": 0.25, "max": 1}, "ratio": {"min": 0.5, "max": 2},
                               "interpolation": "BICUBIC"}})",
    R"({"random_horizontal_flip": {"p": 0}})",
    R"({"resize": {"size": 40, "interpolation": "NEAREST"}})",
    R"({"center_crop": {"size": 36}})",
    R"({"color_jitter": {"brightness": {"min": 0.6, "max": 1.4}, "saturation": {"min": 0.5, "max": 1.5},
                         "hue": {"min": -0.1, "max": 0.1}}})",
    R"({"auto_augment": {"family": "AUTO_AUGMENT", "num_ops": 1, "interpolation": "BILINEAR", "fill": [1, 2, 3], "policy_size": 1,
                         "entries": [{"op": "POSTERIZE", "p": 0.3, "magnitudes": [4]},
                                     {"op": "ROTATE", "p": 0.6, "is_signed": true, "magnitudes": [9.5]}]}})",
    R"({"random_crop": {"size": 24, "padding": {"left": 4, "top": 3, "right": 2, "bottom": 1}, "pad_if_needed": true,
                        "fill": [5, 6, 7]}})",
    R"({"random_affine": {"degrees": {"min": -10, "max": 10}, "translate": {"x": 0.1}, "scale": {"min": 0.5, "max": 2},
                          "shear": [-1, 1, -2, 2], "interpolation": "BILINEAR", "fill": [7, 7, 7],
                          "center": {"y": 3}}})",
    R"({"pad": {"padding": {"left": 1, "top": 2, "right": 3, "bottom": 4}, "fill": [9, 8, 7]}})",
    R"({"center_crop": {"size": 36}})"};

TEST(AugmentWire, EveryOpCrossesTheWireUnchanged) {
  google::protobuf::RepeatedPtrField<v1::AugmentOp> wire;
  for (const std::string& json : kOneOfEach) *wire.Add() = wire_from_json(json);
  const std::vector<AugmentOp> ops = from_wire(wire);
  ASSERT_EQ(ops.size(), op_families().size() + 1);
  for (size_t k = 0; k < ops.size(); ++k) {
    EXPECT_EQ(ops[k].kind, k < op_families().size() ? AugmentOp::Kind(k) : AugmentOp::kCenterCrop);
    EXPECT_EQ(to_wire(ops[k]).SerializeAsString(), wire[int(k)].SerializeAsString()) << ops[k].describe();
  }
  EXPECT_EQ(ops[AugmentOp::kRandomAffine].describe(),
            "RandomAffine(degrees=(-10, 10), translate=(0.1, 0), scale=(0.5, 2), shear=(-1, 1, -2, 2), "
            "interpolation=bilinear, fill=(7, 7, 7), center=(0, 3))");
}

TEST(AugmentWire, AbsentFieldsAreTorchvisionsDefaults) {
  google::protobuf::RepeatedPtrField<v1::AugmentOp> wire;
  *wire.Add() = wire_from_json(R"({"random_resized_crop": {"size": 8}})");
  *wire.Add() = wire_from_json(R"({"random_horizontal_flip": {}})");
  *wire.Add() = wire_from_json(R"({"color_jitter": {"hue": {"min": -0.1, "max": 0.1}}})");
  *wire.Add() = wire_from_json(R"({"random_affine": {"degrees": {"min": -5, "max": 5}}})");
  const std::vector<AugmentOp> ops = from_wire(wire);
  EXPECT_EQ(ops[0].describe(), "RandomResizedCrop(8, scale=(0.08, 1), ratio=(0.75, 1.33333))");
  EXPECT_EQ(ops[1].describe(), "RandomHorizontalFlip(p=0.5)");
  EXPECT_EQ(ops[2].describe(), "ColorJitter(hue=(-0.1, 0.1))");
  EXPECT_EQ(ops[3].describe(), "RandomAffine(degrees=(-5, 5))") << "nearest, no translate, scale, shear or centre";
}

TEST(AugmentWire, AZeroIsKeptWhereItDiffersFromTheDefault) {
  // RandAugment(num_ops=0) applies nothing; absent, num_ops is 1 and an entry's p is 1.
  const auto applied = [](const std::string& fields) {
    const std::vector<AugmentOp> ops =
        ops_from_json({R"({"auto_augment": {"family": "RAND_AUGMENT", "entries": [{"op": "INVERT"}])" + fields + "}}"});
    return draw_augment(ops, 8, 8, 1, 0, 0)[0].applied.size();
  };
  EXPECT_EQ(applied(R"(, "num_ops": 0)"), 0u);
  EXPECT_EQ(applied(""), 1u);
  EXPECT_EQ(applied(R"(, "num_ops": 3)"), 3u);
  EXPECT_EQ(ops_from_json({R"({"random_horizontal_flip": {"p": 0}})"})[0].describe(), "RandomHorizontalFlip(p=0)");
  const std::vector<AugmentOp> apply = ops_from_json(
      {R"({"auto_augment": {"family": "RANDOM_APPLY", "policy_size": 1, "entries": [{"op": "INVERT"}]}})"});
  EXPECT_EQ(draw_augment(apply, 8, 8, 1, 0, 0)[0].applied.size(), 1u) << "an entry's absent p is 1";
}

TEST(AugmentWire, AnOpWithoutItsFamilysParametersIsABugNotACrash) {
  AugmentOp made_by_hand;
  made_by_hand.kind = AugmentOp::kCenterCrop;
  EXPECT_THROW(made_by_hand.describe(), std::logic_error);
}

// What from_wire says of `json`, one op followed by a CenterCrop; "accepted" if it takes it.
std::string refusal(const std::string& json) {
  google::protobuf::RepeatedPtrField<v1::AugmentOp> wire;
  try {
    *wire.Add() = wire_from_json(json);
    *wire.Add() = wire_from_json(R"({"center_crop": {"size": 4}})");
    from_wire(wire);
    return "accepted";
  } catch (const PrepError& e) {
    return e.what();
  }
}

TEST(AugmentWire, MalformedOpsAreRefusedNamingTheOpAndField) {
  EXPECT_EQ(refusal(R"({"random_affine": {"degrees": {"min": 0, "max": 1}, "interpolation": "BICUBIC"}})"),
            "RandomAffine: interpolation must be nearest or bilinear");
  EXPECT_EQ(refusal(R"({"random_affine": {"rotation": true, "shear": [1, 2, 3]}})"),
            "RandomRotation: shear takes 0, 2 or 4 values");
  EXPECT_EQ(refusal(R"({"pad": {"fill": [1, 2]}})"), "Pad: fill takes 3 values, not 2");
  EXPECT_EQ(refusal(R"({"random_crop": {"size": 4, "fill": [1, 2, 256]}})"),
            "RandomCrop: fill values must be in 0..255, not 256");
  EXPECT_EQ(refusal(R"({"auto_augment": {"interpolation": "BICUBIC", "entries": [{}]}})"),
            "AutoAugment: interpolation must be nearest or bilinear");
  EXPECT_EQ(refusal(R"({"auto_augment": {}})"), "TrivialAugmentWide: the op space is empty");
  EXPECT_EQ(refusal(R"({"auto_augment": {"family": "AUTO_AUGMENT", "policy_size": 2, "entries": [{}]}})"),
            "AutoAugment: the sub-policies must each have 2 ops");
  EXPECT_EQ(refusal(R"({"resize": {"size": 9000}})"), "Resize: size must be in 1..8192, not 9000");
  EXPECT_EQ(refusal(R"({"random_horizontal_flip": {"p": 2}})"), "RandomHorizontalFlip: p must be in [0, 1], not 2");
  EXPECT_EQ(refusal(R"({"random_crop": {"size": 4}})"), "accepted");
}

TEST(AugmentWire, WhatIsNotAnOpIsRefusedWithTheParsersWords) {
  EXPECT_NE(refusal(R"({"random_crop": {"size": -1}})").find("not an op"), std::string::npos);
  EXPECT_NE(refusal(R"({"random_crop": {"colour": 1}})").find("colour"), std::string::npos) << "an unknown field";
  EXPECT_NE(refusal(R"({"crop": {}})").find("crop"), std::string::npos) << "an unknown op";
  EXPECT_NE(refusal("[1, 2]").find("not an op"), std::string::npos);
  google::protobuf::RepeatedPtrField<v1::AugmentOp> wire;
  wire.Add();  // no op set: what a client of another protocol, or of a newer op, sends
  try {
    from_wire(wire);
    FAIL() << "an empty op was taken";
  } catch (const PrepError& e) {
    EXPECT_STREQ(e.what(), "an op this build does not know (no op message it reads is set)");
  }
}

}  // namespace
}  // namespace joader
