//! This server as one node of several over one store: its identity, the leases of the
//! sessions it runs, and their renewal.
//!
//! A node runs a session (loads it, starts its worker, runs its turns) only while it holds
//! the session's lease. The renewal task extends every lease the node holds each `ttl / 6`.
//! The node counts a lease as its own only until half the ttl has passed since it sent the
//! last renewal that kept it (measured on its own monotonic clock, from before the
//! statement went out, so the store's expiry is always later); past that, it stops the
//! session: interrupts what runs and stops the worker, with the other half of the ttl as the
//! margin before another node can take over.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::store::{LeaseClaim, LeaseHolder, LeaseNode, Store, StoreError};

/// `[serve] node_id`, `advertise`, `lease_ttl`.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Default: `HOSTNAME:PORT`.
    pub id: Option<String>,
    /// Default: `http://ADDRESS:PORT` of the listener (the host name for an unspecified address).
    pub advertise: Option<String>,
    pub lease_ttl: Duration,
}

/// The default `[serve] lease_ttl`.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(15);

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            id: None,
            advertise: None,
            lease_ttl: DEFAULT_LEASE_TTL,
        }
    }
}

/// A lease this node holds.
#[derive(Debug, Clone, Copy)]
struct Held {
    epoch: i64,
    /// When it was taken or last kept by a renewal that went out at that instant.
    kept_at: Instant,
}

/// Where a session runs, as far as this node can tell.
#[derive(Debug)]
pub enum Claim {
    /// This node holds the lease, with this epoch.
    Mine { epoch: i64 },
    /// Another live node does.
    Elsewhere(LeaseHolder),
}

pub struct Node {
    pub id: String,
    /// This node object: `PID:START#BOOT` (a restarted node is a new instance; so is each of
    /// several nodes one process runs, as benchmarks do).
    pub instance: String,
    /// Where other nodes reach this one (`http://host:port`).
    pub address: String,
    pub ttl: Duration,
    db: PathBuf,
    held: Mutex<HashMap<String, Held>>,
    /// The node's connection for the lease statements of the request path (claims,
    /// look-ups, releases).
    store: Mutex<Option<Box<Store>>>,
    /// The renewal's own connection (and, for PostgreSQL, its own pool): a busy request path,
    /// a claim waiting on a lock, or every pooled connection in use never delays a renewal.
    renewals: Mutex<Option<Box<Store>>>,
}

impl Node {
    pub fn new(id: String, address: String, ttl: Duration, db: PathBuf) -> Node {
        let pid = std::process::id() as i32;
        let boot = crate::session::new_session_id();
        let instance = format!(
            "{}#{}",
            crate::store::process_identity(pid).unwrap_or_else(|| pid.to_string()),
            boot.trim_start_matches("s-")
        );
        Node {
            id,
            instance,
            address,
            ttl,
            db,
            held: Mutex::new(HashMap::new()),
            store: Mutex::new(None),
            renewals: Mutex::new(None),
        }
    }

    /// How long a lease counts as this node's after the renewal that kept it went out.
    pub fn safe_for(&self) -> Duration {
        self.ttl / 2
    }

    /// How often the renewal task runs.
    pub fn renew_every(&self) -> Duration {
        self.ttl / 6
    }

    fn with_store<T>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.on(&self.store, crate::store::open, f)
    }

    /// Runs `f` on the connection in `slot`, opened with `open` when there is none (or the
    /// last call failed).
    fn on<T>(
        &self,
        slot: &Mutex<Option<Box<Store>>>,
        open: fn(&std::path::Path) -> Result<Box<Store>, StoreError>,
        f: impl FnOnce(&Store) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut guard = match slot.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if guard.is_none() {
            *guard = Some(open(&self.db)?);
        }
        let store = guard
            .as_deref()
            .ok_or_else(|| StoreError::CorruptRecord("lease store unavailable".into()))?;
        let out = f(store);
        if out.is_err() {
            // A broken connection is opened afresh next time.
            *guard = None;
        }
        out
    }

    fn me(&self) -> LeaseNode<'_> {
        LeaseNode {
            node_id: &self.id,
            instance: &self.instance,
            address: &self.address,
        }
    }

    /// The epoch of the lease this node holds on `session_id` and may still use.
    pub fn holds(&self, session_id: &str) -> Option<i64> {
        let held = self.held.lock().ok()?;
        held.get(session_id)
            .filter(|h| h.kept_at.elapsed() < self.safe_for())
            .map(|h| h.epoch)
    }

    /// Takes the lease of `session_id` unless another live node holds it. A lease held by an
    /// earlier process of this very node (same id and address, its process gone from this machine) is
    /// taken over at once instead of waiting for it to expire.
    pub fn claim(&self, session_id: &str) -> Result<Claim, StoreError> {
        if let Some(epoch) = self.holds(session_id) {
            return Ok(Claim::Mine { epoch });
        }
        let sent = Instant::now();
        let mut claim =
            self.with_store(|s| s.acquire_lease(session_id, &self.me(), self.ttl, None))?;
        if let LeaseClaim::Held(h) = &claim {
            // Only an earlier process of this very listener: the process check below can say
            // nothing about another machine's processes (a node id shared by mistake).
            let same_listener = h.node_id == self.id && h.address == self.address;
            if same_listener && h.instance != self.instance && !instance_alive(&h.instance) {
                let epoch = h.epoch;
                claim = self.with_store(|s| {
                    s.acquire_lease(session_id, &self.me(), self.ttl, Some(epoch))
                })?;
            }
        }
        Ok(match claim {
            LeaseClaim::Granted { epoch } => {
                if let Ok(mut held) = self.held.lock() {
                    held.insert(
                        session_id.to_string(),
                        Held {
                            epoch,
                            kept_at: sent,
                        },
                    );
                }
                Claim::Mine { epoch }
            }
            LeaseClaim::Held(h) => Claim::Elsewhere(h),
        })
    }

    /// Who else holds the lease of `session_id` now (`None`: nobody, or this node).
    pub fn holder_elsewhere(&self, session_id: &str) -> Result<Option<LeaseHolder>, StoreError> {
        if self.holds(session_id).is_some() {
            return Ok(None);
        }
        let holder = self.with_store(|s| s.lease_holder(session_id))?;
        Ok(holder.filter(|h| h.instance != self.instance))
    }

    /// Gives the lease of `session_id` back (park, delete, shutdown).
    pub fn release(&self, session_id: &str) {
        let held = self.held.lock().ok().and_then(|mut h| h.remove(session_id));
        if let Some(h) = held {
            let _ = self.with_store(|s| s.release_lease(session_id, &self.instance, h.epoch));
        }
    }

    /// Stops counting the lease of `session_id` as this node's, without a statement: the
    /// store already has another holder (a fenced write was refused).
    pub fn forget_lease(&self, session_id: &str) {
        if let Ok(mut held) = self.held.lock() {
            held.remove(session_id);
        }
    }

    /// Gives every lease back (at shutdown).
    pub fn release_all(&self) {
        let ids: Vec<String> = self
            .held
            .lock()
            .map(|h| h.keys().cloned().collect())
            .unwrap_or_default();
        for id in ids {
            self.release(&id);
        }
    }

    /// One round of renewal: extends the leases in the store, and returns those this node
    /// must stop using (lost to another node, or not kept in time).
    pub fn renew(
        self: &Arc<Self>,
        outcome: Option<Vec<(String, i64)>>,
        sent: Instant,
    ) -> Vec<String> {
        let Ok(mut held) = self.held.lock() else {
            return Vec::new();
        };
        if let Some(kept) = outcome {
            let kept: HashMap<String, i64> = kept.into_iter().collect();
            for (id, h) in held.iter_mut() {
                // A lease taken after the renewal went out is judged next round.
                if h.kept_at >= sent {
                    continue;
                }
                if kept.get(id) == Some(&h.epoch) {
                    h.kept_at = sent;
                } else {
                    // Lost: the store no longer has it as ours.
                    h.kept_at = sent - self.safe_for();
                }
            }
        }
        let lost: Vec<String> = held
            .iter()
            .filter(|(_, h)| h.kept_at.elapsed() >= self.safe_for())
            .map(|(id, _)| id.clone())
            .collect();
        for id in &lost {
            held.remove(id);
        }
        lost
    }

    /// The renewal statement (blocking: run it off the event loop).
    pub fn renew_in_store(&self) -> Result<Vec<(String, i64)>, StoreError> {
        self.on(&self.renewals, crate::store::open_private, |s| {
            s.renew_leases(&self.instance, self.ttl)
        })
    }

    /// How many leases this node holds.
    pub fn held_count(&self) -> usize {
        self.held.lock().map(|h| h.len()).unwrap_or(0)
    }
}

/// True while the process an instance names (`PID:START#BOOT`) still runs on this machine.
fn instance_alive(instance: &str) -> bool {
    let process = instance.split('#').next().unwrap_or(instance);
    let Some(pid) = process
        .split(':')
        .next()
        .and_then(|p| p.parse::<i32>().ok())
    else {
        return true;
    };
    crate::store::process_identity(pid).as_deref() == Some(process)
}

/// This machine's host name (`localhost` when it has none).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// The node's id and advertised address as configured, or their defaults for the address
/// the server listens on.
pub fn resolve(config: &NodeConfig, bound: std::net::SocketAddr) -> (String, String) {
    let id = config
        .id
        .clone()
        .unwrap_or_else(|| format!("{}:{}", host_name(), bound.port()));
    let address = config.advertise.clone().unwrap_or_else(|| {
        if bound.ip().is_unspecified() {
            format!("http://{}:{}", host_name(), bound.port())
        } else {
            format!("http://{bound}")
        }
    });
    (id, address)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_renewal_does_not_wait_for_the_request_path_s_connection() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("vis.db");
        let store = Store::open(&db).unwrap();
        store.ensure_session("s-1", &[]).unwrap();
        let node = Arc::new(Node::new(
            "n".into(),
            "http://127.0.0.1:1".into(),
            Duration::from_secs(60),
            db,
        ));
        assert!(matches!(
            node.claim("s-1").unwrap(),
            Claim::Mine { epoch: 1 }
        ));
        // A long call holds the request path's connection (as a claim waiting on a lock does).
        let busy = node.store.lock().unwrap();
        let renewing = {
            let node = node.clone();
            std::thread::spawn(move || node.renew_in_store())
        };
        // Bounded, so a renewal stuck behind the held connection fails instead of hanging.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !renewing.is_finished() {
            assert!(
                Instant::now() < deadline,
                "the renewal waited for the request path's connection"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let renewed = renewing.join().unwrap();
        drop(busy);
        assert_eq!(renewed.unwrap(), [("s-1".to_string(), 1)]);
    }
}
