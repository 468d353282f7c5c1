//! The lease fence at the store (docs/scaling.md, "Fencing"), on both backends: a store fenced
//! for a sub-session writes under the lease of the session its node holds, and once another
//! instance takes that lease, every write of the child (its session row, its link, its state,
//! its turns) is refused with `LeaseLost`, nothing of it written.

use std::path::Path;
use std::time::Duration;

use vis::protocol::{TurnKind, TurnStatus};
use vis::store::{ChildLink, LeaseClaim, LeaseFence, LeaseNode, Store, StoreError};

use crate::support::TestEnv;

const NODE: LeaseNode<'static> = LeaseNode {
    node_id: "a",
    instance: "a-1",
    address: "http://127.0.0.1:1",
};

fn epoch_of(claim: LeaseClaim) -> i64 {
    match claim {
        LeaseClaim::Granted { epoch } => epoch,
        LeaseClaim::Held(holder) => panic!("the lease is held: {holder:?}"),
    }
}

fn assert_lost(result: vis::store::Result<impl std::fmt::Debug>, parent: &str) {
    match result {
        Err(StoreError::LeaseLost { session, .. }) => assert_eq!(session, parent),
        other => panic!("expected LeaseLost on {parent}, got {other:?}"),
    }
}

fn children_write_under_their_parent_s_lease(db: &Path) {
    let store = Store::open(db).unwrap();
    let ttl = Duration::from_secs(600);
    store.ensure_session("parent", &["/w".into()]).unwrap();
    let epoch = epoch_of(store.acquire_lease("parent", &NODE, ttl, None).unwrap());
    let parent_fence = LeaseFence::new("parent", NODE.instance, epoch);

    // While the node holds the parent's lease, the child's writes go through.
    let mut child_store = Store::open(db).unwrap();
    child_store.set_lease_fence(Some(parent_fence.for_sub_session("child-1")));
    assert_eq!(
        child_store.lease_fence().unwrap().guards(),
        "child-1",
        "the fence guards the child"
    );
    child_store
        .ensure_session("child-1", &["/w".into()])
        .unwrap();
    child_store
        .link_child(&ChildLink {
            child: "child-1".into(),
            parent: "parent".into(),
            turn: 1,
            iteration: 1,
            task: "work".into(),
        })
        .unwrap();
    child_store
        .set_child_state("child-1", "running", None)
        .unwrap();
    let turn = child_store
        .begin_turn("child-1", TurnKind::Chat, Some("work"))
        .unwrap();

    // Another instance takes the parent's lease (its holder's renewals never reached it).
    let thief = LeaseNode {
        node_id: "b",
        instance: "b-1",
        address: "http://127.0.0.1:2",
    };
    epoch_of(
        store
            .acquire_lease("parent", &thief, ttl, Some(epoch))
            .unwrap(),
    );

    // Every write of the old holder's child is refused, and names the leased session.
    assert_lost(
        child_store.set_child_state("child-1", "done", Some("late answer")),
        "parent",
    );
    assert_lost(
        child_store.end_turn("child-1", turn, TurnStatus::Done),
        "parent",
    );
    assert_lost(
        child_store.begin_turn("child-1", TurnKind::Chat, Some("more")),
        "parent",
    );
    // No new child starts under the lost lease: neither its session nor its link is written.
    child_store.set_lease_fence(Some(parent_fence.for_sub_session("child-2")));
    assert_lost(
        child_store.ensure_session("child-2", &["/w".into()]),
        "parent",
    );
    assert_lost(
        child_store.link_child(&ChildLink {
            child: "child-2".into(),
            parent: "parent".into(),
            turn: 1,
            iteration: 1,
            task: "more work".into(),
        }),
        "parent",
    );
    // A fence guards one session: child-2's leaves child-1's writes as they are (unfenced).
    assert!(child_store
        .set_child_state("child-1", "running", None)
        .is_ok());

    let reader = Store::open(db).unwrap();
    assert!(
        reader.session("child-2").unwrap().is_none(),
        "child-2 was created"
    );
    let child = reader.child("child-1").unwrap().unwrap();
    assert_eq!(child.link.parent, "parent");
    assert_eq!(child.link.task, "work");
    assert_eq!(child.status, "running");
    assert_eq!(child.answer, None);
    let turns: Vec<(i64, String)> = reader
        .turns("child-1")
        .unwrap()
        .into_iter()
        .map(|t| (t.turn, t.status.as_str().to_string()))
        .collect();
    assert_eq!(turns, [(turn, "running".to_string())]);

    // Unfenced (a command without leases), the same store writes as before.
    child_store.set_lease_fence(None);
    assert!(child_store.lease_fence().is_none());
    child_store
        .set_child_state("child-1", "interrupted", None)
        .unwrap();
    assert_eq!(
        reader.child("child-1").unwrap().unwrap().status,
        "interrupted"
    );
}

#[test]
fn children_write_under_their_parent_s_lease_in_sqlite() {
    let env = TestEnv::new();
    children_write_under_their_parent_s_lease(&env.db());
}

#[test]
fn children_write_under_their_parent_s_lease_in_postgres() {
    let env = TestEnv::new();
    env.use_postgres();
    children_write_under_their_parent_s_lease(&env.db());
}
