//! `spawn()` from `vis mcp` (issue 27 §3): the server has no model of its own, so its
//! sub-sessions run with the provider the config names for them; without one, `spawn` says
//! which setting to add. Driven by the official MCP Python SDK client against the fake
//! provider (each child scripted by a marker in its task).

use std::time::Duration;

use serde_json::Value;
use vis::providers::ProviderKind;
use vis::store::Store;

use crate::support::chat::{answer, calls};
use crate::support::fake_provider::{FakeProvider, Gate, Reply};
use crate::support::mcp::{drive, toml_str, write_config};
use crate::support::{wait_until, worker_pids_in};
use crate::vistest;

const KIND: ProviderKind = ProviderKind::OpenAi;

fn text(v: &Value, key: &str) -> String {
    v[key]["text"].as_str().unwrap_or_default().to_string()
}

/// `[provider]` naming the fake provider, plus `extra`.
fn provider_config(fake: &FakeProvider, extra: &str) -> String {
    format!(
        "[provider]\nname = \"openai\"\nmodel = \"fake-model\"\nbase_url = {}\napi_key = \"test-key\"\nmax_retries = 0\n{extra}",
        toml_str(&fake.base_url(KIND))
    )
}

vistest!(spawn_from_vis_mcp_fans_out_to_the_configured_model, |env| {
    let fake = FakeProvider::start();
    write_config(&env, &provider_config(&fake, ""));
    // Both children's first requests are answered only once both are in flight.
    let gate = Gate::new(2);
    for k in 0..2 {
        fake.conversation(
            &format!("CHILD-{k}"),
            vec![
                Reply::gated(
                    &gate,
                    calls(
                        KIND,
                        &format!("c{k}"),
                        &[&format!("print('WORK-OF-CHILD-{k}')")],
                    ),
                ),
                answer(KIND, &format!("answer {k}: no bugs")),
            ],
        );
    }
    let v = drive(
        &env,
        &["--session", "mcp-parent"],
        r#"
out("fan", await call("children = [spawn(f'CHILD-{k}: review file{k}.py') for k in range(2)]\nfor s in children:\n    print(s.wait())\nprint('listed', len(subs()), sorted(s.status for s in subs()))"))
"#,
    );
    let fan = text(&v, "fan");
    assert_eq!(v["fan"]["is_error"], false, "{fan}");
    assert!(
        fan.starts_with("answer 0: no bugs\nanswer 1: no bugs\nlisted 2 ['done', 'done']\n"),
        "{fan}"
    );
    // Only what the block printed came back: no child's work.
    assert!(!fan.contains("WORK-OF-CHILD"), "{fan}");
    assert_eq!(gate.arrived(), 2);
    for k in 0..2 {
        let child = fake.requests_of(&format!("CHILD-{k}"));
        assert_eq!(child.len(), 2, "child {k}");
        // The child's own context: the system prompt and catalog, then its task.
        assert!(child[0].body_str().contains("python_execution"));
        assert!(child[0].json()["model"] == "fake-model");
        assert!(child[1].body_str().contains(&format!("WORK-OF-CHILD-{k}")));
    }
    // Each child is a stored session linked to the MCP connection's turn and call.
    let store = Store::open(&env.db()).unwrap();
    let children = store.children_of("mcp-parent").unwrap();
    assert_eq!(children.len(), 2);
    for row in &children {
        assert_eq!((row.link.turn, row.link.iteration), (1, 1));
        assert_eq!(row.status, "done");
        assert_eq!(row.requests, 2);
    }
    let shown = env.vis(&["sessions", "show", "mcp-parent"]);
    assert!(
        shown.stdout.contains(&children[0].link.child) && shown.stdout.contains("children:"),
        "{}",
        shown.stdout
    );
    // No child's worker outlives the server.
    assert!(wait_until(Duration::from_secs(10), || worker_pids_in(
        &env.workspace()
    )
    .is_empty()));
});

vistest!(a_cancelled_mcp_call_cancels_its_children, |env| {
    let fake = FakeProvider::start();
    write_config(&env, &provider_config(&fake, ""));
    // The child's request is never answered (the gate wants more than come).
    let gate = Gate::new(99);
    fake.conversation(
        "CHILD-STUCK",
        vec![Reply::gated(&gate, answer(KIND, "never"))],
    );
    let v = drive(
        &env,
        &["--session", "mcp-cancel"],
        r#"
import os
scopes = []
async def run():
    with anyio.CancelScope() as scope:
        scopes.append(scope)
        await call("s = spawn('CHILD-STUCK: wait forever')\nopen('spawned.flag', 'w').write(s.id)\ns.wait()")
async with anyio.create_task_group() as tg:
    tg.start_soon(run)
    while not os.path.exists("spawned.flag"):
        await anyio.sleep(0.02)
    scopes[0].cancel()
out("after", await call("s = subs()[0]\ntry:\n    s.wait(60)\nexcept SubSessionError as e:\n    print('ENDED', e.status)"))
"#,
    );
    let after = text(&v, "after");
    let store = Store::open(&env.db()).unwrap();
    let children = store.children_of("mcp-cancel").unwrap();
    assert_eq!(children.len(), 1, "{after}");
    assert_eq!(children[0].status, "cancelled", "{after}");
    assert!(after.starts_with("ENDED cancelled\n"), "{after}");
    assert!(gate.arrived() <= 1);
});

vistest!(spawn_without_a_configured_model_names_the_setting, |env| {
    // MCP servers but no provider: vis mcp itself runs, spawn() cannot.
    write_config(&env, "[spawn]\nmax_parallel = 2\n");
    let v = drive(
        &env,
        &["--session", "mcp-nomodel"],
        r#"
out("refused", await call("try:\n    spawn('review it')\nexcept RuntimeError as e:\n    print('REFUSED', e)"))
out("still", await call("print(1 + 1)"))
"#,
    );
    let refused = text(&v, "refused");
    assert!(refused.starts_with("REFUSED spawn: sub-sessions need a model, and this vis mcp has none configured; name one in "), "{refused}");
    assert!(
        refused.contains("[provider] name = \"openai\" or \"anthropic\" and model =")
            && refused.contains("[spawn] model")
            && refused.contains("--provider and --model"),
        "{refused}"
    );
    let config_path = env.config_dir().join("config.toml");
    assert!(
        refused.contains(&config_path.display().to_string()),
        "{refused}"
    );
    assert!(text(&v, "still").starts_with("2\n"), "{v}");
    // Nothing was started or stored.
    let store = Store::open(&env.db()).unwrap();
    assert!(store.children_of("mcp-nomodel").unwrap().is_empty());
});
