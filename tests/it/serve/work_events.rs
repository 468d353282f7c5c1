//! The events of the work a block starts, as the real `vis serve` streams them (issue 27):
//! `job_started` and `job_finished` for a background job, `child_started` and
//! `child_finished` for a sub-session, and `block_finished`'s images with the note a model
//! without image input read instead (`[provider] images = false`), also sent as a `notice`.

use serde_json::{json, Value};

use super::{Client, OPENAI};
use crate::support::chat::{answer, calls, events};
use crate::support::fake_provider::FakeProvider;
use crate::support::serve::{read_events, ServeProcess, Sse};
use crate::vistest;

fn the<'a>(evs: &'a [Sse], kind: &str) -> Vec<&'a Value> {
    evs.iter()
        .filter(|e| e.event == kind)
        .map(|e| &e.data)
        .collect()
}

vistest!(
    the_stream_reports_a_blocks_job_child_and_unsent_image,
    |env| {
        let fake = FakeProvider::start();
        std::fs::create_dir_all(env.config_dir()).unwrap();
        std::fs::write(
            env.config_dir().join("config.toml"),
            format!(
                "[provider]\nname = \"openai\"\nmodel = \"fake-model\"\nbase_url = \"{}\"\nmax_retries = 0\nimages = false\n",
                fake.base_url(OPENAI)
            ),
        )
        .unwrap();
        let png = crate::images::image_bytes(40, 30, image::ImageFormat::Png);
        std::fs::write(env.workspace().join("dot.png"), &png).unwrap();
        fake.conversation("CHILD-E", vec![answer(OPENAI, "hi from the child")]);
        fake.push(calls(
            OPENAI,
            "a",
            &["j = sh.background('echo job-out; exit 4')\ns = spawn('CHILD-E: say hi')\nprint(s.wait())\nprint('job exit', j.wait(30))\nshow('dot.png', caption='a dot')"],
        ));
        fake.push(answer(OPENAI, "All done."));
        let server = ServeProcess::start(env.command(&["serve"]));
        let token = std::fs::read_to_string(vis::config::serve_token_path(&env.db())).unwrap();
        events().block_on(async {
            let c = Client::at(&server.url, Some(token.trim()));
            let id = c.create(&env).await;
            let evs = read_events(c.turn(&id, "work").await, 1000).await;
            let kinds: Vec<&str> = evs.iter().map(|e| e.event.as_str()).collect();
            assert_eq!(evs.last().unwrap().data["status"], "done", "{kinds:?}");

            let started = the(&evs, "job_started");
            assert_eq!(started.len(), 1, "{kinds:?}");
            assert_eq!(started[0]["id"], json!(1));
            assert_eq!(started[0]["command"], "echo job-out; exit 4");
            assert!(
                started[0]["artifact"]
                    .as_str()
                    .is_some_and(|a| !a.is_empty()),
                "{}",
                started[0]
            );
            let finished = the(&evs, "job_finished");
            assert_eq!(finished.len(), 1, "{kinds:?}");
            assert_eq!(finished[0]["id"], json!(1));
            assert_eq!(finished[0]["exit_code"], json!(4));
            assert_eq!(finished[0]["lost"], json!(false));
            assert!(
                finished[0]["line"]
                    .as_str()
                    .unwrap()
                    .contains("job 1 finished: exit 4"),
                "{}",
                finished[0]
            );

            let child_started = the(&evs, "child_started");
            assert_eq!(child_started.len(), 1, "{kinds:?}");
            let child = child_started[0]["child"].as_str().unwrap().to_string();
            assert_ne!(child, id);
            assert_eq!(
                (&child_started[0]["turn"], &child_started[0]["iteration"]),
                (&json!(1), &json!(1))
            );
            assert_eq!(child_started[0]["task"], "CHILD-E: say hi");
            let child_finished = the(&evs, "child_finished");
            assert_eq!(child_finished.len(), 1, "{kinds:?}");
            assert_eq!(child_finished[0]["child"], json!(child));
            assert_eq!(child_finished[0]["status"], "done");
            assert_eq!(child_finished[0]["answer"], "hi from the child");
            let at = |kind: &str| kinds.iter().position(|k| *k == kind).unwrap();
            assert!(
                at("child_started") < at("child_finished")
                    && at("child_finished") < at("block_finished"),
                "{kinds:?}"
            );

            let note = "[vis] image not sent: fake-model does not accept images (PNG 40×30, a dot)";
            let block = the(&evs, "block_finished");
            assert_eq!(block.len(), 1);
            assert!(
                block[0]["output"]
                    .as_str()
                    .unwrap()
                    .contains("hi from the child\njob exit 4\n"),
                "{}",
                block[0]
            );
            assert_eq!(block[0]["images"][0]["not_sent"], note, "{}", block[0]);
            let notices = the(&evs, "notice");
            assert!(notices.iter().any(|n| n["text"] == note), "{notices:?}");
        });
        // The child is a session of its own in the API, linked to its parent.
        events().block_on(async {
            let c = Client::at(&server.url, Some(token.trim()));
            let (_, list) = c.json(reqwest::Method::GET, "/api/sessions", None).await;
            assert_eq!(list.as_array().unwrap().len(), 2, "{list}");
        });
    }
);
