#include "server/idle_exit.h"

namespace joader {

bool IdleExit::due(uint64_t jobs, uint64_t jobs_opened, Clock::time_point now) {
  if (jobs > 0 || jobs_opened != jobs_opened_) {
    jobs_opened_ = jobs_opened;
    idle_since_ = now;
    return false;
  }
  return seconds_ > 0 && std::chrono::duration<double>(now - idle_since_).count() >= seconds_;
}

}  // namespace joader
