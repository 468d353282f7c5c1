//! A session's events as server-sent events: replayed after `Last-Event-ID`, then live until
//! the end of the turn that runs. [`Follower`] reads a session's log for both the SSE streams
//! and `POST …/exec`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use serde::Deserialize;
use tokio::sync::watch;
use utoipa::IntoParams;

use super::{reader, require, ApiError, ApiResult};
use crate::protocol::Event;
use crate::serve::events::Logged;
use crate::serve::registry::Slot;
use crate::serve::App;

#[derive(Debug, Deserialize, IntoParams)]
pub struct EventsQuery {
    /// Replay events after this id (the `Last-Event-ID` header takes precedence).
    pub after: Option<String>,
}

/// The events a client missed (after `Last-Event-ID`), then, while a turn runs, the rest of
/// it live. The stream ends after that turn's `turn_finished` (at once when nothing runs).
#[utoipa::path(get, path = "/api/sessions/{id}/events", params(("id" = String, Path), EventsQuery),
    responses((status = 200, content_type = "text/event-stream"), (status = 404, body = ApiError)))]
pub async fn get_events(
    State(app): State<App>,
    Path(id): Path<String>,
    Query(q): Query<EventsQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let store = reader(&app)?;
    require(&*store, &id)?;
    let slot = app.registry.slot(&id);
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or(q.after);
    let after = slot.log.after(last.as_deref());
    let follow = slot.is_working();
    Ok(sse(Follower::new(slot, after, follow)))
}

/// The events of `follower` as an SSE response.
pub(super) fn sse(follower: Follower) -> Response {
    let stream = futures::stream::unfold(follower, |mut f| async move {
        let logged = f.next().await?;
        let event = SseEvent::default()
            .id(f.slot.log.id(logged.n))
            .event(logged.event.kind())
            .data(logged.json.as_str());
        Some((Ok::<_, Infallible>(event), f))
    });
    sse_response(stream)
}

fn sse_response<S>(stream: S) -> Response
where
    S: Stream<Item = Result<SseEvent, Infallible>> + Send + 'static,
{
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// Reads a session's events after a position: the kept ones, then — when following — new
/// ones as they come, until the end of the work that was running when it began (its
/// `turn_finished`, or the news that it was published, should the log have dropped it).
pub(super) struct Follower {
    slot: Arc<Slot>,
    rx: watch::Receiver<u64>,
    last: u64,
    /// The first event number of the work followed (`None`: not following).
    until_end_of: Option<u64>,
    pending: VecDeque<Arc<Logged>>,
    done: bool,
}

impl Follower {
    pub(super) fn new(slot: Arc<Slot>, after: u64, follow: bool) -> Follower {
        // Listening starts before the first read, so no event falls between the two.
        let rx = slot.log.listen();
        let until_end_of = follow.then(|| slot.work_start.load(Ordering::SeqCst));
        Follower {
            slot,
            rx,
            last: after,
            until_end_of,
            pending: VecDeque::new(),
            done: false,
        }
    }

    pub(super) async fn next(&mut self) -> Option<Arc<Logged>> {
        loop {
            if self.done {
                return None;
            }
            while let Some(logged) = self.pending.pop_front() {
                if logged.n <= self.last {
                    continue;
                }
                self.last = logged.n;
                if let Some(start) = self.until_end_of {
                    if matches!(logged.event, Event::TurnFinished { .. }) && logged.n >= start {
                        self.done = true;
                    }
                }
                return Some(logged);
            }
            // The turn's end is read before the events: read after them, an end pushed in
            // between (with the events before it) would close the stream without them.
            let turn_end = self.slot.log.last_turn_end();
            self.pending.extend(self.slot.log.since(self.last));
            if !self.pending.is_empty() {
                continue;
            }
            match self.until_end_of {
                Some(start) if turn_end < start => {}
                // Not following, or the work's end is out already.
                _ => return None,
            }
            if self.rx.changed().await.is_err() {
                return None;
            }
        }
    }
}
