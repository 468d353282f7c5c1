//! The front matter of a skill's `SKILL.md`: the YAML block between a first line `---` and the
//! next line that is `---` (or `...`).
//!
//! It is parsed by a YAML 1.2 parser (`yaml-rust2`), not by splitting lines, so what a skill
//! author writes means what YAML says: a folded `description: >` block is its text joined into
//! one line, a literal `|` block keeps its lines, quotes and escapes are honoured, `#` starts a
//! comment. The result is the top-level `key: scalar` pairs in file order (numbers and booleans
//! as they are written); keys whose values are lists or mappings (`allowed-tools: [...]`,
//! `metadata: {...}`) are left out, since Vis reads only `name` and `description`.
//!
//! Every failure is a [`CatalogError::InvalidFrontMatter`] that says where and how to fix it;
//! the worker puts it in `session["extensions"]` and skips the skill.

use yaml_rust2::{Yaml, YamlLoader};

use super::error::{CatalogError, Result};

fn invalid(reason: impl Into<String>) -> CatalogError {
    CatalogError::InvalidFrontMatter {
        reason: reason.into(),
    }
}

/// The top-level scalar fields of `text`'s front matter, in file order.
pub fn parse_front_matter(text: &str) -> Result<Vec<(String, String)>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines();
    if lines.next().map(str::trim_end) != Some("---") {
        return Err(invalid(
            "the first line must be `---`, then `name:` and `description:` lines, then a closing `---` line",
        ));
    }
    let mut block = Vec::new();
    let mut closed = false;
    for line in lines {
        let end = line.trim_end();
        if end == "---" || end == "..." {
            closed = true;
            break;
        }
        block.push(line);
    }
    if !closed {
        return Err(invalid(
            "the block that starts with `---` on line 1 is never closed; add a `---` line after its last key",
        ));
    }
    let yaml = block.join("\n");
    let docs = YamlLoader::load_from_str(&yaml).map_err(|e| {
        let at = e.marker();
        invalid(format!(
            "not valid YAML at line {} column {} of SKILL.md: {}; quote a value that contains `: ` or starts with a special character (`description: \"...\"`)",
            at.line() + 1,
            at.col() + 1,
            e.info()
        ))
    })?;
    let map =
        match docs.into_iter().next() {
            Some(Yaml::Hash(map)) => map,
            Some(Yaml::Null) | None => return Err(invalid(
                "the block between the `---` lines is empty; it needs `name:` and `description:`",
            )),
            Some(other) => {
                return Err(invalid(format!(
            "the block between the `---` lines must be `key: value` lines (a YAML mapping), not {}",
            kind_of(&other)
        )))
            }
        };
    let mut fields = Vec::with_capacity(map.len());
    for (key, value) in map {
        let Some(key) = scalar_text(key) else {
            continue;
        };
        if let Some(value) = scalar_text(value) {
            fields.push((key, value));
        }
    }
    Ok(fields)
}

fn scalar_text(value: Yaml) -> Option<String> {
    match value {
        Yaml::String(s) | Yaml::Real(s) => Some(s),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        Yaml::Null => Some(String::new()),
        Yaml::Array(_) | Yaml::Hash(_) | Yaml::Alias(_) | Yaml::BadValue => None,
    }
}

fn kind_of(value: &Yaml) -> &'static str {
    match value {
        Yaml::Array(_) => "a list",
        Yaml::Hash(_) => "a mapping",
        _ => "a single value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field<'a>(fields: &'a [(String, String)], key: &str) -> Option<&'a str> {
        fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn plain_keys_in_order() {
        let f = parse_front_matter("---\nname: release\ndescription: Cut a release\n---\nbody\n")
            .unwrap();
        assert_eq!(
            f,
            vec![
                ("name".to_string(), "release".to_string()),
                ("description".to_string(), "Cut a release".to_string())
            ]
        );
    }

    #[test]
    fn folded_block_is_joined_and_literal_block_keeps_lines() {
        let text = "---\nname: a\ndescription: >\n  First part\n  second part.\nnotes: |\n  line one\n  line two\n---\n";
        let f = parse_front_matter(text).unwrap();
        assert_eq!(field(&f, "description"), Some("First part second part.\n"));
        assert_eq!(field(&f, "notes"), Some("line one\nline two\n"));
    }

    #[test]
    fn quotes_escapes_comments_and_scalars() {
        let text = "---\r\nname: \"quoted: yes\"  # a comment\r\ndescription: 'it''s'\r\nversion: 2\r\nbeta: true\r\nempty:\r\n---\r\n";
        let f = parse_front_matter(text).unwrap();
        assert_eq!(field(&f, "name"), Some("quoted: yes"));
        assert_eq!(field(&f, "description"), Some("it's"));
        assert_eq!(field(&f, "version"), Some("2"));
        assert_eq!(field(&f, "beta"), Some("true"));
        assert_eq!(field(&f, "empty"), Some(""));
    }

    #[test]
    fn lists_and_mappings_are_left_out() {
        let text =
            "\u{feff}---\nname: a\nallowed-tools: [Read, Grep]\nmetadata:\n  k: v\ndescription: d\n...\n";
        let f = parse_front_matter(text).unwrap();
        let keys: Vec<&str> = f.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["name", "description"]);
    }

    #[test]
    fn bad_front_matter_says_what_and_where() {
        let cases = [
            ("name: a\n", "first line must be `---`"),
            ("---\nname: a\n", "never closed"),
            ("---\n---\n", "is empty"),
            ("---\n- a\n- b\n---\n", "not a list"),
            ("---\nname: a\ndescription: b: c\n---\n", "line 3 column"),
            ("---\nname: [unclosed\n---\n", "not valid YAML"),
        ];
        for (text, expected) in cases {
            let err = parse_front_matter(text).unwrap_err().to_string();
            assert!(err.contains(expected), "{text:?}: {err}");
            assert!(err.starts_with("invalid SKILL.md front matter"), "{err}");
        }
    }
}
