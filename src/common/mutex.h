// Mutex and MutexLock: std::mutex and std::unique_lock with Clang's thread-safety annotations, so
// that which lock guards what is written in the code (GUARDED_BY, REQUIRES) and checked by the
// compiler: the clang builds (`make fuzz`, part of `make test`) compile with -Wthread-safety as an
// error. Under GCC the annotations are empty.
//
// A condition variable waits on MutexLock::native() (a std::unique_lock of the same mutex): the
// mutex is held before and after the wait, which is all the analysis needs to know.
#pragma once

#include <mutex>

#if defined(__clang__)
#define JOADER_TSA(x) __attribute__((x))
#else
#define JOADER_TSA(x)
#endif

#define CAPABILITY(x) JOADER_TSA(capability(x))
#define SCOPED_CAPABILITY JOADER_TSA(scoped_lockable)
#define GUARDED_BY(x) JOADER_TSA(guarded_by(x))
#define PT_GUARDED_BY(x) JOADER_TSA(pt_guarded_by(x))
#define REQUIRES(...) JOADER_TSA(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) JOADER_TSA(acquire_capability(__VA_ARGS__))
#define RELEASE(...) JOADER_TSA(release_capability(__VA_ARGS__))
#define EXCLUDES(...) JOADER_TSA(locks_excluded(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS JOADER_TSA(no_thread_safety_analysis)

namespace joader {

class CAPABILITY("mutex") Mutex {
 public:
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

// Holds `mu` from construction to destruction, except between unlock() and lock().
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : lock_(mu.native()) {}
  ~MutexLock() RELEASE() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void unlock() RELEASE() { lock_.unlock(); }
  void lock() ACQUIRE() { lock_.lock(); }
  // For std::condition_variable::wait and wait_for.
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace joader
