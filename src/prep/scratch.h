// Per-thread scratch buffers of image preparation, when to give their memory back, and how much
// memory the decodes of very large images may hold at once in one process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace joader {

// Decoded pixels are kept in per-thread buffers from one prepare() to the next instead of
// allocating (and zeroing) half a megabyte per image; glibc recycles such blocks anyway, so this
// is about not faulting in fresh pages, not speed. A buffer one very large image grew is released,
// so that it does not stay pinned in every loader thread.
inline constexpr size_t kKeepScratchBytes = size_t{32} << 20;

template <class T>
inline void release_if_large(std::vector<T>& v) {
  if (v.capacity() * sizeof(T) > kKeepScratchBytes) std::vector<T>().swap(v);
}

// The decode memory budget. Every image allowed (up to PrepSpec::max_pixels, 179 M pixels) decodes
// into up to 7 bytes per pixel (RGB, and CMYK before conversion): ~1.2 GB. With one loader thread
// per core, a dataset of large photos or a handful of decompression-bomb-sized files would hold
// that once per thread. So a decode that needs more than kKeepScratchBytes takes its size from a
// process-wide budget first, and waits while other threads' large decodes hold it; what it took is
// given back when its DecodeMemoryScope ends. A decode larger than the whole budget takes all of it
// (it runs alone). A thread that already holds part of the budget never waits for more (its decode
// may need a second buffer), so a waiting thread holds nothing and waits cannot form a cycle.
//
// One scope per top-level preparation (prepare(), prepare_into()) on its thread; decoders call
// reserve_decode_memory() before each allocation whose size an image's header gave. Outside a
// scope (a test's decode_image()) nothing is counted.
class DecodeMemoryScope {
 public:
  DecodeMemoryScope();
  ~DecodeMemoryScope();  // gives back what this thread reserved in the scope
  DecodeMemoryScope(const DecodeMemoryScope&) = delete;
  DecodeMemoryScope& operator=(const DecodeMemoryScope&) = delete;
};

// See DecodeMemoryScope: counts `bytes` against the budget if they exceed kKeepScratchBytes and a
// scope is open on this thread, waiting for room first unless the thread already holds some.
void reserve_decode_memory(uint64_t bytes);

// The budget in bytes: by default a sixteenth of physical memory, at least 1 GiB. Setting it (tests)
// does not wake threads already waiting until the next release.
uint64_t decode_memory_budget();
void set_decode_memory_budget(uint64_t bytes);
// What open scopes hold now (for tests and status).
uint64_t decode_memory_in_use();

}  // namespace joader
