//! A call the block did not wait for: a thread of block A calls an MCP tool that takes ten
//! minutes, and block A ends first. Every host ends it the same way (one block runner): the
//! call is cancelled with its block and the thread gets the same refusal, which block B
//! prints. `vis exec` runs one block, so there it shows as a block that ends at once instead
//! of waiting for the tool.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use vis::providers::ProviderKind;

use super::lifetime::{http, real_serve, KillOnDrop, RealServe};
use crate::support::chat::{answer, calls};
use crate::support::fake_provider::FakeProvider;
use crate::support::mcp::{drive, with_fixture};
use crate::support::{wait_until, TestEnv};
use crate::vistest;

/// Starts a thread whose MCP call is still waiting when the block ends.
const BLOCK_A: &str = r#"import threading, time
left = {}
asked = threading.Event()
def _late():
    asked.set()
    try:
        left["answer"] = repr(fx.hang(seconds=600))
    except Exception as e:
        left["answer"] = "%s: %s" % (type(e).__name__, e)
late = threading.Thread(target=_late, daemon=True)
late.start()
asked.wait(10)
time.sleep(0.5)
print("block a ends")"#;

/// Shows what the thread's call came to.
const BLOCK_B: &str = r#"late.join(60)
print("LEFT:" + left.get("answer", "no answer within 60 s"))"#;

const REFUSAL: &str = "the host did not answer 'mcp.call': the block it was made for has ended";

/// The last `LEFT:` line of a text (a transcript shows the code before its output).
fn left_line(text: &str) -> String {
    let at = text
        .rfind("LEFT:")
        .unwrap_or_else(|| panic!("no LEFT: line in {text}"));
    text[at..].lines().next().unwrap_or_default().to_string()
}

fn through_chat(env: &TestEnv) -> String {
    with_fixture(env, "");
    let fake = FakeProvider::start();
    let kind = ProviderKind::OpenAi;
    fake.push(calls(kind, "a", &[BLOCK_A]));
    fake.push(calls(kind, "b", &[BLOCK_B]));
    fake.push(answer(kind, "done"));
    let run = env.vis(&[
        "chat",
        "--provider",
        kind.as_str(),
        "--base-url",
        &fake.base_url(kind),
        "--model",
        "fake-model",
        "-m",
        "go",
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("block a ends"), "{}", run.stdout);
    left_line(&run.stdout)
}

fn through_mcp(env: &TestEnv) -> String {
    with_fixture(env, "");
    let body = format!(
        "out(\"a\", await call({}))\nout(\"b\", await call({}))\n",
        serde_json::to_string(BLOCK_A).unwrap(),
        serde_json::to_string(BLOCK_B).unwrap()
    );
    let v = drive(env, &[], &body);
    let a = v["a"]["text"].as_str().unwrap_or_default();
    assert!(a.contains("block a ends"), "{v}");
    left_line(v["b"]["text"].as_str().unwrap_or_default())
}

fn through_serve(env: &TestEnv) -> String {
    let fake = FakeProvider::start();
    let kind = ProviderKind::OpenAi;
    fake.push(calls(kind, "a", &[BLOCK_A]));
    fake.push(calls(kind, "b", &[BLOCK_B]));
    fake.push(answer(kind, "done"));
    let RealServe {
        host: _host,
        port,
        token,
        session: id,
    } = real_serve(env, &fake);
    let message = serde_json::json!({"message": "go"}).to_string();
    let (status, stream) = http(
        port,
        &token,
        "POST",
        &format!("/api/sessions/{id}/turns"),
        &message,
    );
    assert!(status.contains("200"), "{status}: {stream}");
    // The blocks' outputs, from the stream's `block_finished` events.
    let outputs: Vec<String> = stream
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .filter(|event| event["type"] == "block_finished")
        .map(|event| event["output"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(outputs.len(), 2, "{stream}");
    assert!(outputs[0].contains("block a ends"), "{outputs:?}");
    left_line(&outputs[1])
}

vistest!(
    a_call_left_running_ends_with_its_block_through_every_host,
    |env| {
        let chat = through_chat(&env);
        let mcp = through_mcp(&TestEnv::new());
        let serve = through_serve(&TestEnv::new());
        assert!(chat.contains(REFUSAL), "{chat}");
        assert_eq!(mcp, chat, "vis mcp and vis chat differ");
        assert_eq!(serve, chat, "vis serve and vis chat differ");
    }
);

vistest!(a_call_left_running_does_not_hold_vis_exec, |env| {
    with_fixture(&env, "");
    let ws = env.workspace();
    let mut exec = KillOnDrop(
        env.command(&[
            "exec",
            "--session",
            "left",
            "--workspace",
            ws.to_str().unwrap(),
            BLOCK_A,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap(),
    );
    // The tool would take ten minutes: `vis exec` ends with its block instead.
    let ended = wait_until(Duration::from_secs(120), || {
        exec.0.try_wait().ok().flatten().is_some()
    });
    assert!(ended, "vis exec waited for the call its block left running");
    let mut stdout = String::new();
    std::io::Read::read_to_string(exec.0.stdout.as_mut().unwrap(), &mut stdout).unwrap();
    assert!(exec.0.wait().unwrap().success(), "{stdout}");
    assert!(stdout.contains("block a ends"), "{stdout}");
});
