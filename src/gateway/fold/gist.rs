//! Text made of the conversation for folds: the gist of an automatic fold (what the folded
//! turns did), and the originals `read_session` shows.

use regex::Regex;

use crate::gateway::history::Entry;
use crate::protocol::HistoryItem;
use crate::store::{HistoryKind, HistoryRow};

/// The gist of an automatic fold, made from what the folded turns did: what the person asked,
/// the files read and edited, the tests run with their results, the last conclusion.
pub fn mechanical_gist(view: &[Entry], turns: &[i64]) -> String {
    let mut parts = Vec::new();
    for &t in turns {
        let items: Vec<&Entry> = view.iter().filter(|e| e.turn == t).collect();
        let mut asked = String::new();
        let mut read: Vec<String> = Vec::new();
        let mut edited: Vec<String> = Vec::new();
        let mut tests: Vec<String> = Vec::new();
        let mut conclusion = String::new();
        let mut codes: Vec<String> = Vec::new();
        let mut shown: Vec<String> = Vec::new();
        for e in &items {
            match &e.item {
                HistoryItem::User { text } => asked = clip_line(text, 100),
                HistoryItem::Assistant(m) => {
                    let text = m.text();
                    if !text.trim().is_empty() {
                        conclusion = clip_line(&text, 240);
                    }
                    for call in m.tool_calls() {
                        if let Ok(code) = crate::protocol::code_of(call) {
                            codes.push(code);
                        }
                    }
                }
                HistoryItem::ToolResult { output, images, .. } => {
                    // A fold drops the images with their result; the gist says they were there.
                    shown.extend(images.iter().map(|i| {
                        let mut what = format!(
                            "{}×{} {}",
                            i.meta.width,
                            i.meta.height,
                            i.meta.format.label()
                        );
                        if let Some(caption) = &i.meta.caption {
                            what.push_str(&format!(" \"{}\"", clip_line(caption, 60)));
                        }
                        what
                    }));
                    if let Some(code) = codes.last() {
                        if is_test_command(code) {
                            if let Some(line) = test_summary(output) {
                                tests.push(line);
                            }
                        }
                    }
                }
                HistoryItem::Notice { .. } => {}
            }
        }
        for code in &codes {
            for cap in file_calls().captures_iter(code) {
                let (func, path) = (&cap[1], cap[2].to_string());
                let list = if func == "patch" || func == "write_text" {
                    &mut edited
                } else {
                    &mut read
                };
                if !list.contains(&path) {
                    list.push(path);
                }
            }
        }
        let mut line = format!("t{t}:");
        if !asked.is_empty() {
            line.push_str(&format!(" asked \"{asked}\";"));
        }
        if !read.is_empty() {
            line.push_str(&format!(" read {};", short(&read)));
        }
        if !edited.is_empty() {
            line.push_str(&format!(" edited {};", short(&edited)));
        }
        if !tests.is_empty() {
            line.push_str(&format!(" tests: {};", tests.join(" / ")));
        }
        if !shown.is_empty() {
            line.push_str(&format!(" showed image {};", short(&shown)));
        }
        if !conclusion.is_empty() {
            line.push_str(&format!(" concluded \"{conclusion}\""));
        }
        parts.push(line.trim_end_matches(';').to_string());
    }
    format!(
        "(automatic fold: the context reached the model's input limit) {}",
        parts.join(" | ")
    )
}

fn file_calls() -> &'static Regex {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        #[allow(clippy::expect_used)]
        Regex::new(
            r#"\b(cat|patch|read_text|write_text|Path)\(\s*(?:r|f)?["']([^"'\n]{1,200})["']"#,
        )
        .expect("a valid literal regex")
    })
}

fn is_test_command(code: &str) -> bool {
    [
        "tests.run",
        "pytest",
        "cargo test",
        "npm test",
        "go test",
        "unittest",
    ]
    .iter()
    .any(|n| code.contains(n))
}

fn test_summary(output: &str) -> Option<String> {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    #[allow(clippy::expect_used)]
    let re = RE.get_or_init(|| {
        Regex::new(
            r"(?i)(\d+ (passed|failed|errors?)|test result: \w+[^\n]*|FAILED|all tests passed)",
        )
        .expect("a valid literal regex")
    });
    output
        .lines()
        .rev()
        .find(|l| re.is_match(l))
        .map(|l| clip_line(l, 120))
}

fn clip_line(text: &str, max: usize) -> String {
    let one = text.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::protocol::clip(&one, max)
}

fn short(items: &[String]) -> String {
    let mut out: Vec<String> = items.iter().take(6).cloned().collect();
    if items.len() > 6 {
        out.push(format!("+{} more", items.len() - 6));
    }
    out.join(", ")
}

/// The original content of the seq ranges of `selection`, from the stored rows, as text.
pub fn original_text(rows: &[HistoryRow], spans: &[(i64, i64, String)]) -> String {
    let mut out = String::new();
    for (first, last, label) in spans {
        out.push_str(&format!("== {label} ==\n"));
        for row in rows.iter().filter(|r| r.seq >= *first && r.seq <= *last) {
            match row.kind {
                HistoryKind::User => {
                    out.push_str(&format!("[t{} user]\n{}\n", row.turn, row.body.trim_end()))
                }
                HistoryKind::Notice => out.push_str(&format!(
                    "[t{} notice]\n{}\n",
                    row.turn,
                    row.body.trim_end()
                )),
                HistoryKind::Assistant => {
                    if let Ok(m) =
                        serde_json::from_str::<crate::protocol::AssistantMessage>(&row.body)
                    {
                        let text = m.text();
                        if !text.trim().is_empty() {
                            out.push_str(&format!(
                                "[t{} assistant]\n{}\n",
                                row.turn,
                                text.trim_end()
                            ));
                        }
                        for call in m.tool_calls() {
                            let code = crate::protocol::code_of(call)
                                .unwrap_or_else(|_| call.arguments.clone());
                            out.push_str(&format!(
                                "[t{} call {}]\n{}\n",
                                row.turn,
                                call.name,
                                code.trim_end()
                            ));
                        }
                    }
                }
                HistoryKind::ToolResult => out.push_str(&format!(
                    "[t{}/i{} result, {}]\n{}\n",
                    row.turn,
                    row.iteration.unwrap_or(0),
                    row.status.map_or("?", |s| s.as_str()),
                    row.body.trim_end()
                )),
            }
        }
    }
    out
}
