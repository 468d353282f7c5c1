//! Who may talk to the server, checked on every request before any handler runs:
//!
//! 1. `Host` must be a loopback name (`localhost`, `127.0.0.0/8`, `::1`), the address the
//!    connection came in on, or `[serve] public_name`. A page on another name that resolves
//!    here (DNS rebinding) is refused before it reaches anything.
//! 2. Every route needs the token, loopback included — `/openapi.json` and `/metrics` too —
//!    except the page itself (`/` and its modules at their fixed paths under `/web/`, which hold
//!    no data) and the login routes. The token comes as `Authorization: Bearer …`, or as the
//!    session cookie the web view got in exchange for a one-time login code (or for the token,
//!    through its login form).
//! 3. A request that changes something (any method but GET and HEAD) must send its body as
//!    `application/json` (an HTML form or a `text/plain` fetch cannot), and its `Origin`, if
//!    any, must be this server's own. A cookie-carrying one must have an `Origin`; browsers
//!    always send it, and only a browser holds the cookie.
//!
//! Cookies are scoped by host name, not port: a browser sends this one to any server on the
//! same name. The Origin check (which includes the port) keeps pages of such servers from
//! using it; what it cannot stop — a person browsing to such a server, which then reads the
//! cookie — is documented in docs/serve.md.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::api::ApiError;
use super::token::{random_hex, ServeToken, TokenError};
use super::App;

/// Login codes minted and not used yet (older ones are forgotten).
const MAX_PENDING_CODES: usize = 16;
/// Logged-in browsers kept (the oldest is logged out beyond this).
const MAX_COOKIE_SESSIONS: usize = 64;

/// The address a connection came in on (set by the listener on every request).
#[derive(Debug, Clone, Copy)]
pub struct LocalAddr(pub SocketAddr);

/// How a request proved it may be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Credential {
    Bearer,
    Cookie,
}

/// The token, the names this server answers to, one-time login codes and logged-in browsers.
pub struct Access {
    token: ServeToken,
    /// `[serve] public_name`'s host part, lowercase.
    public_host: Option<String>,
    cookie_name: String,
    /// blake3 hashes of codes not used yet, oldest first.
    codes: Mutex<VecDeque<[u8; 32]>>,
    /// blake3 hashes of the cookies of logged-in browsers, oldest first.
    cookies: Mutex<VecDeque<[u8; 32]>>,
    /// The host of `[serve] advertise`: the name other nodes send requests to.
    peer_host: std::sync::OnceLock<String>,
}

impl Access {
    /// `port` names the cookie, so servers on other ports of one host keep their own.
    pub fn new(token: ServeToken, public_name: Option<&str>, port: u16) -> Access {
        Access {
            token,
            public_host: public_name.map(|n| host_name(&n.to_ascii_lowercase()).to_string()),
            cookie_name: format!("vis-session-{port}"),
            codes: Mutex::new(VecDeque::new()),
            cookies: Mutex::new(VecDeque::new()),
            peer_host: std::sync::OnceLock::new(),
        }
    }

    /// Accepts `host` (the advertised address's) in `Host`, as other nodes send it.
    pub fn answer_to_peer_name(&self, host: &str) {
        let _ = self
            .peer_host
            .set(host_name(&host.to_ascii_lowercase()).to_string());
    }

    pub fn token(&self) -> &ServeToken {
        &self.token
    }

    pub fn cookie_name(&self) -> &str {
        &self.cookie_name
    }

    /// A new one-time login URL under `base` (`http://host:port`): opening it logs a browser
    /// in, once.
    pub fn login_url(&self, base: &str) -> Result<String, TokenError> {
        let code = random_hex(32)?;
        push_capped(&self.codes, digest(&code), MAX_PENDING_CODES);
        Ok(format!("{}/login?code={code}", base.trim_end_matches('/')))
    }

    /// Uses up `code`; true when it was a pending one.
    pub(super) fn redeem(&self, code: &str) -> bool {
        take(&self.codes, &digest(code))
    }

    /// A new logged-in browser: the cookie's value.
    pub(super) fn open_cookie_session(&self) -> Result<String, TokenError> {
        let value = random_hex(32)?;
        push_capped(&self.cookies, digest(&value), MAX_COOKIE_SESSIONS);
        Ok(value)
    }

    pub(super) fn close_cookie_session(&self, headers: &HeaderMap) {
        if let Some(value) = self.cookie_of(headers) {
            take(&self.cookies, &digest(value));
        }
    }

    fn cookie_valid(&self, value: &str) -> bool {
        let wanted = digest(value);
        self.cookies
            .lock()
            .map(|c| c.iter().any(|k| *k == wanted))
            .unwrap_or(false)
    }

    /// This server's cookie in the request, if any.
    fn cookie_of<'a>(&self, headers: &'a HeaderMap) -> Option<&'a str> {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(name, _)| *name == self.cookie_name)
            .map(|(_, value)| value)
    }

    fn credential(&self, headers: &HeaderMap) -> Option<Credential> {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.get(..7)
                    .filter(|s| s.eq_ignore_ascii_case("bearer "))
                    .map(|_| &v[7..])
            });
        if let Some(given) = bearer {
            // A wrong bearer token is not rescued by a cookie.
            return self
                .token
                .matches(given.trim())
                .then_some(Credential::Bearer);
        }
        self.cookie_of(headers)
            .filter(|v| self.cookie_valid(v))
            .map(|_| Credential::Cookie)
    }

    /// A `Host` (lowercase) this server answers to (its port is not checked: a rebinding page cannot
    /// choose the name, which is what matters).
    fn host_allowed(&self, host: &str, local: Option<IpAddr>) -> bool {
        let name = host_name(host);
        if name == "localhost" {
            return true;
        }
        if let Ok(ip) = name.parse::<IpAddr>() {
            let ip = ip.to_canonical();
            return ip.is_loopback() || Some(ip) == local.map(|l| l.to_canonical());
        }
        self.public_host.as_deref() == Some(name)
            || self.peer_host.get().map(String::as_str) == Some(name)
    }

    /// An `Origin` of this server: the scheme and the very `Host` the request came to (port
    /// included), or the public name.
    fn origin_allowed(&self, origin: &str, host: &str) -> bool {
        let Some(authority) = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
        else {
            return false;
        };
        if authority.is_empty() || authority.contains('/') {
            return false;
        }
        authority.eq_ignore_ascii_case(host)
            || self.public_host.as_deref() == Some(host_name(&authority.to_ascii_lowercase()))
    }
}

/// Checks Host, credentials, Origin and the body's type; see the module doc.
pub async fn guard(State(app): State<App>, request: Request, next: Next) -> Response {
    app.registry.metrics.http_requests.inc();
    match check(&app.access, &request) {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

fn check(access: &Access, request: &Request) -> Result<(), ApiError> {
    let headers = request.headers();
    let local = request.extensions().get::<LocalAddr>().map(|a| a.0.ip());
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| request.uri().authority().map(|a| a.to_string()))
        .unwrap_or_default()
        .to_ascii_lowercase();
    if !access.host_allowed(&host, local) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "host_not_allowed",
            format!(
                "this server does not answer to the name '{}'; use http://127.0.0.1 or http://localhost with its port, or set [serve] public_name to the name clients use",
                crate::protocol::clip(&host, 80)
            ),
        ));
    }
    let method = request.method();
    let path = request.uri().path();
    let reads = *method == Method::GET || *method == Method::HEAD;
    let public = reads && (path == "/" || path == "/login" || super::web::is_module_path(path));
    let token_login = *method == Method::POST && path == "/api/login";
    if !reads {
        json_body_only(headers)?;
    }
    let credential = if public || token_login {
        None
    } else {
        Some(access.credential(headers).ok_or_else(|| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "a valid token is required: send `Authorization: Bearer <token>` (the token is in serve-token beside the database, or VIS_SERVE_TOKEN), or log in through the one-time URL vis serve printed",
            )
        })?)
    };
    let foreign = |why: &str| {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "origin_not_allowed",
            format!("{why}; requests that change something must come from this server's own page or from a client without a browser"),
        )
    };
    if !reads {
        match headers
            .get(header::ORIGIN)
            .map(|v| v.to_str().unwrap_or(""))
        {
            Some(origin) if !access.origin_allowed(origin, &host) => {
                return Err(foreign(&format!(
                    "the request comes from the page '{}', not this server's",
                    crate::protocol::clip(origin, 80)
                )))
            }
            None if credential == Some(Credential::Cookie) => {
                return Err(foreign("a cookie-carrying request without an Origin"))
            }
            _ => {}
        }
    }
    if credential == Some(Credential::Cookie) {
        let site = headers
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("same-origin");
        if site != "same-origin" && site != "none" {
            return Err(foreign(&format!("the browser says it is a {site} request")));
        }
    }
    Ok(())
}

/// A body, if any, must be JSON: the types an HTML form or a simple cross-site `fetch` can send
/// (`text/plain`, form encodings) are refused.
fn json_body_only(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(kind) = headers.get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    let essence = kind
        .to_str()
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if essence == "application/json" {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        format!(
            "a body of type '{}' is not accepted; send JSON with `Content-Type: application/json`",
            crate::protocol::clip(&essence, 60)
        ),
    ))
}

/// The host part of `host[:port]` or `[v6][:port]`, lowercase, without a final dot.
fn host_name(authority: &str) -> &str {
    let name = match authority.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => authority
            .rsplit_once(':')
            .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
            .map_or(authority, |(host, _)| host),
    };
    name.strip_suffix('.').unwrap_or(name)
}

fn digest(secret: &str) -> [u8; 32] {
    *blake3::hash(secret.as_bytes()).as_bytes()
}

fn push_capped(list: &Mutex<VecDeque<[u8; 32]>>, key: [u8; 32], cap: usize) {
    if let Ok(mut list) = list.lock() {
        list.push_back(key);
        while list.len() > cap {
            list.pop_front();
        }
    }
}

fn take(list: &Mutex<VecDeque<[u8; 32]>>, key: &[u8; 32]) -> bool {
    let Ok(mut list) = list.lock() else {
        return false;
    };
    match list.iter().position(|k| k == key) {
        Some(i) => {
            list.remove(i);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(public: Option<&str>) -> Access {
        Access::new(
            ServeToken::explicit("0123456789abcdef0123", "test").unwrap(),
            public,
            7878,
        )
    }

    #[test]
    fn only_loopback_names_the_local_address_and_the_public_name_are_hosts() {
        let a = access(Some("Vis.Example.com"));
        let local: Option<IpAddr> = Some("192.168.1.5".parse().unwrap());
        for ok in [
            "localhost",
            "localhost:7878",
            "LOCALHOST.",
            "127.0.0.1:7878",
            "127.8.9.1",
            "[::1]:7878",
            "[::1]",
            "192.168.1.5:7878",
            "vis.example.com",
            "vis.example.com:443",
        ] {
            assert!(a.host_allowed(&ok.to_ascii_lowercase(), local), "{ok}");
        }
        for bad in [
            "evil.example:7878",
            "evil.example",
            "localhost.evil.example",
            "192.168.1.6",
            "",
            "[::2]:7878",
            "vis.example.com.evil",
        ] {
            assert!(!a.host_allowed(bad, local), "{bad}");
        }
    }

    #[test]
    fn an_origin_must_be_this_very_server() {
        let a = access(Some("vis.example.com"));
        assert!(a.origin_allowed("http://127.0.0.1:7878", "127.0.0.1:7878"));
        assert!(a.origin_allowed("https://vis.example.com", "127.0.0.1:7878"));
        for bad in [
            "http://127.0.0.1:9999",
            "http://evil.example:7878",
            "null",
            "",
            "http://127.0.0.1:7878/x",
            "file://",
        ] {
            assert!(!a.origin_allowed(bad, "127.0.0.1:7878"), "{bad}");
        }
    }

    #[test]
    fn a_login_code_works_once_and_cookies_can_be_closed() {
        let a = access(None);
        let url = a.login_url("http://127.0.0.1:7878/").unwrap();
        let code = url.split("code=").nth(1).unwrap();
        assert!(url.starts_with("http://127.0.0.1:7878/login?code="));
        assert!(!a.redeem("not-a-code"));
        assert!(a.redeem(code));
        assert!(!a.redeem(code), "a code works once");
        let cookie = a.open_cookie_session().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            format!("other=1; vis-session-7878={cookie}")
                .parse()
                .unwrap(),
        );
        assert_eq!(a.credential(&headers), Some(Credential::Cookie));
        a.close_cookie_session(&headers);
        assert_eq!(a.credential(&headers), None);
    }

    #[test]
    fn a_wrong_bearer_token_is_refused_even_with_a_cookie() {
        let a = access(None);
        let cookie = a.open_cookie_session().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            format!("vis-session-7878={cookie}").parse().unwrap(),
        );
        headers.insert(header::AUTHORIZATION, "Bearer nope".parse().unwrap());
        assert_eq!(a.credential(&headers), None);
        headers.insert(
            header::AUTHORIZATION,
            "bearer 0123456789abcdef0123".parse().unwrap(),
        );
        assert_eq!(a.credential(&headers), Some(Credential::Bearer));
    }
}
