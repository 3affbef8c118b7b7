// The per-item pipeline's op families: X(kind, the OpFamily defined in ops/<file>.cc). This list
// makes AugmentOp::Kind (prep/augment_op.h) and the table (ops/registry.cc); proto/joader.proto's
// AugmentOp lists their messages in its `op` oneof in the same order (AugmentWire tests check it).
#pragma once

#define JOADER_OP_FAMILIES(X)                           \
  X(kRandomResizedCrop, kRandomResizedCropFamily)       \
  X(kRandomHorizontalFlip, kRandomHorizontalFlipFamily) \
  X(kResize, kResizeFamily)                             \
  X(kCenterCrop, kCenterCropFamily)                     \
  X(kColorJitter, kColorJitterFamily)                   \
  X(kAutoAugment, kAutoAugmentFamily)                   \
  X(kRandomCrop, kRandomCropFamily)                     \
  X(kRandomAffine, kRandomAffineFamily)                 \
  X(kPad, kPadFamily)
