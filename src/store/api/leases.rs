//! Session leases (docs/serve.md, "Many nodes"): which `vis serve` node runs a session, who
//! holds a lease, what a claim got, and the fence a node's writes are checked against. Apart
//! from the other records because only `vis serve` with several nodes uses them.

use serde::Serialize;

use crate::store::Result;

/// A node of `vis serve` as a lease holder: its configured id, this process (a restarted
/// node is a new instance), and where other nodes reach it.
#[derive(Debug, Clone, Copy)]
pub struct LeaseNode<'a> {
    pub node_id: &'a str,
    pub instance: &'a str,
    pub address: &'a str,
}

/// Who holds a session's lease now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeaseHolder {
    pub node_id: String,
    pub instance: String,
    pub address: String,
    pub epoch: i64,
    /// Milliseconds until it expires, on the store's clock (always positive).
    pub expires_in_ms: i64,
}

/// What [`Leases::acquire_lease`] got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseClaim {
    /// The caller holds the lease until the ttl passes (unless renewed), with this epoch.
    Granted { epoch: i64 },
    /// Another instance holds an unexpired lease.
    Held(LeaseHolder),
}

/// The lease a store's writes to one session are made under: a node's instance and the
/// epoch it got the lease with (a fencing token, docs/scaling.md "Fencing").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseFence {
    /// The session whose lease row is checked: the one the node holds.
    pub session_id: String,
    pub instance: String,
    pub epoch: i64,
    /// The sub-session whose writes the fence guards when it is not `session_id` itself: a
    /// child (`spawn()`), at any depth, writes under the lease of the session the node holds.
    pub sub_session: Option<String>,
}

impl LeaseFence {
    /// The fence of the leased session `session_id` itself.
    pub fn new(session_id: &str, instance: &str, epoch: i64) -> LeaseFence {
        LeaseFence {
            session_id: session_id.to_string(),
            instance: instance.to_string(),
            epoch,
            sub_session: None,
        }
    }

    /// The session whose writes this fence guards.
    pub fn guards(&self) -> &str {
        self.sub_session.as_deref().unwrap_or(&self.session_id)
    }

    /// The same lease, guarding the writes of sub-session `child` instead.
    pub fn for_sub_session(&self, child: &str) -> LeaseFence {
        LeaseFence {
            sub_session: Some(child.to_string()),
            ..self.clone()
        }
    }
}

/// Session leases: which `vis serve` node runs a session (docs/serve.md, "Many nodes").
///
/// Every operation is an atomic compare-and-set on one row per session. Expiry is computed and
/// compared on the store's clock (the database server's for PostgreSQL; for SQLite, whose
/// processes share one machine, that machine's), never on the nodes' clocks, so clock skew
/// between nodes does not matter; a holder stays safe by measuring its own margin from before
/// it sent the renewal. The epoch grows by one at each change of holder, so it can serve as a
/// fencing token.
pub trait Leases {
    /// Takes (or, for its holder, extends) the lease of `session_id` for `ttl`. Granted when
    /// there is none, it expired or was released, `me` holds it, or its epoch is
    /// `replacing_epoch` (a holder the caller knows to be dead); else who holds it.
    fn acquire_lease(
        &self,
        session_id: &str,
        me: &LeaseNode<'_>,
        ttl: std::time::Duration,
        replacing_epoch: Option<i64>,
    ) -> Result<LeaseClaim>;
    /// Extends every unexpired lease of `instance` by `ttl` from now; returns those it holds
    /// still, as `(session, epoch)` (one missing from the answer was lost).
    fn renew_leases(&self, instance: &str, ttl: std::time::Duration) -> Result<Vec<(String, i64)>>;
    /// Ends the lease if `instance` still holds it with `epoch`; true when it did.
    fn release_lease(&self, session_id: &str, instance: &str, epoch: i64) -> Result<bool>;
    /// The unexpired holder of the lease, if any.
    fn lease_holder(&self, session_id: &str) -> Result<Option<LeaseHolder>>;
    /// Fences this store's writes to `fence.guards()` (`None`: unfenced, the default, for
    /// every command that runs a session without a lease). While fenced, `begin_turn`,
    /// `end_turn`, `begin_iteration`, `finish_iteration`, `append_history`, `record_request`,
    /// `record_fold` and, for a sub-session, `ensure_session`, `link_child` and
    /// `set_child_state` check, in the transaction that writes, that the lease row of
    /// `fence.session_id` still has this instance and epoch and is unexpired, and fail with
    /// [`StoreError::LeaseLost`] (nothing written) when it does not: a node frozen past its
    /// ttl cannot write into a session another node has taken over, nor into its children. A
    /// fenced store also takes every running turn of the guarded session for dangling
    /// (`running_turns`): the lease says no one else runs it.
    ///
    /// [`StoreError::LeaseLost`]: crate::store::StoreError::LeaseLost
    fn set_lease_fence(&self, fence: Option<LeaseFence>);
    /// The fence set by [`Leases::set_lease_fence`], if any (a session's children write
    /// under it).
    fn lease_fence(&self) -> Option<LeaseFence>;
}

/// The end of [`Leases::acquire_lease`] in every backend, after the statement that takes the
/// lease: `Granted` with the epoch it got (`granted`), else who holds the lease, or, when it
/// expired between the two statements, a second try.
pub(crate) fn claim_or_holder<S: Leases + ?Sized>(
    store: &S,
    granted: Option<i64>,
    session_id: &str,
    me: &LeaseNode<'_>,
    ttl: std::time::Duration,
) -> Result<LeaseClaim> {
    if let Some(epoch) = granted {
        return Ok(LeaseClaim::Granted { epoch });
    }
    match store.lease_holder(session_id)? {
        Some(holder) => Ok(LeaseClaim::Held(holder)),
        None => store.acquire_lease(session_id, me, ttl, None),
    }
}
