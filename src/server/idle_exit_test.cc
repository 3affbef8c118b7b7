#include "server/idle_exit.h"

#include <gtest/gtest.h>

namespace joader {
namespace {

using std::chrono::seconds;
const IdleExit::Clock::time_point t0{};

TEST(IdleExit, ADaemonThatNeverHadAJobExitsOnceTheIdleTimeHasPassedSinceItsStart) {
  IdleExit idle(60, t0);
  EXPECT_FALSE(idle.due(0, 0, t0 + seconds(59)));
  EXPECT_TRUE(idle.due(0, 0, t0 + seconds(60)));
}

TEST(IdleExit, TheCountStartsAgainWhenTheLastJobEnds) {
  IdleExit idle(60, t0);
  EXPECT_FALSE(idle.due(1, 1, t0 + seconds(50)));
  EXPECT_FALSE(idle.due(1, 1, t0 + seconds(500)));  // a long job keeps it alive
  EXPECT_FALSE(idle.due(0, 1, t0 + seconds(501)));  // it ended after the last look that saw it
  EXPECT_FALSE(idle.due(0, 1, t0 + seconds(559)));
  EXPECT_TRUE(idle.due(0, 1, t0 + seconds(560)));
}

TEST(IdleExit, AJobThatCameAndWentBetweenTwoLooksCountsAsActivity) {
  IdleExit idle(60, t0);
  EXPECT_FALSE(idle.due(0, 0, t0 + seconds(30)));
  EXPECT_FALSE(idle.due(0, 3, t0 + seconds(70)));  // three short jobs ran meanwhile
  EXPECT_FALSE(idle.due(0, 3, t0 + seconds(129)));
  EXPECT_TRUE(idle.due(0, 3, t0 + seconds(130)));
}

TEST(IdleExit, ZeroSecondsMeansNever) {
  IdleExit idle(0, t0);
  EXPECT_FALSE(idle.due(0, 0, t0 + seconds(1000000)));
}

}  // namespace
}  // namespace joader
