// One family of the per-item pipeline's ops (prep/augment.h) behind one interface: how an op is
// checked, described and carried on the wire, what it does to the image's size, what one delivery
// draws for it and what it does with those draws. Every family is listed once, in ops/list.h; the
// pipeline (prep/augment.cc) and the wire's codec loop over that table and never ask an op's kind.
// Each family's parameters are its own type (AugmentOp::params), which only its file reads.
//
// Adding an op: its file here (an OpFamily and its parameters, a type derived from OpParams that
// from_wire makes), its line in list.h (which makes its AugmentOp::Kind), its message in
// proto/joader.proto's AugmentOp (named as `name`, its field of `op` in list.h's order), its
// mapping from torchvision's class in python/joader/augment.py. Tests check that the list, the
// protocol and the Python names agree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "joader.pb.h"
#include "prep/augment_op.h"
#include "prep/counter_rng.h"
#include "prep/image_prep.h"

namespace joader {

struct OpFamily {
  const char* name;  // torchvision's class

  // What the op does to the size of its input: keeps it, makes it size×size (a pipeline that ends
  // in one size has such an op after its last resize), or resizes it to a size that depends on it.
  enum class Sizing { kKeeps, kFixes, kResizes };
  Sizing sizing = Sizing::kKeeps;
  // kFixes: the side of its output.
  uint32_t (*fixed_size)(const AugmentOp& op) = nullptr;

  // Throws PrepError (invalid() below) naming what is wrong with the op's fields.
  void (*validate)(const AugmentOp& op) = nullptr;
  std::string (*describe)(const AugmentOp& op) = nullptr;
  // The op as its message in the protocol's AugmentOp (setting its field of `op`), and back:
  // from_wire makes op.params (op.kind is set) from the message's fields as they are, validate()
  // judges their values; it throws PrepError (invalid()) only for what the parameters cannot
  // hold (an interpolation the op does not take, a fill that is not 3 bytes).
  void (*to_wire)(const AugmentOp& op, v1::AugmentOp& m) = nullptr;
  void (*from_wire)(const v1::AugmentOp& m, AugmentOp& op) = nullptr;
  // Optional: why the op, first in a pipeline, cannot take every image of a dataset whose
  // smallest is width×height ("" if it can): `image` names that image for the message ("the
  // smallest image 'train' stores"), `detail` says which it is ("item 3"; may be empty).
  std::string (*refuses_input)(const AugmentOp& op, uint32_t width, uint32_t height, const std::string& image,
                               const std::string& detail) = nullptr;
  // The name an error gives (RandomAffine's fields also hold a RandomRotation); null: `name`.
  const char* (*name_of)(const AugmentOp& op) = nullptr;

  // The draws of one delivery for an input of width×height, from rng; width and height become the
  // op's output size. Null: draws nothing, keeps the size.
  void (*draw)(const AugmentOp& op, uint32_t& width, uint32_t& height, CounterRng& rng, OpDraw& draw) = nullptr;
  // The op on `in`, its output left in `cur`. `in` is a view of `cur` (the ops before made it) or
  // the pipeline's input (then cur is empty); own() makes cur an image the op may change in place.
  void (*apply)(const ImageView& in, Image& cur, const AugmentOp& op, const OpDraw& draw) = nullptr;

  // Optional: whether this op's output can be handed on row by row as its resample makes it, and
  // doing so (mirrored: every row mirrored, the flips after it folded in). Null: never.
  bool (*streams)(const AugmentOp& op) = nullptr;
  void (*stream)(const ImageView& in, const AugmentOp& op, const OpDraw& draw, bool mirrored, RowSink& sink) = nullptr;
  // The op only mirrors its input when its draw's `flip` says so (RandomHorizontalFlip): a
  // streaming op before it folds it in.
  bool mirrors = false;

  // Optional: the rows of its input the op reads for a draw (a crop's box), and the draw counted
  // from row `top` of its input instead. Null: it reads every row.
  void (*rows_read)(const OpDraw& draw, int64_t* top, int64_t* height) = nullptr;
  void (*rows_from)(OpDraw& draw, int64_t top) = nullptr;
};

// The family of an op's kind (every AugmentOp::Kind has one).
const OpFamily& family_of(AugmentOp::Kind kind);
inline const OpFamily& family_of(const AugmentOp& op) { return family_of(op.kind); }
// Every family, in AugmentOp::Kind's order.
const std::vector<const OpFamily*>& op_families();

// Helpers of the families (and the pipeline), apart from the rest of joader.
namespace ops {

[[noreturn]] void invalid(const AugmentOp& op, const std::string& what);  // PrepError "Name: what"
void check_size(const AugmentOp& op, uint32_t size);                      // in 1..kMaxAugmentSize
std::string number(double v);                                             // %.6g
// RandomCrop's and Pad's padding: each side at most kMaxAugmentSize.
void check_padding(const AugmentOp& op, const std::array<uint32_t, 4>& padding);
std::string padding_text(const std::array<uint32_t, 4>& padding);  // "(left, top, right, bottom)"
// An op that makes a width×height image w×h: refused above PrepSpec's pixel limit, naming both.
void check_pixels(const AugmentOp& op, uint64_t width, uint64_t height, uint64_t w, uint64_t h);
std::string interpolation_text(Interpolation interpolation);  // ", interpolation=bicubic"; "" for bilinear
ResizeFilter filter_of(Interpolation interpolation);

// The wire's shared pieces. An interpolation of the resizing ops (DEFAULT: bilinear), and of the
// geometric ones (nearest or bilinear; DEFAULT: nearest).
v1::AugmentOp::Interpolation wire_interpolation(Interpolation interpolation);
Interpolation interpolation_of(const AugmentOp& op, v1::AugmentOp::Interpolation wire);
v1::AugmentOp::Interpolation wire_resample(Resample resample);
Resample resample_of(const AugmentOp& op, v1::AugmentOp::Interpolation wire);
// A fill: 3 values in 0..255, or none (black).
void set_wire_fill(const std::array<uint8_t, 3>& fill, google::protobuf::RepeatedField<uint32_t>* wire);
std::array<uint8_t, 3> fill_of(const AugmentOp& op, const google::protobuf::RepeatedField<uint32_t>& wire);
void set_wire_range(double min, double max, v1::AugmentOp::Range* wire);
void set_wire_padding(const std::array<uint32_t, 4>& padding, v1::AugmentOp::Padding* wire);
std::array<uint32_t, 4> padding_of(const v1::AugmentOp::Padding& wire);
ImageView view_of(const Image& img);
Image copy_of(const ImageView& v);
// cur as an image of its own holding `in` (a copy of in unless in already views cur).
Image& own(const ImageView& in, Image& cur);
void flip_rows(Image& img);
int64_t py_round(double v);  // Python's round() of a non-negative double: ties to even

}  // namespace ops

}  // namespace joader
