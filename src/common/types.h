// Basic vocabulary shared by every layer of Joader.
#pragma once

#include <cstdint>

namespace joader {

// Index of an item inside its dataset: 0..N-1.
using ItemId = uint32_t;

// Slot of a job inside one dataset's sampler: 0..kMaxJobs-1. A slot is reused after its job leaves.
using JobSlot = int;

// Jobs per dataset are tracked as bits of a 64-bit signature.
inline constexpr int kMaxJobs = 64;

}  // namespace joader
