//! The Python side of the protocol types, checked: `python/vis/_protocol.py` declares as
//! `TypedDict`s what the host sends a block, and these tests convert Rust values exactly as the
//! worker does (pyo3 for a [`Block`] and a [`PersistedDef`], JSON for the rest) and check each
//! against its `TypedDict` in the embedded interpreter: the same keys, each value of the
//! declared type, nested dicts recursively. A field added, removed or retyped on either side
//! fails here.

use std::borrow::Cow;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;
use serde_json::{json, Value};

use super::*;
use crate::sandbox::{Layers, Mode};

const PROTOCOL_PY: &str = include_str!("../../python/vis/_protocol.py");

/// Checks a value against a type hint; returns the problems, one per line (empty when it
/// conforms). `TypedDict`s must have exactly their keys.
const CHECKER: &str = r#"
import types, typing

def check(value, hint, where="value"):
    problems = []
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is typing.Any:
        return problems
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not the dict {hint.__name__}"]
        hints = typing.get_type_hints(hint)
        # Keys the Python side adds itself are `NotRequired` (read from the annotations:
        # under `from __future__ import annotations` the class cannot see it itself).
        extras = typing.get_type_hints(hint, include_extras=True)
        optional = {k for k, h in extras.items() if typing.get_origin(h) is typing.NotRequired}
        missing = sorted(set(hints) - set(value) - optional)
        extra = sorted(set(value) - set(hints))
        if missing:
            problems.append(f"{where}: {hint.__name__} declares {missing}, which the host does not send")
        if extra:
            problems.append(f"{where}: the host sends {extra}, which {hint.__name__} does not declare")
        for key in set(hints) & set(value):
            problems += check(value[key], hints[key], f"{where}[{key!r}]")
        return problems
    if origin in (typing.Union, types.UnionType):
        attempts = [check(value, arm, where) for arm in args]
        if any(not a for a in attempts):
            return []
        closest = min((a for a in attempts if a), key=len)
        return [f"{where}: none of {hint}: " + "; ".join(closest)]
    if origin is typing.Literal:
        return [] if value in args else [f"{where}: {value!r} is not one of {args}"]
    if hint is type(None):
        return [] if value is None else [f"{where}: {value!r} is not None"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__}, not a list"]
        for i, item in enumerate(value):
            problems += check(item, args[0], f"{where}[{i}]")
        return problems
    if origin is tuple:
        # JSON has no tuples: a list of the right length stands for one.
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            return [f"{where}: {value!r} is not a {len(args)}-tuple"]
        for i, (item, arm) in enumerate(zip(value, args)):
            problems += check(item, arm, f"{where}[{i}]")
        return problems
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not a dict"]
        for key, item in value.items():
            problems += check(key, args[0], f"{where} key") + check(item, args[1], f"{where}[{key!r}]")
        return problems
    if hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, hint)
    return [] if ok else [f"{where}: {value!r} is not {getattr(hint, '__name__', hint)}"]
"#;

/// The module `_protocol.py` (as `vis._protocol`, so `typing.get_type_hints` resolves its
/// names) with the checker beside it: loaded once per process, since the tests run on
/// several threads and a module replaced under one of them would lose its names.
fn load(py: Python<'_>) -> Bound<'_, PyDict> {
    static MODULE: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
    MODULE
        .get_or_init(py, || {
            let module = pyo3::types::PyModule::new(py, "vis._protocol").unwrap();
            let globals = module.dict();
            for (source, name) in [(PROTOCOL_PY, "_protocol.py"), (CHECKER, "checker")] {
                let code = std::ffi::CString::new(source).unwrap();
                py.run(&code, Some(&globals), None)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            py.import("sys")
                .unwrap()
                .getattr("modules")
                .unwrap()
                .set_item("vis._protocol", &module)
                .unwrap();
            globals.unbind()
        })
        .bind(py)
        .clone()
}

/// Problems of `value` (already a Python object) against `_protocol.<name>`.
fn problems(globals: &Bound<'_, PyDict>, value: Bound<'_, PyAny>, name: &str) -> String {
    let hint = globals
        .get_item(name)
        .unwrap()
        .unwrap_or_else(|| panic!("no {name} in _protocol.py"));
    let check = globals.get_item("check").unwrap().unwrap();
    let found: Vec<String> = check.call1((value, hint, name)).unwrap().extract().unwrap();
    found.join("\n")
}

fn json_problems(py: Python<'_>, globals: &Bound<'_, PyDict>, value: Value, name: &str) -> String {
    let object = json_into_py(Cow::Owned(value), py).unwrap();
    problems(globals, object, name)
}

fn layers() -> Layers {
    Layers {
        mode: Some(Mode::WorkspaceWrite),
        landlock: Some("full".into()),
        hidden: vec!["/home/u/.ssh".into()],
        protected: vec!["/w/.git".into()],
        missing: vec!["seccomp: old kernel".into()],
        ..Layers::default()
    }
}

fn notice() -> RestoreNotice {
    RestoreNotice {
        restart_reason: Some("after a crash".into()),
        report: RestoreReport {
            ok: vec!["a".into()],
            failed: vec![("b".into(), "NameError".into())],
            unkept: vec![("c".into(), vec!["cache".into()])],
        },
        extensions_skipped: Some("exit 7".into()),
    }
}

fn measurements() -> Vec<(Measurement, &'static str)> {
    let before = Before {
        input_tokens: Some(1000),
        provider: "openai".into(),
        model: "m".into(),
        turn: 2,
    };
    vec![
        (Measurement::pending(&[1, 2], &before), "PendingMeasurement"),
        (
            Measurement::Measured {
                fold_count: 1,
                folds: vec![1],
                before_input_tokens: 1000,
                after_input_tokens: 600,
                net_reduction_tokens: 400,
            },
            "MeasuredFolds",
        ),
        (
            Measurement::Unavailable {
                fold_count: 1,
                folds: vec![1],
                reason: "a new turn".into(),
            },
            "UnmeasuredFolds",
        ),
    ]
}

/// A `session` with every optional part present, and one with none.
fn sessions() -> Vec<SessionInfo> {
    let counts = SessionCounts {
        turns: 3,
        iterations: 7,
        folds: 1,
    };
    let mut full = SessionInfo::new(
        "s-1",
        3,
        2,
        counts,
        Utilization::new(
            2000,
            1000,
            Some((800, true)),
            Some(measurements()[1].0.clone()),
        ),
    );
    full.utilization.fold_hint = Some(FoldHint {
        cache: "cold".into(),
        cache_note: Some("resumed session, 2 h since the last request".into()),
        expected_requests: 12,
        candidates: vec![FoldCandidate {
            key: "t1".into(),
            tokens: 900,
            recache_cost: 0,
            saving_per_request: 84,
            break_even_requests: Some(0),
            value: 1008,
        }],
        text: Some("the prompt cache is cold".into()),
    });
    full.restored = Some(notice().to_json());
    full.sandbox = Some(layers().session_json(true, false));
    full.jobs = Some(json!({"max": 8, "next_id": 3, "output_bytes": 67108864}));
    full.extensions
        .insert("jira".into(), json!({"project": "VIS"}));
    let bare = SessionInfo::new("s-2", 1, 1, counts, Utilization::without_requests());
    vec![full, bare]
}

#[test]
fn the_session_dict_matches_its_typed_dict() {
    Python::initialize();
    Python::attach(|py| {
        let globals = load(py);
        for session in sessions() {
            let value = serde_json::to_value(&session).unwrap();
            assert_eq!(
                json_problems(py, &globals, value, "Session"),
                "",
                "{session:?}"
            );
        }
        for (measurement, name) in measurements() {
            let value = serde_json::to_value(&measurement).unwrap();
            assert_eq!(json_problems(py, &globals, value, name), "");
        }
    });
}

#[test]
fn host_replies_match_their_typed_dicts() {
    Python::initialize();
    Python::attach(|py| {
        let globals = load(py);
        let receipt = FoldReceipt {
            fold: 2,
            key: "t1".into(),
            selected: vec!["t1".into()],
            widened: true,
            absorbed: vec![1],
            tokens_removed: 900,
            gist_tokens: 20,
            estimated_net_tokens: 880,
            recache_tokens: 300,
            recache_cost: 345,
            saving_per_request: 88,
            break_even_requests: Some(4),
            recache_note: "the next request writes the 300 tokens from t1 on to the cache again"
                .into(),
            fold_count: 1,
            automatic: false,
            measurement: "pending".into(),
        };
        let replies = [
            (HostReply::Fold(receipt), "FoldReceipt"),
            (
                HostReply::Read(SessionRead {
                    off: false,
                    text: "t1 …".into(),
                }),
                "SessionRead",
            ),
            (
                HostReply::Written {
                    path: "/w/.vis/extensions/h.py".into(),
                },
                "Written",
            ),
        ];
        for (reply, name) in replies {
            assert_eq!(json_problems(py, &globals, reply.into_json(), name), "");
        }
        let report = serde_json::to_value(notice().report).unwrap();
        assert_eq!(json_problems(py, &globals, report, "RestoreReport"), "");
    });
}

#[test]
fn blocks_and_definitions_match_their_typed_dicts() {
    Python::initialize();
    Python::attach(|py| {
        let globals = load(py);
        for session in sessions() {
            let block = Block {
                code: "print(1)".into(),
                filename: "<t1/i1>".into(),
                session,
                workspace_roots: vec!["/w".into()],
                output_limit: 100,
                artifact_path: "/a/t1.txt".into(),
                artifact_dir: "/a".into(),
                artifact_quota: 10,
                timeout: Duration::from_millis(1500),
            };
            let object = (&block).into_pyobject(py).unwrap().into_any();
            assert_eq!(problems(&globals, object, "Block"), "");
        }
        let def = PersistedDef {
            name: "f".into(),
            kind: "function".into(),
            source: "def f(): pass\n".into(),
            signature: "f()".into(),
            doc: String::new(),
        };
        let object = (&def).into_pyobject(py).unwrap().into_any();
        assert_eq!(problems(&globals, object, "Definition"), "");
    });
}

#[test]
fn the_checker_catches_a_missing_an_extra_and_a_mistyped_field() {
    Python::initialize();
    Python::attach(|py| {
        let globals = load(py);
        let bad = json!({"turns": 1, "iterations": "2", "files": 3});
        let found = json_problems(py, &globals, bad, "SessionCounts");
        assert!(found.contains("declares ['folds']"), "{found}");
        assert!(found.contains("sends ['files']"), "{found}");
        assert!(found.contains("['iterations']: '2' is not int"), "{found}");
        let found = json_problems(py, &globals, json!({"off": 1, "text": "x"}), "SessionRead");
        assert!(found.contains("1 is not bool"), "{found}");
    });
}
