//! What the worker tells the prelude at start, in one typed object: [`PreludeSettings`] here,
//! `vis._state.Settings` (a `TypedDict`) in Python, handed over by one call,
//! `vis._state.configure(settings)`. The test below ties the two definitions together. (What
//! the host tells the worker is `runtime::wire::WorkerArgs`, its first message.)

use pyo3::IntoPyObject;

/// The prelude's settings for one worker (see `python/vis/_state.py`). Crosses into Python as
/// a dict (pyo3's `IntoPyObject`), one key per field.
#[derive(Debug, Clone, PartialEq, Eq, IntoPyObject)]
pub(crate) struct PreludeSettings {
    /// The workspace the worker was started for (extensions and skills under `.vis/`).
    pub workspace: Option<String>,
    /// The user's config directory (`extensions/`, `skills/`).
    pub config_dir: Option<String>,
    /// Vis's cache directory for this workspace (read here, written by the host).
    pub cache_dir: Option<String>,
    /// Digest of the embedded prelude and bundled extensions (a key of the signature cache).
    pub prelude_digest: String,
    /// Load only the bundled extensions.
    pub safe_mode: bool,
    /// The user trusts the workspace: its own code may load.
    pub trusted: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use pyo3::prelude::*;
    use pyo3::types::PyDict;

    /// The annotation a field of the `TypedDict` must have for the value it receives: the
    /// Python type's name, `| None` when the Rust field is an `Option` (it crosses as None).
    fn annotation(value: &Bound<'_, PyAny>, when_none: &Bound<'_, PyAny>) -> String {
        let name = value.get_type().name().unwrap().to_string();
        if when_none.is_none() {
            format!("{name} | None")
        } else {
            name
        }
    }

    #[test]
    fn the_typed_dict_has_exactly_the_rust_fields_and_types() {
        let source = include_str!("../../../python/vis/_state.py");
        let full = PreludeSettings {
            workspace: Some("/w".into()),
            config_dir: Some("/c".into()),
            cache_dir: Some("/k".into()),
            prelude_digest: "d".into(),
            safe_mode: true,
            trusted: false,
        };
        // The same with every `Option` empty: a field that is None here is optional.
        let empty = PreludeSettings {
            workspace: None,
            config_dir: None,
            cache_dir: None,
            ..full.clone()
        };
        Python::initialize();
        Python::attach(|py| {
            // The annotations of `class Settings(TypedDict)`, read with Python's own parser.
            let globals = PyDict::new(py);
            globals.set_item("SOURCE", source).unwrap();
            py.run(
                c"import ast\nfields = []\nfor node in ast.walk(ast.parse(SOURCE)):\n    if isinstance(node, ast.ClassDef) and node.name == 'Settings':\n        fields = [(s.target.id, ast.unparse(s.annotation)) for s in node.body if isinstance(s, ast.AnnAssign)]\n",
                Some(&globals),
                None,
            )
            .unwrap();
            let declared: Vec<(String, String)> = globals
                .get_item("fields")
                .unwrap()
                .unwrap()
                .extract()
                .unwrap();
            let full = full.into_pyobject(py).unwrap();
            let empty = empty.into_pyobject(py).unwrap();
            let given: Vec<(String, String)> = full
                .items()
                .iter()
                .map(|item| {
                    let (key, value): (String, Bound<'_, PyAny>) = item.extract().unwrap();
                    let when_none = empty.get_item(&key).unwrap().unwrap();
                    let ty = annotation(&value, &when_none);
                    (key, ty)
                })
                .collect();
            assert_eq!(
                declared, given,
                "vis._state.Settings and PreludeSettings differ"
            );
        });
    }
}
