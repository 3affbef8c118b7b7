// What `status`, `top` and the JSON say about a job's epoch.
#include "client/report.h"

#include <gtest/gtest.h>

namespace joader {
namespace {

v1::JobStatus job(uint32_t epoch, uint32_t epochs) {
  v1::JobStatus j;
  j.set_name("j");
  j.set_epoch(epoch);
  j.set_epochs(epochs);
  return j;
}

TEST(Report, AJobThatDeliveredAllItsEpochsShowsDoneNotAnEpochBeyondItsLast) {
  EXPECT_EQ(epoch_column(job(2, 3)), "2");
  EXPECT_EQ(epoch_column(job(3, 3)), "done");
  EXPECT_EQ(epoch_column(job(7, 0)), "7") << "epochs 0: unbounded, never done";
  v1::StatusReply s;
  *s.add_jobs() = job(3, 3);
  *s.add_jobs() = job(1, 3);
  const nlohmann::json j = to_json(s);
  EXPECT_EQ(j["jobs"][0]["epoch"], 3);
  EXPECT_EQ(j["jobs"][0]["finished"], true);
  EXPECT_EQ(j["jobs"][1]["finished"], false);
}

}  // namespace
}  // namespace joader
