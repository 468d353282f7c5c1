//! Dotted names: validation, path helpers and "did you mean" suggestions.
//!
//! A name is a dotted path such as `git`, `git.diff` or `slack.admin.users.invite`. Every
//! segment of a function or namespace name must be a Python identifier (Unicode `XID_Start` or
//! `_`, then `XID_Continue`) that is not a hard keyword, because the model calls it as
//! `slack.admin.invite(...)`. Pages and skills are read with `doc("...")`, never called, and
//! skill names in `SKILL.md` front matter are conventionally kebab-case, so for those kinds the
//! segments may also contain `-` (but must still start with a letter or `_`).
//!
//! Names are never sanitized: a bad segment is an error that names it and proposes a spelling.

use super::error::{CatalogError, Result};

/// Python's hard keywords (soft keywords such as `match`, `case`, `type` are valid names).
pub const PYTHON_KEYWORDS: [&str; 35] = [
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// Which segment alphabet a path uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// Functions and namespaces: every segment a Python identifier, not a keyword.
    Identifier,
    /// Pages, skills and deny-list paths: like `Identifier`, but segments may contain `-`.
    Slug,
}

/// Validates a dotted path under `rule`; the error names the first bad segment.
pub fn validate_name(name: &str, rule: NameRule) -> Result<()> {
    if name.is_empty() {
        return Err(CatalogError::EmptyName);
    }
    for segment in name.split('.') {
        if let Some(problem) = segment_problem(segment, rule) {
            return Err(CatalogError::InvalidName {
                name: name.to_string(),
                segment: segment.to_string(),
                problem,
                suggestion: suggest_path(name, rule),
                extra: match rule {
                    NameRule::Identifier => "",
                    NameRule::Slug => " (`-` is also allowed after the first character)",
                },
            });
        }
    }
    Ok(())
}

/// Validates a namespace path (always the identifier rule).
pub fn validate_namespace(path: &str) -> Result<()> {
    validate_name(path, NameRule::Identifier)
}

fn segment_problem(segment: &str, rule: NameRule) -> Option<String> {
    let mut chars = segment.chars();
    let Some(first) = chars.next() else {
        return Some("is empty (a leading, trailing or doubled `.`)".into());
    };
    if !(first == '_' || unicode_ident::is_xid_start(first)) {
        return Some(if first.is_ascii_digit() {
            "starts with a digit".into()
        } else {
            format!("starts with `{first}`")
        });
    }
    for c in chars {
        let ok = unicode_ident::is_xid_continue(c) || (rule == NameRule::Slug && c == '-');
        if !ok {
            return Some(if c.is_whitespace() {
                "contains whitespace".into()
            } else {
                format!("contains `{c}`")
            });
        }
    }
    if PYTHON_KEYWORDS.contains(&segment) {
        return Some("is a Python keyword".into());
    }
    None
}

/// A valid spelling close to `name` (used only in error messages).
fn suggest_path(name: &str, rule: NameRule) -> String {
    let fixed: Vec<String> = name
        .split('.')
        .filter(|s| !s.is_empty())
        .map(|segment| spell_segment(segment, rule))
        .collect();
    if fixed.is_empty() {
        "name".into()
    } else {
        fixed.join(".")
    }
}

/// `segment` made a valid segment under `rule`: every character it may not hold becomes `_`,
/// a leading `_` when it would not start like an identifier (or is empty), a trailing `_` on a
/// keyword. MCP names become Python names by the same rule, so the two never disagree.
pub fn spell_segment(segment: &str, rule: NameRule) -> String {
    let mut out: String = segment
        .chars()
        .map(|c| {
            let ok = unicode_ident::is_xid_continue(c) || (rule == NameRule::Slug && c == '-');
            if ok {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out
        .chars()
        .next()
        .is_none_or(|c| !(c == '_' || unicode_ident::is_xid_start(c)))
    {
        out.insert(0, '_');
    }
    if PYTHON_KEYWORDS.contains(&out.as_str()) {
        out.push('_');
    }
    out
}

/// The namespace a name lives in (`""` for top-level names).
pub fn parent(name: &str) -> &str {
    match name.rfind('.') {
        Some(i) => &name[..i],
        None => "",
    }
}

/// The last segment of a dotted name.
pub fn last_segment(name: &str) -> &str {
    match name.rfind('.') {
        Some(i) => &name[i + 1..],
        None => name,
    }
}

/// Proper ancestors of a name, shortest first: `a.b.c` → `a`, `a.b`.
pub fn ancestors(name: &str) -> impl Iterator<Item = &str> {
    name.match_indices('.').map(move |(i, _)| &name[..i])
}

/// True when `name` is strictly inside namespace `ns` (at any depth).
pub fn is_within(name: &str, ns: &str) -> bool {
    name.len() > ns.len() + 1 && name.starts_with(ns) && name.as_bytes()[ns.len()] == b'.'
}

/// Up to `max` candidates closest to `query`, best first. Ranking: case-insensitive equality,
/// then equal last segment (`diff` → `git.diff`), then substring either way, then small
/// edit distance (optimal string alignment) over the whole name or the last segment. Ties keep
/// candidate order. About 1 ms per 5,000 candidates.
pub fn closest<'a, I>(query: &str, candidates: I, max: usize) -> Vec<String>
where
    I: IntoIterator<Item = &'a str>,
{
    let q = query.trim().to_lowercase();
    if q.is_empty() || max == 0 {
        return Vec::new();
    }
    let q_last = last_segment(&q).to_string();
    let allowed = (q.chars().count() / 3).max(2);
    let mut scored: Vec<(usize, usize, &'a str)> = Vec::new();
    for (pos, cand) in candidates.into_iter().enumerate() {
        let lowered;
        let c: &str = if cand.bytes().any(|b| b.is_ascii_uppercase()) || !cand.is_ascii() {
            lowered = cand.to_lowercase();
            &lowered
        } else {
            cand
        };
        let c_last = last_segment(c);
        let score = if c == q {
            0
        } else if !q_last.is_empty() && c_last == q_last {
            1
        } else if (q.len() >= 3 && c.contains(q.as_str()))
            || (c_last.len() >= 3 && q.contains(c_last))
        {
            2 + c.len().abs_diff(q.len()).min(50)
        } else {
            // Length differences bound the edit distance from below: skip hopeless candidates.
            let full_ok = c.len().abs_diff(q.len()) <= allowed;
            let last_ok = c_last.len().abs_diff(q_last.len()) <= allowed;
            let d_full = if full_ok {
                strsim::osa_distance(c, &q)
            } else {
                usize::MAX
            };
            let d_last = if last_ok {
                strsim::osa_distance(c_last, &q_last)
            } else {
                usize::MAX
            };
            let d = d_full.min(d_last);
            if d > allowed {
                continue;
            }
            100 + d
        };
        scored.push((score, pos, cand));
    }
    scored.sort_by_key(|&(score, pos, _)| (score, pos));
    let mut out: Vec<String> = Vec::new();
    for (_, _, cand) in scored {
        if !out.iter().any(|o| o == cand) {
            out.push(cand.to_string());
        }
        if out.len() == max {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bad segment and the suggestion of an `InvalidName` error.
    fn rejected(name: &str, rule: NameRule) -> (String, String) {
        match validate_name(name, rule) {
            Err(CatalogError::InvalidName {
                segment,
                suggestion,
                ..
            }) => (segment, suggestion),
            other => panic!("{name}: expected InvalidName, got {other:?}"),
        }
    }

    #[test]
    fn identifiers_soft_keywords_and_unicode_are_valid() {
        for name in [
            "git",
            "git.diff",
            "_x",
            "match",
            "type.case",
            "données.résumé",
        ] {
            assert!(validate_name(name, NameRule::Identifier).is_ok(), "{name}");
        }
        assert!(validate_namespace("slack.admin").is_ok());
        assert!(validate_name("skills.release-checklist", NameRule::Slug).is_ok());
    }

    #[test]
    fn each_bad_segment_is_named_with_a_valid_spelling() {
        assert_eq!(
            rejected("slack.2fa", NameRule::Identifier),
            ("2fa".into(), "slack._2fa".into())
        );
        assert_eq!(
            rejected("git.import", NameRule::Identifier),
            ("import".into(), "git.import_".into())
        );
        assert_eq!(
            rejected("a-b.c", NameRule::Identifier),
            ("a-b".into(), "a_b.c".into())
        );
        // A dash is fine in a slug but not at the start of a segment.
        assert_eq!(rejected("-x", NameRule::Slug), ("-x".into(), "_-x".into()));
        assert_eq!(rejected("a..b", NameRule::Identifier).0, "");
        assert_eq!(rejected("a.", NameRule::Slug).0, "");
        assert!(matches!(
            validate_name("", NameRule::Identifier),
            Err(CatalogError::EmptyName)
        ));
        assert!(validate_namespace("my-ns").is_err());
    }

    #[test]
    fn segment_problems_say_what_is_wrong() {
        let id = NameRule::Identifier;
        assert_eq!(
            segment_problem("1x", id).as_deref(),
            Some("starts with a digit")
        );
        assert_eq!(
            segment_problem("$x", id).as_deref(),
            Some("starts with `$`")
        );
        assert_eq!(
            segment_problem("a b", id).as_deref(),
            Some("contains whitespace")
        );
        assert_eq!(segment_problem("a-b", id).as_deref(), Some("contains `-`"));
        assert_eq!(segment_problem("a-b", NameRule::Slug), None);
        assert_eq!(
            segment_problem("None", id).as_deref(),
            Some("is a Python keyword")
        );
        assert!(segment_problem("", id).is_some_and(|p| p.starts_with("is empty")));
    }

    #[test]
    fn a_name_with_nothing_usable_suggests_a_placeholder() {
        assert_eq!(suggest_path(".", NameRule::Identifier), "name");
        assert_eq!(suggest_path("a b.c", NameRule::Identifier), "a_b.c");
    }

    #[test]
    fn path_helpers() {
        assert_eq!(ancestors("a.b.c").collect::<Vec<_>>(), ["a", "a.b"]);
        assert_eq!(ancestors("a").count(), 0);
        assert_eq!((parent("a.b.c"), parent("a")), ("a.b", ""));
        assert_eq!((last_segment("a.b.c"), last_segment("a")), ("c", "a"));
        assert!(is_within("git.diff", "git"));
        assert!(is_within("git.a.b", "git"));
        assert!(!is_within("gitx.diff", "git"));
        assert!(!is_within("git", "git"));
    }

    #[test]
    fn closest_ranks_exact_then_last_segment_then_substring_then_edits() {
        let names = ["git.log", "git.diff", "hg.diff", "diffstat", "dif"];
        // Substrings either way rank by how close their length is.
        assert_eq!(
            closest("DIFF", names, 5),
            ["git.diff", "hg.diff", "dif", "diffstat"]
        );
        assert_eq!(closest("git.lgo", names, 1), ["git.log"]);
        assert_eq!(closest("diff", names, 2), ["git.diff", "hg.diff"]);
        assert!(closest("", names, 5).is_empty());
        assert!(closest("diff", names, 0).is_empty());
        assert!(closest("zzzzzz", names, 5).is_empty());
        // Duplicates among candidates are listed once.
        assert_eq!(closest("a", ["a", "a"], 5), ["a"]);
    }
}
