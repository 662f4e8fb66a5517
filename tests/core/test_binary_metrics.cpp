// AUC and logloss against values computed by hand: ties share their average rank, one class gives
// NaN, bad labels and mismatched lengths throw.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "core/binary_metrics.h"
#include "core/check.h"

using frugal::auc;
using frugal::logloss;

TEST_CASE("auc: hand-computed values") {
  // Perfect and reversed rankings.
  CHECK(auc(std::vector<float>{0.1f, 0.2f, 0.8f, 0.9f}, std::vector<float>{0, 0, 1, 1}) == 1.0);
  CHECK(auc(std::vector<float>{0.9f, 0.8f, 0.2f, 0.1f}, std::vector<float>{0, 0, 1, 1}) == 0.0);
  // Positives 0.35, 0.8; negatives 0.1, 0.4: pairs (0.35>0.1) (0.35<0.4) (0.8>0.1) (0.8>0.4) -> 3/4.
  CHECK(auc(std::vector<float>{0.1f, 0.4f, 0.35f, 0.8f}, std::vector<float>{0, 0, 1, 1}) == Approx(0.75));
  // A tie between a positive and a negative counts one half: positives {0.5, 0.9}, negatives
  // {0.5, 0.2}: 0.5 vs 0.5 -> 1/2, 0.5 > 0.2, 0.9 > both -> (0.5 + 1 + 2) / 4.
  CHECK(auc(std::vector<float>{0.5f, 0.2f, 0.5f, 0.9f}, std::vector<float>{0, 0, 1, 1}) == Approx(0.875));
  // All scores equal: 1/2 whatever the labels.
  CHECK(auc(std::vector<float>{3, 3, 3, 3, 3}, std::vector<float>{1, 0, 0, 1, 0}) == Approx(0.5));
  // Three positives, two negatives, ties across and within classes: scores/labels
  // (1,1) (1,0) (2,1) (2,1) (0,0): positive-negative pairs: s=1 vs 1 -> .5, vs 0 -> 1; each s=2
  // beats both -> 2 + 2; total 5.5 of 6.
  CHECK(auc(std::vector<float>{1, 1, 2, 2, 0}, std::vector<float>{1, 0, 1, 1, 0}) == Approx(5.5 / 6));
}

TEST_CASE("auc: undefined with one class, errors on bad input") {
  CHECK(std::isnan(auc(std::vector<float>{0.1f, 0.2f}, std::vector<float>{1, 1})));
  CHECK(std::isnan(auc(std::vector<float>{}, std::vector<float>{})));
  CHECK_THROWS_WITH(auc(std::vector<float>{0.1f}, std::vector<float>{2}), Catch::Contains("expected 0 or 1"));
  CHECK_THROWS_WITH(auc(std::vector<float>{0.1f}, std::vector<float>{1, 0}), Catch::Contains("1 predictions but 2 labels"));
  CHECK_THROWS_WITH(auc(std::vector<float>{NAN, 0.2f}, std::vector<float>{1, 0}), Catch::Contains("is NaN"));
}

TEST_CASE("logloss: hand-computed values and clamping") {
  // -(log 0.8 + log(1 - 0.4)) / 2 = (0.22314355 + 0.51082562) / 2
  CHECK(logloss(std::vector<float>{0.8f, 0.4f}, std::vector<float>{1, 0}) == Approx(0.36698459).epsilon(1e-6));
  CHECK(logloss(std::vector<float>{0.5f}, std::vector<float>{0}) == Approx(std::log(2.0)));
  // A certain mistake costs -log(1e-7) = 16.118..., not infinity; a certain hit costs ~1e-7.
  CHECK(logloss(std::vector<float>{0.0f}, std::vector<float>{1}) == Approx(16.11809565));
  CHECK(logloss(std::vector<float>{1.0f}, std::vector<float>{1}) == Approx(1e-7).margin(1e-9));
  CHECK(logloss(std::vector<float>{}, std::vector<float>{}) == 0.0);
  CHECK_THROWS_WITH(logloss(std::vector<float>{1.5f}, std::vector<float>{1}), Catch::Contains("outside [0, 1]"));
}
