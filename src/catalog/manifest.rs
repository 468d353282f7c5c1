//! The manifest: every public name a session can see, in one deterministic order.
//!
//! # Manifest order
//!
//! Entries are grouped by origin, and each group keeps registration (input) order:
//!
//! 1. core (the prelude) in registration order;
//! 2. extensions sorted by extension name (byte order), each in its registration order;
//! 3. MCP servers sorted by server name, each in its registration order.
//!
//! Namespaces are rows of their own: a namespace's row is placed immediately before the first
//! row that needs it (its first member, or its explicit metadata entry, whichever comes first);
//! its ancestors come before it. A path may be both a function and a namespace
//! (`slack.admin(...)` and `slack.admin.invite(...)`): it then has two rows.
//!
//! # Names and namespaces
//!
//! A function, page or skill named `a.b.c` implicitly creates namespaces `a` and `a.b`.
//! An entry of kind [`EntryKind::Namespace`] only adds metadata (summary, doc, `pinned`) to a
//! namespace; a namespace with no visible function, page or skill below it is dropped. At most
//! one function/page/skill and at most one namespace entry may use a given name; a second one is
//! a [`CatalogError::DuplicateName`] error.
//!
//! # Permissions
//!
//! [`DenyList`] paths are applied while building: a denied entry (or every entry at or below a
//! denied namespace path) is omitted entirely, so it is not listed, not documented, and
//! [`Manifest::is_visible`] is false for it (callers refuse calls on that basis).

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::error::{CatalogError, Result};
use super::names::{self, NameRule};

/// Longest first-doc-line kept in rows and catalogs (characters); longer ones end in `…`.
pub const SUMMARY_MAX_CHARS: usize = 160;

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    Function,
    Namespace,
    Page,
    Skill,
}

impl EntryKind {
    /// Lowercase name (`"function"`, ...), as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Function => "function",
            EntryKind::Namespace => "namespace",
            EntryKind::Page => "page",
            EntryKind::Skill => "skill",
        }
    }

    fn rule(self) -> NameRule {
        match self {
            EntryKind::Function | EntryKind::Namespace => NameRule::Identifier,
            EntryKind::Page | EntryKind::Skill => NameRule::Slug,
        }
    }
}

/// Who registered an entry. Serialized as `"core"`, `{"extension": "git"}`, `{"mcp": "github"}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    #[default]
    Core,
    Extension(String),
    Mcp(String),
}

impl Origin {
    fn group_key(&self) -> (u8, &str) {
        match self {
            Origin::Core => (0, ""),
            Origin::Extension(n) => (1, n),
            Origin::Mcp(n) => (2, n),
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Core => f.write_str("the core prelude"),
            Origin::Extension(n) => write!(f, "extension `{n}`"),
            Origin::Mcp(n) => write!(f, "MCP server `{n}`"),
        }
    }
}

/// One public symbol. This is the JSON shape the Python worker sends; `signature`, `summary`,
/// `doc`, `namespace`, `pinned` and `origin` may be omitted (empty / false / core).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestEntry {
    /// Dotted name (`git.diff`).
    pub name: String,
    pub kind: EntryKind,
    /// Python signature including parentheses, e.g. `(path=None, staged=False) -> str`.
    #[serde(default)]
    pub signature: String,
    /// First doc line; derived from `doc` when empty.
    #[serde(default)]
    pub summary: String,
    /// Full documentation (docstring, or the Markdown text of a page or skill).
    #[serde(default)]
    pub doc: String,
    /// The namespace (`parent(name)`); derived when empty, must agree when given.
    #[serde(default)]
    pub namespace: String,
    /// Shown in the catalog even in summary mode. On a namespace: all its functions are.
    #[serde(default)]
    pub pinned: bool,
    #[serde(default)]
    pub origin: Origin,
}

impl ManifestEntry {
    /// A bare entry; the namespace is derived from the name.
    pub fn new(kind: EntryKind, name: impl Into<String>, origin: Origin) -> Self {
        let name = name.into();
        ManifestEntry {
            namespace: names::parent(&name).to_string(),
            name,
            kind,
            signature: String::new(),
            summary: String::new(),
            doc: String::new(),
            pinned: false,
            origin,
        }
    }

    /// A function with its signature (`"(path=None)"`) and docstring.
    pub fn function(
        name: impl Into<String>,
        signature: impl Into<String>,
        doc: impl Into<String>,
        origin: Origin,
    ) -> Self {
        let mut e = Self::new(EntryKind::Function, name, origin);
        e.signature = signature.into();
        e.doc = doc.into();
        e
    }

    /// Namespace metadata (summary and optional longer doc).
    pub fn namespace(name: impl Into<String>, summary: impl Into<String>, origin: Origin) -> Self {
        let mut e = Self::new(EntryKind::Namespace, name, origin);
        e.summary = summary.into();
        e
    }

    /// A documentation page (Markdown).
    pub fn page(name: impl Into<String>, markdown: impl Into<String>, origin: Origin) -> Self {
        let mut e = Self::new(EntryKind::Page, name, origin);
        e.doc = markdown.into();
        e
    }

    /// A skill: `description` from its front matter, `markdown` the whole `SKILL.md`.
    pub fn skill(
        name: impl Into<String>,
        description: impl Into<String>,
        markdown: impl Into<String>,
        origin: Origin,
    ) -> Self {
        let mut e = Self::new(EntryKind::Skill, name, origin);
        e.summary = description.into();
        e.doc = markdown.into();
        e
    }

    /// Sets `pinned`.
    pub fn with_pinned(mut self, pinned: bool) -> Self {
        self.pinned = pinned;
        self
    }

    /// Sets the full doc.
    pub fn with_doc(mut self, doc: impl Into<String>) -> Self {
        self.doc = doc.into();
        self
    }

    /// Sets the summary (first doc line).
    pub fn with_summary(mut self, summary: impl Into<String>) -> Self {
        self.summary = summary.into();
        self
    }

    /// `name(signature)`, the way the model calls it (`(...)` when the signature is unknown).
    pub fn call_form(&self) -> String {
        if self.signature.is_empty() {
            format!("{}(...)", self.name)
        } else {
            format!("{}{}", self.name, self.signature)
        }
    }

    /// The one-line rendering used by `apropos`, `doc` member lists and the catalog:
    /// `git.diff(path=None)  — Show the diff`, `vis.addresses  [page] — How addresses work`.
    /// Namespaces are rendered by the manifest (they need member counts).
    pub fn line(&self) -> String {
        let head = match self.kind {
            EntryKind::Function => self.call_form(),
            kind => format!("{}  [{}]", self.name, kind.as_str()),
        };
        with_summary(head, &self.summary)
    }

    /// Validates the name and fills derived fields (namespace, summary) in place.
    fn normalize(&mut self) -> Result<()> {
        names::validate_name(&self.name, self.kind.rule())?;
        let expected = names::parent(&self.name);
        if !self.namespace.is_empty() && self.namespace != expected {
            return Err(CatalogError::InconsistentNamespace {
                name: self.name.clone(),
                given: self.namespace.clone(),
                expected: expected.to_string(),
            });
        }
        // The namespace part is always identifier-only, even for pages and skills.
        if !expected.is_empty() {
            names::validate_namespace(expected)?;
        }
        self.namespace = expected.to_string();
        self.signature = one_line(&self.signature);
        let source = if self.summary.trim().is_empty() {
            first_line(&self.doc)
        } else {
            first_line(&self.summary)
        };
        self.summary = truncate_chars(&one_line(source), SUMMARY_MAX_CHARS);
        Ok(())
    }
}

/// `head  — summary`, or `head` alone when the summary is empty.
pub(crate) fn with_summary(head: String, summary: &str) -> String {
    if summary.is_empty() {
        head
    } else {
        format!("{head}  — {summary}")
    }
}

/// First non-empty line, skipping a leading `---` front-matter block and Markdown heading marks.
fn first_line(text: &str) -> &str {
    let mut lines = text.lines().map(str::trim).peekable();
    while lines.peek().is_some_and(|l| l.is_empty()) {
        lines.next();
    }
    if lines.peek() == Some(&"---") {
        lines.next();
        for l in lines.by_ref() {
            if l == "---" {
                break;
            }
        }
    }
    lines
        .map(|l| l.trim_start_matches('#').trim())
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

/// Collapses whitespace runs (including newlines and tabs) to single spaces and trims.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((i, _)) => format!("{}…", text[..i].trim_end()),
    }
}

/// Denied names and namespace paths (from the config). A path denies itself and everything
/// below it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenyList {
    paths: Vec<String>,
}

impl DenyList {
    /// Validates every path (segments may contain `-` so skills can be denied) and sorts them.
    pub fn new<I, S>(paths: I) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut out: Vec<String> = Vec::new();
        for p in paths {
            let p: String = p.into();
            names::validate_name(&p, NameRule::Slug)?;
            out.push(p);
        }
        out.sort();
        out.dedup();
        Ok(DenyList { paths: out })
    }

    /// True when `name` is denied (it, or a namespace containing it, is listed).
    pub fn denies(&self, name: &str) -> bool {
        // A denying path is a prefix of `name`: check each candidate prefix by binary search.
        let hit = |p: &str| self.paths.binary_search_by(|x| x.as_str().cmp(p)).is_ok();
        hit(name) || names::ancestors(name).any(hit)
    }

    /// The denied paths, sorted.
    pub fn paths(&self) -> &[String] {
        &self.paths
    }

    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }
}

/// A namespace as the manifest sees it (explicit metadata merged with derived counts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceInfo {
    pub name: String,
    /// From an explicit namespace entry; empty otherwise.
    pub summary: String,
    pub doc: String,
    pub pinned: bool,
    /// Origin of the explicit namespace entry, if any.
    pub origin: Option<Origin>,
    /// Direct children (row indices, manifest order).
    pub children: Vec<usize>,
    /// Functions directly in this namespace.
    pub function_count: usize,
    /// Functions, pages and skills at any depth below.
    pub leaf_count: usize,
}

/// What a row points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowTarget {
    /// Index into [`Manifest::entries`].
    Entry(usize),
    /// Index into [`Manifest::namespaces`].
    Namespace(usize),
}

/// One row in manifest order: a function, page, skill or namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub name: String,
    pub kind: EntryKind,
    pub target: RowTarget,
}

/// The visible symbols of a session, in manifest order, with lookup indexes precomputed.
#[derive(Debug, Clone, Default)]
pub struct Manifest {
    entries: Vec<ManifestEntry>,
    rows: Vec<Row>,
    namespaces: Vec<NamespaceInfo>,
    ns_index: HashMap<String, usize>,
    leaf_index: HashMap<String, usize>,
    canonical: Vec<usize>,
}

impl Manifest {
    /// Builds a manifest with no deny list.
    pub fn new(entries: Vec<ManifestEntry>) -> Result<Self> {
        Self::build(entries, &DenyList::default())
    }

    /// Validates, orders and indexes `entries`, omitting everything `deny` denies.
    pub fn build(entries: Vec<ManifestEntry>, deny: &DenyList) -> Result<Self> {
        let mut entries = entries;
        for e in entries.iter_mut() {
            e.normalize()?;
        }
        // Manifest order: origin groups, registration order inside each (stable sort).
        entries.sort_by(|a, b| a.origin.group_key().cmp(&b.origin.group_key()));

        // Duplicates are errors even when one of them is denied: they are registration bugs.
        let mut seen: HashMap<(&str, bool), usize> = HashMap::new();
        for (i, e) in entries.iter().enumerate() {
            let key = (e.name.as_str(), e.kind == EntryKind::Namespace);
            if let Some(&first) = seen.get(&key) {
                let f = &entries[first];
                return Err(CatalogError::DuplicateName {
                    name: e.name.clone(),
                    first: format!("a {} by {}", f.kind.as_str(), f.origin),
                    second: format!("a {} by {}", e.kind.as_str(), e.origin),
                });
            }
            seen.insert(key, i);
        }
        drop(seen);

        entries.retain(|e| !deny.denies(&e.name));

        // Namespaces that have at least one visible function/page/skill below them.
        let live: HashSet<String> = entries
            .iter()
            .filter(|e| e.kind != EntryKind::Namespace)
            .flat_map(|e| names::ancestors(&e.name).map(str::to_string))
            .collect();
        entries.retain(|e| e.kind != EntryKind::Namespace || live.contains(&e.name));

        let mut m = Manifest {
            entries,
            ..Default::default()
        };
        for i in 0..m.entries.len() {
            let name = m.entries[i].name.clone();
            for anc in names::ancestors(&name) {
                m.ensure_namespace(anc);
            }
            match m.entries[i].kind {
                EntryKind::Namespace => {
                    let ns = m.ensure_namespace(&name);
                    let e = &m.entries[i];
                    let info = &mut m.namespaces[ns];
                    info.summary = e.summary.clone();
                    info.doc = e.doc.clone();
                    info.pinned = e.pinned;
                    info.origin = Some(e.origin.clone());
                }
                kind => {
                    m.leaf_index.insert(name.clone(), i);
                    m.rows.push(Row {
                        name,
                        kind,
                        target: RowTarget::Entry(i),
                    });
                }
            }
        }
        for (r, row) in m.rows.iter().enumerate() {
            let parent = names::parent(&row.name);
            if let Some(&ns) = m.ns_index.get(parent) {
                m.namespaces[ns].children.push(r);
                if row.kind == EntryKind::Function {
                    m.namespaces[ns].function_count += 1;
                }
            }
            if row.kind != EntryKind::Namespace {
                for anc in names::ancestors(&row.name) {
                    if let Some(&ns) = m.ns_index.get(anc) {
                        m.namespaces[ns].leaf_count += 1;
                    }
                }
            }
        }
        let mut canonical: Vec<usize> = m.leaf_index.values().copied().collect();
        canonical.sort_by(|&a, &b| m.entries[a].name.cmp(&m.entries[b].name));
        m.canonical = canonical;
        Ok(m)
    }

    fn ensure_namespace(&mut self, path: &str) -> usize {
        if let Some(&ns) = self.ns_index.get(path) {
            return ns;
        }
        let ns = self.namespaces.len();
        self.namespaces.push(NamespaceInfo {
            name: path.to_string(),
            summary: String::new(),
            doc: String::new(),
            pinned: false,
            origin: None,
            children: Vec::new(),
            function_count: 0,
            leaf_count: 0,
        });
        self.ns_index.insert(path.to_string(), ns);
        self.rows.push(Row {
            name: path.to_string(),
            kind: EntryKind::Namespace,
            target: RowTarget::Namespace(ns),
        });
        ns
    }

    /// Visible entries (functions, pages, skills, and explicit namespace metadata), in
    /// manifest order of registration.
    pub fn entries(&self) -> &[ManifestEntry] {
        &self.entries
    }

    /// All rows in manifest order.
    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// All visible namespaces, in order of first appearance.
    pub fn namespaces(&self) -> &[NamespaceInfo] {
        &self.namespaces
    }

    /// The function, page or skill called `name`.
    pub fn entry(&self, name: &str) -> Option<&ManifestEntry> {
        self.leaf_index.get(name).map(|&i| &self.entries[i])
    }

    /// The namespace called `name`.
    pub fn namespace(&self, name: &str) -> Option<&NamespaceInfo> {
        self.ns_index.get(name).map(|&i| &self.namespaces[i])
    }

    /// True when `name` is a visible function, page, skill or namespace. A denied or unknown
    /// name is not visible; callers refuse to call it as if it did not exist.
    pub fn is_visible(&self, name: &str) -> bool {
        self.leaf_index.contains_key(name) || self.ns_index.contains_key(name)
    }

    /// True when `name` is a visible function (what a caller checks before calling).
    pub fn is_callable(&self, name: &str) -> bool {
        self.entry(name)
            .is_some_and(|e| e.kind == EntryKind::Function)
    }

    /// Functions, pages and skills in canonical order (sorted by name, byte order): the order
    /// of the rendered catalog, independent of load order.
    pub fn canonical(&self) -> impl Iterator<Item = &ManifestEntry> + '_ {
        self.canonical.iter().map(move |&i| &self.entries[i])
    }

    /// Number of visible functions.
    pub fn function_count(&self) -> usize {
        self.leaf_index
            .values()
            .filter(|&&i| self.entries[i].kind == EntryKind::Function)
            .count()
    }

    /// Number of rows (functions, pages, skills and namespaces).
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The one-line rendering of row `r` (see [`ManifestEntry::line`]); namespaces render as
    /// `slack.admin  [namespace, 12 members] — summary`.
    pub fn row_line(&self, row: &Row) -> String {
        match row.target {
            RowTarget::Entry(i) => self.entries[i].line(),
            RowTarget::Namespace(ns) => {
                let info = &self.namespaces[ns];
                let n = info.children.len();
                let head = format!(
                    "{}  [namespace, {n} member{}]",
                    info.name,
                    if n == 1 { "" } else { "s" }
                );
                with_summary(head, &info.summary)
            }
        }
    }

    /// Names of every row (for suggestions), manifest order, deduplicated.
    pub(crate) fn all_names(&self) -> impl Iterator<Item = &str> + '_ {
        let mut last: Option<&str> = None;
        self.rows.iter().filter_map(move |r| {
            let n = r.name.as_str();
            if last == Some(n) {
                None
            } else {
                last = Some(n);
                Some(n)
            }
        })
    }
}
