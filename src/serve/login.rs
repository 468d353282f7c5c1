//! Logging a browser in: the one-time URL `vis serve` prints (`GET /login?code=…`, as Jupyter
//! does), the page's token form (`POST /api/login`), and logging out (`POST /api/logout`).
//! Afterwards the browser holds an HttpOnly, SameSite=Strict cookie: the page's script never
//! sees the token or the cookie, and other sites' requests do not carry it.

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;
use utoipa::ToSchema;

use super::api::{ApiError, Body};
use super::App;

#[derive(Debug, Deserialize)]
pub struct LoginQuery {
    code: Option<String>,
}

/// `GET /login?code=…`: a code that is pending logs the browser in (once) and opens the page;
/// any other lands on the page with `?login=expired`, which says so.
pub async fn login_with_code(State(app): State<App>, Query(q): Query<LoginQuery>) -> Response {
    let redeemed = q.code.as_deref().is_some_and(|c| app.access.redeem(c));
    if !redeemed {
        return see_other("/?login=expired", None);
    }
    match app.access.open_cookie_session() {
        Ok(value) => see_other("/", Some(session_cookie(&app, &value))),
        Err(e) => ApiError::internal(e).into_response(),
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenLogin {
    /// The server's token.
    pub token: String,
}

/// Exchange the token for the session cookie the web view uses (its login form).
#[utoipa::path(post, path = "/api/login", request_body = TokenLogin,
    responses((status = 200, body = serde_json::Value, description = "logged in: the response sets an HttpOnly cookie"),
        (status = 401, body = ApiError)))]
pub async fn login_with_token(
    State(app): State<App>,
    Body(body): Body<TokenLogin>,
) -> Result<Response, ApiError> {
    if !app.access.token().matches(body.token.trim()) {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "that is not this server's token: it is in serve-token beside the database (or VIS_SERVE_TOKEN)",
        ));
    }
    let value = app
        .access
        .open_cookie_session()
        .map_err(ApiError::internal)?;
    let mut response = Json(json!({"logged_in": true})).into_response();
    append_cookie(&mut response, session_cookie(&app, &value));
    Ok(response)
}

/// Log this browser out: its cookie stops working.
#[utoipa::path(post, path = "/api/logout", responses((status = 200, body = serde_json::Value)))]
pub async fn logout(State(app): State<App>, headers: HeaderMap) -> Response {
    app.access.close_cookie_session(&headers);
    let mut response = Json(json!({"logged_in": false})).into_response();
    append_cookie(
        &mut response,
        format!(
            "{}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0",
            app.access.cookie_name()
        ),
    );
    response
}

fn session_cookie(app: &App, value: &str) -> String {
    format!(
        "{}={value}; HttpOnly; SameSite=Strict; Path=/",
        app.access.cookie_name()
    )
}

fn append_cookie(response: &mut Response, cookie: String) {
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

fn see_other(location: &'static str, cookie: Option<String>) -> Response {
    let mut response = (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, location),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
    )
        .into_response();
    if let Some(cookie) = cookie {
        append_cookie(&mut response, cookie);
    } else {
        response
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}
