//! `cargo bench --bench serve -- --kill [--sessions N] [--turns N] [--ttl S] [--db URL]`: the
//! time from a node's death to its sessions being served again (issue 26, the third bench
//! line), on real `vis serve` processes.
//!
//! Three nodes on loopback over one store (a SQLite file in a temp dir, or the empty
//! PostgreSQL database `--db` names), the fake provider answering at once. Node A makes N
//! sessions (default 20) and runs `--turns` turns in each (default 3), so it holds their
//! leases and runs their workers; the bench notes, for each session, when its lease expires
//! on the store's clock, then kills A with SIGKILL. From the kill, one client per session sends
//! its next turn to B or C (alternately, as a load balancer would) and, as the web view and API
//! client do, sends it again after an error (`503` with `Retry-After`, a dropped connection)
//! until a turn finishes `done`. Reported per session: from the kill to that turn's end, and
//! the part of it after the lease's expiry (what Vis adds above the floor `lease_ttl` sets:
//! waking up, the takeover, the session load, a worker start and the turn itself). Afterwards
//! it checks the store (every turn's block stored exactly once, none lost) and that none of
//! A's worker processes survive.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{json, Value};

use super::fake_provider::FakeProvider;
use super::procs::{descendants, still_runs};
use super::{arg, db_arg, percentile};

/// A `vis serve` node this bench started.
struct Node {
    child: Child,
    url: String,
}

impl Drop for Node {
    fn drop(&mut self) {
        // SAFETY: a signal to a child process this bench started.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

/// Where the nodes keep their files and find their configuration.
struct World {
    dir: PathBuf,
    db: PathBuf,
}

impl World {
    fn home(&self) -> PathBuf {
        self.dir.join("home")
    }

    fn config(&self) -> PathBuf {
        self.dir.join("config")
    }

    fn workspace(&self) -> PathBuf {
        self.dir.join("workspace")
    }

    /// The directory beside the store where `vis serve` writes its token.
    fn store_dir(&self) -> PathBuf {
        let db = self.db.to_string_lossy();
        if db.starts_with("postgres://") || db.starts_with("postgresql://") {
            self.home()
                .join("postgres")
                .join(vis::store::state_key(&db))
        } else {
            self.dir.clone()
        }
    }

    /// Starts `vis serve` on a free loopback port; waits until it is ready.
    fn start_node(&self) -> Node {
        let mut child = Command::new(env!("CARGO_BIN_EXE_vis"))
            .arg("--db")
            .arg(&self.db)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env("VIS_HOME", self.home())
            .env("VIS_CONFIG_DIR", self.config())
            .env_remove("VIS_DB")
            .current_dir(self.workspace())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let mut lines = std::io::BufReader::new(stderr).lines();
        let mut banner = String::new();
        let login = loop {
            let Some(Ok(line)) = lines.next() else {
                let _ = child.kill();
                panic!("vis serve did not start:\n{banner}");
            };
            banner.push_str(&line);
            banner.push('\n');
            if let Some((_, url)) = line.split_once("one-time login link: ") {
                break url.trim().to_string();
            }
        };
        // The rest of its output is drained so the node never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        let url = login.split("/login?").next().unwrap_or(&login).to_string();
        Node { child, url }
    }
}

/// The fake model: a user message is the code of one block; after the block, "Done.".
fn script(fake: &FakeProvider) {
    fake.respond_with(|req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let last = messages.last().cloned().unwrap_or(Value::Null);
        if last["role"] == "tool" {
            super::fake_provider::Reply::openai().text("Done.").build()
        } else {
            let code = last["content"].as_str().unwrap_or("").to_string();
            super::fake_provider::Reply::openai()
                .tool_call(
                    "c",
                    "python_execution",
                    &json!({ "code": code }).to_string(),
                )
                .build()
        }
    });
}

/// One turn, read to its end: whether it finished `done`, or why not.
async fn one_turn(http: &reqwest::Client, url: &str, id: &str, code: &str) -> Result<(), String> {
    use eventsource_stream::Eventsource;
    let resp = http
        .post(format!("{url}/api/sessions/{id}/turns"))
        .header("content-type", "application/json")
        .body(json!({ "message": code }).to_string())
        .send()
        .await
        .map_err(|e| format!("send: {e}"))?;
    if !resp.status().is_success() {
        let status = resp.status();
        let body = resp.text().await.unwrap_or_default();
        return Err(format!("{status}: {body}"));
    }
    let mut events = resp.bytes_stream().eventsource();
    while let Some(ev) = events.next().await {
        let ev = ev.map_err(|e| format!("stream: {e}"))?;
        if ev.event == "turn_finished" {
            let data: Value = serde_json::from_str(&ev.data).unwrap_or(Value::Null);
            return match data["status"].as_str() {
                Some("done") => Ok(()),
                other => Err(format!("turn ended {other:?}")),
            };
        }
    }
    Err("the stream ended without turn_finished".into())
}

pub fn run() {
    let sessions = arg("--sessions", 20);
    let turns = arg("--turns", 3);
    let ttl = arg("--ttl", 5);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let tmp = tempfile::tempdir().unwrap();
    let db = db_arg(tmp.path());
    let world = World {
        dir: tmp.path().to_path_buf(),
        db,
    };
    std::fs::create_dir_all(world.workspace()).unwrap();
    std::fs::create_dir_all(world.config()).unwrap();
    let fake = FakeProvider::start();
    script(&fake);
    std::fs::write(
        world.config().join("config.toml"),
        format!(
            "[provider]\nname = \"openai\"\nmodel = \"fake-model\"\nbase_url = \"{}\"\nmax_retries = 0\n\n[serve]\nlease_ttl = {ttl}\nmax_live_workers = 300\n",
            fake.base_url(vis::providers::ProviderKind::OpenAi)
        ),
    )
    .unwrap();
    let mut a = world.start_node();
    let others = [world.start_node(), world.start_node()];
    let token = std::fs::read_to_string(world.store_dir().join("serve-token"))
        .unwrap()
        .trim()
        .to_string();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut auth = reqwest::header::HeaderMap::new();
    auth.insert("authorization", format!("Bearer {token}").parse().unwrap());
    let http = reqwest::Client::builder()
        .default_headers(auth)
        .no_proxy()
        .build()
        .unwrap();
    let workspace = world.workspace().canonicalize().unwrap();
    // On A: the sessions and their first turns (A holds every lease and runs every worker).
    let ids: Vec<String> = rt.block_on(async {
        let mut tasks = Vec::new();
        for _ in 0..sessions {
            let (http, url, ws) = (http.clone(), a.url.clone(), workspace.clone());
            tasks.push(tokio::spawn(async move {
                let resp = http
                    .post(format!("{url}/api/sessions"))
                    .header("content-type", "application/json")
                    .body(json!({ "workspace": ws }).to_string())
                    .send()
                    .await
                    .unwrap();
                let body: Value = resp.json().await.unwrap();
                let id = body["id"]
                    .as_str()
                    .unwrap_or_else(|| panic!("no session was created: {body}"))
                    .to_string();
                for t in 0..turns {
                    let code = format!("print('{id} {t}')");
                    one_turn(&http, &url, &id, &code).await.unwrap();
                }
                id
            }));
        }
        let mut ids = Vec::new();
        for t in tasks {
            ids.push(t.await.unwrap());
        }
        ids
    });
    // When each lease expires, on this process's clock (the store says how long it has left).
    let store = vis::store::Store::open(&world.db).unwrap();
    let a_pid = a.child.id() as i32;
    let workers = descendants(a_pid);
    let mut expiry: HashMap<String, Instant> = HashMap::new();
    for id in &ids {
        let read_at = Instant::now();
        let holder = store
            .lease_holder(id)
            .unwrap()
            .unwrap_or_else(|| panic!("A holds no lease on {id}"));
        assert!(
            holder.address == a.url,
            "{id} is leased by {} instead of A",
            holder.address
        );
        expiry.insert(
            id.clone(),
            read_at + Duration::from_millis(holder.expires_in_ms.max(0) as u64),
        );
    }
    let killed_at = Instant::now();
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    // From the kill: each session's next turn through B or C, sent again after an error.
    let served: Vec<(String, Duration, Duration, usize)> = rt.block_on(async {
        let mut tasks = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            let (http, id) = (http.clone(), id.clone());
            let url = others[i % 2].url.clone();
            let expires = expiry[&id];
            tasks.push(tokio::spawn(async move {
                let code = format!("print('{id} {turns}')");
                let mut attempts = 0;
                loop {
                    attempts += 1;
                    assert!(attempts <= 50, "{id}: never served again");
                    match one_turn(&http, &url, &id, &code).await {
                        Ok(()) => break,
                        Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                    }
                }
                let done = Instant::now();
                (
                    id,
                    done - killed_at,
                    done.saturating_duration_since(expires),
                    attempts,
                )
            }));
        }
        let mut served = Vec::new();
        for t in tasks {
            served.push(t.await.unwrap());
        }
        served
    });
    let survivors = {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let alive: Vec<&(i32, String)> = workers
                .iter()
                .filter(|(p, start)| still_runs(*p, start))
                .collect();
            if alive.is_empty() || Instant::now() > deadline {
                break alive.len();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // The store: each session holds every turn's block exactly once, the last one from B or C.
    let (mut lost, mut duplicated) = (0, 0);
    for id in &ids {
        let outputs: Vec<String> = store
            .iterations(id)
            .unwrap()
            .into_iter()
            .filter(|i| i.status.as_str() == "ok")
            .map(|i| i.output)
            .collect();
        for t in 0..=turns {
            let expected = format!("{id} {t}\n");
            match outputs.iter().filter(|o| o.ends_with(&expected)).count() {
                0 => lost += 1,
                1 => {}
                n => duplicated += n - 1,
            }
        }
    }
    let mut since_kill: Vec<f64> = served.iter().map(|s| s.1.as_secs_f64()).collect();
    let mut above_expiry: Vec<f64> = served.iter().map(|s| s.2.as_secs_f64() * 1000.0).collect();
    since_kill.sort_by(f64::total_cmp);
    above_expiry.sort_by(f64::total_cmp);
    let retried = served.iter().filter(|s| s.3 > 1).count();
    let store_kind = if world.store_dir() == world.dir {
        "SQLite"
    } else {
        "PostgreSQL"
    };
    println!(
        "{store_kind}, 3 nodes, lease_ttl {ttl} s: {sessions} sessions of node A ({turns} turns each) served again after A's kill -9 in median {:.2} s, max {:.2} s (min {:.2} s); after their leases expired: median {:.0} ms, max {:.0} ms; {retried} of {sessions} clients had to send their turn again",
        percentile(&since_kill, 0.5),
        since_kill.last().copied().unwrap_or(0.0),
        since_kill.first().copied().unwrap_or(0.0),
        percentile(&above_expiry, 0.5),
        above_expiry.last().copied().unwrap_or(0.0),
    );
    println!(
        "verified: {lost} turns lost, {duplicated} duplicated in the store; {} of A's {} worker processes survive it",
        survivors,
        workers.len()
    );
    assert_eq!((lost, duplicated, survivors), (0, 0, 0));
    drop(others);
}
