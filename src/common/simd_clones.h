// JOADER_CLONES: compile a hot loop several times (AVX2, SSE4.1, baseline x86-64) and let the
// dynamic loader pick the best the machine has. x86-64's baseline (SSE2) lacks the 32-bit vector
// multiply and byte shuffles these loops vectorise into. Same arithmetic in every clone, so the
// same bytes. Not in sanitizer builds: their runtimes are not ready when the dynamic loader runs
// the clones' resolvers (TSan crashes at start), and they check the same code anyway.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define JOADER_CLONES __attribute__((target_clones("avx2", "sse4.1", "default")))
#else
#define JOADER_CLONES
#endif
