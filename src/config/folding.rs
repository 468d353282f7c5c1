//! `[folding]`: context folding and its limits as written, and their checks (a limit of zero
//! tokens, or a folding threshold above the hard limit, is refused with its line).

/// `[folding]`: context folding and its limits.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
pub struct FoldingConfig {
    pub introspection: Option<bool>,
    pub gist_max_tokens: Option<u64>,
    pub input_limit: Option<u64>,
    pub auto_compress_above: Option<u64>,
}

impl FoldingConfig {
    /// The checks serde cannot make; `at(key)` is `line N: ` for `[folding] key`.
    pub(super) fn check(&self, at: impl Fn(&str) -> String) -> Result<(), String> {
        for (key, value) in [
            ("gist_max_tokens", self.gist_max_tokens),
            ("input_limit", self.input_limit),
            ("auto_compress_above", self.auto_compress_above),
        ] {
            if value == Some(0) {
                return Err(format!(
                    "{}`folding.{key}` must be at least 1 token",
                    at(key)
                ));
            }
        }
        if let (Some(a), Some(l)) = (self.auto_compress_above, self.input_limit) {
            if a > l {
                return Err(format!(
                    "{}`folding.auto_compress_above` ({a}) must not exceed `folding.input_limit` ({l})",
                    at("auto_compress_above")
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::key_marker as at;
    use super::*;

    #[test]
    fn zero_limits_and_a_threshold_above_the_limit_are_refused() {
        let ok = FoldingConfig {
            input_limit: Some(1000),
            auto_compress_above: Some(1000),
            ..FoldingConfig::default()
        };
        assert_eq!(ok.check(at), Ok(()));
        let zero = FoldingConfig {
            gist_max_tokens: Some(0),
            ..FoldingConfig::default()
        };
        assert_eq!(
            zero.check(at).unwrap_err(),
            "[gist_max_tokens] `folding.gist_max_tokens` must be at least 1 token"
        );
        let above = FoldingConfig {
            input_limit: Some(1000),
            auto_compress_above: Some(1001),
            ..FoldingConfig::default()
        };
        assert_eq!(
            above.check(at).unwrap_err(),
            "[auto_compress_above] `folding.auto_compress_above` (1001) must not exceed `folding.input_limit` (1000)"
        );
    }
}
