// Chi-square goodness-of-fit helpers for the statistical tests (tests only).
//
// chi_square_pvalue is exact for integer degrees of freedom (closed forms of the regularized
// upper incomplete gamma function for integer and half-integer shape), evaluated in log space so
// that large statistics and degrees of freedom (thousands) neither overflow nor underflow.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

namespace joader::testing {

// P(χ²_df ≥ x). A statistic that is not a number (0/0 from empty cells) throws.
inline double chi_square_pvalue(double x, int df) {
  if (std::isnan(x) || df < 1) throw std::invalid_argument("chi_square_pvalue: statistic or df undefined");
  if (x <= 0) return 1.0;
  const double half = x / 2;
  std::vector<double> log_terms;
  double base = 0;
  if (df % 2 == 0) {
    // Q = e^{-x/2} Σ_{i<df/2} (x/2)^i / i!
    for (int i = 0; i < df / 2; ++i) log_terms.push_back(-half + i * std::log(half) - std::lgamma(i + 1.0));
  } else {
    // Q = erfc(√(x/2)) + 2φ(√x) Σ_{k=1}^{(df-1)/2} √x^{2k-1} / (2k-1)!!
    base = std::erfc(std::sqrt(half));
    const double log_two_phi = std::log(2.0) - half - 0.5 * std::log(2 * std::numbers::pi);
    for (int k = 1; k <= (df - 1) / 2; ++k) {
      const double log_double_factorial = std::lgamma(2.0 * k + 1) - k * std::log(2.0) - std::lgamma(k + 1.0);
      log_terms.push_back(log_two_phi + (2 * k - 1) * 0.5 * std::log(x) - log_double_factorial);
    }
  }
  if (log_terms.empty()) return std::min(1.0, base);
  const double top = *std::max_element(log_terms.begin(), log_terms.end());
  double sum = 0;
  for (double t : log_terms) sum += std::exp(t - top);
  return std::min(1.0, base + std::exp(top + std::log(sum)));
}

struct ChiSquare {
  double statistic;
  int df;
  double pvalue;
};

// Goodness of fit of `counts` to equal cell probabilities. An empty sample (no cell, or all zero)
// throws std::invalid_argument: it would give 0/0 and a p-value of 1, a test that cannot fail.
inline ChiSquare chi_square_uniform(const std::vector<uint64_t>& counts) {
  double total = 0;
  for (uint64_t c : counts) total += double(c);
  if (counts.size() < 2 || total <= 0) {
    throw std::invalid_argument("chi_square_uniform: an empty sample (" + std::to_string(counts.size()) +
                                " cells, " + std::to_string(uint64_t(total)) + " observations) tests nothing");
  }
  const double expected = total / double(counts.size());
  double stat = 0;
  for (uint64_t c : counts) stat += (double(c) - expected) * (double(c) - expected) / expected;
  const int df = static_cast<int>(counts.size()) - 1;
  return {stat, df, chi_square_pvalue(stat, df)};
}

// Rank of a permutation of 0..n-1 in lexicographic order (Lehmer code), in [0, n!).
inline uint64_t permutation_rank(const std::vector<int>& perm) {
  uint64_t rank = 0;
  const size_t n = perm.size();
  for (size_t i = 0; i < n; ++i) {
    uint64_t smaller_after = 0;
    for (size_t j = i + 1; j < n; ++j) smaller_after += perm[j] < perm[i];
    rank = rank * (n - i) + smaller_after;
  }
  return rank;
}

}  // namespace joader::testing
