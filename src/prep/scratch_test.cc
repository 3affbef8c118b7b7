// The decode memory budget (prep/scratch.h): waits, what never waits, what is given back.
#include "prep/scratch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

namespace joader {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// Sets the budget for one test and puts the default back.
class BudgetOf {
 public:
  explicit BudgetOf(uint64_t bytes) : saved_(decode_memory_budget()) { set_decode_memory_budget(bytes); }
  ~BudgetOf() { set_decode_memory_budget(saved_); }

 private:
  uint64_t saved_;
};

TEST(DecodeMemory, TheDefaultBudgetHoldsAtLeastOneGibibyte) { EXPECT_GE(decode_memory_budget(), 1024 * kMiB); }

TEST(DecodeMemory, SmallDecodesAndDecodesOutsideAScopeAreNotCounted) {
  const BudgetOf budget(100 * kMiB);
  reserve_decode_memory(500 * kMiB);  // no scope: a test's decode_image()
  EXPECT_EQ(decode_memory_in_use(), 0u);
  {
    const DecodeMemoryScope scope;
    reserve_decode_memory(kKeepScratchBytes);
    EXPECT_EQ(decode_memory_in_use(), 0u);
    reserve_decode_memory(kKeepScratchBytes + 1);
    EXPECT_EQ(decode_memory_in_use(), kKeepScratchBytes + 1);
  }
  EXPECT_EQ(decode_memory_in_use(), 0u);
}

TEST(DecodeMemory, ALargeDecodeWaitsUntilTheOthersLeaveRoom) {
  const BudgetOf budget(100 * kMiB);
  std::promise<void> release;
  std::promise<void> holding;
  std::thread first([&] {
    const DecodeMemoryScope scope;
    reserve_decode_memory(70 * kMiB);
    holding.set_value();
    release.get_future().wait();
  });
  holding.get_future().wait();
  std::atomic<bool> reserved = false;
  std::thread second([&] {
    const DecodeMemoryScope scope;
    reserve_decode_memory(40 * kMiB);  // 70 + 40 > 100
    reserved = true;
  });
  // Waiting cannot be proven by a delay, only its absence: a second decode that went ahead within
  // 100 ms fails here; one that waits passes, however slow the machine.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(reserved);
  release.set_value();
  first.join();
  second.join();
  EXPECT_TRUE(reserved);
  EXPECT_EQ(decode_memory_in_use(), 0u);
}

TEST(DecodeMemory, ADecodeLargerThanTheBudgetRunsAloneInsteadOfWaitingForever) {
  const BudgetOf budget(100 * kMiB);
  const DecodeMemoryScope scope;
  reserve_decode_memory(300 * kMiB);
  EXPECT_EQ(decode_memory_in_use(), 100 * kMiB);
}

TEST(DecodeMemory, AThreadThatHoldsPartOfTheBudgetNeverWaitsForItsSecondBuffer) {
  const BudgetOf budget(100 * kMiB);
  // On this thread alone: a wait here would never end, and the test would hit its time limit.
  const DecodeMemoryScope scope;
  reserve_decode_memory(80 * kMiB);  // the pixels
  reserve_decode_memory(60 * kMiB);  // a CMYK copy
  EXPECT_EQ(decode_memory_in_use(), 140 * kMiB);
}

TEST(DecodeMemory, NestedScopesGiveBackOnlyWhenTheOutermostEnds) {
  const BudgetOf budget(100 * kMiB);
  {
    const DecodeMemoryScope outer;
    {
      const DecodeMemoryScope inner;
      reserve_decode_memory(50 * kMiB);
    }
    EXPECT_EQ(decode_memory_in_use(), 50 * kMiB);
  }
  EXPECT_EQ(decode_memory_in_use(), 0u);
}

}  // namespace
}  // namespace joader
