// Mutex and MutexLock: std::mutex and std::unique_lock with Clang's thread-safety annotations, so
// that which lock guards what is written in the code (JOADER_GUARDED_BY, JOADER_REQUIRES) and checked by the
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

#define JOADER_CAPABILITY(x) JOADER_TSA(capability(x))
#define JOADER_SCOPED_CAPABILITY JOADER_TSA(scoped_lockable)
#define JOADER_GUARDED_BY(x) JOADER_TSA(guarded_by(x))
#define JOADER_PT_GUARDED_BY(x) JOADER_TSA(pt_guarded_by(x))
#define JOADER_REQUIRES(...) JOADER_TSA(requires_capability(__VA_ARGS__))
#define JOADER_ACQUIRE(...) JOADER_TSA(acquire_capability(__VA_ARGS__))
#define JOADER_RELEASE(...) JOADER_TSA(release_capability(__VA_ARGS__))
#define JOADER_EXCLUDES(...) JOADER_TSA(locks_excluded(__VA_ARGS__))
#define JOADER_NO_THREAD_SAFETY_ANALYSIS JOADER_TSA(no_thread_safety_analysis)

namespace joader {

class JOADER_CAPABILITY("mutex") Mutex {
 public:
  void lock() JOADER_ACQUIRE() { mu_.lock(); }
  void unlock() JOADER_RELEASE() { mu_.unlock(); }
  bool try_lock() JOADER_TSA(try_acquire_capability(true)) { return mu_.try_lock(); }
  std::mutex& native() { return mu_; }
  // Tells the analysis that the caller holds the mutex where it cannot see it (a lambda called
  // under the lock); checks nothing at run time.
  void assert_held() const JOADER_TSA(assert_capability(this)) {}

 private:
  std::mutex mu_;
};

// Holds `mu` from construction to destruction, except between unlock() and lock().
class JOADER_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) JOADER_ACQUIRE(mu) : lock_(mu.native()) {}
  ~MutexLock() JOADER_RELEASE() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void unlock() JOADER_RELEASE() { lock_.unlock(); }
  void lock() JOADER_ACQUIRE() { lock_.lock(); }
  // For std::condition_variable::wait and wait_for.
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace joader
