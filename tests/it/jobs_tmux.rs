//! `job.wait()` interrupted by Ctrl-C in `vis chat`, in tmux as a person does it (issue 27 §1,
//! docs/jobs.md "Waiting"): the block gets `KeyboardInterrupt` at once, the model is told the
//! block was interrupted, the job goes on into the next turn, the chat stays usable, and the
//! job is killed when the session ends.

use crate::chat_tui::{start, wait_turns, KIND};
use crate::support::chat::{answer, calls};
use crate::support::fake_provider::FakeProvider;
use crate::support::tmux::DEADLINE;
use crate::support::wait_until;
use crate::vistest;

/// The job's command: a sleep whose arguments no other process has.
const JOB: &str = "echo job-started; sleep 3217.25";

/// Whether a process runs `sleep 3217.25` (the job; it lives in the worker's PID namespace,
/// which the host's `/proc` sees too).
fn job_alive() -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten().any(|entry| {
        std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmd| cmd == b"sleep\x003217.25\x00")
    })
}

vistest!(ctrl_c_interrupts_job_wait_and_the_job_goes_on, |env| {
    let fake = FakeProvider::start();
    fake.push(calls(
        KIND,
        "a",
        &[&format!(
            "j = sh.background({JOB:?})\nprint('waiting on job', j.id)\nopen('waiting', 'w').close()\nj.wait()\nprint('wait returned')"
        )],
    ));
    fake.push(calls(
        KIND,
        "b",
        &["print([(j.id, j.running, j.tail(1).strip()) for j in jobs()])"],
    ));
    fake.push(answer(KIND, "The job still runs."));
    let tmux = start(&env, &fake, &[]);
    tmux.send_line("run the long job and wait");
    let waiting = env.workspace().join("waiting");
    assert!(
        wait_until(DEADLINE, || waiting.exists()),
        "the block did not reach wait()"
    );
    assert!(wait_until(DEADLINE, job_alive), "the job did not start");
    tmux.keys(&["C-c"]);
    let screen = wait_turns(&tmux, 1);
    // The wait was interrupted at once: the block ended interrupted, not by the job or a
    // timeout, and the turn ended without another request (the screen folds the traceback;
    // the next request, below, shows the model the KeyboardInterrupt).
    assert!(screen.contains("  ⎿ interrupted · "), "{screen}");
    assert!(
        !screen.lines().any(|l| l.trim() == "wait returned"),
        "{screen}"
    );
    assert!(screen.contains("⏹ turn 1 interrupted"), "{screen}");
    assert_eq!(fake.request_count(), 1);
    // The job goes on: the status line counts it, /jobs lists it, its process lives.
    assert!(screen.contains(" · 1 job running (/jobs)"), "{screen}");
    tmux.send_line("/jobs");
    tmux.wait_text(&format!("job 1    {JOB}  running"));
    assert!(job_alive());
    // The chat goes on; the model is told of the interrupted block and finds the job running.
    tmux.send_line("is the job still there?");
    let screen = wait_turns(&tmux, 2);
    assert!(screen.contains("The job still runs."), "{screen}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    let told = requests[1].body_str();
    assert!(
        told.contains("KeyboardInterrupt") && told.contains("waiting on job 1"),
        "{told}"
    );
    let listed = requests[2].body_str();
    assert!(listed.contains("[(1, True, 'job-started')]"), "{listed}");
    // The session's end kills the job.
    tmux.send_line("/exit");
    assert_eq!(tmux.wait_exit(), 0);
    assert!(
        wait_until(DEADLINE, || !job_alive()),
        "the job outlived the session"
    );
});
