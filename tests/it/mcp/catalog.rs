//! A server's `notifications/tools/list_changed` reaches the model: the next request carries
//! a catalog update, appended after the prefix (through a chat session and the fake provider).

use serde_json::Value;
use vis::protocol::TurnStatus;
use vis::providers::ProviderKind;

use crate::support::chat::{answer, calls, events, messages, new_session, settings, turn};
use crate::support::fake_provider::FakeProvider;
use crate::support::mcp::with_fixture;
use crate::vistest;

vistest!(a_changed_tool_list_becomes_a_catalog_update, |env| {
    with_fixture(&env, "");
    let rt = events();
    let kind = ProviderKind::OpenAi;
    let fake = FakeProvider::start();
    let mut session = new_session(&env, settings(&env, &fake, kind), "mcp-catalog");
    let config = vis::config::Config::load(&env.config_dir()).unwrap();
    let store = vis::store::Store::open(&env.db()).unwrap();
    // In this process (the test binary), the servers' guards run from the vis binary.
    let hub = vis::mcp::hub_for_binary(
        &config,
        &env.workspace(),
        vis::config::artifact_dir(&env.db(), "mcp-catalog"),
        &*store,
        crate::support::vis_bin(),
    )
    .unwrap();
    session.set_mcp(hub);
    fake.push(calls(kind, "a", &["print(fx.add_tool())"]));
    fake.push(answer(kind, "added a tool"));
    assert_eq!(
        turn(&rt, &mut session, "add one").0.status,
        TurnStatus::Done
    );
    fake.push(calls(kind, "b", &["print(fx.added(x=21))"]));
    fake.push(answer(kind, "used it"));
    let (end, events) = turn(&rt, &mut session, "use it");
    assert_eq!(end.status, TurnStatus::Done, "{events:?}");
    let reqs = fake.requests();
    // The prefix (system text with the catalog) already lists the MCP tools.
    let first: Value = reqs[0].json();
    let system = first["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(system.contains("fx.search_issues("), "{system}");
    assert!(!system.contains("fx.added("));
    // The request after the block that changed the list carries the update, after the
    // history; the prefix is untouched.
    let before = messages(&reqs[0].body);
    let after = messages(&reqs[1].body);
    assert_eq!(&after[..before.len()], &before[..]);
    let tail = serde_json::to_string(&after[before.len()..]).unwrap();
    assert!(
        tail.contains("Catalog update") && tail.contains("fx.added(x: int) -> int"),
        "{tail}"
    );
    assert_eq!(reqs[1].json()["messages"][0], first["messages"][0]);
    // Sent once.
    let later = serde_json::to_string(&messages(&reqs[2].body)[after.len()..]).unwrap();
    assert!(!later.contains("Catalog update"), "{later}");
    // And the new tool works.
    let out = serde_json::to_string(&messages(&reqs[3].body)).unwrap();
    assert!(out.contains("42"), "{out}");
    rt.block_on(session.shutdown());
});
