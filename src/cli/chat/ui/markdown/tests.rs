use super::super::stream::MarkdownStream;
use super::super::style::strip;
use super::super::wrap::text_width;
use super::*;

/// `text` rendered whole at `width`, without styles, one string.
fn shown(text: &str, width: usize) -> String {
    render(text, width)
        .iter()
        .map(|row| strip(row) + "\n")
        .collect()
}

#[test]
fn renders_the_usual_markdown() {
    let out = render(
        "# Title\n\nSome **bold**, *it* and `code`.\n- one\n  - two\n3. three\n\n> quote\n\n[link](http://x.y) ---\n",
        80,
    );
    let text: String = out.iter().map(|l| strip(l) + "\n").collect();
    assert_eq!(
        text,
        "Title\n\nSome bold, it and code.\n• one\n  ◦ two\n3. three\n\n│ quote\n\nlink (http://x.y) ---\n"
    );
    assert!(out.concat().contains('\u{1b}'));
}

#[test]
fn prose_wraps_at_word_boundaries_under_its_marker() {
    assert_eq!(
        shown("- the quick brown fox jumps over the lazy dog\n", 20),
        "• the quick brown\n  fox jumps over the\n  lazy dog\n"
    );
    assert_eq!(
        shown("> a quote that is long enough to wrap\n", 20),
        "│ a quote that is\n│ long enough to\n│ wrap\n"
    );
    // Soft line breaks are spaces: the paragraph is re-flowed.
    assert_eq!(shown("one\ntwo\nthree\n", 80), "one two three\n");
    assert_eq!(shown("one  \ntwo\n", 80), "one\ntwo\n");
}

#[test]
fn emphasis_and_lists_span_lines() {
    assert_eq!(
        shown("*started here\nended here* and **bold\nacross**\n", 80),
        "started here ended here and bold across\n"
    );
    let out = render("*a\nb*\n", 80);
    assert!(out[0].contains("\u{1b}[3m"), "{out:?}");
    assert_eq!(
        shown(
            "1. first\n2. second\n   continued\n\n   second paragraph\n3. third\n",
            80
        ),
        "1. first\n\n2. second continued\n\n   second paragraph\n\n3. third\n"
    );
}

#[test]
fn code_in_an_answer_is_labelled_not_run_and_never_reflowed() {
    let out = shown(
        "```python\ndef f(x):\n    return x + 1  # a comment that is long enough to pass the width\n```\n",
        40,
    );
    assert_eq!(
        out,
        "  ┄ python (not run)\n  ┆ def f(x):\n  ┆     return x + 1  # a comment that i\n  ┆ ↪ s long enough to pass the width\n"
    );
    assert_eq!(
        shown("~~~\nplain\n~~~\n", 40),
        "  ┄ code (not run)\n  ┆ plain\n"
    );
    // Highlighted: the keyword is painted.
    let out = render("```python\ndef f(): pass\n```\n", 40);
    assert!(out[1].contains('\u{1b}'), "{out:?}");
}

#[test]
fn tables_are_aligned() {
    assert_eq!(
        shown(
            "| a | long header |\n|---|:---:|\n| `xyz` | y |\n| 1 | 2 |\n\nafter\n",
            80
        ),
        "a   │ long header\n────┼────────────\nxyz │      y\n1   │      2\n\nafter\n"
    );
}

#[test]
fn a_wide_table_narrows_its_widest_column_and_wraps_its_cells() {
    let out = shown(
        "| key | description |\n|---|---|\n| a | a long description that does not fit the width |\n",
        30,
    );
    assert_eq!(
        out,
        "key │ description\n────┼─────────────────────────\na   │ a long description that\n    │ does not fit the width\n"
    );
    for row in out.lines() {
        assert!(text_width(row) <= 30, "{row:?}");
    }
}

#[test]
fn nothing_from_the_model_drives_the_terminal() {
    let out = render(
        "x \u{1b}[2J &#27;]0;t&#7; `\u{9b}` [a](\u{1b}b)\n```\n\u{1b}c\n```\n",
        80,
    )
    .concat();
    assert!(!strip(&out).contains('\u{1b}'), "{out:?}");
    assert!(!strip(&out).contains('\u{7}'), "{out:?}");
    assert!(strip(&out).contains("\\x1b[2J"), "{out:?}");
}

#[test]
fn blank_runs_collapse() {
    assert_eq!(shown("\n\na\n\n\n\nb\n", 80), "a\n\nb\n");
}

#[test]
fn every_row_fits_the_width() {
    let text = "# A heading that is long enough to wrap somewhere\n\n- item with `inline code that is long` and a https://very.long/url/without/spaces/at/all\n  > nested quote with words enough to wrap twice over at this width\n\n| a | b | c | d | e | f | g | h |\n|---|---|---|---|---|---|---|---|\n| 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 |\n\n```\nx = 'a code line that is much longer than twenty columns'\n```\n日本語の文章はスペースがありません。とても長い行は幅で切られます。\n";
    for width in [20, 33, 80] {
        for row in render(text, width) {
            let row = strip(&row);
            assert!(text_width(&row) <= width, "{width}: {row:?}");
        }
    }
}

#[test]
fn deep_nesting_stops_indenting_at_half_the_width() {
    let out = shown(&format!("{}deep\n", "> ".repeat(100)), 40);
    assert_eq!(out, format!("{}deep\n", "│ ".repeat(10)));
}

#[test]
fn a_nested_image_in_a_link_keeps_its_addresses() {
    assert_eq!(
        shown(
            "[![alt](img.png)](http://x.y) [same](same) [](http://e)\n",
            80
        ),
        "alt (img.png) (http://x.y) same  (http://e)\n"
    );
}

#[test]
fn top_level_blocks_start_on_their_first_line() {
    let text = "para\n\n   - item\n- more\n\n```\ncode\n```\n---\n";
    assert_eq!(block_starts(text), [0, 6, 24, 37]);
}

/// Renders `text` in 64-byte deltas and at once; both must give the same rows.
fn streamed_and_whole(text: String) -> String {
    crate::cli::chat::ui::finishes(move || {
        let mut md = MarkdownStream::default();
        let mut streamed = Vec::new();
        let mut rest = text.as_str();
        while !rest.is_empty() {
            let mut cut = rest.len().min(64);
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            streamed.extend(md.push(&rest[..cut], 80).commit);
            rest = &rest[cut..];
        }
        streamed.extend(md.finish(80));
        let whole = render(&text, 80);
        // (Not assert_eq: a megabyte of difference is no help.)
        assert!(
            streamed == whole,
            "streamed and whole differ: {} and {} rows",
            streamed.len(),
            whole.len()
        );
        streamed.iter().map(|row| strip(row) + "\n").collect()
    })
}

/// A megabyte of each input that made a step super-linear: re-rendering the whole held
/// text on every delta, searching it for a newline on every delta, folding the whole style
/// stack for every piece of text, stripping a link's whole text again for every nested link
/// or image, building the prefix of every row from every level of nesting.
#[test]
fn a_megabyte_of_pathological_markdown_renders_in_linear_time() {
    const MB: usize = 1 << 20;
    let runs = ["`", "*", "_", "[", "<", "~", "\\", "&#"];
    for run in runs {
        let out = streamed_and_whole(format!("x {}\n\nafter\n", run.repeat(MB / run.len())));
        assert!(
            out.ends_with("after\n"),
            "{run}: {}",
            &out[out.len().saturating_sub(200)..]
        );
    }
    let nested = [
        "> ".repeat(MB / 2),
        "- ".repeat(MB / 2),
        "  ".repeat(MB / 2) + "- deep",
        format!("{}a{}", "![".repeat(MB / 8), "](u)".repeat(MB / 8)),
        format!(
            "{}a{}",
            "**a *b ".repeat(MB / 16),
            " b* a**".repeat(MB / 16)
        ),
        "a\n".repeat(MB / 2),
        "- a\n".repeat(MB / 4),
        "> a\nb\n".repeat(MB / 6),
        "| a ".repeat(MB / 4) + "|\n|---|\n",
        format!("```\n{}", "x\n".repeat(MB / 2)),
    ];
    for text in nested {
        let head: String = text.chars().take(12).collect();
        let out = streamed_and_whole(text + "\n\nafter\n");
        assert!(out.ends_with("after\n"), "{head:?}…");
    }
}
