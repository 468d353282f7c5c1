//! A real headless Chromium for the web view's tests, driven over WebDriver: fantoccini
//! talking to Debian's `chromedriver`, which starts Debian's `chromium` with a fresh profile.
//! `scripts/test.sh` installs both when they are missing; without them the tests fail and say
//! so (they never pass silently).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{ClientBuilder, Locator};
use serde_json::{json, Value};

/// How long a wait for the page lasts before the test fails.
pub const PATIENCE: Duration = Duration::from_secs(15);

pub struct Browser {
    client: Option<fantoccini::Client>,
    driver: Child,
    profile: tempfile::TempDir,
}

fn program(var: &str, default: &str) -> PathBuf {
    let path = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default));
    assert!(
        path.exists(),
        "the web view's browser tests need Debian's chromium and chromium-driver, and {} is \
         missing: run scripts/test.sh (it installs them) or `apt-get install chromium \
         chromium-driver` (or point {var} at the program)",
        path.display()
    );
    path
}

/// Where screenshots go: `target/web-screenshots/`.
pub fn screenshot_dir() -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let dir = tmp.parent().unwrap_or(tmp).join("web-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

impl Browser {
    pub async fn start() -> Browser {
        let chromium = program("VIS_TEST_CHROMIUM", "/usr/bin/chromium");
        let chromedriver = program("VIS_TEST_CHROMEDRIVER", "/usr/bin/chromedriver");
        let profile = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = profile.path().join("chromedriver.log");
        let driver = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", log.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", chromedriver.display()));
        let mut browser = Browser {
            client: None,
            driver,
            profile,
        };
        let deadline = Instant::now() + PATIENCE;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "chromedriver did not listen on port {port}: {}",
                browser.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let data_dir = browser.profile.path().join("chromium");
        // As root on a machine without network: no sandbox, no GPU, nothing that phones home.
        let args = [
            "--headless".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--no-default-browser-check".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-extensions".into(),
            "--window-size=1360,1000".into(),
            "--lang=en-US".into(),
            format!("--user-data-dir={}", data_dir.display()),
        ];
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args},
        });
        let caps = caps.as_object().cloned().unwrap();
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "chromium did not start under chromedriver: {e}\n{}",
                    browser.log()
                )
            });
        browser.client = Some(client);
        browser
    }

    fn log(&self) -> String {
        let text = std::fs::read_to_string(self.profile.path().join("chromedriver.log"))
            .unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(30).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    pub fn client(&self) -> &fantoccini::Client {
        self.client.as_ref().unwrap()
    }

    pub async fn goto(&self, url: &str) {
        self.client().goto(url).await.unwrap();
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page.
    pub async fn js(&self, script: &str, args: Vec<Value>) -> Value {
        self.client()
            .execute(script, args)
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// The rendered text of the first element matching `css` ("" when there is none).
    pub async fn text(&self, css: &str) -> String {
        self.js(
            "const e = document.querySelector(arguments[0]); return e ? e.innerText : '';",
            vec![json!(css)],
        )
        .await
        .as_str()
        .unwrap_or_default()
        .to_string()
    }

    pub async fn count(&self, css: &str) -> usize {
        self.js(
            "return document.querySelectorAll(arguments[0]).length;",
            vec![json!(css)],
        )
        .await
        .as_u64()
        .unwrap_or(0) as usize
    }

    /// Waits until the text of `css` contains `needle`; returns that text.
    pub async fn wait_text(&self, css: &str, needle: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let text = self.text(css).await;
            if text.contains(needle) {
                return text;
            }
            if Instant::now() >= deadline {
                self.screenshot("failed").await;
                panic!("{css} never showed {needle:?}; it shows:\n{text}");
            }
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
    }

    /// Waits until `script` (a function body) returns a truthy value.
    pub async fn wait_js(&self, what: &str, script: &str) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let v = self.js(script, vec![]).await;
            let truthy = match &v {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy {
                return v;
            }
            if Instant::now() >= deadline {
                self.screenshot("failed").await;
                panic!("waited in vain for {what}");
            }
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
    }

    /// A real click (WebDriver's), after scrolling the element to the middle of the window.
    pub async fn click(&self, css: &str) {
        self.js(
            "const e = document.querySelector(arguments[0]); if (e) e.scrollIntoView({block: 'center'});",
            vec![json!(css)],
        )
        .await;
        let el = self
            .client()
            .wait()
            .at_most(PATIENCE)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css} to click: {e}"));
        el.click()
            .await
            .unwrap_or_else(|e| panic!("clicking {css}: {e}"));
    }

    /// Types into the element matching `css` (real key events).
    pub async fn type_into(&self, css: &str, text: &str) {
        let el = self
            .client()
            .wait()
            .at_most(PATIENCE)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css} to type into: {e}"));
        el.send_keys(text).await.unwrap();
    }

    /// Saves the window as `target/web-screenshots/NAME.png`.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client().screenshot().await.unwrap();
        let path = screenshot_dir().join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }

    /// Ends the browser session (chromedriver stops chromium) and chromedriver.
    pub async fn close(mut self) {
        if let Some(client) = self.client.take() {
            let _ = client.close().await;
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        // A chromium left behind by a failed test: ours are the ones using our profile.
        let marker = self.profile.path().to_string_lossy().into_owned();
        for pid in crate::support::pids_with(&marker) {
            // SAFETY: sending a signal to a pid we found running with our own profile.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}
