// Per-job augmentation of a decoded image, with torchvision's semantics: the random part of a
// training pipeline, run per delivery on the shared decoded image so that jobs keep independent,
// fresh crops while sharing the decode.
//
// Ops (applied in order, each to the output of the one before, as torchvision.transforms.Compose
// applies them to a PIL image):
//   RandomResizedCrop(size, scale, ratio, interpolation)  parameters by torchvision's get_params
//       law (10 attempts, then the clamped central fallback); output bytes equal
//       F.resized_crop(pil, top, left, h, w, [size, size], interpolation) (PIL's antialiased
//       bilinear or bicubic, or its nearest neighbour).
//   RandomHorizontalFlip(p)                F.hflip with probability p.
//   Resize(S, interpolation)               shorter side to S, the longer int(S * long / short).
//   CenterCrop(C)                          torchvision's offsets, zero padding when smaller.
//   ColorJitter(brightness, contrast, saturation, hue)  ColorJitter.get_params's law (a uniform
//       order of the four, each factor uniform in its range; a range at its centre — (1, 1),
//       or (0, 0) for hue — is torchvision's None: not applied), then F.adjust_* on the PIL
//       image in that order (prep/color.h: PIL's bytes).
//   AutoAugment(policy)                    TrivialAugmentWide, RandAugment or AutoAugment with
//       their laws and PIL's pixels (prep/autoaugment.h); also torchvision's single random ops
//       (RandomPosterize, RandomGrayscale, RandomVerticalFlip, ...) as its RandomApply family.
//   RandomAffine(degrees, translate, scale, shear, interpolation, fill, center) and
//       RandomRotation(degrees, interpolation, expand=False, center, fill): get_params's law (the
//       angle, scale and shears uniform, the translations round(uniform(±fraction × size))), then
//       F.affine / F.rotate on the PIL image (prep/pil/geometry.h: PIL's pixels).
//   RandomCrop(size, padding, pad_if_needed, fill)  torchvision's: F.pad with the constant fill
//       (padding, then pad_if_needed's padding of both sides by the missing width / height), then
//       a size×size window at a uniform position (get_params); an image still smaller than size
//       is an error, as in torchvision.
//
// Randomness comes from a counter-based generator keyed by (seed, epoch, item): no state is shared
// between deliveries, so a job's crops are reproducible from its seed, resumable after a crash,
// and independent of which other jobs run or in what order items are delivered.
//
// Each op family is one file of prep/ops/ behind one interface (ops/op_family.h), listed once
// (ops/list.h); this pipeline loops over that table.
//
// Thread-safe: every function is pure.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "prep/augment_op.h"
#include "prep/counter_rng.h"
#include "prep/image_prep.h"
#include "prep/ops/color_jitter.h"
#include "prep/ops/random_crop.h"
#include "prep/ops/resized_crop.h"

namespace joader {

// Throws PrepError naming the op and field, e.g. "RandomResizedCrop: size must be in 1..8192, not
// 0", "RandomResizedCrop: scale (0.5, 0.2) is empty", "RandomHorizontalFlip: p must be in [0, 1]".
// A pipeline must end in a fixed size: its last sizing op is RandomResizedCrop, CenterCrop or
// RandomCrop.
void validate_pipeline(const std::vector<AugmentOp>& ops);

// The output side (C of C×C) of a valid pipeline.
uint32_t pipeline_output_size(const std::vector<AugmentOp>& ops);

// The random draws of one delivery: per op, what it draws (OpDraw) for an input of width×height.
std::vector<OpDraw> draw_augment(const std::vector<AugmentOp>& ops, uint32_t width, uint32_t height, uint64_t seed,
                                 uint32_t epoch, uint32_t item);

// For a caller that copies only what it reads of an image: whether the pipeline's first op reads
// only some rows of its input (a crop's box), and then which for these draws (false: all rows).
// rows_from(..., top) counts the first op's draws from row `top` of the input (for an input whose
// rows before `top` were left out).
bool reads_some_rows(const std::vector<AugmentOp>& ops);
bool rows_read(const std::vector<AugmentOp>& ops, const std::vector<OpDraw>& draws, int64_t* top, int64_t* height);
void rows_from(const std::vector<AugmentOp>& ops, std::vector<OpDraw>& draws, int64_t top);

// The ops applied in order to img with the given draws (from draw_augment on img's size).
Image apply_augment(const ImageView& img, const std::vector<AugmentOp>& ops, const std::vector<OpDraw>& draws);

// The same pixels handed to `sink` row by row (rows 0 .. size - 1 of the size×size output, in
// order) instead of stored: for a pipeline whose last op that is not a flip can stream its rows
// (a bilinear or bicubic RandomResizedCrop), straight from its resample, the flips folded in (no
// output image, no flip pass); for any other, from the image apply_augment computes.
void apply_augment(const ImageView& img, const std::vector<AugmentOp>& ops, const std::vector<OpDraw>& draws,
                   RowSink& sink);

// What one delivery of `item` in `epoch` to a job with `seed` receives:
// apply_augment(img, ops, draw_augment(ops, img.width, img.height, seed, epoch, item)).
// Throws PrepError on an image without pixels.
Image augment(const ImageView& img, const std::vector<AugmentOp>& ops, uint64_t seed, uint32_t epoch, uint32_t item);
Image augment(const Image& img, const std::vector<AugmentOp>& ops, uint64_t seed, uint32_t epoch, uint32_t item);
// augment() handing the rows to `sink` (apply_augment above): e.g. into a batch's slot.
void augment(const ImageView& img, const std::vector<AugmentOp>& ops, uint64_t seed, uint32_t epoch, uint32_t item,
             RowSink& sink);

}  // namespace joader
