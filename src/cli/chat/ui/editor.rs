//! The prompt: `reedline` with emacs keys, a history file, and multi-line input.
//!
//! - Enter sends; Alt-Enter (or Shift-Enter where the terminal reports it) inserts a newline;
//!   a line ending in `\` continues on the next line (the `\` is dropped when it is sent).
//!   Pasted text keeps its newlines (bracketed paste).
//! - Ctrl-O asks for the last block in full (`/expand`) without losing what is typed.
//! - Tab completes a slash command's name.
//! - The history file is kept beside the database (`chat_history`); it cannot be written,
//!   history still works for this run.
//!
//! reedline clears the line before it reports Ctrl-C, so whether there was text is taken from
//! the last buffer its highlighter saw.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use reedline::{
    default_emacs_keybindings, ColumnarMenu, Completer, Emacs, FileBackedHistory, Highlighter,
    KeyCode, KeyModifiers, MenuBuilder, Prompt, PromptEditMode, PromptHistorySearch,
    PromptHistorySearchStatus, Reedline, ReedlineEvent, ReedlineMenu, Signal, Span, StyledText,
    Suggestion, ValidationResult, Validator,
};

/// What the person did at the prompt.
#[derive(Debug, PartialEq, Eq)]
pub enum Input {
    /// A message or a command (continuation backslashes removed).
    Line(String),
    /// A command bound to a key (Ctrl-O); the typed line waits on the prompt.
    Key(String),
    /// Ctrl-C; `had_text` tells whether it cleared a non-empty line.
    Interrupt { had_text: bool },
    /// Ctrl-D on an empty line.
    Eof,
}

pub struct Editor {
    line: Reedline,
    prompt: VisPrompt,
    buffer: Arc<Mutex<String>>,
}

impl Editor {
    /// The editor (completing `commands`), and a warning when the history file cannot be used.
    pub fn new(history: PathBuf, commands: Vec<String>) -> (Editor, Option<String>) {
        let mut keys = default_emacs_keybindings();
        keys.add_binding(
            KeyModifiers::CONTROL,
            KeyCode::Char('o'),
            ReedlineEvent::ExecuteHostCommand("/expand".into()),
        );
        keys.add_binding(
            KeyModifiers::NONE,
            KeyCode::Tab,
            ReedlineEvent::UntilFound(vec![
                ReedlineEvent::Menu(MENU.into()),
                ReedlineEvent::MenuNext,
            ]),
        );
        let buffer = Arc::new(Mutex::new(String::new()));
        let mut line = Reedline::create()
            .with_edit_mode(Box::new(Emacs::new(keys)))
            .with_completer(Box::new(Commands(commands)))
            .with_menu(ReedlineMenu::EngineCompleter(Box::new(
                ColumnarMenu::default().with_name(MENU),
            )))
            .with_quick_completions(true)
            .with_partial_completions(true)
            .with_validator(Box::new(Continuation))
            .with_highlighter(Box::new(Watch(buffer.clone())))
            .use_bracketed_paste(true);
        let mut warning = None;
        if let Some(dir) = history.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        match FileBackedHistory::with_file(10_000, history.clone()) {
            Ok(h) => line = line.with_history(Box::new(h)),
            Err(e) => {
                warning = Some(format!(
                    "vis chat: the history file {} cannot be used ({e}); this run keeps its history in memory",
                    history.display()
                ))
            }
        }
        let editor = Editor {
            line,
            prompt: VisPrompt,
            buffer,
        };
        (editor, warning)
    }

    /// Waits for the person (blocking: call it where the runtime may block).
    pub fn read(&mut self) -> std::io::Result<Input> {
        let signal = self.line.read_line(&self.prompt)?;
        let last = std::mem::take(&mut *self.buffer.lock().unwrap_or_else(|e| e.into_inner()));
        Ok(match signal {
            Signal::Success(text) => {
                // Written now, not only at exit, so a killed program keeps its history.
                let _ = self.line.sync_history();
                Input::Line(join_continuations(&text))
            }
            Signal::HostCommand(command) => Input::Key(command),
            Signal::CtrlC => Input::Interrupt {
                had_text: !last.is_empty(),
            },
            Signal::CtrlD => Input::Eof,
            Signal::ExternalBreak(text) => Input::Line(join_continuations(&text)),
            // Signals added by later reedline versions: nothing to send.
            _ => Input::Line(String::new()),
        })
    }
}

/// `a\` + newline + `b` is `a` + newline + `b`.
pub fn join_continuations(text: &str) -> String {
    text.replace("\\\r\n", "\n").replace("\\\n", "\n")
}

const MENU: &str = "commands";

/// Completes the name of a slash command (only the first word of a line starting with `/`).
struct Commands(Vec<String>);

impl Completer for Commands {
    fn complete(&mut self, line: &str, pos: usize) -> Vec<Suggestion> {
        let typed = line.get(..pos).unwrap_or(line);
        if !typed.starts_with('/') || typed.contains(char::is_whitespace) {
            return Vec::new();
        }
        self.0
            .iter()
            .filter(|name| name.starts_with(typed))
            .map(|name| Suggestion {
                value: name.clone(),
                span: Span::new(0, pos),
                append_whitespace: true,
                ..Suggestion::default()
            })
            .collect()
    }
}

/// A line ending in `\` is not finished.
struct Continuation;

impl Validator for Continuation {
    fn validate(&self, line: &str) -> ValidationResult {
        if line.ends_with('\\') && !line.ends_with("\\\\") {
            ValidationResult::Incomplete
        } else {
            ValidationResult::Complete
        }
    }
}

/// Remembers the buffer (see the module docs) and shows it unstyled.
struct Watch(Arc<Mutex<String>>);

impl Highlighter for Watch {
    fn highlight(&self, line: &str, _cursor: usize) -> StyledText {
        if let Ok(mut last) = self.0.lock() {
            line.clone_into(&mut last);
        }
        let mut text = StyledText::new();
        text.push((Default::default(), line.to_string()));
        text
    }
}

struct VisPrompt;

impl Prompt for VisPrompt {
    fn render_prompt_left(&self) -> Cow<'_, str> {
        Cow::Borrowed("")
    }

    fn render_prompt_right(&self) -> Cow<'_, str> {
        Cow::Borrowed("")
    }

    fn render_prompt_indicator(&self, _mode: PromptEditMode) -> Cow<'_, str> {
        Cow::Borrowed("› ")
    }

    fn render_prompt_multiline_indicator(&self) -> Cow<'_, str> {
        Cow::Borrowed("· ")
    }

    fn render_prompt_history_search_indicator(&self, search: PromptHistorySearch) -> Cow<'_, str> {
        let state = match search.status {
            PromptHistorySearchStatus::Passing => "",
            PromptHistorySearchStatus::Failing => "failing ",
        };
        Cow::Owned(format!("({state}search: {}) ", search.term))
    }

    fn get_indicator_color(&self) -> reedline::Color {
        reedline::Color::Cyan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_command_names_complete() {
        let mut c = Commands(vec!["/status".into(), "/sessions".into(), "/help".into()]);
        let values = |v: Vec<Suggestion>| v.into_iter().map(|s| s.value).collect::<Vec<_>>();
        assert_eq!(values(c.complete("/s", 2)), ["/status", "/sessions"]);
        assert_eq!(values(c.complete("/he", 3)), ["/help"]);
        assert!(c.complete("he", 2).is_empty());
        assert!(c.complete("/expand 1", 9).is_empty());
    }

    #[test]
    fn continuations_join_lines() {
        assert_eq!(join_continuations("a\\\nb\\\nc"), "a\nb\nc");
        assert_eq!(join_continuations("a\nb"), "a\nb");
        assert!(matches!(
            Continuation.validate("x \\"),
            ValidationResult::Incomplete
        ));
        assert!(matches!(
            Continuation.validate("x \\\\"),
            ValidationResult::Complete
        ));
    }
}
