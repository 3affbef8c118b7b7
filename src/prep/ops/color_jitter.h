// ColorJitter (prep/augment.h): get_params's law, then PIL's adjustments (prep/color.h).
#pragma once

#include "prep/augment_op.h"
#include "prep/image_prep.h"

namespace joader {

// ColorJitter with the given draws on img, in place.
void color_jitter(Image& img, const AugmentOp& op, const OpDraw& draw);

}  // namespace joader
