//! Finding a JSON-RPC message's `id` in bytes that are not (or not yet) a whole message.
//!
//! A message over the size limit is never buffered whole, and a line that is not valid JSON
//! cannot be parsed; either may still carry the `id` of a request someone waits for. The
//! [`IdSniffer`] scans bytes as they stream past, in constant memory, and remembers the value
//! of the top-level object's first `"id"` member when it is a number or a short string (the
//! only ids JSON-RPC allows besides `null`), and whether the message is a request (a
//! `"method"` member) or a response (`"result"` or `"error"`): the ids of requests and of
//! responses belong to the two directions, so only the kind says whose id it is. Nested
//! objects and strings that contain `"id"` are skipped.

use rmcp::model::{NumberOrString, RequestId};

/// Longest string id kept (longer ones are not ids worth answering).
const MAX_ID_CHARS: usize = 128;
/// Longest key told apart (`method`, `result`).
const MAX_KEY_BYTES: usize = 6;

/// What a message is, from its top-level keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// It has a `method`: a request (with an id) or a notification.
    Request,
    /// It has a `result` or an `error`: the answer to a request.
    Response,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the first non-blank byte.
    Start,
    /// Inside the top-level object, where a key (or `}`) comes next.
    ExpectKey,
    /// Reading a top-level key.
    Key,
    /// After a top-level key, before `:`.
    AfterKey,
    /// After `:`, before the value.
    ExpectValue,
    /// Reading the value of `"id"` (a string or a number).
    IdString,
    IdNumber,
    /// After a value read here, before `,` or `}`.
    AfterValue,
    /// Skipping another value (nested containers and strings included).
    Skip,
    /// The object ended, or it is not one (or not well-formed where it matters).
    Done,
}

/// Scans a JSON-RPC message for its top-level `"id"` (see the module docs).
#[derive(Debug, Clone)]
pub struct IdSniffer {
    state: State,
    /// The key being read (only `id`, `method`, `result` and `error` matter).
    key: Vec<u8>,
    key_long: bool,
    key_is_id: bool,
    /// The id's text while it is read.
    value: Vec<u8>,
    /// Containers open while skipping a value, and string state.
    depth: u32,
    in_string: bool,
    escaped: bool,
    found: Option<RequestId>,
    kind: Option<Kind>,
}

impl Default for IdSniffer {
    fn default() -> Self {
        IdSniffer::new()
    }
}

impl IdSniffer {
    pub fn new() -> IdSniffer {
        IdSniffer {
            state: State::Start,
            key: Vec::with_capacity(MAX_KEY_BYTES),
            key_long: false,
            key_is_id: false,
            value: Vec::new(),
            depth: 0,
            in_string: false,
            escaped: false,
            found: None,
            kind: None,
        }
    }

    /// The id found so far.
    pub fn id(&self) -> Option<&RequestId> {
        self.found.as_ref()
    }

    /// What the message is, as far as its keys so far tell.
    pub fn kind(&self) -> Option<Kind> {
        self.kind
    }

    /// Nothing more to learn: the id and the kind are known, or the object ended.
    pub fn settled(&self) -> bool {
        self.state == State::Done || (self.found.is_some() && self.kind.is_some())
    }

    /// Scans the next bytes of the message.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.state == State::Done {
                return;
            }
            self.step(b);
        }
    }

    /// Scans a whole line (a message that is not valid JSON).
    pub fn of(bytes: &[u8]) -> IdSniffer {
        let mut sniffer = IdSniffer::new();
        sniffer.feed(bytes);
        sniffer.finish();
        sniffer
    }

    /// The input ended: a number at the very end has no delimiter after it.
    pub fn finish(&mut self) {
        if self.state == State::IdNumber {
            self.step(b' ');
        }
    }

    fn step(&mut self, b: u8) {
        let blank = matches!(b, b' ' | b'\t' | b'\r' | b'\n');
        match self.state {
            State::Start => match b {
                _ if blank => {}
                // A UTF-8 byte order mark may start the line.
                0xEF | 0xBB | 0xBF => {}
                b'{' => self.state = State::ExpectKey,
                _ => self.state = State::Done,
            },
            State::ExpectKey => match b {
                _ if blank || b == b',' => {}
                b'"' => {
                    self.key.clear();
                    self.key_long = false;
                    self.escaped = false;
                    self.state = State::Key;
                }
                _ => self.state = State::Done,
            },
            State::Key => {
                if self.escaped {
                    self.escaped = false;
                    self.push_key(b);
                } else if b == b'\\' {
                    self.escaped = true;
                    // An escaped key is never spelled plainly as `id`.
                    self.push_key(b);
                } else if b == b'"' {
                    self.end_key();
                    self.state = State::AfterKey;
                } else {
                    self.push_key(b);
                }
            }
            State::AfterKey => match b {
                _ if blank => {}
                b':' => self.state = State::ExpectValue,
                _ => self.state = State::Done,
            },
            State::ExpectValue => {
                if blank {
                    return;
                }
                if self.key_is_id && self.found.is_none() {
                    self.value.clear();
                    match b {
                        b'"' => {
                            self.state = State::IdString;
                            return;
                        }
                        b'-' | b'0'..=b'9' => {
                            self.value.push(b);
                            self.state = State::IdNumber;
                            return;
                        }
                        // `null` or another kind of value: not an id to answer.
                        _ => {}
                    }
                }
                self.start_skip(b);
            }
            State::IdString => match b {
                b'"' => {
                    self.found = std::str::from_utf8(&self.value)
                        .ok()
                        .map(|s| NumberOrString::String(s.into()));
                    self.state = State::AfterValue;
                }
                // Escapes in an id are not worth decoding: give up.
                b'\\' => self.state = State::Done,
                _ if self.value.len() >= MAX_ID_CHARS => self.state = State::Done,
                _ => self.value.push(b),
            },
            State::IdNumber => match b {
                b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-' if self.value.len() < 40 => {
                    self.value.push(b);
                }
                _ => {
                    self.found = std::str::from_utf8(&self.value)
                        .ok()
                        .and_then(|s| s.parse::<i64>().ok())
                        .map(NumberOrString::Number);
                    self.state = State::AfterValue;
                    self.step(b);
                }
            },
            State::AfterValue => match b {
                _ if blank => {}
                b',' => self.state = State::ExpectKey,
                _ => self.state = State::Done,
            },
            State::Skip => self.skip(b),
            State::Done => {}
        }
    }

    fn push_key(&mut self, b: u8) {
        if self.key.len() < MAX_KEY_BYTES {
            self.key.push(b);
        } else {
            self.key_long = true;
        }
    }

    fn end_key(&mut self) {
        let key: &[u8] = if self.key_long { b"" } else { &self.key };
        self.key_is_id = key == b"id";
        let kind = match key {
            b"method" => Some(Kind::Request),
            b"result" | b"error" => Some(Kind::Response),
            _ => None,
        };
        if self.kind.is_none() {
            self.kind = kind;
        }
    }

    fn start_skip(&mut self, b: u8) {
        self.depth = 0;
        self.in_string = false;
        self.escaped = false;
        self.state = State::Skip;
        self.skip(b);
    }

    /// Skips one value; at its end, back to the next key.
    fn skip(&mut self, b: u8) {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
            }
            return;
        }
        match b {
            b'"' => self.in_string = true,
            b'{' | b'[' => self.depth += 1,
            b'}' | b']' if self.depth > 0 => self.depth -= 1,
            // The top-level object ends: no id in it.
            b'}' => self.state = State::Done,
            b',' if self.depth == 0 => self.state = State::ExpectKey,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(n: i64) -> Option<RequestId> {
        Some(NumberOrString::Number(n))
    }

    fn id_of(line: &[u8]) -> Option<RequestId> {
        IdSniffer::of(line).found
    }

    #[test]
    fn finds_the_top_level_id_wherever_it_is() {
        assert_eq!(id_of(br#"{"jsonrpc":"2.0","id":7,"method":"x"}"#), num(7));
        assert_eq!(
            id_of(br#"{"jsonrpc":"2.0","method":"x","params":{"id":1,"a":[{"id":2}],"s":"\"id\":3"},"id":42}"#),
            num(42)
        );
        assert_eq!(
            id_of(br#" { "id" : "req-1" , "method": "x""#),
            Some(NumberOrString::String("req-1".into()))
        );
        assert_eq!(id_of(br#"{"id":-3"#), num(-3));
        assert_eq!(id_of(b"\xEF\xBB\xBF{\"id\":5}"), num(5));
        // The first `id` wins.
        assert_eq!(id_of(br#"{"id":1,"id":2}"#), num(1));
    }

    #[test]
    fn tells_requests_from_responses() {
        let kind = |line: &[u8]| {
            let s = IdSniffer::of(line);
            (s.found.clone(), s.kind())
        };
        assert_eq!(
            kind(br#"{"id":3,"jsonrpc":"2.0","method":"tools/call","params":{"result":1}}"#),
            (num(3), Some(Kind::Request))
        );
        assert_eq!(
            kind(br#"{"jsonrpc":"2.0","result":{"method":"x"},"id":4}"#),
            (num(4), Some(Kind::Response))
        );
        assert_eq!(
            kind(br#"{"jsonrpc":"2.0","id":5,"error":{"code":1}"#),
            (num(5), Some(Kind::Response))
        );
        assert_eq!(kind(br#"{"methods":1,"results":2,"id":6}"#), (num(6), None));
        let mut s = IdSniffer::new();
        s.feed(br#"{"id":9,"method":"#);
        assert!(s.settled());
    }

    #[test]
    fn no_id_when_there_is_none_to_answer() {
        for line in [
            &br#"{"jsonrpc":"2.0","method":"notifications/x"}"#[..],
            br#"{"id":null,"method":"x"}"#,
            br#"{"id":{"n":1}}"#,
            br#"{"idx":1,"xid":2}"#,
            br#"[{"id":1}]"#,
            br#"not json, "id":1"#,
            br#"{"i\u0064":1}"#,
            br#"{"id":"a\"b"}"#,
            b"",
        ] {
            assert_eq!(id_of(line), None, "{}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn bytes_may_arrive_in_any_pieces() {
        let message =
            br#"{"jsonrpc":"2.0","params":{"code":"x = '}'\n"},"id":1234,"method":"tools/call"}"#;
        for cut in 1..message.len() {
            let mut s = IdSniffer::new();
            for piece in message.chunks(cut) {
                s.feed(piece);
            }
            assert_eq!(s.id(), num(1234).as_ref(), "pieces of {cut}");
            assert_eq!(s.kind(), Some(Kind::Request), "pieces of {cut}");
        }
    }

    #[test]
    fn a_huge_value_before_the_id_costs_no_memory() {
        let mut s = IdSniffer::new();
        s.feed(br#"{"result":{"text":""#);
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..20 {
            s.feed(&chunk);
        }
        s.feed(br#""},"id":9}"#);
        assert_eq!(s.id(), num(9).as_ref());
        assert!(s.value.capacity() < 64 && s.key.capacity() < 64);
    }
}
