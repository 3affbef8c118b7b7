// DsaSampler: the dependent sampling algorithm (docs/SAMPLER.md).
//
// Per round, jobs are ordered by |R_j| ascending (ties by slot). The first draws X uniformly from
// its R. Each next job i takes as parent p the already-decided job with the largest |R_p ∩ R_i|
// (start-of-round state), then reuses X_p with probability |R_p|/|R_i| when X_p ∈ R_i, and
// otherwise draws uniformly from R_i \ R_p. This is the maximal coupling of two uniform laws:
// P(X_i = y) = 1/|R_i| for every y ∈ R_i given everything before the round, so each job's epoch is a
// uniformly random permutation whatever the other jobs do, while P(X_i = X_p) = |R_p ∩ R_i|/|R_i|.
#pragma once

#include "sampler/sampler.h"

namespace joader {

class DsaSampler : public Sampler {
 public:
  using Sampler::Sampler;

 protected:
  void decide(std::span<const JobSlot> jobs, std::vector<Decision>& out) override;

  // Whether job i reuses its parent p's item X_p, given X_p ∈ R_i. The exact rule is a coin
  // with probability |R_p|/|R_i|; tests override this to show that a biased rule is caught.
  virtual bool reuse_parent(JobSlot i, JobSlot p);

 private:
  std::vector<JobSlot> order_;
};

// A deliberately NON-uniform DSA that always reuses the parent's item when it is in R_i: the
// control of the statistical tests (in the sampler's unit tests and through the daemon with
// `joader serve --sampler biased-dsa`), which must reject it. Never for training.
class AlwaysReuseDsaSampler : public DsaSampler {
 public:
  using DsaSampler::DsaSampler;

 protected:
  bool reuse_parent(JobSlot, JobSlot) override { return true; }
};

}  // namespace joader
