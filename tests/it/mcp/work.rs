//! Images and background jobs through `vis mcp` (issue 27 §1, §2), driven by the official MCP
//! Python SDK client: `show()` in a `python_execution` call comes back as an MCP `image`
//! content item after the text (the bytes as validated, the caption as text), and a job started
//! in one call outlives it, is listed, waited for and read in the next.

use serde_json::{json, Value};

use crate::support::mcp::drive;
use crate::vistest;

vistest!(show_and_a_background_job_work_through_vis_mcp, |env| {
    let png = crate::images::image_bytes(120, 80, image::ImageFormat::Png);
    std::fs::write(env.workspace().join("plot.png"), &png).unwrap();
    let v = drive(
        &env,
        &["--session", "mcp-work"],
        r#"
import base64
res = await s.call_tool("python_execution", {"code": "show('plot.png', caption='<b>loss</b> curve')\nprint('shown')"})
items = []
for c in res.content:
    if c.type == "image":
        items.append(["image", c.mime_type, base64.b64decode(c.data) == open("plot.png", "rb").read()])
    else:
        items.append([c.type, c.text])
out("show", {"is_error": bool(res.is_error), "items": items})
out("start", await call("j = sh.background('printf \"one\\\\ntwo\\\\n\"; sleep 0.3; exit 3')\nprint('job', j.id, j.running)"))
out("later", await call("j = jobs()[0]\nprint('exit', j.wait(30))\nprint('running', j.running)\nprint(j.tail())"))
"#,
    );
    let show = &v["show"];
    assert_eq!(show["is_error"], json!(false), "{v}");
    let items = show["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{show}");
    // The text first: what the block printed, the placeholder line included.
    let text = items[0][1].as_str().unwrap();
    assert_eq!(items[0][0], "text");
    assert!(
        text.contains("[image 120×80 PNG")
            && text.contains("<b>loss</b> curve]")
            && text.contains("shown"),
        "{text}"
    );
    // Then the image itself, as the validated PNG.
    assert_eq!(items[1], json!(["image", "image/png", true]), "{show}");

    let start = &v["start"];
    assert_eq!(start["is_error"], json!(false), "{start}");
    assert!(
        start["text"].as_str().unwrap().starts_with("job 1 True"),
        "{start}"
    );
    let later: &Value = &v["later"];
    assert_eq!(later["is_error"], json!(false), "{later}");
    let out = later["text"].as_str().unwrap();
    assert!(out.starts_with("exit 3\nrunning False\n"), "{out}");
    assert!(out.contains("one\ntwo"), "{out}");
    assert_eq!(v["stream_errors"], json!([]));
});
