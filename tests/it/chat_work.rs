//! `vis chat` and the work beside its turns (issue 27), in tmux as a person sees it: `show()`
//! prints the placeholder line (size, dimensions, caption) and never the image's bytes or the
//! escape sequences of an untrusted caption; a job that outlives its turn is in the status line
//! and in `/jobs`, running and then ended.

use crate::chat_tui::{start, wait_turns, KIND};
use crate::support::chat::{answer, calls};
use crate::support::fake_provider::FakeProvider;
use crate::vistest;

vistest!(
    chat_shows_an_image_placeholder_and_lists_running_jobs,
    |env| {
        let png = crate::images::image_bytes(120, 80, image::ImageFormat::Png);
        std::fs::write(env.workspace().join("plot.png"), &png).unwrap();
        let go = env.workspace().join("job-go");
        let job = format!(
            "while [ ! -e {} ]; do sleep 0.05; done; echo done",
            go.display()
        );
        fake_turn(&env, &job, png.len())
    }
);

fn fake_turn(env: &crate::support::TestEnv, job: &str, png_len: usize) {
    let fake = FakeProvider::start();
    let code = format!(
        "show('plot.png', caption='\\x1b]0;pwned\\x07 plot \\x1b[2J')\nj = sh.background({job:?})\nprint('job', j.id)"
    );
    fake.push(calls(KIND, "a", &[&code]));
    fake.push(answer(KIND, "Shown."));
    let tmux = start(env, &fake, &[]);
    tmux.send_line("plot it");
    let screen = wait_turns(&tmux, 1);
    // The placeholder line: dimensions, format, size, the caption with its controls escaped.
    let size = (png_len as u64).div_ceil(1024);
    let placeholder = format!("[image 120×80 PNG {size} KB: \\x1b]0;pwned\\x07 plot \\x1b[2J]");
    assert!(screen.contains(&placeholder), "{placeholder} in:\n{screen}");
    assert!(screen.contains("job 1"), "{screen}");
    // Nothing of the image's bytes, nothing the terminal obeyed.
    assert!(
        !screen.contains("IHDR") && !screen.contains("\u{FFFD}PNG"),
        "{screen}"
    );
    let title = tmux.pane("#{pane_title}");
    assert!(!title.contains("pwned"), "the title was set: {title}");
    assert!(
        screen.contains("plot it"),
        "the screen was not cleared:\n{screen}"
    );
    // The job runs on after the turn: the status line says so, `/jobs` lists it.
    assert!(screen.contains("· 1 job running (/jobs)"), "{screen}");
    tmux.send_line("/jobs");
    let screen = tmux.wait_for("/jobs listing the running job", |s| {
        s.lines()
            .any(|l| l.contains("job 1") && l.contains("job-go") && l.ends_with("running"))
    });
    assert!(!screen.contains("[vis] job 1 finished"), "{screen}");
    // It ends between turns; `/jobs` says how (asked again until the job's end has reached
    // the host's table: each listing is waited for before the next is asked).
    std::fs::write(env.workspace().join("job-go"), "").unwrap();
    let wanted = "[vis] job 1 finished: exit 0, 1 line";
    let listings = |s: &str| {
        s.lines()
            .filter(|l| l.contains("job 1") && l.contains("job-go"))
            .count()
    };
    let mut seen = listings(&tmux.screen());
    for _ in 0..200 {
        tmux.send_line("/jobs");
        let screen = tmux.wait_for("another /jobs listing", |s| listings(s) > seen);
        seen = listings(&screen);
        let last = screen
            .lines()
            .rfind(|l| l.contains("job 1") && l.contains("job-go"))
            .unwrap_or("")
            .to_string();
        if last.contains(wanted) {
            return;
        }
        assert!(last.ends_with("running"), "{last}");
    }
    panic!("/jobs never showed the job's end");
}

/// One turn of `vis chat` showing a 120×80 PNG with `config` as config.toml (the model is
/// `fake-model`);
/// the screen after it and the second request (the block's result on its way to the model).
fn show_turn(env: &crate::support::TestEnv, config: &str) -> (String, String) {
    let png = crate::images::image_bytes(120, 80, image::ImageFormat::Png);
    std::fs::write(env.workspace().join("plot.png"), &png).unwrap();
    std::fs::create_dir_all(env.config_dir()).unwrap();
    std::fs::write(env.config_dir().join("config.toml"), config).unwrap();
    let fake = FakeProvider::start();
    fake.push(calls(
        KIND,
        "a",
        &["show('plot.png', caption='\\x1b[31mred\\x1b[0m loss curve')"],
    ));
    fake.push(answer(KIND, "Seen."));
    let tmux = start(env, &fake, &[]);
    tmux.send_line("plot it");
    let screen = wait_turns(&tmux, 1);
    let second = fake.requests()[1].body_str();
    (screen, second)
}

vistest!(
    chat_says_when_an_image_was_not_sent_to_a_model_without_image_input,
    |env| {
        let (screen, sent) = show_turn(&env, "[provider]\nimages = false\n");
        let note = "[vis] image not sent: fake-model does not accept images (PNG 120×80, \\x1b[31mred\\x1b[0m loss curve)";
        assert!(screen.contains(note), "{note} in:\n{screen}");
        // Right under the block's placeholder line, before the model's answer.
        let lines: Vec<&str> = screen.lines().collect();
        let at = |what: &str| lines.iter().position(|l| l.contains(what)).unwrap();
        assert!(at("[image 120×80 PNG") < at(note), "{screen}");
        assert!(at(note) < at("Seen."), "{screen}");
        // What the model got: the same note, and no image.
        assert!(
            sent.contains("image not sent: fake-model does not accept images"),
            "{sent}"
        );
        assert!(!sent.contains("image_url"), "{sent}");
    }
);

vistest!(
    chat_says_nothing_of_the_kind_when_the_model_takes_the_image,
    |env| {
        let (screen, sent) = show_turn(&env, "[provider]\nimages = true\n");
        assert!(screen.contains("[image 120×80 PNG"), "{screen}");
        assert!(!screen.contains("not sent"), "{screen}");
        assert!(sent.contains("image_url"), "{sent}");
    }
);
