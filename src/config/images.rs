//! `[images]`: the images blocks show the model (`show()`), as written, their checks, and the
//! limits with defaults filled in (`crate::images::ImageLimits`).

/// `[images]`: the images blocks show the model (`show()`); `None` keeps the default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
pub struct ImagesConfig {
    /// Longest edge sent, pixels (default 1568; larger images are scaled down).
    pub max_edge: Option<u32>,
    /// Largest image sent, bytes (default 3,750,000; larger ones are re-encoded smaller).
    pub max_bytes: Option<u64>,
    /// Images one block may show (default 8).
    pub max_per_block: Option<usize>,
}

impl ImagesConfig {
    /// The limits, defaults filled in.
    pub fn limits(&self) -> crate::images::ImageLimits {
        let default = crate::images::ImageLimits::default();
        crate::images::ImageLimits {
            max_edge: self.max_edge.unwrap_or(default.max_edge),
            max_bytes: self.max_bytes.unwrap_or(default.max_bytes),
            max_per_block: self.max_per_block.unwrap_or(default.max_per_block),
        }
    }

    /// The checks serde cannot make; `at(key)` is `line N: ` for `[images] key`.
    pub(super) fn check(&self, at: impl Fn(&str) -> String) -> Result<(), String> {
        if let Some(edge) = self.max_edge.filter(|e| !(16..=8000).contains(e)) {
            return Err(format!(
                "{}`images.max_edge` must be between 16 and 8000 pixels (Anthropic's hard limit), got {edge}",
                at("max_edge")
            ));
        }
        if let Some(bytes) = self.max_bytes.filter(|b| !(1024..=20_000_000).contains(b)) {
            return Err(format!(
                "{}`images.max_bytes` must be between 1024 and 20000000 bytes, got {bytes}",
                at("max_bytes")
            ));
        }
        if self.max_per_block == Some(0) {
            return Err(format!(
                "{}`images.max_per_block` must be at least 1",
                at("max_per_block")
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::key_marker as at;
    use super::*;

    #[test]
    fn limits_fill_in_the_defaults() {
        let default = crate::images::ImageLimits::default();
        let set = ImagesConfig {
            max_edge: Some(300),
            ..ImagesConfig::default()
        };
        let limits = set.limits();
        assert_eq!(limits.max_edge, 300);
        assert_eq!(limits.max_bytes, default.max_bytes);
        assert_eq!(limits.max_per_block, default.max_per_block);
    }

    #[test]
    fn out_of_range_values_name_their_key_and_range() {
        assert_eq!(ImagesConfig::default().check(at), Ok(()));
        for (config, needle) in [
            (
                ImagesConfig {
                    max_edge: Some(8001),
                    ..ImagesConfig::default()
                },
                "[max_edge] `images.max_edge` must be between 16 and 8000 pixels",
            ),
            (
                ImagesConfig {
                    max_bytes: Some(1000),
                    ..ImagesConfig::default()
                },
                "[max_bytes] `images.max_bytes` must be between 1024 and 20000000 bytes, got 1000",
            ),
            (
                ImagesConfig {
                    max_per_block: Some(0),
                    ..ImagesConfig::default()
                },
                "[max_per_block] `images.max_per_block` must be at least 1",
            ),
        ] {
            let e = config.check(at).unwrap_err();
            assert!(e.starts_with(needle), "{e}");
        }
    }
}
