//! Processes as `/proc` shows them: a node's descendants (its workers) and whether one still
//! runs. Also compiled into `benches/serve.rs` (the kill bench checks the same).

/// A process's parent, state and start time from `/proc/PID/stat`.
fn stat_of(pid: i32) -> Option<(i32, String, String)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    (fields.len() > 19).then(|| {
        (
            fields[1].parse().unwrap_or(0),
            fields[0].to_string(),
            fields[19].to_string(),
        )
    })
}

/// Every live descendant of `pid` now, with its start time (so a reused pid is not mistaken
/// for it).
pub fn descendants(pid: i32) -> Vec<(i32, String)> {
    let mut parent_of = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(p) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Some((parent, state, start)) = stat_of(p) {
            if state != "Z" {
                parent_of.push((p, parent, start));
            }
        }
    }
    let mut found: Vec<(i32, String)> = Vec::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for (p, pp, start) in &parent_of {
            if *pp == parent && !found.iter().any(|(f, _)| f == p) {
                found.push((*p, start.clone()));
                frontier.push(*p);
            }
        }
    }
    found
}

/// Whether the process `pid` started at `start` still runs (zombies count as gone).
pub fn still_runs(pid: i32, start: &str) -> bool {
    stat_of(pid).is_some_and(|(_, state, s)| state != "Z" && s == start)
}
