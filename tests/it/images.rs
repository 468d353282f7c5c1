//! Images to the model (issue 27 §2): `show()` in real blocks (the worker binary and its
//! interpreter) through the agent loop against the fake provider, whose recorded request
//! bodies are checked: Anthropic's image block inside the tool result, OpenAI's user message
//! after the tool messages, the note for a model without image input, the scaling to the
//! limits, bad inputs, folding and resume.

use std::io::Cursor;

use base64::Engine;
use serde_json::Value;
use vis::gateway::ChatSession;
use vis::protocol::{Event, TurnStatus};
use vis::providers::ProviderKind;
use vis::store::Store;

use crate::support::chat::{answer, calls, events, messages, new_session, settings, turn, KINDS};
use crate::support::fake_provider::FakeProvider;
use crate::support::TestEnv;
use crate::vistest;

/// A `width`×`height` image in `format`, with content (so scaling changes it).
pub(crate) fn image_bytes(width: u32, height: u32, format: image::ImageFormat) -> Vec<u8> {
    let img = image::DynamicImage::ImageRgb8(image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([
            (x * 7 % 256) as u8,
            (y * 3 % 256) as u8,
            ((x + y) % 256) as u8,
        ])
    }));
    let mut out = Cursor::new(Vec::new());
    match format {
        image::ImageFormat::WebP => image::DynamicImage::ImageRgba8(img.to_rgba8())
            .write_to(&mut out, format)
            .unwrap(),
        _ => img.write_to(&mut out, format).unwrap(),
    }
    out.into_inner()
}

fn unb64(text: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap()
}

/// The images of a request body, in order: (media type, bytes), for either wire.
fn sent_images(body: &Value) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for m in body["messages"].as_array().unwrap() {
        let Some(parts) = m["content"].as_array() else {
            continue;
        };
        for part in parts {
            // Anthropic: inside tool_result blocks.
            if let Some(inner) = part["content"].as_array() {
                for b in inner.iter().filter(|b| b["type"] == "image") {
                    out.push((
                        b["source"]["media_type"].as_str().unwrap().to_string(),
                        unb64(b["source"]["data"].as_str().unwrap()),
                    ));
                }
            }
            if part["type"] == "image_url" {
                let url = part["image_url"]["url"].as_str().unwrap();
                let (head, data) = url.split_once(";base64,").unwrap();
                out.push((head.trim_start_matches("data:").to_string(), unb64(data)));
            }
        }
    }
    out
}

fn dimensions(bytes: &[u8]) -> (u32, u32) {
    image::ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .unwrap()
        .into_dimensions()
        .unwrap()
}

/// Images stored in the session's database.
fn stored_images(env: &TestEnv) -> i64 {
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    conn.query_row("SELECT count(*) FROM images", [], |r| r.get(0))
        .unwrap()
}

fn output_of(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            Event::BlockFinished { output, .. } => Some(output.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n---\n")
}

vistest!(
    show_of_a_png_reaches_both_providers_inside_the_tool_result,
    |env| {
        let rt = events();
        let png = image_bytes(80, 60, image::ImageFormat::Png);
        std::fs::write(env.workspace().join("plot.png"), &png).unwrap();
        for kind in KINDS {
            let fake = FakeProvider::start();
            fake.push(calls(
                kind,
                "a",
                &["print('before')\nshow('plot.png', 'the plot')"],
            ));
            fake.push(answer(kind, "I see it."));
            let mut s = settings(&env, &fake, kind);
            s.provider.images = Some(true);
            let id = format!("png-{}", kind.as_str());
            let mut session = new_session(&env, s, &id);
            let (end, events) = turn(&rt, &mut session, "look at the plot");
            assert_eq!(end.status, TurnStatus::Done, "{events:?}");
            let output = output_of(&events);
            assert!(
                output.contains("[image 80×60 PNG ") && output.contains(": the plot]"),
                "{output}"
            );
            let finished = events.iter().find_map(|e| match e {
                Event::BlockFinished { images, .. } => Some(images.clone()),
                _ => None,
            });
            assert_eq!(finished.unwrap().len(), 1);
            let reqs = fake.requests();
            let body = reqs[1].json();
            // The image travels byte for byte (it was within the limits).
            assert_eq!(sent_images(&body), [("image/png".to_string(), png.clone())]);
            let messages = body["messages"].as_array().unwrap();
            match kind {
                ProviderKind::Anthropic => {
                    let last = messages.last().unwrap();
                    assert_eq!(last["role"], "user");
                    let result = &last["content"][0];
                    assert_eq!(result["type"], "tool_result");
                    assert_eq!(result["content"][0]["type"], "text");
                    assert!(result["content"][0]["text"]
                        .as_str()
                        .unwrap()
                        .contains("before"));
                    assert_eq!(result["content"][1]["type"], "image");
                    assert_eq!(result["content"][1]["source"]["type"], "base64");
                }
                ProviderKind::OpenAi => {
                    let n = messages.len();
                    assert_eq!(messages[n - 2]["role"], "tool");
                    assert!(messages[n - 2]["content"].is_string());
                    assert_eq!(messages[n - 1]["role"], "user");
                    assert_eq!(messages[n - 1]["content"][2]["type"], "image_url");
                    assert!(messages[n - 1]["content"][2]["image_url"]["url"]
                        .as_str()
                        .unwrap()
                        .starts_with("data:image/png;base64,"));
                }
            }
            // The estimate counts the image (80×60 is 85 + 170 tokens on OpenAI's scale).
            let store = Store::open(&env.db()).unwrap();
            let history = store.history(&id).unwrap();
            let result = history.iter().find(|h| !h.images.is_empty()).unwrap();
            assert_eq!(result.images[0].width, 80);
            assert!(result.tokens >= 255, "{}", result.tokens);
        }
        // One row per distinct image: both sessions showed the same bytes.
        assert_eq!(stored_images(&env), 1);
    }
);

vistest!(
    parallel_calls_get_one_user_message_after_all_tool_messages,
    |env| {
        let rt = events();
        let png = image_bytes(20, 10, image::ImageFormat::Png);
        std::fs::write(env.workspace().join("a.png"), &png).unwrap();
        let fake = FakeProvider::start();
        let kind = ProviderKind::OpenAi;
        fake.push(calls(kind, "a", &["show('a.png')", "print('second')"]));
        fake.push(answer(kind, "ok"));
        let mut s = settings(&env, &fake, kind);
        s.provider.images = Some(true);
        let mut session = new_session(&env, s, "parallel");
        let (end, events) = turn(&rt, &mut session, "go");
        assert_eq!(end.status, TurnStatus::Done, "{events:?}");
        let body = fake.requests()[1].json();
        let roles: Vec<&str> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(
            roles,
            ["system", "user", "assistant", "tool", "tool", "user"]
        );
        assert_eq!(sent_images(&body).len(), 1);
    }
);

vistest!(
    an_image_over_the_cap_is_scaled_down_before_it_is_sent,
    |env| {
        let rt = events();
        let big = image_bytes(900, 300, image::ImageFormat::Png);
        std::fs::write(env.workspace().join("wide.png"), &big).unwrap();
        for kind in KINDS {
            let fake = FakeProvider::start();
            fake.push(calls(
                kind,
                "a",
                &["r = show('wide.png')\nprint(r['resized_from'])"],
            ));
            fake.push(answer(kind, "ok"));
            let mut s = settings(&env, &fake, kind);
            s.provider.images = Some(true);
            s.images.max_edge = 300;
            let mut session = new_session(&env, s, &format!("big-{}", kind.as_str()));
            let (_, events) = turn(&rt, &mut session, "go");
            let output = output_of(&events);
            assert!(output.contains("[image 300×100 PNG"), "{output}");
            assert!(output.contains("resized from 900×300"), "{output}");
            let sent = sent_images(&fake.requests()[1].json());
            assert_eq!(sent.len(), 1);
            assert_eq!(dimensions(&sent[0].1), (300, 100));
        }
    }
);

vistest!(
    a_model_without_image_input_gets_a_note_and_no_image,
    |env| {
        let rt = events();
        let png = image_bytes(30, 20, image::ImageFormat::Png);
        std::fs::write(env.workspace().join("p.png"), &png).unwrap();
        for kind in KINDS {
            let fake = FakeProvider::start();
            fake.push(calls(kind, "a", &["show('p.png', 'chart')"]));
            fake.push(answer(kind, "ok"));
            let mut s = settings(&env, &fake, kind);
            s.provider.images = Some(false);
            let model = s.provider.model.clone();
            let mut session = new_session(&env, s, &format!("noimg-{}", kind.as_str()));
            let (end, _) = turn(&rt, &mut session, "go");
            assert_eq!(end.status, TurnStatus::Done);
            let raw = fake.requests()[1].body_str();
            let body: Value = serde_json::from_str(&raw).unwrap();
            assert!(sent_images(&body).is_empty());
            assert!(!raw.contains("image_url") && !raw.contains("\"type\":\"image\""));
            let note =
                format!("[vis] image not sent: {model} does not accept images (PNG 30×20, chart)");
            assert!(raw.contains(&note), "{raw}");
        }
    }
);

vistest!(bytes_of_each_format_and_a_figure_are_shown, |env| {
    let rt = events();
    for (name, format, label) in [
        ("i.png", image::ImageFormat::Png, "PNG"),
        ("i.jpg", image::ImageFormat::Jpeg, "JPEG"),
        ("i.gif", image::ImageFormat::Gif, "GIF"),
        ("i.webp", image::ImageFormat::WebP, "WebP"),
    ] {
        std::fs::write(env.workspace().join(name), image_bytes(16, 12, format)).unwrap();
        // Detected by the bytes, not the name: the same bytes under a misleading name.
        std::fs::write(
            env.workspace().join(format!("{name}.txt")),
            image_bytes(16, 12, format),
        )
        .unwrap();
        let _ = label;
    }
    let kind = ProviderKind::Anthropic;
    let fake = FakeProvider::start();
    // The figure path: matplotlib is not in the worker's Python here, so a duck-typed object
    // with Matplotlib's savefig(buffer, format="png") stands in for a figure.
    let code = "from pathlib import Path\n\
        for n in ['i.png', 'i.jpg', 'i.gif', 'i.webp']:\n    show(Path(n + '.txt').read_bytes(), n)\n\
        class Fig:\n    def savefig(self, buf, format):\n        assert format == 'png'\n        buf.write(Path('i.png').read_bytes())\n\
        show(Fig(), 'figure')";
    fake.push(calls(kind, "a", &[code]));
    fake.push(answer(kind, "ok"));
    let mut s = settings(&env, &fake, kind);
    s.provider.images = Some(true);
    let mut session = new_session(&env, s, "formats");
    let (_, events) = turn(&rt, &mut session, "go");
    let output = output_of(&events);
    for label in ["PNG", "JPEG", "GIF", "WebP"] {
        assert!(
            output.contains(&format!("16×12 {label}")),
            "{label}: {output}"
        );
    }
    assert!(output.contains(": figure]"), "{output}");
    let media: Vec<String> = sent_images(&fake.requests()[1].json())
        .into_iter()
        .map(|(m, _)| m)
        .collect();
    assert_eq!(
        media,
        [
            "image/png",
            "image/jpeg",
            "image/gif",
            "image/webp",
            "image/png"
        ]
    );
});

vistest!(
    bad_inputs_are_refused_with_their_cause_and_nothing_is_stored,
    |env| {
        let rt = events();
        let png = image_bytes(64, 64, image::ImageFormat::Png);
        std::fs::write(env.workspace().join("half.png"), &png[..png.len() / 2]).unwrap();
        std::fs::write(env.workspace().join("notes.png"), "just text").unwrap();
        let outside = env.path().join("outside.png");
        std::fs::write(&outside, &png).unwrap();
        let code = format!(
            "for arg in ['notes.png', 'half.png', {outside:?}, 42, b'GIF89a']:\n    \
         try:\n        show(arg)\n    except Exception as e:\n        print(type(e).__name__, e)\n"
        );
        let kind = ProviderKind::OpenAi;
        let fake = FakeProvider::start();
        fake.push(calls(kind, "a", &[&code]));
        fake.push(answer(kind, "ok"));
        let mut s = settings(&env, &fake, kind);
        s.provider.images = Some(true);
        let mut session = new_session(&env, s, "bad");
        let (_, events) = turn(&rt, &mut session, "go");
        let output = output_of(&events);
        let lines: Vec<&str> = output.lines().collect();
        assert!(
        lines[0].starts_with("RuntimeError show(): not an image: the data starts with \"just text\"; show() takes PNG, JPEG, GIF or WebP"),
        "{output}"
    );
        assert!(
            lines[1].contains("the PNG image is damaged or truncated"),
            "{output}"
        );
        assert!(
            lines[2].starts_with("PermissionError") && lines[2].contains("outside the workspace"),
            "{output}"
        );
        assert!(
            lines[3].starts_with("TypeError show() takes a path"),
            "{output}"
        );
        assert!(
            lines[4].contains("GIF image is damaged or truncated"),
            "{output}"
        );
        assert_eq!(stored_images(&env), 0);
        let raw = fake.requests()[1].body_str();
        assert!(!raw.contains("image_url"));
    }
);

vistest!(
    too_many_images_in_one_block_are_refused_past_the_cap,
    |env| {
        let rt = events();
        let kind = ProviderKind::Anthropic;
        let fake = FakeProvider::start();
        let code = "from pathlib import Path\nfor i in range(3):\n    \
        try:\n        show(Path('p%d.png' % i).read_bytes())\n    except Exception as e:\n        print('ERR', e)\n";
        for i in 0..3 {
            std::fs::write(
                env.workspace().join(format!("p{i}.png")),
                image_bytes(10 + i, 10, image::ImageFormat::Png),
            )
            .unwrap();
        }
        fake.push(calls(kind, "a", &[code]));
        fake.push(answer(kind, "ok"));
        let mut s = settings(&env, &fake, kind);
        s.provider.images = Some(true);
        s.images.max_per_block = 2;
        let mut session = new_session(&env, s, "many");
        let (_, events) = turn(&rt, &mut session, "go");
        let output = output_of(&events);
        assert!(
        output.contains("ERR show(): this block already showed 2 images, the most one block may show ([images] max_per_block)"),
        "{output}"
    );
        assert_eq!(sent_images(&fake.requests()[1].json()).len(), 2);
        assert_eq!(stored_images(&env), 2);
    }
);

vistest!(
    a_folded_image_result_is_no_longer_sent_and_the_fold_says_so,
    |env| {
        let rt = events();
        let png = image_bytes(40, 30, image::ImageFormat::Png);
        std::fs::write(env.workspace().join("p.png"), &png).unwrap();
        for kind in KINDS {
            let fake = FakeProvider::start();
            fake.push(calls(kind, "a", &["show('p.png', 'old plot')"]));
            fake.push(answer(kind, "seen"));
            fake.push(calls(
                kind,
                "b",
                &["print(fold_session('t1', 'looked at the old plot'))"],
            ));
            fake.push(answer(kind, "folded"));
            let mut s = settings(&env, &fake, kind);
            s.provider.images = Some(true);
            let mut session = new_session(&env, s, &format!("fold-{}", kind.as_str()));
            turn(&rt, &mut session, "show it");
            let (end, events) = turn(&rt, &mut session, "fold it");
            assert_eq!(end.status, TurnStatus::Done, "{events:?}");
            let reqs = fake.requests();
            assert_eq!(sent_images(&reqs[2].json()).len(), 1);
            let last = reqs.last().unwrap();
            assert!(sent_images(&last.json()).is_empty());
            let raw = last.body_str();
            assert!(
                raw.contains("[it showed an image (40×30 PNG), no longer sent]"),
                "{raw}"
            );
        }
    }
);

vistest!(a_resumed_session_sends_the_same_image_bytes, |env| {
    let rt = events();
    let big = image_bytes(700, 500, image::ImageFormat::Png);
    std::fs::write(env.workspace().join("p.png"), &big).unwrap();
    for kind in KINDS {
        let fake = FakeProvider::start();
        fake.push(calls(kind, "a", &["show('p.png')"]));
        fake.push(answer(kind, "seen"));
        fake.push(answer(kind, "again"));
        let mut s = settings(&env, &fake, kind);
        s.provider.images = Some(true);
        s.images.max_edge = 350;
        let id = format!("resume-{}", kind.as_str());
        let mut session = new_session(&env, s.clone(), &id);
        turn(&rt, &mut session, "show it");
        drop(session);
        let store = Store::open(&env.db()).unwrap();
        let (mut session, _) = ChatSession::open(store, &env.db(), &id, s).unwrap();
        turn(&rt, &mut session, "and now?");
        let reqs = fake.requests();
        let images = sent_images(&reqs[1].json());
        assert_eq!(images.len(), 1);
        assert_eq!(sent_images(&reqs[2].json()), images);
        // The earlier messages are identical (the image is encoded from the stored bytes).
        let before = messages(&reqs[1].body);
        let after = messages(&reqs[2].body);
        assert_eq!(before[..], after[..before.len()], "{kind}");
    }
});

vistest!(resume_reads_no_bytes_of_a_folded_image, |env| {
    let rt = events();
    let png = image_bytes(64, 48, image::ImageFormat::Png);
    std::fs::write(env.workspace().join("p.png"), &png).unwrap();
    let kind = ProviderKind::Anthropic;
    let fake = FakeProvider::start();
    fake.push(calls(kind, "a", &["show('p.png')"]));
    fake.push(answer(kind, "seen"));
    fake.push(calls(
        kind,
        "b",
        &["print(fold_session('t1', 'GIST: turn 1 showed p.png')['fold'])"],
    ));
    fake.push(answer(kind, "folded"));
    fake.push(answer(kind, "resumed"));
    let mut s = settings(&env, &fake, kind);
    s.provider.images = Some(true);
    let id = "folded-image";
    let mut session = new_session(&env, s.clone(), id);
    turn(&rt, &mut session, "show it");
    let (end, _) = turn(&rt, &mut session, "fold it");
    assert_eq!(end.status, TurnStatus::Done, "{end:?}");
    drop(session);
    // The folded image's bytes go (a store pruned by hand, or a row lost): the conversation
    // never sends them again, so resuming must not read them.
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    assert_eq!(conn.execute("DELETE FROM images", []).unwrap(), 1);
    drop(conn);
    let store = Store::open(&env.db()).unwrap();
    let (mut session, _) = ChatSession::open(store, &env.db(), id, s.clone()).unwrap();
    let (end, _) = turn(&rt, &mut session, "and now?");
    assert_eq!(end.status, TurnStatus::Done, "{end:?}");
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 5);
    assert_eq!(
        sent_images(&reqs[1].json()).len(),
        1,
        "shown before the fold"
    );
    let last = reqs[4].body_str();
    assert!(sent_images(&reqs[4].json()).is_empty(), "{last}");
    assert!(last.contains("GIST: turn 1 showed p.png"), "{last}");
    drop(session);
    // An image a request still carries is read, and its loss is named.
    let fake = FakeProvider::start();
    fake.push(calls(kind, "c", &["show('p.png')"]));
    fake.push(answer(kind, "seen again"));
    let mut s = settings(&env, &fake, kind);
    s.provider.images = Some(true);
    let mut session = new_session(&env, s.clone(), "unfolded-image");
    turn(&rt, &mut session, "show it");
    drop(session);
    let conn = rusqlite::Connection::open(env.db()).unwrap();
    assert_eq!(conn.execute("DELETE FROM images", []).unwrap(), 1);
    drop(conn);
    let store = Store::open(&env.db()).unwrap();
    let err = ChatSession::open(store, &env.db(), "unfolded-image", s)
        .err()
        .expect("an image the conversation carries is missing");
    let hash = blake3::hash(&png).to_hex().to_string();
    assert!(
        err.to_string()
            .contains(&format!("image {hash} is not in the store")),
        "{err}"
    );
});
