//! A running block's output as it arrives: in the TUI under the spinner (tmux), in `vis chat
//! -m`'s transcript line by line, over `vis serve`'s event stream and in the web view (headless
//! Chromium), and bounded when a block floods it. Each block waits for a file the test creates only after it saw the first line,
//! so "before the block ended" is a fact of the test, not a timing.

use std::io::{BufRead, Write};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use vis::protocol::Status;
use vis::providers::ProviderKind;
use vis::runtime::{LiveOutput, Supervisor, WorkerOptions, LIVE_CHUNK_BYTES, LIVE_INTERVAL};

use crate::serve::Client;
use crate::support::chat::{answer, calls, events};
use crate::support::fake_provider::FakeProvider;
use crate::support::serve::{ServerConfig, TestServer};
use crate::support::tmux::{Tmux, DEADLINE};
use crate::support::{vis_bin, worker_bin, TestEnv};
use crate::vistest;
use crate::web::browser::Browser;

const KIND: ProviderKind = ProviderKind::OpenAi;

/// Prints a line, a line of escape sequences (a window title, a screen clear, red), waits
/// for the file `go`, then prints another line and one without its newline. The lines are
/// built so the code shown on the screen does not contain them.
const WAITS_FOR_GO: &str = "import os, time\n\
print('first' + ' line', flush=True)\n\
print('\\x1b]0;pw' + 'ned\\x07\\x1b[2J\\x1b[31m' + 'osc', flush=True)\n\
while not os.path.exists('go'):\n    time.sleep(0.02)\n\
print('second' + ' line')\n\
print('no' + ' newline', end='')";

fn chat_args(fake: &FakeProvider) -> Vec<String> {
    vec![
        "chat".into(),
        "--provider".into(),
        KIND.as_str().into(),
        "--base-url".into(),
        fake.base_url(KIND),
        "--model".into(),
        "fake-model".into(),
    ]
}

vistest!(
    the_tui_shows_a_running_blocks_last_lines_then_its_usual_view,
    |env| {
        let fake = FakeProvider::start();
        let long = format!("print('{}' + 'end', flush=True)\n", "w".repeat(90));
        fake.push(calls(KIND, "a", &[&format!("{long}{WAITS_FOR_GO}")]));
        fake.push(answer(KIND, "Both lines."));
        let mut args = vec!["--db".to_string(), env.db().to_string_lossy().into_owned()];
        args.extend(chat_args(&fake));
        let vars = [
            (
                "VIS_HOME",
                env.path().join("home").to_string_lossy().into_owned(),
            ),
            (
                "VIS_CONFIG_DIR",
                env.config_dir().to_string_lossy().into_owned(),
            ),
            ("NO_COLOR", String::new()),
        ];
        let tmux = Tmux::start(&env.workspace(), &vars, &vis_bin(), &args);
        tmux.wait_text("› ");
        tmux.send_line("print two lines");
        // The block runs (it waits for `go`): its lines are under the spinner.
        let screen = tmux.wait_text("\n    first line\n");
        assert!(screen.contains("running t1/i1"), "{screen}");
        assert!(!screen.contains("⎿"), "the block has not ended:\n{screen}");
        // Escape sequences arrive as text: the title is not changed, the screen not cleared.
        let screen = tmux.wait_text("\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mosc");
        assert_ne!(tmux.pane("#{pane_title}"), "pwned");
        assert!(screen.contains("› print two lines"), "{screen}");
        let styled = tmux.screen_styled();
        assert!(
            !styled.contains("\u{1b}[31m"),
            "the block's red reached the screen"
        );
        assert!(
            screen.contains(&format!("    {}end\n", "w".repeat(90))),
            "{screen}"
        );
        // Narrowed: the 94-column line now takes two rows, and the region is still erased
        // whole each frame (no copy of it is left behind).
        tmux.resize(60, 40);
        tmux.wait_for("the region redrawn at 60 columns", |s| {
            s.lines()
                .any(|l| l.starts_with("    www") && l.ends_with('…'))
        });
        std::fs::write(env.workspace().join("go"), "").unwrap();
        let screen = tmux.wait_text("Both lines.");
        for needle in [
            "  ⎿ ok · ",
            "    first line\n",
            "    second line\n",
            "    no newline\n",
        ] {
            assert!(screen.contains(needle), "missing {needle:?} in\n{screen}");
        }
        // The live region collapsed into the usual view: each line once, no spinner left.
        assert_eq!(screen.matches("first line").count(), 1, "{screen}");
        assert_eq!(screen.matches("pwned").count(), 1, "{screen}");
        assert!(!screen.contains("running t1/i1"), "{screen}");
        let long_rows = screen.lines().filter(|l| l.starts_with("    www")).count();
        assert_eq!(long_rows, 1, "{screen}");
    }
);

vistest!(
    ctrl_c_ends_a_streaming_block_and_its_region_collapses,
    |env| {
        let fake = FakeProvider::start();
        fake.push(calls(
            KIND,
            "a",
            &["import time\nfor i in range(10**6):\n    print(f'tick {i}', flush=True)\n    time.sleep(0.02)"],
        ));
        let mut args = vec!["--db".to_string(), env.db().to_string_lossy().into_owned()];
        args.extend(chat_args(&fake));
        let vars = [
            (
                "VIS_HOME",
                env.path().join("home").to_string_lossy().into_owned(),
            ),
            (
                "VIS_CONFIG_DIR",
                env.config_dir().to_string_lossy().into_owned(),
            ),
        ];
        let tmux = Tmux::start(&env.workspace(), &vars, &vis_bin(), &args);
        tmux.wait_text("› ");
        tmux.send_line("tick");
        tmux.wait_for("tick 20 or later live", |s| {
            s.lines()
                .filter_map(|l| l.strip_prefix("    tick "))
                .any(|n| n.trim().parse::<u32>().is_ok_and(|n| n >= 20))
        });
        tmux.keys(&["C-c"]);
        let screen = tmux.wait_text("turn 1 interrupted");
        assert!(screen.contains("  ⎿ interrupted · "), "{screen}");
        // Only the collapsed view's first lines are left: no live line of a later tick.
        let ticks: Vec<u32> = screen
            .lines()
            .filter_map(|l| l.strip_prefix("    tick "))
            .filter_map(|n| n.trim().parse().ok())
            .collect();
        assert_eq!(ticks, (0..6).collect::<Vec<u32>>(), "{screen}");
        assert!(!screen.contains("interrupting…"), "{screen}");
    }
);

vistest!(
    chat_m_prints_a_blocks_lines_as_they_complete_and_not_twice,
    |env| {
        transcript_streams_lines(&env, &["-m", "print two lines"], None);
    }
);

vistest!(
    piped_chat_prints_a_blocks_lines_as_they_complete_and_not_twice,
    |env| {
        transcript_streams_lines(&env, &[], Some("print two lines\n"));
    }
);

/// `vis chat ARGS` (with `stdin` piped in) runs [`WAITS_FOR_GO`]; its transcript, read line by
/// line, shows the block's first line while the block still runs, and no line twice.
fn transcript_streams_lines(env: &TestEnv, extra: &[&str], stdin: Option<&str>) {
    let fake = FakeProvider::start();
    fake.push(calls(KIND, "a", &[WAITS_FOR_GO]));
    fake.push(answer(KIND, "Both lines."));
    let mut args = chat_args(&fake);
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = env.command(&args);
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    if stdin.is_some() {
        cmd.stdin(Stdio::piped());
    }
    let mut child = cmd.spawn().unwrap();
    if let Some(text) = stdin {
        // Written and closed: the program ends after this turn.
        let mut input = child.stdin.take().unwrap();
        input.write_all(text.as_bytes()).unwrap();
    }
    let (tx, lines) = mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).split(b'\n') {
            let Ok(line) = line else { break };
            if tx
                .send(String::from_utf8_lossy(&line).into_owned())
                .is_err()
            {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    // Everything up to the first line of output arrives while the block still runs.
    while !seen.iter().any(|l: &String| l == "first line") {
        seen.push(lines.recv_timeout(DEADLINE).unwrap_or_else(|_| {
            panic!("no `first line` while the block runs; stdout so far:\n{seen:#?}")
        }));
    }
    assert!(
        !seen.iter().any(|l| l.starts_with("── ok")),
        "the block ended already:\n{seen:#?}"
    );
    std::fs::write(env.workspace().join("go"), "").unwrap();
    seen.extend(lines.iter());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{seen:#?}");
    let out = seen.join("\n") + "\n";
    assert!(
        !out.contains('\u{1b}'),
        "a raw escape reached stdout:\n{out}"
    );
    // The lines streamed before the status; after it only what had not been shown (the
    // unterminated last line); each line once.
    let expected = "first line\n\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mosc\nsecond line\n── ok · ";
    assert!(out.contains(expected), "{out}");
    let after_status = out.split("── ok · ").nth(1).unwrap();
    let rest: Vec<&str> = after_status.lines().skip(1).take(2).collect();
    assert_eq!(rest, ["no newline", "Both lines."], "{out}");
    assert_eq!(out.matches("first line").count(), 1, "{out}");
    assert_eq!(out.matches("second line").count(), 1, "{out}");
    // What the model got is the whole output, as before.
    let requests = fake.requests();
    let sent = requests.last().unwrap().body_str();
    assert!(
        sent.contains(
            "first line\\n\\u001b]0;pwned\\u0007\\u001b[2J\\u001b[31mosc\\nsecond line\\nno newline"
        ),
        "{sent}"
    );
}

vistest!(block_output_streams_over_sse_before_the_block_ends, |env| {
    let rt = events();
    let fake = FakeProvider::start();
    let server = TestServer::start(&env, &fake, ServerConfig::default());
    rt.block_on(async {
        let c = Client::new(&server);
        let id = c.create(&env).await;
        fake.push(calls(KIND, "a", &[WAITS_FOR_GO]));
        fake.push(answer(KIND, "done"));
        let resp = c.turn(&id, "print two lines").await;
        assert_eq!(resp.status(), 200);
        let mut stream = resp.bytes_stream().eventsource();
        let mut seen: Vec<(String, serde_json::Value)> = Vec::new();
        let mut go_written = false;
        while let Some(ev) = tokio::time::timeout(DEADLINE, stream.next())
            .await
            .unwrap_or_else(|_| panic!("the stream stalled after {seen:#?}"))
        {
            let ev = ev.unwrap();
            let data: serde_json::Value = serde_json::from_str(&ev.data).unwrap();
            assert_eq!(data["type"], ev.event.as_str());
            let text = data["text"].as_str().unwrap_or_default().to_string();
            seen.push((ev.event.clone(), data));
            if ev.event == "block_output" && text.contains("first line") && !go_written {
                // Seen live: only now may the block end.
                assert!(!seen.iter().any(|(k, _)| k == "block_finished"));
                std::fs::write(env.workspace().join("go"), "").unwrap();
                go_written = true;
            }
            if ev.event == "turn_finished" {
                break;
            }
        }
        assert!(go_written, "no block_output with the first line: {seen:#?}");
        let kinds: Vec<&str> = seen.iter().map(|(k, _)| k.as_str()).collect();
        let finished = kinds.iter().position(|k| *k == "block_finished").unwrap();
        let outputs: Vec<usize> = kinds
            .iter()
            .enumerate()
            .filter(|(_, k)| **k == "block_output")
            .map(|(i, _)| i)
            .collect();
        assert!(outputs.iter().all(|&i| i < finished), "{kinds:?}");
        // Together the updates are the block's output, in order, and the result is unchanged.
        let streamed: String = seen
            .iter()
            .filter(|(k, _)| k == "block_output")
            .map(|(_, d)| {
                assert_eq!(d["skipped_bytes"], 0);
                assert_eq!(
                    (d["turn"].as_i64(), d["iteration"].as_i64()),
                    (Some(1), Some(1))
                );
                d["text"].as_str().unwrap().to_string()
            })
            .collect();
        let output = seen[finished].1["output"].as_str().unwrap();
        assert_eq!(streamed, output);
        assert_eq!(
            output,
            "first line\n\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}[31mosc\nsecond line\nno newline"
        );
        // A client that reconnects gets the block's output from the log too.
        let (_, replay) = c
            .json(reqwest::Method::GET, &format!("/api/sessions/{id}"), None)
            .await;
        assert_eq!(replay["iterations"][0]["output"], output);
        let resp = c
            .req(reqwest::Method::GET, &format!("/api/sessions/{id}/events"))
            .send()
            .await
            .unwrap();
        let again = crate::support::serve::read_events(resp, 1000).await;
        assert!(again.iter().any(|e| e.event == "block_output"));
    });
});

vistest!(
    the_web_view_shows_a_running_blocks_last_lines_as_text,
    |env| {
        let rt = events();
        let fake = FakeProvider::start();
        let server = TestServer::start(&env, &fake, ServerConfig::default());
        rt.block_on(async {
            let id = Client::new(&server).create(&env).await;
            // Eight lines, one of them markup, then a wait for `go` the test writes once it saw
            // them; then one more line.
            fake.push(calls(
                KIND,
                "a",
                &[
                    "import os, time\nfor i in range(1, 8):\n    print(f'count {i}', flush=True)\n\
               print('<img src=x onerror=alert(1)>', flush=True)\n\
               while not os.path.exists('go'):\n    time.sleep(0.02)\nprint('last' + ' line')",
                ],
            ));
            fake.push(answer(KIND, "Counted."));
            let b = Browser::start().await;
            b.goto(&format!("{}#{id}", server.login_url())).await;
            b.wait_text("#session-head", &id).await;
            b.type_into("#message", "count").await;
            b.click("#send").await;
            // While the block runs its card shows the last five lines it printed, as text.
            let tail = b.wait_text(".live .block .output.live", "onerror").await;
            assert_eq!(
                tail,
                "count 4\ncount 5\ncount 6\ncount 7\n<img src=x onerror=alert(1)>"
            );
            assert_eq!(b.count(".live img").await, 0);
            let head = b.text(".live .block .block-head").await;
            assert!(head.contains("running"), "{head}");
            b.screenshot("block-live-output").await;
            std::fs::write(env.workspace().join("go"), "").unwrap();
            // Finished: the live lines give way to the usual collapsed output.
            let t = b.wait_text("#transcript", "Counted.").await;
            assert!(t.contains("count 1\ncount 2"), "{t}");
            assert_eq!(b.count(".output.live").await, 0);
            assert_eq!(b.count("#transcript img").await, 0);
            let out = b.text("#transcript .block .output").await;
            assert!(out.contains("show all 9 lines"), "{out}");
            b.close().await;
        });
    }
);

vistest!(
    a_block_printing_200_mb_streams_a_bounded_tail_and_returns_the_same_result,
    |env| {
        let events = events();
        events.block_on(async {
            let mut opts = WorkerOptions::new(worker_bin());
            opts.workspace = Some(env.workspace());
            let mut sup = Supervisor::new(opts, vec![]);
            // 200,000 lines of 1,000 bytes; the last one names its number.
            let code = "import sys\nline = 'x' * 991\nfor i in range(199_999):\n    sys.stdout.write(line + f'{i:08}\\n')\n_ = sys.stdout.write('the end ☃\\n')";
            let total = 199_999 * 1000 + "the end ☃\n".len();
            let (plain, _) = flood(&mut sup, env.block(code), None).await;
            let mut updates = Vec::new();
            let (watched, wall) = flood(&mut sup, env.block(code), Some(&mut updates)).await;
            sup.shutdown().await;
            assert_eq!(plain.status, Status::Ok);
            assert_eq!((watched.status, &watched.output), (plain.status, &plain.output));
            assert_eq!(watched.artifact, plain.artifact);
            assert!(
                watched.output.contains("of 199,999,010 characters cut"),
                "{}",
                watched.output.lines().find(|l| l.contains("cut")).unwrap_or_default()
            );
            // Bounded: each update at most one chunk, at most one per interval (and the last),
            // and every byte either sent or counted as skipped.
            assert!(!updates.is_empty());
            assert!(updates.iter().all(|u| u.text.len() <= LIVE_CHUNK_BYTES));
            let reads = wall.as_millis() / LIVE_INTERVAL.as_millis() + 2;
            assert!(
                updates.len() as u128 <= reads,
                "{} updates in {wall:?}",
                updates.len()
            );
            let accounted: u64 = updates
                .iter()
                .map(|u| u.text.len() as u64 + u.skipped_bytes)
                .sum();
            assert_eq!(accounted, total as u64);
            assert!(updates.iter().any(|u| u.skipped_bytes > 0));
            assert!(updates.last().unwrap().text.ends_with("00199998\nthe end ☃\n"));
        });
    }
);

/// Runs `block`, watched into `updates` when given; its result and how long it took.
async fn flood(
    sup: &mut Supervisor,
    block: vis::protocol::Block,
    updates: Option<&mut Vec<LiveOutput>>,
) -> (vis::protocol::BlockResult, Duration) {
    let (tx, _calls) = tokio::sync::mpsc::unbounded_channel();
    let started = std::time::Instant::now();
    let result = match updates {
        Some(updates) => {
            let mut push = |o: LiveOutput| updates.push(o);
            sup.exec_watched(block, tx, CancellationToken::new(), Some(&mut push))
                .await
        }
        None => sup.exec(block, tx, CancellationToken::new()).await,
    };
    (result.unwrap(), started.elapsed())
}
