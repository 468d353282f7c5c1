//! The response body as a stream of server-sent events, with the idle timeout.
//!
//! Parsing is `eventsource-stream`'s (comments, `event:` names, multi-line `data:`, CR/LF
//! handling, a leading BOM). Two things are added around it:
//! - The idle timeout is applied to the *bytes*, not to events: a comment line
//!   (`: keep-alive`, OpenRouter's `: OPENROUTER PROCESSING`) is life even though the parser
//!   never yields it as an event.
//! - At a clean end of the body a blank line is fed to the parser. Per the SSE rules an event
//!   not followed by a blank line is dropped at EOF, but local servers do end with
//!   `data: {...finish_reason...}\n` and nothing after it; that event is real. Events released
//!   by this flush are marked `at_eof`, so a decoder error there (half a JSON object) can be
//!   reported as a truncated body rather than as garbage.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};

use super::error::ProviderError;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` name, `message` when none was given.
    pub event: String,
    pub data: String,
    /// Released by the end-of-body flush: the body ended without the closing blank line.
    pub at_eof: bool,
}

/// Why the byte stream under the parser ended badly.
#[derive(Debug)]
pub(crate) enum ChunkError {
    Idle(Duration),
    Transport(String),
}

impl std::fmt::Display for ChunkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChunkError::Idle(d) => write!(f, "silent for {d:?}"),
            ChunkError::Transport(cause) => f.write_str(cause),
        }
    }
}

pub(crate) type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, reqwest::Error>> + Send>>;

struct Feed {
    inner: Option<ByteStream>,
    idle: Duration,
    flushed: Arc<AtomicBool>,
}

/// The events of `body`; an `Err` item ends the stream.
pub(crate) fn events(
    body: ByteStream,
    idle: Duration,
) -> impl Stream<Item = Result<SseEvent, ProviderError>> + Send {
    let flushed = Arc::new(AtomicBool::new(false));
    let feed = Feed {
        inner: Some(body),
        idle,
        flushed: flushed.clone(),
    };
    let bytes = futures::stream::unfold(feed, |mut feed| async move {
        let inner = feed.inner.as_mut()?;
        let item = match tokio::time::timeout(feed.idle, inner.next()).await {
            Err(_) => Err(ChunkError::Idle(feed.idle)),
            Ok(Some(Ok(chunk))) => return Some((Ok(chunk), feed)),
            Ok(Some(Err(err))) => Err(ChunkError::Transport(super::root_cause(&err))),
            Ok(None) => {
                feed.flushed.store(true, Ordering::SeqCst);
                Ok(Bytes::from_static(b"\n\n"))
            }
        };
        // Whatever happened, the body is over after this item.
        feed.inner = None;
        Some((item, feed))
    });
    bytes.eventsource().map(move |item| match item {
        Ok(event) => Ok(SseEvent {
            event: event.event,
            data: event.data,
            at_eof: flushed.load(Ordering::SeqCst),
        }),
        Err(EventStreamError::Transport(ChunkError::Idle(after))) => {
            Err(ProviderError::IdleTimeout { after })
        }
        Err(EventStreamError::Transport(ChunkError::Transport(cause))) => Err(
            ProviderError::truncated(format!("the connection broke mid-response: {cause}")),
        ),
        Err(EventStreamError::Utf8(_)) => Err(ProviderError::malformed(
            "the event stream is not valid UTF-8",
        )),
        Err(EventStreamError::Parser(err)) => Err(ProviderError::malformed(format!(
            "unparsable event stream: {}",
            super::error::clean_message(&err.to_string(), 120)
        ))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(chunks: &[&'static str]) -> ByteStream {
        let items: Vec<Result<Bytes, reqwest::Error>> = chunks
            .iter()
            .map(|c| Ok(Bytes::from_static(c.as_bytes())))
            .collect();
        Box::pin(futures::stream::iter(items))
    }

    async fn collect(chunks: &[&'static str]) -> Vec<Result<SseEvent, ProviderError>> {
        events(body(chunks), Duration::from_secs(5)).collect().await
    }

    fn ev(event: &str, data: &str, at_eof: bool) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
            at_eof,
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn comments_names_multiline_and_a_missing_final_blank_line() {
        let got = collect(&[
            ": keep-alive\n\nevent: ping\ndata: {}\n\nda",
            "ta: a\ndata: b\r\n\r\n",
            "data: last",
        ])
        .await;
        let got: Vec<SseEvent> = got.into_iter().map(|r| r.unwrap()).collect();
        assert_eq!(
            got,
            vec![
                ev("ping", "{}", false),
                ev("message", "a\nb", false),
                ev("message", "last", true)
            ]
        );
    }
}
