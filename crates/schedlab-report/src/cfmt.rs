//! C `printf` conversions that Rust's `format!` lacks.
//!
//! ministat prints with `%g`, `%13.8g` and friends; Rust has no `%g`, so it is
//! re-implemented here from the C standard's definition (C11 7.21.6.1):
//!
//! * let `P` be the precision (6 when unspecified, 1 when 0) and `X` the decimal
//!   exponent that `%e` with precision `P - 1` would print;
//! * if `P > X >= -4` the value is printed like `%f` with precision `P - 1 - X`,
//!   otherwise like `%e` with precision `P - 1`;
//! * then (no `#` flag) trailing zeros of the fraction are removed, and the
//!   decimal point too if nothing follows it.
//!
//! `%e` exponents have a sign and at least two digits (`1e+06`, `2.5e-07`), and
//! infinities and NaNs print as `inf`, `-inf`, `nan`, as glibc and FreeBSD libc do.

/// `%.{precision}g`.
pub(crate) fn g(value: f64, precision: usize) -> String {
    if value.is_nan() {
        return "nan".to_string();
    }
    if value.is_infinite() {
        return if value < 0.0 { "-inf".to_string() } else { "inf".to_string() };
    }
    let p = precision.max(1);
    if value == 0.0 {
        return if value.is_sign_negative() { "-0".to_string() } else { "0".to_string() };
    }
    // Rust's `{:e}` with a precision rounds correctly, like C's `%e`; only the
    // exponent's spelling differs (`1.5e6` instead of `1.5e+06`).
    let e_form = format!("{:.*e}", p - 1, value);
    let (mantissa, exponent) = e_form.split_once('e').expect("`{:e}` output always has an exponent");
    let x: i32 = exponent.parse().expect("`{:e}` exponent is an integer");
    let p_i = i32::try_from(p).unwrap_or(i32::MAX);
    if x < -4 || x >= p_i {
        let sign = if x < 0 { '-' } else { '+' };
        format!("{}e{}{:02}", strip_fraction_zeros(mantissa), sign, x.unsigned_abs())
    } else {
        let decimals = usize::try_from(p_i - 1 - x).expect("P - 1 - X >= 0 in the %f branch");
        strip_fraction_zeros(&format!("{:.*}", decimals, value)).to_string()
    }
}

/// `%{width}.{precision}g`: right-aligned in `width` columns.
pub(crate) fn g_width(value: f64, width: usize, precision: usize) -> String {
    format!("{:>width$}", g(value, precision), width = width)
}

/// Removes trailing zeros after a decimal point, then the point if it ends the text.
fn strip_fraction_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected strings are what C's printf prints (C11 rules, checked by hand).
    #[test]
    fn g_default_precision() {
        assert_eq!(g(240.0, 6), "240");
        assert_eq!(g(212.215, 6), "212.215");
        assert_eq!(g(264.15904, 6), "264.159");
        assert_eq!(g(80.0, 6), "80");
        assert_eq!(g(1_446_850.0, 6), "1.44685e+06");
        assert_eq!(g(-0.011_571_428, 6), "-0.0115714");
        assert_eq!(g(0.000_012_345_67, 6), "1.23457e-05");
        assert_eq!(g(0.000_123_456_7, 6), "0.000123457");
        assert_eq!(g(999_999.5, 6), "1e+06");
        assert_eq!(g(123_456.0, 6), "123456");
        assert_eq!(g(0.0, 6), "0");
        assert_eq!(g(-0.0, 6), "-0");
        assert_eq!(g(1.0, 6), "1");
        assert_eq!(g(f64::INFINITY, 6), "inf");
        assert_eq!(g(f64::NEG_INFINITY, 6), "-inf");
        assert_eq!(g(f64::NAN, 6), "nan");
    }

    #[test]
    fn g_with_width_and_precision() {
        assert_eq!(g_width(238.047_614_6, 13, 8), "    238.04761");
        assert_eq!(g_width(2_767_939.6, 13, 8), "    2767939.6");
        assert_eq!(g_width(0.004_670_066_8, 13, 8), " 0.0046700668");
        assert_eq!(g_width(50.0, 13, 8), "           50");
        assert_eq!(g_width(123_456_789.0, 13, 8), "1.2345679e+08");
        assert_eq!(g(5.0, 0), "5");
    }
}
