//! The HTTP client under the SDK's streamable HTTP transport, noting when a server's answer
//! was over the size limit.
//!
//! The SDK enforces the limit itself (an SSE event or a JSON body over
//! `[mcp] max_message_mb` is refused), but then closes the connection, and the call that
//! waited only learns that the transport closed. [`LimitedHttp`] delegates every request to
//! reqwest and raises a flag when the SDK refused an answer for its size, so the call can say
//! so ([`crate::mcp::McpHub::call`]).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once};

use futures::StreamExt;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::common::client_side_sse::BoxedSseResponse;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

use super::errors::ServerError;
use crate::config::expand_env;

/// Installs rustls' provider once (the build leaves the choice to us); reqwest needs one
/// before it builds a client.
pub(super) fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    });
}

/// The `headers` of server `name` (declared in `file`) as HTTP headers, `${NAME}` expanded
/// from the host's environment; a name or value HTTP cannot carry is an error naming it.
pub(super) fn header_map(
    name: &str,
    headers: &BTreeMap<String, String>,
    file: &Path,
) -> Result<HashMap<HeaderName, HeaderValue>, ServerError> {
    let mut map = HashMap::new();
    for (k, v) in headers {
        let value = expand_env(v, &format!("[mcp.servers.{name}] headers.{k}"))?;
        let (Ok(hn), Ok(hv)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(&value),
        ) else {
            return Err(ServerError::BadHeader {
                name: name.to_string(),
                header: k.clone(),
                file: file.to_path_buf(),
            });
        };
        map.insert(hn, hv);
    }
    Ok(map)
}

/// reqwest, plus the over-the-limit flag of one connection.
#[derive(Clone)]
pub(super) struct LimitedHttp {
    pub(super) inner: reqwest::Client,
    pub(super) over_limit: Arc<AtomicBool>,
}

/// The SDK's words for an SSE event over its limit (its error type is private).
const EVENT_TOO_LARGE: &str = "exceeded the maximum size";

/// `stream`, raising `flag` when it ends because an event was over the limit.
fn watched(stream: BoxedSseResponse, flag: Arc<AtomicBool>) -> BoxedSseResponse {
    stream
        .inspect(move |item| {
            if let Err(e) = item {
                if e.to_string().contains(EVENT_TOO_LARGE) {
                    flag.store(true, Ordering::SeqCst);
                }
            }
        })
        .boxed()
}

type Post = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>;

impl LimitedHttp {
    fn note(&self, posted: Post) -> Post {
        match posted {
            Err(e @ StreamableHttpError::ResponseBodyTooLarge { .. }) => {
                self.over_limit.store(true, Ordering::SeqCst);
                Err(e)
            }
            Ok(StreamableHttpPostResponse::Sse(stream, session)) => Ok(
                StreamableHttpPostResponse::Sse(watched(stream, self.over_limit.clone()), session),
            ),
            other => other,
        }
    }
}

impl StreamableHttpClient for LimitedHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Post {
        let posted = self
            .inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await;
        self.note(posted)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Post {
        let posted = self
            .inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.note(posted)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Post {
        let posted = self
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        self.note(posted)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxedSseResponse, StreamableHttpError<Self::Error>> {
        let stream = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await?;
        Ok(watched(stream, self.over_limit.clone()))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxedSseResponse, StreamableHttpError<Self::Error>> {
        let stream = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        Ok(watched(stream, self.over_limit.clone()))
    }
}

#[cfg(test)]
mod tests;
