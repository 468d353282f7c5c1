//! When to retry, and how long to wait first.
//!
//! Rules (also in `docs/providers.md`):
//! - Without a `retry-after`: exponential backoff with full jitter, a uniformly random wait in
//!   `[0, min(retry_max_delay, retry_base_delay * 2^retry)]`; the jitter spreads many clients
//!   that failed together (AWS architecture blog, "Exponential Backoff And Jitter").
//! - With `retry-after-ms` (preferred, finer) or `retry-after` (seconds or an HTTP date): that
//!   wait, exactly, even above `retry_max_delay`: the provider knows when its window reopens and
//!   retrying earlier only burns an attempt. Up to [`RETRY_AFTER_CEILING`]; a longer wait (a
//!   quota reset in an hour) is not slept through: the error is returned at once, naming it.

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

/// The longest `retry-after` the client sleeps through before retrying.
pub const RETRY_AFTER_CEILING: Duration = Duration::from_secs(60);

/// The wait before retry number `retry` (0-based) without a provider hint.
pub(crate) fn backoff(retry: u32, base: Duration, max: Duration) -> Duration {
    let exp = base.saturating_mul(1u32.checked_shl(retry.min(20)).unwrap_or(u32::MAX));
    let cap = exp.min(max);
    let nanos = u64::try_from(cap.as_nanos()).unwrap_or(u64::MAX);
    if nanos == 0 {
        return Duration::ZERO;
    }
    // The OS generator does not fail on a supported kernel; should it, waiting the whole cap
    // never retries sooner than the schedule allows. The modulo's bias is below 2^-20 for any
    // cap under four hours.
    let jitter = getrandom::u64().map_or(nanos, |r| r % nanos.saturating_add(1));
    Duration::from_nanos(jitter)
}

/// The wait a response asks for: `retry-after-ms`, else `retry-after` in (possibly
/// fractional) seconds or as an HTTP date (relative to `now`).
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = value("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    let raw = value("retry-after")?;
    if let Ok(secs) = raw.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = httpdate::parse_http_date(raw).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// `x-should-retry: false` (sent by OpenAI and Anthropic, honoured by their SDKs) forbids a
/// retry that the status alone would allow.
pub(crate) fn should_not_retry(headers: &HeaderMap) -> bool {
    headers
        .get("x-should-retry")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("false"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        map
    }

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        let at = |pairs| retry_after(&headers(pairs), now);
        assert_eq!(at(&[("retry-after", "2")]), Some(Duration::from_secs(2)));
        assert_eq!(
            at(&[("retry-after", "0.5")]),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            at(&[("retry-after", "2"), ("retry-after-ms", "150")]),
            Some(Duration::from_millis(150))
        );
        // 1445412480 is Wed, 21 Oct 2015 07:28:00 GMT.
        assert_eq!(
            at(&[("retry-after", "Wed, 21 Oct 2015 07:28:30 GMT")]),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            at(&[("retry-after", "Wed, 21 Oct 2015 07:27:00 GMT")]),
            Some(Duration::ZERO)
        );
        assert_eq!(at(&[("retry-after", "soon")]), None);
        assert_eq!(at(&[("retry-after", "-1")]), None);
        assert_eq!(at(&[]), None);
    }

    #[test]
    fn backoff_stays_within_the_capped_exponential() {
        let base = Duration::from_millis(100);
        let max = Duration::from_millis(1000);
        for retry in 0..40 {
            let cap = (base * 2u32.pow(retry.min(10))).min(max);
            assert!(backoff(retry, base, max) <= cap);
        }
        assert_eq!(backoff(3, Duration::ZERO, max), Duration::ZERO);
    }

    #[test]
    fn backoff_spreads_waits_across_the_window() {
        // 32 draws from a window of 10^9 nanoseconds: all alike only if the jitter is gone.
        let waits: std::collections::BTreeSet<Duration> = (0..32)
            .map(|_| backoff(4, Duration::from_millis(100), Duration::from_secs(1)))
            .collect();
        assert!(waits.len() > 1, "{waits:?}");
        assert!(waits.iter().all(|w| *w <= Duration::from_secs(1)));
    }

    #[test]
    fn should_retry_header() {
        assert!(should_not_retry(&headers(&[("x-should-retry", "false")])));
        assert!(!should_not_retry(&headers(&[("x-should-retry", "true")])));
        assert!(!should_not_retry(&headers(&[])));
    }
}
