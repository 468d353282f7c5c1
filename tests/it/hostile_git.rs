//! A cloned repository whose git configuration tries to run a program through the bundled
//! `git` extension: fsmonitor, hooks, textconv, external diff, filters, pagers and editors,
//! system config, includes, signature checks and the fetches of a partial clone. Each test
//! plants one attack, runs the `git.*` calls that git would run it for, and checks that the
//! program never ran and the call still answered — in an untrusted and in a trusted workspace.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{run, TestEnv};
use vis::protocol::Status;

/// What every planted program does: note that it ran, then behave like a harmless filter.
const EVIL_SCRIPT: &str = "#!/bin/sh\necho \"$(basename \"$0\") $*\" >> LOG\nif [ $# -eq 0 ]; then exec cat; fi\nif [ -f \"$1\" ]; then exec cat \"$1\"; fi\nexit 1\n";

fn sh(dir: &Path, cmd: &str) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{cmd}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A repository with one commit (`f.txt`: alpha, beta), the attacker's `evil.sh` beside it and
/// the log it writes when it runs (`pwned.log`, ignored like the script so status stays clean).
struct Hostile {
    env: TestEnv,
    trusted: bool,
}

impl Hostile {
    fn new(trusted: bool) -> Hostile {
        let env = if trusted {
            TestEnv::new()
        } else {
            TestEnv::untrusted()
        };
        let ws = env.workspace();
        sh(&ws, "git init -q -b main . && git config user.email t@example.com && git config user.name Tester && printf 'alpha\\nbeta\\n' > f.txt && git add f.txt && git commit -qm 'first commit'");
        let log = format!("'{}'", ws.join("pwned.log").display());
        std::fs::write(ws.join("evil.sh"), EVIL_SCRIPT.replace("LOG", &log)).unwrap();
        sh(&ws, "chmod +x evil.sh && printf 'evil.sh\\npwned.log\\nhooks/\\nevil.inc\\nsystem.conf\\n' >> .git/info/exclude");
        Hostile { env, trusted }
    }

    fn ws(&self) -> PathBuf {
        self.env.workspace()
    }

    fn evil(&self) -> String {
        self.ws().join("evil.sh").to_string_lossy().into_owned()
    }

    fn git(&self, cmd: &str) {
        sh(&self.ws(), cmd);
    }

    /// `f.txt`'s stat data no longer matches the index (same size and content), so `status`
    /// and `diff` read it again: through the filters, and writing the index when they may.
    fn touch(&self) {
        self.git("touch -m -d '2001-02-03 04:05:06' f.txt");
    }

    /// Runs `code` in a worker for this workspace; the block must succeed.
    fn exec(&self, code: &str) -> String {
        let mut rt = self.env.runtime_with(|o| o.trusted = self.trusted, vec![]);
        let out = run(&self.env, &mut rt, code);
        assert_eq!(
            out.status,
            Status::Ok,
            "trusted={}: {}",
            self.trusted,
            out.output
        );
        out.output
    }

    fn assert_nothing_ran(&self) {
        let log = self.ws().join("pwned.log");
        assert!(
            !log.exists(),
            "trusted={}: the repository ran {:?}",
            self.trusted,
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
}

#[test]
fn git_status_runs_no_fsmonitor() {
    for trusted in [false, true] {
        let repo = Hostile::new(trusted);
        repo.git(&format!("git config core.fsmonitor {}", repo.evil()));
        repo.git("echo gamma >> f.txt");
        let out = repo.exec("print(git.status())");
        assert!(out.contains(" M f.txt\n"), "{out}");
        repo.assert_nothing_ran();
    }
}

#[test]
fn git_status_runs_no_hook_from_core_hooks_path() {
    for trusted in [false, true] {
        let repo = Hostile::new(trusted);
        let hooks = repo.ws().join("hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        for hook in ["post-index-change", "pre-commit", "post-checkout"] {
            std::fs::copy(repo.ws().join("evil.sh"), hooks.join(hook)).unwrap();
        }
        // Hooks in .git/hooks too: git's default place when core.hooksPath is unset.
        repo.git("cp hooks/post-index-change .git/hooks/post-index-change");
        repo.git("git config core.hooksPath hooks");
        repo.touch();
        let out = repo.exec("print(git.status())");
        assert!(out.contains("branch main: clean\n"), "{out}");
        repo.assert_nothing_ran();
    }
}

#[test]
fn git_diff_log_and_blame_run_no_textconv_driver() {
    for trusted in [false, true] {
        let repo = Hostile::new(trusted);
        repo.git(
            "echo 'f.txt diff=evil' > .gitattributes && echo '* diff=evil' > .git/info/attributes",
        );
        repo.git(&format!(
            "git config diff.evil.textconv {0} && git config diff.evil.command {0} && git config diff.evil.cachetextconv false",
            repo.evil()
        ));
        repo.git("echo gamma >> f.txt");
        let out =
            repo.exec("print(git.diff())\nprint(git.blame('f.txt'))\nprint(git.log(path='f.txt'))");
        assert!(out.contains("=== f.txt\n"), "{out}");
        assert!(out.contains("|gamma\n"), "{out}");
        assert!(out.contains("Tester  first commit"), "{out}");
        repo.assert_nothing_ran();
    }
}

#[test]
fn git_diff_runs_no_external_diff() {
    for trusted in [false, true] {
        let repo = Hostile::new(trusted);
        repo.git(&format!("git config diff.external {}", repo.evil()));
        repo.git("echo gamma >> f.txt && git add f.txt && echo delta >> f.txt");
        // The worker's environment cannot name one either.
        let out = repo.exec(&format!(
            "import os\nos.environ['GIT_EXTERNAL_DIFF'] = {:?}\nprint(git.diff())\nprint(git.diff(staged=True))",
            repo.evil()
        ));
        assert!(
            out.contains("|delta\n") && out.contains("|gamma\n"),
            "{out}"
        );
        repo.assert_nothing_ran();
    }
}

#[test]
fn git_runs_no_filter_driver_named_by_gitattributes() {
    for trusted in [false, true] {
        let repo = Hostile::new(trusted);
        repo.git("printf 'one\\n' > g.txt && git add g.txt && git commit -qm second");
        repo.git("printf 'f.txt filter=cleaner\\ng.txt filter=proc\\n' > .gitattributes && echo '* filter=cleaner' > .git/info/attributes");
        repo.git(&format!(
            "git config filter.cleaner.clean {0} && git config filter.cleaner.smudge {0} && git config filter.cleaner.required true && git config filter.proc.process {0} && git config filter.proc.required true",
            repo.evil()
        ));
        repo.touch();
        repo.git("touch -m -d '2001-02-03 04:05:06' g.txt");
        let out = repo.exec("print(git.status())\nprint(git.diff())\nprint(git.blame('g.txt'))");
        assert!(out.contains("?? .gitattributes\n"), "{out}");
        assert!(out.contains("no unstaged changes"), "{out}");
        repo.assert_nothing_ran();
    }
}

#[test]
fn git_uses_no_pager_or_editor_of_the_repository() {
    for trusted in [false, true] {
        let repo = Hostile::new(trusted);
        repo.git(&format!(
            "git config core.pager {0} && git config pager.status {0} && git config pager.log {0} && git config core.editor {0} && git config sequence.editor {0}",
            repo.evil()
        ));
        // No `git.*` call has a terminal, so ask git which programs it would start: the runner
        // every call goes through answers for all of them.
        let out = repo.exec(
            "from vis import _safegit\nfor var in ('GIT_PAGER', 'GIT_EDITOR', 'GIT_SEQUENCE_EDITOR'):\n    print(var, _safegit.run(['var', var]).decode().strip())\nprint(git.log())",
        );
        assert!(out.contains("GIT_PAGER cat\n"), "{out}");
        assert!(out.contains("GIT_EDITOR :\n"), "{out}");
        assert!(out.contains("GIT_SEQUENCE_EDITOR :\n"), "{out}");
        repo.assert_nothing_ran();
    }
}

#[test]
fn git_reads_no_system_config() {
    for trusted in [false, true] {
        let repo = Hostile::new(trusted);
        std::fs::write(
            repo.ws().join("system.conf"),
            format!(
                "[status]\n\tshowUntrackedFiles = no\n[filter \"sys\"]\n\tclean = {0}\n\trequired = true\n[core]\n\tfsmonitor = {0}\n",
                repo.evil()
            ),
        )
        .unwrap();
        repo.git("echo '* filter=sys' > .git/info/attributes && echo new > untracked.txt");
        repo.touch();
        // The worker's environment points git at it, as an inherited variable would.
        let out = repo.exec(&format!(
            "import os\nos.environ['GIT_CONFIG_SYSTEM'] = {:?}\nos.environ['GIT_CONFIG_NOSYSTEM'] = '0'\nprint(git.status())",
            repo.ws().join("system.conf").to_string_lossy()
        ));
        // A system file that were read would hide the untracked file.
        assert!(out.contains("?? untracked.txt\n"), "{out}");
        repo.assert_nothing_ran();
    }
}

#[test]
fn git_includes_bring_in_nothing_that_runs() {
    for trusted in [false, true] {
        let repo = Hostile::new(trusted);
        std::fs::write(
            repo.ws().join("evil.inc"),
            format!(
                "[filter \"inc\"]\n\tclean = {0}\n\tprocess = {0}\n[diff \"inc\"]\n\ttextconv = {0}\n[core]\n\tfsmonitor = {0}\n\thooksPath = hooks\n",
                repo.evil()
            ),
        )
        .unwrap();
        // Relative to .git/config: the file in the work tree.
        repo.git("git config include.path ../evil.inc && git config 'includeIf.gitdir:/.path' ../evil.inc");
        repo.git("echo '* filter=inc diff=inc' > .gitattributes");
        repo.touch();
        let out = repo.exec("print(git.status())\nprint(git.diff())\nprint(git.blame('f.txt'))");
        assert!(out.contains("?? .gitattributes\n"), "{out}");
        repo.assert_nothing_ran();
    }
}

#[test]
fn git_log_checks_no_signature_with_the_repositorys_gpg_program() {
    for trusted in [false, true] {
        let repo = Hostile::new(trusted);
        // A commit carrying a (fake) signature, so showing signatures would call gpg.program.
        repo.git("printf 'tree %s\\nparent %s\\nauthor Tester <t@example.com> 1700000000 +0000\\ncommitter Tester <t@example.com> 1700000000 +0000\\ngpgsig -----BEGIN PGP SIGNATURE-----\\n \\n iQEzBAABCAAdFiEE\\n -----END PGP SIGNATURE-----\\n\\nsigned commit\\n' $(git rev-parse 'HEAD^{tree}') $(git rev-parse HEAD) > .git/signed && git update-ref refs/heads/main $(git hash-object -t commit -w .git/signed)");
        repo.git(&format!(
            "git config log.showSignature true && git config gpg.program {0} && git config gpg.ssh.program {0} && git config gpg.x509.program {0}",
            repo.evil()
        ));
        let out = repo.exec("print(git.log())");
        assert!(out.contains("Tester  signed commit\n"), "{out}");
        repo.assert_nothing_ran();
    }
}

#[test]
fn git_fetches_nothing_for_a_partial_clone() {
    for trusted in [false, true] {
        let repo = Hostile::new(trusted);
        // A partial clone whose blob of f.txt is missing: reading it would fetch it from the
        // promisor remotes, over ssh (core.sshCommand) or the ext:: transport (a command).
        repo.git("blob=$(git rev-parse HEAD:f.txt) && rm -f .git/objects/$(echo $blob | cut -c1-2)/$(echo $blob | cut -c3-)");
        repo.git(&format!(
            "git config core.repositoryformatversion 1 && git config extensions.partialClone origin && git config remote.origin.url ssh://example.invalid/repo && git config remote.origin.promisor true && git config core.sshCommand {0} && git config remote.ext.url 'ext::{0} %S' && git config remote.ext.promisor true && git config protocol.ext.allow always && git config protocol.allow always && git config credential.helper '!{0}' && git config core.askPass {0}",
            repo.evil()
        ));
        repo.git("echo gamma >> f.txt");
        let out = repo.exec(
            "for call in (lambda: git.diff(), lambda: git.blame('f.txt'), lambda: git.status()):\n    try:\n        print(call())\n    except RuntimeError as e:\n        print('error:', e)",
        );
        assert!(out.contains(" M f.txt\n"), "{out}");
        repo.assert_nothing_ran();
    }
}

#[test]
fn an_untrusted_repository_config_reaches_git_only_in_what_reading_needs() {
    for trusted in [false, true] {
        let repo = Hostile::new(trusted);
        // Branch tracking is read in both; a repository's own ignore file only when trusted.
        repo.git("git update-ref refs/remotes/origin/main HEAD && git config branch.main.remote origin && git config branch.main.merge refs/heads/main && git config remote.origin.fetch '+refs/heads/*:refs/remotes/origin/*'");
        repo.git("echo gamma >> f.txt && git commit -qam second && echo new > untracked.txt && echo untracked.txt > .git/own-ignore && git config core.excludesFile $(pwd)/.git/own-ignore");
        let out = repo.exec("print(git.status())");
        assert!(
            out.starts_with("branch main...origin/main [ahead 1]"),
            "{out}"
        );
        assert_eq!(out.contains("?? untracked.txt"), !trusted, "{out}");
        repo.assert_nothing_ran();
    }
}

#[test]
fn git_reads_linked_worktrees_and_sha256_repositories_in_both_modes() {
    for trusted in [false, true] {
        // The workspace is a linked work tree of a repository beside it: its `.git` is a file
        // and the common directory is the main repository's.
        let repo = Hostile::new(trusted);
        // Beside the workspace's own files (the host's /tmp around it is not in the worker's
        // view).
        let main = repo.ws().join("main");
        std::fs::create_dir_all(&main).unwrap();
        sh(&main, "git init -q -b trunk . && git config user.email m@example.com && git config user.name Main && echo one > m.txt && git add m.txt && git commit -qm 'main commit'");
        let linked = repo.ws().join("linked");
        sh(
            &main,
            &format!("git worktree add -q -b side {}", linked.display()),
        );
        sh(&linked, "echo two >> m.txt");
        let out = repo.exec(&format!(
            "from vis import _safegit\nprint(_safegit.run(['status', '--porcelain=v1', '--branch'], cwd={0:?}).decode())\nprint(_safegit.run(['log', '--format=%s'], cwd={0:?}).decode())",
            linked.to_string_lossy()
        ));
        assert!(out.starts_with("## side\n M m.txt\n"), "{out}");
        assert!(out.contains("main commit\n"), "{out}");

        // A sha256 repository needs extensions.objectFormat, which an untrusted copy keeps.
        let sha = repo.ws().join("sha");
        std::fs::create_dir_all(&sha).unwrap();
        sh(&sha, "git init -q -b main --object-format=sha256 . && git config user.email s@example.com && git config user.name Sha && echo x > s.txt && git add s.txt && git commit -qm 'sha commit' && echo y >> s.txt");
        let out = repo.exec(&format!(
            "from vis import _safegit\nprint(_safegit.run(['diff', '--stat'], cwd={0:?}).decode())\nprint(_safegit.run(['rev-parse', 'HEAD'], cwd={0:?}).decode())",
            sha.to_string_lossy()
        ));
        assert!(out.contains("s.txt | 1 +"), "{out}");
        assert!(
            out.lines()
                .any(|l| l.len() == 64 && l.chars().all(|c| c.is_ascii_hexdigit())),
            "{out}"
        );
        repo.assert_nothing_ran();
    }
}

#[test]
fn a_broken_dot_git_is_a_clear_error_and_stays_as_it_was() {
    let env = TestEnv::untrusted();
    let ws = env.workspace();
    for (content, expected) in [
        (
            "garbage\n",
            "does not start with `gitdir:`; repair or remove it",
        ),
        (
            "gitdir: ../nowhere\n",
            "is not a usable git directory (no HEAD or objects); repair or remove it",
        ),
    ] {
        std::fs::write(ws.join(".git"), content).unwrap();
        let mut rt = env.runtime_with(|o| o.trusted = false, vec![]);
        let out = run(
            &env,
            &mut rt,
            "print(session['extensions']['git'])\ngit.status()",
        );
        assert_eq!(out.status, Status::Error, "{}", out.output);
        assert!(out.output.contains(expected), "{}", out.output);
        assert!(out.output.contains("RuntimeError"), "{}", out.output);
        assert_eq!(std::fs::read_to_string(ws.join(".git")).unwrap(), content);
    }
}

#[test]
fn a_repository_another_user_owns_is_refused_unless_the_user_allows_it() {
    for trusted in [false, true] {
        let env = if trusted {
            TestEnv::new()
        } else {
            TestEnv::untrusted()
        };
        // Another user's repository above the workspace (as `/home/.git` would be): the
        // workspace has none of its own, so git would find that one. Outside `/tmp`, which
        // is the worker's own (a `/tmp/.git` is out of its sight altogether).
        let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let above = outside.path().canonicalize().unwrap();
        let ws = above.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let log = ws.join("pwned.log");
        let evil = above.join("evil.sh");
        std::fs::write(
            &evil,
            EVIL_SCRIPT.replace("LOG", &format!("'{}'", log.display())),
        )
        .unwrap();
        sh(&above, &format!("chmod +x evil.sh && git init -q . && git config core.fsmonitor {0} && git config filter.x.clean {0} && echo '* filter=x' > .gitattributes && chown -R 4242:4242 .git .gitattributes .", evil.display()));
        if trusted {
            vis::trust::trust(&env.config_dir(), &ws).unwrap();
        }
        let mut rt = env.runtime_with(
            |o| {
                o.trusted = trusted;
                o.workspace = Some(ws.clone());
            },
            vec![],
        );
        let mut exec = |code: &str| {
            let mut block = env.block(code);
            block.workspace_roots = vec![ws.clone()];
            let out = rt.exec(block, &mut vis::runtime::NoHostCalls).unwrap();
            assert_eq!(out.status, Status::Ok, "trusted={trusted}: {}", out.output);
            out.output
        };
        let out = exec("try:\n    git.status()\nexcept RuntimeError as e:\n    print(e)");
        assert!(out.contains("detected dubious ownership"), "{out}");
        assert!(out.contains("safe.directory"), "{out}");
        // The user's own config allows it: then it is read, and still nothing runs.
        let home = ws.join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            home.join(".gitconfig"),
            format!("[safe]\n\tdirectory = {}\n", above.display()),
        )
        .unwrap();
        let out = exec(&format!(
            "import os\nos.environ['HOME'] = {:?}\nprint(git.status())",
            home.to_string_lossy()
        ));
        assert!(out.contains("?? "), "{out}");
        assert!(
            !log.exists(),
            "trusted={trusted}: {:?}",
            std::fs::read_to_string(&log)
        );
    }
}
