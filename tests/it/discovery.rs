//! `apropos`/`doc` through the real worker: manifest order, pagination, regex and name errors,
//! leaf/branch namespaces, pages and skills, and the manifest the host receives.

use std::path::Path;

use crate::support::{run, TestEnv};
use crate::vistest;
use vis::protocol::Status;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Runs `code` in a fresh runtime for `env` and returns the output (asserting it ran ok).
fn ok(env: &TestEnv, code: &str) -> String {
    let mut rt = env.runtime();
    let out = run(env, &mut rt, code);
    assert_eq!(out.status, Status::Ok, "{}", out.output);
    out.output
}

vistest!(
    manifest_order_follows_the_prelude_then_extensions_by_name,
    |env| {
        let mut rt = env.runtime();
        let out = run(&env, &mut rt, "import vis\nprint([n for n in vis.__all__ if callable(getattr(vis, n)) and not isinstance(getattr(vis, n), type)])");
        let core: Vec<String> = out
            .output
            .trim()
            .trim_matches(|c| c == '[' || c == ']')
            .split(", ")
            .map(|s| s.trim_matches('\'').to_string())
            .collect();
        let names: Vec<&str> = rt
            .manifest_entries()
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        // Core functions first, in `vis.__all__` order; then pages; then extensions (git < tests).
        assert_eq!(
            &names[..core.len()],
            core.iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .as_slice()
        );
        let git = names.iter().position(|n| n.starts_with("git.")).unwrap();
        let tests = names.iter().position(|n| n.starts_with("tests.")).unwrap();
        let page = names.iter().position(|n| *n == "vis.addresses").unwrap();
        assert!(core.len() <= page && page < git && git < tests, "{names:?}");
        // The rows apropos shows follow the same order, namespaces right before their members.
        let out = ok(&env, "r = apropos('.', limit=500)\nprint(r.names)");
        let git_ns = out.find("'git'").unwrap();
        let git_status = out.find("'git.status'").unwrap();
        let tests_ns = out.find("'tests'").unwrap();
        assert!(git_ns < git_status && git_status < tests_ns, "{out}");
    }
);

vistest!(apropos_paginates_with_the_exact_next_call, |env| {
    let out = ok(
        &env,
        "a = apropos('.', limit=3)\nprint(a)\nb = apropos('.', limit=3, offset=a.next_offset)\nprint(b.names)\nall_ = apropos('.', limit=1000)\nprint(all_.total, len(all_), a.total == all_.total, a.remaining == all_.total - 3)\nprint(all_.names[3:6] == b.names)",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 7, "{out}");
    assert!(
        lines[3].starts_with("[1–3 of ") && lines[3].ends_with("apropos('.', limit=3, offset=3)]"),
        "{out}"
    );
    assert!(lines[5].ends_with("True True"), "{out}");
    assert_eq!(lines[6], "True", "{out}");
    // The last expression's repr is the plain text.
    let out = ok(&env, "apropos('^git\\\\.st')");
    assert!(
        out.starts_with("git.status() -> GitText  — Show the branch"),
        "{out}"
    );
    assert!(out.trim_end().ends_with("[1 match]"), "{out}");
    // No match says so and suggests a wider pattern.
    let out = ok(&env, "apropos('git.stauts')");
    assert!(
        out.contains("No names match 'git.stauts'")
            && out.contains("git.status")
            && out.contains("wider pattern"),
        "{out}"
    );
});

vistest!(apropos_reports_regex_and_argument_errors, |env| {
    let mut rt = env.runtime();
    let out = run(&env, &mut rt, "apropos('git(')");
    assert_eq!(out.status, Status::Error);
    assert!(
        out.output
            .contains("ValueError: invalid regular expression at position 3"),
        "{}",
        out.output
    );
    assert!(out.output.contains("    git(\n       ^"), "{}", out.output);
    for (code, needle) in [
        ("apropos('.', limit=0)", "limit must be at least 1"),
        ("apropos('.', offset=-1)", "offset must be 0 or more"),
        ("apropos(3)", "TypeError: apropos() pattern must be a string"),
        ("apropos('.', namespace='gti')", "LookupError: unknown namespace `gti`; did you mean `git`?"),
        ("apropos('.', namespace='git.2fa')", "segment `2fa` starts with a digit"),
        ("doc('git.dif')", "LookupError: no function, namespace, page or skill named `git.dif`; did you mean `git.diff`,"),
    ] {
        let out = run(&env, &mut rt, code);
        assert_eq!(out.status, Status::Error, "{code}: {}", out.output);
        assert!(out.output.contains(needle), "{code}: {}", out.output);
    }
    // The worker is fine afterwards.
    assert_eq!(run(&env, &mut rt, "print(1)").output, "1\n");
});

vistest!(doc_shows_functions_namespaces_objects_and_pages, |env| {
    let out = ok(&env, "print(doc('git.diff'))\nprint(doc(git.log) == doc('git.log'))\nprint(doc('git'))\ndoc('vis.addresses')");
    assert!(out.starts_with("git.diff(path: str | None = None, staged: bool = False, context: int = 3) -> GitText\n\nShow changes"), "{out}");
    assert!(out.contains("(from extension `git`)"), "{out}");
    assert!(out.contains("True\nnamespace git  — Git: status"), "{out}");
    assert!(
        out.contains("Members (4):\ngit.status() -> GitText"),
        "{out}"
    );
    assert!(
        out.contains("# Addresses: how cat, grep and patch name lines"),
        "{out}"
    );
    let out = ok(&env, "print(apropos('^vis\\\\.'))");
    for page in [
        "vis.addresses  [page]",
        "vis.editing  [page]",
        "vis.folding  [page]",
        "vis.extensions  [page]",
    ] {
        assert!(out.contains(page), "{out}");
    }
});

vistest!(namespaces_can_be_both_callable_and_branches, |env| {
    write(
        &env.workspace().join(".vis/extensions/slack.py"),
        r#"from vis.extension import register, namespace

namespace("slack.admin", "Workspace administration")

@register("slack.admin")
def admin(action: str = "list") -> str:
    """Run an admin action."""
    return "admin:" + action

@register("slack.admin.invite")
def invite(email: str) -> str:
    """Invite someone."""
    return "invited " + email

@register
def post(channel: str, text: str) -> str:
    """Post a message."""
    return "%s <- %s" % (channel, text)
"#,
    );
    let mut rt = env.runtime();
    let out = run(
        &env,
        &mut rt,
        "print(slack.admin('x'), slack.admin.invite('a@b'), slack.post('#c', 'hi'))\nprint(apropos('admin'))\nprint(doc('slack.admin'))\nslack.admin.nope",
    )
    .output;
    assert!(out.starts_with("admin:x invited a@b #c <- hi\n"), "{out}");
    assert!(out.contains("slack.admin  [namespace, 1 member]  — Workspace administration\nslack.admin(action: str = 'list') -> str  — Run an admin action.\nslack.admin.invite(email: str) -> str"), "{out}");
    assert!(out.contains("slack.admin(action: str = 'list') -> str\n\nRun an admin action.\n\n(from extension `slack`)\n\nnamespace slack.admin  — Workspace administration"), "{out}");
    assert!(
        out.contains("AttributeError: namespace 'slack.admin' has no attribute 'nope'"),
        "{out}"
    );
});

vistest!(bad_names_are_rejected_with_the_segment_named, |env| {
    write(
        &env.workspace().join(".vis/extensions/badname.py"),
        "from vis.extension import register\n\n@register('badname.2fa.reset')\ndef reset():\n    pass\n",
    );
    write(
        &env.workspace().join(".vis/extensions/my-ext.py"),
        "x = 1\n",
    );
    let mut rt = env.runtime();
    let out = run(&env, &mut rt, "print(session['extensions']['badname']['error'])\nprint(session['extensions']['my-ext']['error'])\nprint('badname' in globals())");
    assert!(
        out.output.contains("segment `2fa` starts with a digit"),
        "{}",
        out.output
    );
    assert!(
        out.output.contains("rename it (e.g. `badname._2fa.reset`)"),
        "{}",
        out.output
    );
    assert!(
        out.output.contains(
            "invalid extension name: invalid name `my-ext`: segment `my-ext` contains `-`"
        ),
        "{}",
        out.output
    );
    assert!(out.output.trim_end().ends_with("False"), "{}", out.output);
});

vistest!(skills_are_found_and_documented, |env| {
    write(
        &env.workspace().join(".vis/skills/release/SKILL.md"),
        "---\nname: release-checklist\ndescription: How to cut a release\n---\n\n1. Bump the version.\n",
    );
    write(
        &env.config_dir().join("skills/style/SKILL.md"),
        "---\nname: code-style\ndescription: \"House style\"\n---\nUse four spaces.\n",
    );
    // A folded block (`>`) is YAML's: its lines joined into one text, not the `>` itself.
    write(
        &env.workspace().join(".vis/skills/folded/SKILL.md"),
        "---\nname: folded-skill\ndescription: >\n  Reviews a change\n  before it is merged.\nallowed-tools: [Read]\n---\nRead the diff.\n",
    );
    write(
        &env.workspace().join(".vis/skills/broken/SKILL.md"),
        "no front matter\n",
    );
    let mut rt = env.runtime_with(|o| o.config_dir = Some(env.config_dir()), vec![]);
    let out = run(
        &env,
        &mut rt,
        "print(apropos('release|style|folded'))\nprint(doc('release-checklist'))",
    );
    assert!(
        out.output
            .contains("release-checklist  [skill]  — How to cut a release"),
        "{}",
        out.output
    );
    assert!(
        out.output.contains("code-style  [skill]  — House style"),
        "{}",
        out.output
    );
    assert!(
        out.output
            .contains("folded-skill  [skill]  — Reviews a change before it is merged."),
        "{}",
        out.output
    );
    assert!(
        out.output.contains("1. Bump the version."),
        "{}",
        out.output
    );
    assert!(
        out.output.contains("[vis] skill ")
            && out
                .output
                .contains("broken/SKILL.md is skipped: invalid SKILL.md front matter: the first line must be `---`"),
        "{}",
        out.output
    );
    // Reported once.
    let again = run(&env, &mut rt, "print(1)");
    assert_eq!(again.output, "1\n");
});

vistest!(the_host_gets_the_visible_manifest, |env| {
    let mut rt = env.runtime();
    rt.start().unwrap();
    let m = rt.manifest().unwrap();
    for name in [
        "apropos",
        "doc",
        "promote",
        "git.status",
        "git.blame",
        "tests.run",
        "vis.addresses",
    ] {
        assert!(m.is_visible(name), "{name}");
    }
    let text = m.doc("git").unwrap();
    assert!(text.contains("Members (4):"), "{text}");
    assert!(m.entry("git.status").unwrap().signature == "() -> GitText");
});
