//! The top-level statements of a block, cut out of its source the way Python reads it, and
//! what each one would persist: a function or class (its text, decorators included), the
//! names an import binds (one canonical `import` statement per name, built here, never taken
//! from the worker), or a `NAME = value` assignment with the shape of its value.
//!
//! A statement's text runs from its first token to its last (comments after it are not part
//! of it; a compound statement keeps a `;` that ends its last line, as Python's `ast` does),
//! in the block's source with its newlines normalized.

use super::tokens::{identifier, normalize_newlines, tokenize, Dialect, Kind, SourceError, Token};

/// One top-level statement of a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// Its source, newlines normalized, without a final newline.
    pub text: String,
    pub kind: StatementKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatementKind {
    Function {
        name: String,
    },
    Class {
        name: String,
    },
    /// The names a top-level `import` or absolute `from … import` binds (a relative or
    /// `__future__` import binds none that are kept).
    Import {
        names: Vec<ImportedName>,
    },
    /// `NAME = value` or `NAME: annotation = value`, one plain name and one `=`.
    Assignment {
        name: String,
        /// The annotation, if any, is names, attributes, subscripts and literals only (no call).
        plain_annotation: bool,
        value: ValueShape,
    },
    Other,
}

/// One name an import binds, with the statement that binds only it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedName {
    /// The name bound (`os` for `import os.path`; `mod.*` for a star import).
    pub bound: String,
    /// `import a.b as c` / `from m import n as o` / `from m import *`, and a newline: the form
    /// Python's `ast.unparse` gives a one-name import.
    pub source: String,
}

/// What the value of an assignment is, judged from its tokens alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueShape {
    /// Numbers, strings and bytes (not f-strings), `True`, `False`, `None`, and tuples,
    /// signs and sums of them: nothing that can run code.
    Literal,
    /// `root.attr(…)(literals, name=literal, …)`: a call whose only names are a dotted callee
    /// and keyword names.
    Call {
        root: String,
    },
    Other,
}

const KEYWORDS: [&str; 35] = [
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// Statements that own an indented block (and may carry one on their own line).
const COMPOUND: [&str; 12] = [
    "def", "class", "async", "if", "elif", "else", "while", "for", "try", "except", "finally",
    "with",
];

/// The top-level statements of `code`, in order. An error means Python would not read the
/// block either (nothing in it ran).
pub fn top_level_statements(code: &str, dialect: Dialect) -> Result<Vec<Statement>, SourceError> {
    let source = normalize_newlines(code);
    let source = source.as_ref();
    let tokens = tokenize(source, dialect)?;
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        match tokens[i].kind {
            Kind::Indent => {
                let line = source[..tokens[i].start].matches('\n').count() + 1;
                return Err(SourceError {
                    line,
                    message: "unexpected indent",
                });
            }
            Kind::Newline | Kind::Dedent => {
                i += 1;
                continue;
            }
            _ => {}
        }
        let start = i;
        // Decorators are lines of their own before the definition they decorate.
        let mut head = i;
        while head < tokens.len() && is_op(&tokens[head], source, "@") {
            head = line_end(&tokens, head) + 1;
        }
        let end = block_end(&tokens, line_end(&tokens, head) + 1);
        let first = tokens.get(head).map(|t| t.text(source)).unwrap_or_default();
        let whole = &tokens[start..end];
        let has_block = whole.iter().any(|t| t.kind == Kind::Indent);
        if head > start || COMPOUND.contains(&first) {
            out.push(Statement {
                text: span(whole, source),
                kind: definition_kind(tokens.get(head..end).unwrap_or_default(), source),
            });
        } else if has_block {
            // `match x:` and the like: one statement that keeps nothing.
            out.push(Statement {
                text: span(whole, source),
                kind: StatementKind::Other,
            });
        } else {
            for piece in simple_pieces(whole, source) {
                out.push(Statement {
                    text: span(piece, source),
                    kind: simple_kind(piece, source),
                });
            }
        }
        i = end;
    }
    Ok(out)
}

fn is_op(token: &Token, source: &str, op: &str) -> bool {
    token.kind == Kind::Op && token.text(source) == op
}

fn is_name(token: Option<&Token>, source: &str, name: &str) -> bool {
    token.is_some_and(|t| t.kind == Kind::Name && t.text(source) == name)
}

/// The index of the NEWLINE that ends the logical line holding token `i` (the last index when
/// there is none).
fn line_end(tokens: &[Token], i: usize) -> usize {
    let last = tokens.len().saturating_sub(1);
    tokens
        .get(i..)
        .and_then(|rest| rest.iter().position(|t| t.kind == Kind::Newline))
        .map_or(last, |p| i + p)
}

/// Given the index just after a NEWLINE, the index after the indented block that follows it
/// (or the same index when none does).
fn block_end(tokens: &[Token], after: usize) -> usize {
    if tokens.get(after).map(|t| t.kind) != Some(Kind::Indent) {
        return after.min(tokens.len());
    }
    let mut depth = 0usize;
    for (k, t) in tokens.iter().enumerate().skip(after) {
        match t.kind {
            Kind::Indent => depth += 1,
            Kind::Dedent => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

/// The text from the first token to the last that is not a NEWLINE, INDENT or DEDENT.
fn span(tokens: &[Token], source: &str) -> String {
    let real = |t: &&Token| !matches!(t.kind, Kind::Newline | Kind::Indent | Kind::Dedent);
    match (tokens.iter().find(real), tokens.iter().rev().find(real)) {
        (Some(first), Some(last)) => source
            .get(first.start..last.end)
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    }
}

/// The statements of one simple logical line: split at each `;` outside brackets (the `;`
/// itself belongs to none of them).
fn simple_pieces<'t>(line: &'t [Token], source: &str) -> Vec<&'t [Token]> {
    let mut pieces = Vec::new();
    let mut depth = 0i64;
    let mut from = 0;
    let line = match line.iter().position(|t| t.kind == Kind::Newline) {
        Some(newline) => &line[..newline],
        None => line,
    };
    for (k, t) in line.iter().enumerate() {
        if t.kind != Kind::Op {
            continue;
        }
        match t.text(source) {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth -= 1,
            ";" if depth == 0 => {
                if k > from {
                    pieces.push(&line[from..k]);
                }
                from = k + 1;
            }
            _ => {}
        }
    }
    if line.len() > from {
        pieces.push(&line[from..]);
    }
    pieces
}

/// A compound statement (after its decorators): a function, a class, or something else.
fn definition_kind(tokens: &[Token], source: &str) -> StatementKind {
    let mut k = 0;
    if is_name(tokens.first(), source, "async") {
        k = 1;
    }
    let keyword = tokens.get(k).map(|t| t.text(source)).unwrap_or_default();
    let name = match tokens.get(k + 1) {
        Some(t) if t.kind == Kind::Name => identifier(t.text(source)).into_owned(),
        _ => return StatementKind::Other,
    };
    match keyword {
        "def" => StatementKind::Function { name },
        "class" if k == 0 => StatementKind::Class { name },
        _ => StatementKind::Other,
    }
}

fn simple_kind(tokens: &[Token], source: &str) -> StatementKind {
    let text = |k: usize| tokens.get(k).map(|t| t.text(source)).unwrap_or_default();
    match text(0) {
        "import" => return import_names(&tokens[1..], source),
        "from" => return from_import_names(&tokens[1..], source),
        _ => {}
    }
    let Some(target) = tokens.first().filter(|t| t.kind == Kind::Name) else {
        return StatementKind::Other;
    };
    let name = identifier(target.text(source)).into_owned();
    if KEYWORDS.contains(&name.as_str()) {
        return StatementKind::Other;
    }
    let equals: Vec<usize> = top_level_ops(tokens, source, "=");
    let (annotation, value, more) = match (text(1), equals.as_slice()) {
        ("=", [1, more @ ..]) => (&tokens[1..1], &tokens[2..], more),
        (":", [eq, more @ ..]) => (&tokens[2..*eq], &tokens[eq + 1..], more),
        _ => return StatementKind::Other,
    };
    // Another `=` outside brackets is a chained assignment (`A = B = 1`), unless it is a
    // lambda's default (`F = lambda x=1: x`).
    if let Some(&next) = more.first() {
        let lambda = tokens
            .iter()
            .position(|t| t.kind == Kind::Name && t.text(source) == "lambda");
        if lambda.is_none_or(|l| next < l) {
            return StatementKind::Other;
        }
    }
    if value.is_empty() {
        return StatementKind::Other;
    }
    StatementKind::Assignment {
        name,
        plain_annotation: annotation.iter().all(|t| match t.kind {
            Kind::Name | Kind::Number | Kind::String => true,
            Kind::Op => matches!(t.text(source), "." | "[" | "]" | "," | "|" | "..."),
            _ => false,
        }),
        value: value_shape(value, source),
    }
}

/// Indexes of `op` outside brackets.
fn top_level_ops(tokens: &[Token], source: &str, op: &str) -> Vec<usize> {
    let mut depth = 0i64;
    let mut found = Vec::new();
    for (k, t) in tokens.iter().enumerate() {
        if t.kind != Kind::Op {
            continue;
        }
        match t.text(source) {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => depth -= 1,
            s if s == op && depth == 0 => found.push(k),
            _ => {}
        }
    }
    found
}

fn is_literal_token(t: &Token, source: &str) -> bool {
    match t.kind {
        Kind::Number | Kind::String => true,
        Kind::Name => matches!(t.text(source), "True" | "False" | "None"),
        Kind::Op => matches!(t.text(source), "(" | ")" | "," | "+" | "-"),
        _ => false,
    }
}

fn value_shape(tokens: &[Token], source: &str) -> ValueShape {
    if tokens.iter().all(|t| is_literal_token(t, source)) {
        return ValueShape::Literal;
    }
    // root(.attr)* ( args )
    let Some(root) = tokens.first().filter(|t| t.kind == Kind::Name) else {
        return ValueShape::Other;
    };
    let root = identifier(root.text(source)).into_owned();
    if KEYWORDS.contains(&root.as_str()) {
        return ValueShape::Other;
    }
    let mut k = 1;
    while tokens.get(k).is_some_and(|t| is_op(t, source, "."))
        && tokens.get(k + 1).is_some_and(|t| t.kind == Kind::Name)
    {
        k += 2;
    }
    let opens = tokens.get(k).is_some_and(|t| is_op(t, source, "("));
    let closes = tokens.last().is_some_and(|t| is_op(t, source, ")"));
    if !opens || !closes || tokens.len() < k + 2 {
        return ValueShape::Other;
    }
    let args = &tokens[k + 1..tokens.len() - 1];
    // The parenthesis after the callee must be the one that closes last.
    let mut depth = 0i64;
    for (n, t) in args.iter().enumerate() {
        let keyword = t.kind == Kind::Name
            && depth == 0
            && args.get(n + 1).is_some_and(|next| is_op(next, source, "="))
            && (n == 0 || args.get(n - 1).is_some_and(|p| is_op(p, source, ",")));
        let keyword_equals = is_op(t, source, "=")
            && depth == 0
            && n > 0
            && args.get(n - 1).is_some_and(|p| p.kind == Kind::Name);
        if keyword || keyword_equals {
            continue;
        }
        if !is_literal_token(t, source) {
            return ValueShape::Other;
        }
        match t.text(source) {
            "(" if t.kind == Kind::Op => depth += 1,
            ")" if t.kind == Kind::Op => {
                depth -= 1;
                if depth < 0 {
                    return ValueShape::Other;
                }
            }
            _ => {}
        }
    }
    if depth != 0 {
        return ValueShape::Other;
    }
    ValueShape::Call { root }
}

/// `dotted(.name)*`, from token `k`: the name and the index after it.
fn dotted_name(tokens: &[Token], source: &str, mut k: usize) -> Option<(String, usize)> {
    let mut name = String::new();
    loop {
        let part = tokens.get(k).filter(|t| t.kind == Kind::Name)?;
        name.push_str(&identifier(part.text(source)));
        k += 1;
        if tokens.get(k).is_some_and(|t| is_op(t, source, ".")) {
            name.push('.');
            k += 1;
        } else {
            return Some((name, k));
        }
    }
}

/// `as NAME` at token `k`, if there: the alias and the index after it.
fn alias(tokens: &[Token], source: &str, k: usize) -> Option<(String, usize)> {
    if !is_name(tokens.get(k), source, "as") {
        return None;
    }
    let name = tokens.get(k + 1).filter(|t| t.kind == Kind::Name)?;
    Some((identifier(name.text(source)).into_owned(), k + 2))
}

/// After `import`: `dotted [as name] (, dotted [as name])*`.
fn import_names(tokens: &[Token], source: &str) -> StatementKind {
    let mut names = Vec::new();
    let mut k = 0;
    loop {
        let Some((module, next)) = dotted_name(tokens, source, k) else {
            return StatementKind::Other;
        };
        k = next;
        let (bound, clause) = match alias(tokens, source, k) {
            Some((a, next)) => {
                k = next;
                (a.clone(), format!(" as {a}"))
            }
            None => (
                module.split('.').next().unwrap_or_default().to_string(),
                String::new(),
            ),
        };
        names.push(ImportedName {
            bound,
            source: format!("import {module}{clause}\n"),
        });
        match tokens.get(k) {
            None => return StatementKind::Import { names },
            Some(t) if is_op(t, source, ",") => k += 1,
            Some(_) => return StatementKind::Other,
        }
    }
}

/// After `from`: `[dots] dotted import (* | names | (names[,]))`.
fn from_import_names(tokens: &[Token], source: &str) -> StatementKind {
    let mut k = 0;
    let mut level = 0;
    while let Some(t) = tokens.get(k).filter(|t| t.kind == Kind::Op) {
        match t.text(source) {
            "." => level += 1,
            "..." => level += 3,
            _ => break,
        }
        k += 1;
    }
    let module = if is_name(tokens.get(k), source, "import") {
        None
    } else {
        let Some((module, next)) = dotted_name(tokens, source, k) else {
            return StatementKind::Other;
        };
        k = next;
        Some(module)
    };
    if !is_name(tokens.get(k), source, "import") {
        return StatementKind::Other;
    }
    k += 1;
    let mut names = Vec::new();
    let kept = level == 0 && module.as_deref().is_some_and(|m| m != "__future__");
    let module = module.unwrap_or_default();
    if tokens.get(k).is_some_and(|t| is_op(t, source, "*")) {
        if k + 1 != tokens.len() {
            return StatementKind::Other;
        }
        if kept {
            names.push(ImportedName {
                bound: format!("{module}.*"),
                source: format!("from {module} import *\n"),
            });
        }
        return StatementKind::Import { names };
    }
    let parenthesized = tokens.get(k).is_some_and(|t| is_op(t, source, "("));
    let mut end = tokens.len();
    if parenthesized {
        if !tokens.last().is_some_and(|t| is_op(t, source, ")")) {
            return StatementKind::Other;
        }
        k += 1;
        end -= 1;
    }
    let tokens = &tokens[..end];
    loop {
        let Some(name) = tokens.get(k).filter(|t| t.kind == Kind::Name) else {
            return StatementKind::Other;
        };
        let name = identifier(name.text(source)).into_owned();
        k += 1;
        let (bound, clause) = match alias(tokens, source, k) {
            Some((a, next)) => {
                k = next;
                (a.clone(), format!(" as {a}"))
            }
            None => (name.clone(), String::new()),
        };
        if kept {
            names.push(ImportedName {
                bound,
                source: format!("from {module} import {name}{clause}\n"),
            });
        }
        match tokens.get(k) {
            None => return StatementKind::Import { names },
            Some(t) if is_op(t, source, ",") => {
                k += 1;
                // A trailing comma is allowed inside parentheses.
                if k == tokens.len() && parenthesized {
                    return StatementKind::Import { names };
                }
            }
            Some(_) => return StatementKind::Other,
        }
    }
}

#[cfg(test)]
mod tests;
