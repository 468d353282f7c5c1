//! **Background jobs** (`sh.background`): the host's table of a session's jobs.
//!
//! A job is a shell command the worker's interpreter started in its own process group; it
//! lives in the worker's sandbox and PID namespace, so it dies with the worker. The worker's
//! memory dies with it too, which is why the table is here: the worker reports each job's
//! start, finish and "the block saw it finish" as `job` messages ([`JobReport`]), which the
//! channel's reader task applies as they arrive, between blocks as well as during one. When a
//! worker ends (restart, crash, kill, the session's end) its running jobs become *lost*.
//!
//! What the table is for: the next model request is told, in one appended line, about every
//! job that finished or was lost and that no block saw end ([`Jobs::take_announcements`]);
//! the next block's output names the jobs a restart lost; `vis chat`'s status line and `vis
//! serve`'s events show what runs ([`Jobs::subscribe`]). Reports are the worker's claims
//! (untrusted): unknown ids, a second start of an id and reports over the cap are ignored,
//! and their text is clipped.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::protocol::Event;

/// The default `[jobs] max`: jobs running at once per session.
pub const DEFAULT_MAX_JOBS: u32 = 8;
/// The default `[jobs] output_mb`: what one job's artifact file keeps.
pub const DEFAULT_OUTPUT_MB: u64 = 64;
/// Finished jobs kept in the table (the oldest go first).
const KEEP_FINISHED: usize = 200;
/// The longest command kept (characters).
const MAX_COMMAND_CHARS: usize = 2000;

pub use crate::runtime::wire::JobReport;

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Running,
    Finished,
    /// Its worker ended while it ran (it was killed with it).
    Lost,
}

/// One job as the host knows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobInfo {
    pub id: u32,
    pub command: String,
    pub artifact: String,
    pub state: JobState,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub lines: u64,
    pub dropped_bytes: u64,
    pub timed_out: bool,
    pub killed: bool,
    /// Why its worker ended, for a lost job.
    pub lost_because: Option<String>,
    /// The model was told it ended (by a block or an announcement).
    pub announced: bool,
}

impl JobInfo {
    /// How the job ended, one line for the model: `[vis] job 3 finished: exit 0, 1,204
    /// lines (artifact …)`; `None` while it runs.
    pub fn ending_line(&self) -> Option<String> {
        let lines = format!(
            "{} line{}",
            thousands(self.lines),
            if self.lines == 1 { "" } else { "s" }
        );
        let dropped = if self.dropped_bytes > 0 {
            format!(
                ", {} bytes over the output cap not kept",
                thousands(self.dropped_bytes)
            )
        } else {
            String::new()
        };
        let how = match self.state {
            JobState::Running => return None,
            JobState::Lost => {
                let why = self.lost_because.as_deref().unwrap_or("the worker ended");
                return Some(format!(
                    "[vis] job {} lost: it was killed with its worker ({why}); its output so far is in {}",
                    self.id, self.artifact
                ));
            }
            JobState::Finished if self.timed_out => "killed by its timeout".to_string(),
            JobState::Finished if self.killed => "killed by kill()".to_string(),
            JobState::Finished => match (self.exit_code, self.signal) {
                (Some(code), _) => format!("exit {code}"),
                (None, Some(signal)) => format!("killed by signal {signal}"),
                (None, None) => "ended".to_string(),
            },
        };
        Some(format!(
            "[vis] job {} finished: {how}, {lines}{dropped} (artifact {})",
            self.id, self.artifact
        ))
    }
}

/// 1204 → "1,204".
fn thousands(n: u64) -> String {
    crate::protocol::group_thousands(usize::try_from(n).unwrap_or(usize::MAX))
}

#[derive(Debug, Default)]
struct JobTable {
    jobs: BTreeMap<u32, JobInfo>,
    /// The id the next job gets (ids are never reused in a session).
    next_id: u32,
}

/// A session's job table, shared by the supervisor, the channel's reader task and whoever
/// shows jobs. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Jobs {
    table: Arc<Mutex<JobTable>>,
    max: u32,
    changes: broadcast::Sender<Event>,
}

impl Jobs {
    /// An empty table for a session that may run `max` jobs at once.
    pub fn new(max: u32) -> Jobs {
        let (changes, _) = broadcast::channel(64);
        Jobs {
            table: Arc::new(Mutex::new(JobTable {
                jobs: BTreeMap::new(),
                next_id: 1,
            })),
            max,
            changes,
        }
    }

    fn lock(&self) -> MutexGuard<'_, JobTable> {
        // A panic while the table was held leaves it consistent (every change is one insert
        // or field update): keep using it.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True when both are the same session's table.
    pub fn same_table(&self, other: &Jobs) -> bool {
        Arc::ptr_eq(&self.table, &other.table)
    }

    /// Jobs running at once per session (`[jobs] max`).
    pub fn max(&self) -> u32 {
        self.max
    }

    /// The id the worker gives its next job.
    pub fn next_id(&self) -> u32 {
        self.lock().next_id
    }

    /// Job starts and ends as [`Event::JobStarted`] / [`Event::JobFinished`], as they happen.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.changes.subscribe()
    }

    /// Every job, oldest first.
    pub fn list(&self) -> Vec<JobInfo> {
        self.lock().jobs.values().cloned().collect()
    }

    /// The jobs running now.
    pub fn running(&self) -> Vec<JobInfo> {
        self.lock()
            .jobs
            .values()
            .filter(|j| j.state == JobState::Running)
            .cloned()
            .collect()
    }

    /// Applies a worker's report (ignoring what does not fit the table: see the module doc).
    pub fn apply(&self, report: JobReport) {
        let event = {
            let mut table = self.lock();
            apply(&mut table, report, self.max)
        };
        if let Some(event) = event {
            let _ = self.changes.send(event);
        }
    }

    /// Marks every running job lost because its worker ended (`why`); returns their ids.
    /// The table keeps them lost and untold until [`Jobs::tell_lost`] or
    /// [`Jobs::take_announcements`] tells the model, so nobody else tracks them.
    pub fn lose_running(&self, why: &str) -> Vec<u32> {
        let mut events = Vec::new();
        let mut lost = Vec::new();
        {
            let mut table = self.lock();
            for job in table.jobs.values_mut() {
                if job.state == JobState::Running {
                    job.state = JobState::Lost;
                    job.lost_because = Some(why.to_string());
                    lost.push(job.id);
                    events.push(finished_event(job));
                }
            }
        }
        for event in events {
            let _ = self.changes.send(event);
        }
        lost
    }

    /// The lines of the lost jobs the model was not told about yet (for the next block's
    /// output), marking them told.
    pub fn tell_lost(&self) -> Vec<String> {
        self.tell(|job| job.state == JobState::Lost)
    }

    /// The lines for the jobs that ended since the model last heard, oldest first; each job
    /// is returned once.
    pub fn take_announcements(&self) -> Vec<String> {
        self.tell(|job| job.state != JobState::Running)
    }

    /// The ending lines of the untold jobs `which` picks, oldest first, marking them told.
    fn tell(&self, which: impl Fn(&JobInfo) -> bool) -> Vec<String> {
        let mut table = self.lock();
        let mut lines = Vec::new();
        for job in table.jobs.values_mut() {
            if !job.announced && which(job) {
                job.announced = true;
                lines.extend(job.ending_line());
            }
        }
        lines
    }
}

fn apply(table: &mut JobTable, report: JobReport, max: u32) -> Option<Event> {
    match report {
        JobReport::Started {
            id,
            command,
            artifact,
        } => {
            let running = table
                .jobs
                .values()
                .filter(|j| j.state == JobState::Running)
                .count();
            if table.jobs.contains_key(&id) || id == 0 || running >= max as usize {
                return None;
            }
            let job = JobInfo {
                id,
                command: crate::protocol::clip(&command, MAX_COMMAND_CHARS).to_string(),
                artifact: crate::protocol::clip(&artifact, MAX_COMMAND_CHARS).to_string(),
                state: JobState::Running,
                exit_code: None,
                signal: None,
                lines: 0,
                dropped_bytes: 0,
                timed_out: false,
                killed: false,
                lost_because: None,
                announced: false,
            };
            table.next_id = table.next_id.max(id.saturating_add(1));
            let event = Event::JobStarted {
                id,
                command: job.command.clone(),
                artifact: job.artifact.clone(),
            };
            table.jobs.insert(id, job);
            forget_oldest(table);
            Some(event)
        }
        JobReport::Finished {
            id,
            exit_code,
            signal,
            lines,
            bytes: _,
            dropped_bytes,
            timed_out,
            killed,
        } => {
            let job = table.jobs.get_mut(&id)?;
            if job.state != JobState::Running {
                return None;
            }
            job.state = JobState::Finished;
            job.exit_code = exit_code;
            job.signal = signal;
            job.lines = lines;
            job.dropped_bytes = dropped_bytes;
            job.timed_out = timed_out;
            job.killed = killed;
            Some(finished_event(job))
        }
        JobReport::Observed { id } => {
            if let Some(job) = table.jobs.get_mut(&id) {
                if job.state != JobState::Running {
                    job.announced = true;
                }
            }
            None
        }
    }
}

fn finished_event(job: &JobInfo) -> Event {
    Event::JobFinished {
        id: job.id,
        line: job.ending_line().unwrap_or_default(),
        exit_code: job.exit_code,
        lost: job.state == JobState::Lost,
    }
}

fn forget_oldest(table: &mut JobTable) {
    let ended: Vec<u32> = table
        .jobs
        .values()
        .filter(|j| j.state != JobState::Running)
        .map(|j| j.id)
        .collect();
    if ended.len() > KEEP_FINISHED {
        for id in &ended[..ended.len() - KEEP_FINISHED] {
            table.jobs.remove(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started(id: u32) -> JobReport {
        JobReport::Started {
            id,
            command: "make".into(),
            artifact: format!("/a/job-{id}.txt"),
        }
    }

    fn finished(id: u32, code: i32) -> JobReport {
        JobReport::Finished {
            id,
            exit_code: Some(code),
            signal: None,
            lines: 1204,
            bytes: 9000,
            dropped_bytes: 0,
            timed_out: false,
            killed: false,
        }
    }

    #[test]
    fn a_finished_job_is_announced_once() {
        let jobs = Jobs::new(8);
        jobs.apply(started(3));
        assert!(jobs.take_announcements().is_empty());
        jobs.apply(finished(3, 0));
        assert_eq!(
            jobs.take_announcements(),
            vec!["[vis] job 3 finished: exit 0, 1,204 lines (artifact /a/job-3.txt)".to_string()]
        );
        assert!(jobs.take_announcements().is_empty());
        assert_eq!(jobs.next_id(), 4);
    }

    #[test]
    fn an_observed_finish_is_not_announced() {
        let jobs = Jobs::new(8);
        jobs.apply(started(1));
        jobs.apply(finished(1, 2));
        jobs.apply(JobReport::Observed { id: 1 });
        assert!(jobs.take_announcements().is_empty());
    }

    #[test]
    fn forged_reports_are_ignored() {
        let jobs = Jobs::new(2);
        jobs.apply(finished(9, 0));
        jobs.apply(started(0));
        jobs.apply(started(1));
        jobs.apply(started(1));
        jobs.apply(started(2));
        jobs.apply(started(3));
        assert_eq!(
            jobs.running().len(),
            2,
            "the cap holds and ids are not reused"
        );
        jobs.apply(JobReport::Observed { id: 1 });
        jobs.apply(finished(1, 0));
        assert_eq!(
            jobs.take_announcements().len(),
            1,
            "observed before it ended"
        );
    }

    #[test]
    fn running_jobs_are_lost_with_their_worker() {
        let jobs = Jobs::new(8);
        jobs.apply(started(1));
        jobs.apply(started(2));
        jobs.apply(finished(2, 1));
        let lost = jobs.lose_running("after restart()");
        assert_eq!(lost, vec![1]);
        let lines = jobs.tell_lost();
        assert_eq!(
            lines.len(),
            1,
            "the finished job is not a lost one: {lines:?}"
        );
        assert!(jobs.tell_lost().is_empty(), "told once");
        assert_eq!(
            jobs.take_announcements().len(),
            1,
            "the finished job is still announced, the lost one not again"
        );
        assert!(lines[0]
            .starts_with("[vis] job 1 lost: it was killed with its worker (after restart())"));
        // A late finish of a lost job changes nothing.
        jobs.apply(finished(1, 0));
        assert_eq!(jobs.list()[0].state, JobState::Lost);
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
    }
}
