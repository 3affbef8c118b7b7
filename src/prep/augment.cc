// The per-item pipeline: each step asks the op's family (ops/op_family.h, listed in ops/list.h).
#include "prep/augment.h"

#include <span>

#include "prep/ops/op_family.h"

namespace joader {

using namespace ops;

std::string AugmentOp::describe() const { return family_of(*this).describe(*this); }

void validate_pipeline(const std::vector<AugmentOp>& ops) {
  if (ops.empty()) throw PrepError("an augmentation pipeline needs at least one op");
  for (const AugmentOp& op : ops) family_of(op).validate(op);
  pipeline_output_size(ops);
}

uint32_t pipeline_output_size(const std::vector<AugmentOp>& ops) {
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    const OpFamily::Sizing sizing = family_of(*it).sizing;
    if (sizing == OpFamily::Sizing::kFixes) return family_of(*it).fixed_size(*it);
    if (sizing == OpFamily::Sizing::kResizes) break;
  }
  throw PrepError(
      "an augmentation pipeline must end in a fixed size (RandomResizedCrop, CenterCrop or RandomCrop "
      "after the last Resize or Pad), so that batches are [B, 3, size, size]");
}

std::vector<OpDraw> draw_augment(const std::vector<AugmentOp>& ops, uint32_t width, uint32_t height, uint64_t seed,
                                 uint32_t epoch, uint32_t item) {
  if (width == 0 || height == 0) throw PrepError("image has no pixels");
  CounterRng rng(seed, epoch, item);
  std::vector<OpDraw> draws(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpFamily& family = family_of(ops[i]);
    if (family.draw) family.draw(ops[i], width, height, rng, draws[i]);
  }
  return draws;
}

bool reads_some_rows(const std::vector<AugmentOp>& ops) { return !ops.empty() && family_of(ops[0]).rows_read; }

bool rows_read(const std::vector<AugmentOp>& ops, const std::vector<OpDraw>& draws, int64_t* top, int64_t* height) {
  if (!reads_some_rows(ops)) return false;
  family_of(ops[0]).rows_read(draws[0], top, height);
  return true;
}

void rows_from(const std::vector<AugmentOp>& ops, std::vector<OpDraw>& draws, int64_t top) {
  if (reads_some_rows(ops)) family_of(ops[0]).rows_from(draws[0], top);
}

namespace {

// The ops applied in order (apply_augment's loop) to a part of a pipeline.
Image apply_ops(const ImageView& img, std::span<const AugmentOp> ops, std::span<const OpDraw> draws) {
  Image cur;           // the output of the ops so far
  ImageView in = img;  // what the next op reads: the input until an op has produced an image
  for (size_t i = 0; i < ops.size(); ++i) {
    if (in.width == 0 || in.height == 0) throw PrepError("image has no pixels");
    family_of(ops[i]).apply(in, cur, ops[i], draws[i]);
    in = view_of(cur);
  }
  return std::move(own(in, cur));
}

}  // namespace

Image apply_augment(const ImageView& img, const std::vector<AugmentOp>& ops, const std::vector<OpDraw>& draws) {
  return apply_ops(img, ops, draws);
}

void apply_augment(const ImageView& img, const std::vector<AugmentOp>& ops, const std::vector<OpDraw>& draws,
                   RowSink& sink) {
  // A pipeline whose pixels are last made by an op that streams (a bilinear or bicubic
  // RandomResizedCrop), perhaps flipped after: its resample hands each row over while it is in the
  // cache, mirrored on the way when the flips say so. Any other pipeline is computed whole, then
  // handed over row by row.
  size_t tail = ops.size();
  bool mirrored = false;
  while (tail > 0 && family_of(ops[tail - 1]).mirrors) {
    --tail;
    mirrored = mirrored != draws[tail].flip;
  }
  const std::span<const AugmentOp> all(ops);
  const OpFamily* last = tail > 0 ? &family_of(ops[tail - 1]) : nullptr;
  if (last == nullptr || last->streams == nullptr || !last->streams(ops[tail - 1])) {
    const Image out = apply_ops(img, all, draws);
    for (uint32_t y = 0; y < out.height; ++y) sink.row(y, &out.rgb[size_t{y} * out.width * 3]);
    return;
  }
  const size_t streaming = tail - 1;
  Image head;  // the ops before it, if any
  ImageView in = img;
  if (streaming > 0) {
    head = apply_ops(img, all.first(streaming), std::span<const OpDraw>(draws).first(streaming));
    in = view_of(head);
  }
  if (in.width == 0 || in.height == 0) throw PrepError("image has no pixels");
  last->stream(in, ops[streaming], draws[streaming], mirrored, sink);
}

Image augment(const ImageView& img, const std::vector<AugmentOp>& ops, uint64_t seed, uint32_t epoch, uint32_t item) {
  return apply_augment(img, ops, draw_augment(ops, img.width, img.height, seed, epoch, item));
}

Image augment(const Image& img, const std::vector<AugmentOp>& ops, uint64_t seed, uint32_t epoch, uint32_t item) {
  return augment(view_of(img), ops, seed, epoch, item);
}

void augment(const ImageView& img, const std::vector<AugmentOp>& ops, uint64_t seed, uint32_t epoch, uint32_t item,
             RowSink& sink) {
  apply_augment(img, ops, draw_augment(ops, img.width, img.height, seed, epoch, item), sink);
}

}  // namespace joader
