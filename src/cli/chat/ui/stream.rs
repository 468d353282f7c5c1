//! An answer's Markdown as it streams: what is settled is drawn once, for good; the rest is a
//! live view redrawn as it grows.
//!
//! The held source (`tail`) starts at the first top-level block not drawn yet. After a delta,
//! the complete lines of the tail are split into top-level blocks ([`block_starts`]); every
//! block but the last is settled (the next one began on a complete line, and CommonMark never
//! reopens a block it closed), so it is rendered on its own and committed, and its source is
//! dropped. The last block, with the incomplete line after it, is rendered as the live view:
//! it may still change (a table's delimiter row, a setext underline, a closing fence, an
//! emphasis closed on the next line), so it is only ever drawn where it can be redrawn. At the
//! end of the answer, [`MarkdownStream::finish`] commits what is left. What is committed is
//! therefore exactly [`markdown::render`](super::markdown::render) of the whole answer,
//! however the deltas split it (the tests check every split of several samples).
//!
//! Rendering the tail costs time in its length, and a single block can be long (a megabyte
//! paragraph, a thousand-line code block), so the renders a delta may trigger are paid from a
//! budget: each byte received adds [`WORK_PER_BYTE`] bytes of rendering, and a render is done
//! when the budget covers the tail. Total work is linear in the answer; when the budget runs
//! short the live view lags behind, and the caller may [`refresh`](MarkdownStream::refresh) it
//! on a timer.

use super::markdown::{block_starts, render_rows, Joiner};
use super::wrap::{paint, Line};

/// Bytes of re-rendering a received byte pays for.
pub const WORK_PER_BYTE: usize = 2;
/// Rendering allowed before any byte pays for it: small answers re-render on every delta.
const FREE_WORK: usize = 256 * 1024;

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Update {
    /// Rows settled, painted: drawn once, above the live view.
    pub commit: Vec<String>,
    /// The live view's rows now (`None`: unchanged), not painted: a view that shows only its
    /// last rows paints only those.
    pub live: Option<Vec<Line>>,
}

pub struct MarkdownStream {
    /// The source from the first top-level block not committed yet.
    tail: String,
    joiner: Joiner,
    /// Rendering work still paid for.
    credit: usize,
    /// The tail changed since the last render.
    dirty: bool,
}

impl Default for MarkdownStream {
    fn default() -> Self {
        MarkdownStream {
            tail: String::new(),
            joiner: Joiner::default(),
            credit: FREE_WORK,
            dirty: false,
        }
    }
}

impl MarkdownStream {
    /// Adds a delta; renders when the budget allows.
    pub fn push(&mut self, delta: &str, width: usize) -> Update {
        if delta.is_empty() {
            return Update::default();
        }
        self.tail.push_str(delta);
        self.dirty = true;
        self.credit = self
            .credit
            .saturating_add(delta.len().saturating_mul(WORK_PER_BYTE));
        if self.credit < self.tail.len() {
            return Update::default();
        }
        self.credit -= self.tail.len();
        self.render(width)
    }

    /// Renders what arrived since the last render, budget or not (a timer's call: the caller
    /// bounds how often).
    pub fn refresh(&mut self, width: usize) -> Update {
        if !self.dirty {
            return Update::default();
        }
        self.render(width)
    }

    /// The tail changed since it was last rendered.
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// Commits everything held (the answer is complete) and starts afresh.
    pub fn finish(&mut self, width: usize) -> Vec<String> {
        let mut out = Vec::new();
        let tail = std::mem::take(&mut self.tail);
        let starts = block_starts(&tail);
        let mut from = 0;
        for &start in starts.iter().skip(1) {
            self.joiner.add(&tail[from..start], width, &mut out);
            from = start;
        }
        self.joiner.add(&tail[from..], width, &mut out);
        *self = MarkdownStream::default();
        out.iter().map(|row| paint(row)).collect()
    }

    /// Forgets everything (the attempt that streamed it failed).
    pub fn discard(&mut self) {
        *self = MarkdownStream::default();
    }

    fn render(&mut self, width: usize) -> Update {
        self.dirty = false;
        let complete = self.tail.rfind('\n').map_or(0, |at| at + 1);
        let starts = block_starts(&self.tail[..complete]);
        let mut commit = Vec::new();
        let mut from = 0;
        for &start in starts.iter().skip(1) {
            self.joiner.add(&self.tail[from..start], width, &mut commit);
            from = start;
        }
        self.tail.drain(..from);
        let mut live = Vec::new();
        if self.joiner.pending_blank() && !self.tail.trim().is_empty() {
            live.push(Line::new());
        }
        live.extend(render_rows(&self.tail, width));
        Update {
            commit: commit.iter().map(|row| paint(row)).collect(),
            live: Some(live),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::markdown::render;
    use super::super::screen::term::Terminal;
    use super::super::screen::Screen;
    use super::super::style::strip;
    use super::*;
    use proptest::prelude::*;

    /// Answers with every construct that spans lines.
    const SAMPLES: &[&str] = &[
        "# Plan\n\nRun `pytest` **now**, then *look\nat* the ~~old~~ results.\n\n```python\ndef f(x):\n    '''Doc\n    string'''\n    return x\n```\nDone: *ok*",
        "Steps:\n- one\n  - nested *a\n    b*\n  - two\n- three\n\n1. first\n2. second\n\n   more of second\n3. third\n\n- [ ] todo\n- [x] done\n",
        "| name | size |\n|:-----|-----:|\n| `a.py` | 1,024 |\n| b | 7 |\n\nAfter the table.\n\n> quoted\n> and continued\nlazily\n\n> second quote\n\n---\nend",
        "Setext\n======\n\npara\n---\n\n~~~\nplain fence\n~~~~\n\n    indented code\n\n<div>\nhtml\n</div>\n\n[link](http://x.y) and <http://a.b>\n\n```\nnever closed",
        "日本語の文章はスペースがありません。とても長い行は幅で切られます。\n\nA https://example.com/a/very/long/url/that/does/not/fit/in/the/width and more.\n",
    ];

    fn whole(text: &str, width: usize) -> Vec<String> {
        render(text, width)
    }

    /// The live rows without styles.
    fn shown(live: Option<Vec<Line>>) -> Vec<String> {
        live.unwrap().iter().map(|row| strip(&paint(row))).collect()
    }

    /// `text` cut at `cuts` (byte offsets, any order, taken modulo its length).
    fn chunks<'a>(text: &'a str, cuts: &[usize]) -> Vec<&'a str> {
        let mut cuts: Vec<usize> = cuts
            .iter()
            .map(|c| c % (text.len() + 1))
            .filter(|c| text.is_char_boundary(*c))
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut out = Vec::new();
        let mut from = 0;
        for cut in cuts.into_iter().chain([text.len()]) {
            out.push(&text[from..cut]);
            from = cut;
        }
        out
    }

    /// Streams `text` cut at `cuts`; returns what was committed.
    fn streamed(text: &str, cuts: &[usize], width: usize) -> Vec<String> {
        let mut md = MarkdownStream::default();
        let mut out = Vec::new();
        for chunk in chunks(text, cuts) {
            out.extend(md.push(chunk, width).commit);
        }
        out.extend(md.finish(width));
        out
    }

    /// Streams `text` cut at `cuts` onto a terminal as the view draws it: what settles is
    /// committed, the rest redrawn in the live region above a spinner; with `budget`, renders
    /// wait for the budget and a timer's refresh comes every third delta. Returns the screen
    /// at the end.
    fn on_screen(text: &str, cuts: &[usize], width: usize, budget: bool) -> String {
        let mut md = MarkdownStream::default();
        if budget {
            md.credit = 0;
        }
        let mut screen = Screen::default();
        let mut term = Terminal::default();
        let mut live = Vec::new();
        for (n, chunk) in chunks(text, cuts).into_iter().enumerate() {
            let mut update = md.push(chunk, width);
            if budget && n % 3 == 2 {
                let refreshed = md.refresh(width);
                update.commit.extend(refreshed.commit);
                update.live = refreshed.live.or(update.live);
            }
            if let Some(rows) = update.live {
                live = rows.iter().map(|row| paint(row)).collect();
            }
            let commit: String = update.commit.iter().map(|r| format!("{r}\n")).collect();
            term.write(&screen.frame(&commit, &live, Some("⠋ thinking 1.0 s")));
        }
        let rest: String = md.finish(width).iter().map(|r| format!("{r}\n")).collect();
        term.write(&screen.frame(&rest, &[], None));
        term.text()
    }

    /// The whole rendering as a terminal shows it.
    fn whole_on_screen(text: &str, width: usize) -> String {
        let mut term = Terminal::default();
        for row in render(text, width) {
            term.write(&format!("{row}\n"));
        }
        term.text()
    }

    #[test]
    fn every_split_of_every_sample_commits_the_whole_rendering() {
        for text in SAMPLES {
            for width in [20, 79] {
                let expected = whole(text, width);
                for cut in 0..=text.len() {
                    if !text.is_char_boundary(cut) {
                        continue;
                    }
                    assert_eq!(
                        streamed(text, &[cut], width),
                        expected,
                        "{text:?} cut at {cut}, width {width}"
                    );
                }
                // Byte by byte: every delta one character, on a terminal too.
                let all: Vec<usize> = (0..text.len()).collect();
                assert_eq!(streamed(text, &all, width), expected, "{text:?} bytewise");
                assert_eq!(
                    on_screen(text, &all, width, false),
                    whole_on_screen(text, width),
                    "{text:?} bytewise on a terminal"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn any_chunking_leaves_the_screen_of_the_whole_rendering(
            sample in 0..SAMPLES.len(),
            cuts in proptest::collection::vec(any::<usize>(), 0..40),
            width in 20usize..120,
            budget in any::<bool>(),
        ) {
            let text = SAMPLES[sample];
            prop_assert_eq!(on_screen(text, &cuts, width, budget), whole_on_screen(text, width));
        }

        #[test]
        fn any_chunking_commits_the_whole_rendering(
            sample in 0..SAMPLES.len(),
            cuts in proptest::collection::vec(any::<usize>(), 0..40),
            width in 20usize..120,
        ) {
            let text = SAMPLES[sample];
            prop_assert_eq!(streamed(text, &cuts, width), whole(text, width));
        }
    }

    #[test]
    fn settled_blocks_are_committed_and_the_rest_is_live() {
        let mut md = MarkdownStream::default();
        let update = md.push("| a | b |\n", 80);
        assert!(update.commit.is_empty());
        // One header row and nothing else yet: a paragraph, for now.
        assert_eq!(shown(update.live), ["| a | b |"]);
        // The next block begun on an incomplete line settles nothing.
        let update = md.push("|---|---|\n| 1 | 2 |\n\nNext **par", 80);
        assert!(update.commit.is_empty());
        assert_eq!(
            shown(update.live),
            ["a │ b", "──┼──", "1 │ 2", "", "Next **par"]
        );
        let update = md.push("t**\n", 80);
        let commit: Vec<String> = update.commit.iter().map(|l| strip(l)).collect();
        assert_eq!(commit, ["a │ b", "──┼──", "1 │ 2"]);
        assert_eq!(shown(update.live), ["", "Next part"]);
        let rest: Vec<String> = md.finish(80).iter().map(|l| strip(l)).collect();
        assert_eq!(rest, ["", "Next part"]);
    }

    #[test]
    fn an_open_fence_stays_live_until_it_closes() {
        let mut md = MarkdownStream::default();
        let update = md.push("```python\nx = '''\n", 80);
        assert!(update.commit.is_empty());
        assert_eq!(shown(update.live)[0], "  ┄ python (not run)");
        let update = md.push("'''\n```\n\nafter\n", 80);
        let commit: Vec<String> = update.commit.iter().map(|l| strip(l)).collect();
        assert_eq!(commit, ["  ┄ python (not run)", "  ┆ x = '''", "  ┆ '''"]);
        assert_eq!(shown(update.live), ["", "after"]);
    }

    #[test]
    fn renders_beyond_the_budget_wait_for_a_refresh() {
        let mut md = MarkdownStream::default();
        assert!(md.push(&"a".repeat(10_000), 80).live.is_some());
        // Spent: a byte pays for two bytes of rendering, not for ten thousand.
        md.credit = 0;
        assert!(md.push("b", 80).live.is_none());
        assert!(md.is_dirty());
        assert!(md.refresh(80).live.is_some());
        assert!(!md.is_dirty());
        assert_eq!(md.refresh(80), Update::default());
    }
}
