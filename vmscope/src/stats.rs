//! Summary statistics and Student's t, shared by bench, compare, report,
//! the overhead measurements and the workloads. Pure: numbers in, numbers
//! out.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF as _, StudentsT};

/// The arithmetic mean; NaN for no values.
pub fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// The median of values already sorted ascending (the mean of the middle
/// two for an even count); NaN for no values.
pub fn median_of_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The median, sorting `v` in place first.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    median_of_sorted(v)
}

/// The upper of the middle two for an even count (an element of the
/// sample, as LMbench reports), sorting `v` in place; None for no values.
pub fn upper_median<T: Ord + Copy>(v: &mut [T]) -> Option<T> {
    v.sort_unstable();
    v.get(v.len() / 2).copied()
}

/// Sample standard deviation (n - 1); 0 for fewer than two values.
pub fn stddev(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v);
    (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

/// The mean of sorted values after dropping up to `trim` from each end,
/// and how many were dropped from each end: `trim` is lowered so that at
/// least one value (two for an even count) is kept.
pub fn trimmed_mean(sorted: &[f64], trim: usize) -> (f64, usize) {
    let k = trim.min(sorted.len().saturating_sub(1) / 2);
    (mean(&sorted[k..sorted.len() - k]), k)
}

/// The two-sided critical value of Student's t with `df` degrees of
/// freedom at this confidence level (0.95: the 97.5% quantile), or None
/// when `df` is not a positive finite number.
pub fn t_critical(df: f64, confidence: f64) -> Option<f64> {
    students_t(df).map(|d| d.inverse_cdf(1.0 - (1.0 - confidence) / 2.0))
}

/// The two-sided p-value of the statistic `t` under Student's t with `df`
/// degrees of freedom, or None when `t` or `df` is unusable.
pub fn t_two_sided_p(t: f64, df: f64) -> Option<f64> {
    if !t.is_finite() {
        return None;
    }
    students_t(df).map(|d| (2.0 * d.sf(t.abs())).min(1.0))
}

/// The distribution functions panic on NaN, so unusable degrees of
/// freedom give None before they get there.
fn students_t(df: f64) -> Option<StudentsT> {
    if !(df.is_finite() && df > 0.0) {
        return None;
    }
    StudentsT::new(0.0, 1.0, df).ok()
}

/// The confidence interval of a mean from `n` values with sample standard
/// deviation `stddev` (Student's t on n - 1 degrees of freedom), or None
/// with fewer than two values.
pub fn mean_interval(mean: f64, stddev: f64, n: usize, confidence: f64) -> Option<(f64, f64)> {
    if n < 2 {
        return None;
    }
    let t = t_critical((n - 1) as f64, confidence)?;
    let half = t * stddev / (n as f64).sqrt();
    Some((mean - half, mean + half))
}

/// Welch's t-test of NEW against BASE.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WelchTest {
    /// t statistic of mean(NEW) - mean(BASE); None when infinite (both
    /// sides without spread, different means).
    pub t: Option<f64>,
    /// Welch–Satterthwaite degrees of freedom; None when neither side has
    /// any spread (the difference is then exact).
    pub df: Option<f64>,
    /// Two-sided p-value.
    pub p: f64,
    /// Confidence interval of mean(NEW) - mean(BASE), at the level asked.
    pub ci_low: f64,
    pub ci_high: f64,
}

/// Welch's t-test on two samples with its interval at `confidence`, or
/// None when a side has fewer than two values.
pub fn welch(base: &[f64], new: &[f64], confidence: f64) -> Option<WelchTest> {
    let (nb, nn) = (base.len() as f64, new.len() as f64);
    if base.len() < 2 || new.len() < 2 {
        return None;
    }
    let diff = mean(new) - mean(base);
    // Squared standard errors of each mean.
    let vb = stddev(base).powi(2) / nb;
    let vn = stddev(new).powi(2) / nn;
    let se2 = vb + vn;
    if se2 == 0.0 {
        // No spread on either side: the difference is exactly known.
        let (t, p) = if diff == 0.0 {
            (Some(0.0), 1.0)
        } else {
            (None, 0.0)
        };
        return Some(WelchTest {
            t,
            df: None,
            p,
            ci_low: diff,
            ci_high: diff,
        });
    }
    let se = se2.sqrt();
    let t = diff / se;
    // Welch–Satterthwaite.
    let df = se2 * se2 / (vb * vb / (nb - 1.0) + vn * vn / (nn - 1.0));
    // Values too large (or too close) for f64 leave no test to make.
    let p = t_two_sided_p(t, df)?;
    let crit = t_critical(df, confidence)?;
    Some(WelchTest {
        t: Some(t),
        df: Some(df),
        p,
        ci_low: diff - crit * se,
        ci_high: diff + crit * se,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: f64, want: f64, tol: f64) {
        assert!((got - want).abs() <= tol, "{got} is not {want} ± {tol}");
    }

    #[test]
    fn mean_and_sample_stddev_of_a_hand_computed_example() {
        // 10, 12, 14: mean 12, deviations -2 0 2, s² = 8/2 = 4.
        assert_eq!(mean(&[10.0, 12.0, 14.0]), 12.0);
        assert_eq!(stddev(&[10.0, 12.0, 14.0]), 2.0);
        assert_eq!(stddev(&[5.0]), 0.0);
        assert_eq!(stddev(&[]), 0.0);
        assert!(mean(&[]).is_nan());
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0]), 2.5);
        assert_eq!(median_of_sorted(&[1.0, 2.0, 3.0, 10.0]), 2.5);
        assert!(median_of_sorted(&[]).is_nan());
        // The upper median is one of the values.
        assert_eq!(upper_median(&mut [3000u64, 1000, 2000]), Some(2000));
        assert_eq!(upper_median(&mut [1000u64, 4000]), Some(4000));
        assert_eq!(upper_median::<u64>(&mut []), None);
    }

    #[test]
    fn trimmed_mean_keeps_the_middle() {
        let v = [9.0, 10.0, 10.0, 11.0, 12.0, 12.0, 30.0];
        assert_eq!(trimmed_mean(&v, 1), (11.0, 1));
        // Too few values to drop 5 from each end: 3 are dropped, one kept.
        assert_eq!(trimmed_mean(&v, 5), (11.0, 3));
        assert_eq!(trimmed_mean(&[1.0, 3.0], 1), (2.0, 0));
    }

    #[test]
    fn students_t_matches_the_tables() {
        // t(0.975) at 2, 5 and 30 df: 4.3027, 2.5706, 2.0423.
        close(t_critical(2.0, 0.95).expect("2 df"), 4.3027, 1e-4);
        close(t_critical(5.0, 0.95).expect("5 df"), 2.5706, 1e-4);
        close(t_critical(30.0, 0.95).expect("30 df"), 2.0423, 1e-4);
        close(t_two_sided_p(2.5706, 5.0).expect("5 df"), 0.05, 1e-4);
        close(t_two_sided_p(0.0, 5.0).expect("5 df"), 1.0, 1e-12);
        assert!(t_critical(f64::NAN, 0.95).is_none());
        assert!(t_critical(0.0, 0.95).is_none());
        assert!(t_two_sided_p(f64::INFINITY, 3.0).is_none());
    }

    #[test]
    fn mean_interval_is_students_t_on_n_minus_one_df() {
        // Mean 12, s = 2, n = 3; t(0.975, 2 df) = 4.3027; half-width
        // 4.3027 * 2 / sqrt(3) = 4.9683.
        let (lo, hi) = mean_interval(12.0, 2.0, 3, 0.95).expect("three values");
        close(lo, 7.0317, 1e-3);
        close(hi, 16.9683, 1e-3);
        assert!(mean_interval(1.0, 0.0, 1, 0.95).is_none());
    }

    #[test]
    fn welch_matches_the_hand_computed_example() {
        // BASE = 10, 12, 14: mean 12, deviations -2 0 2, s² = 8/2 = 4.
        // NEW  = 20, 22, 24, 26: mean 23, deviations -3 -1 1 3, s² = 20/3.
        // Squared standard errors: 4/3 = 1.3333 and (20/3)/4 = 5/3 = 1.6667;
        // se² = 3, se = √3 = 1.73205.
        // t = (23 - 12) / √3 = 11 / 1.73205 = 6.35085.
        // df = se⁴ / ((4/3)²/2 + (5/3)²/3) = 9 / (0.888889 + 0.925926)
        //    = 9 / 1.814815 = 4.95918.
        // Student's t with 4.959 df (integrating its density numerically):
        // two-sided p for t = 6.35085 is 0.001473; the 97.5% quantile is
        // 2.57696 (between the tables' 2.5706 at 5 df and 2.7764 at 4 df),
        // so the 95% CI is 11 ± 2.57696·√3 = [6.5366, 15.4634].
        let w = welch(&[10.0, 12.0, 14.0], &[20.0, 22.0, 24.0, 26.0], 0.95).expect("two runs each");
        close(w.t.expect("finite"), 6.350_853, 1e-5);
        close(w.df.expect("spread"), 4.959_184, 1e-5);
        close(w.p, 0.001_473, 2e-5);
        close(w.ci_low, 6.536_58, 1e-3);
        close(w.ci_high, 15.463_42, 1e-3);
        // Swapping the sides flips the sign and nothing else.
        let r = welch(&[20.0, 22.0, 24.0, 26.0], &[10.0, 12.0, 14.0], 0.95).expect("two runs each");
        close(r.t.expect("finite"), -6.350_853, 1e-5);
        close(r.p, w.p, 1e-12);
        close(r.ci_high, -w.ci_low, 1e-9);
    }

    #[test]
    fn welch_needs_two_runs_per_side() {
        assert!(welch(&[1.0], &[2.0, 3.0], 0.95).is_none());
        assert!(welch(&[1.0, 2.0], &[], 0.95).is_none());
    }

    #[test]
    fn obviously_different_samples_are_significant_identical_ones_are_not() {
        let a = [100.0, 101.0, 99.0, 100.5, 99.5];
        let b = [150.0, 151.0, 149.0, 150.5, 149.5];
        let w = welch(&a, &b, 0.95).expect("five runs each");
        assert!(w.p < 1e-6, "p = {}", w.p);
        assert!(w.ci_low > 45.0 && w.ci_high < 55.0, "{w:?}");
        let same = welch(&a, &a, 0.95).expect("five runs each");
        close(same.p, 1.0, 1e-12);
        assert!(same.ci_low < 0.0 && same.ci_high > 0.0, "{same:?}");
        // Overlapping noise is not significant.
        let noisy = welch(&[10.0, 20.0, 15.0], &[12.0, 22.0, 14.0], 0.95).expect("three each");
        assert!(noisy.p > 0.05, "p = {}", noisy.p);
        // Exact counts: no spread at all.
        let exact = welch(&[600.0, 600.0, 600.0], &[6000.0, 6000.0, 6000.0], 0.95).expect("3");
        assert_eq!((exact.t, exact.df, exact.p), (None, None, 0.0));
        assert_eq!((exact.ci_low, exact.ci_high), (5400.0, 5400.0));
        let flat = welch(&[7.0, 7.0], &[7.0, 7.0], 0.95).expect("2");
        assert_eq!((flat.t, flat.p), (Some(0.0), 1.0));
    }

    #[test]
    fn values_too_large_for_f64_give_no_test_rather_than_panic() {
        for (b, n) in [
            ([f64::MAX, f64::MAX], [f64::MAX, 1.0]),
            ([1e200, -1e200], [1e200, 1e200]),
            ([f64::MAX, -f64::MAX], [0.0, 5e-324]),
        ] {
            if let Some(t) = welch(&b, &n, 0.95) {
                assert!((0.0..=1.0).contains(&t.p), "{b:?} {n:?}: p {}", t.p);
            }
        }
    }
}
