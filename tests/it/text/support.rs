//! Helpers shared by the text tests.

use std::path::{Path, PathBuf};

use tempfile::TempDir;
use vis::text::{cat, CatOptions, Workspace};

/// A temporary workspace root.
pub struct Ws {
    pub dir: TempDir,
    pub ws: Workspace,
}

impl Ws {
    pub fn new() -> Ws {
        let dir = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::new([dir.path().to_path_buf()]);
        Ws { dir, ws }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let path = self.path(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&path, bytes).expect("write");
        path
    }

    pub fn read(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.path(rel)).expect("read")
    }

    /// Addresses of every line, via cat.
    pub fn addresses(&self, rel: &str) -> Vec<String> {
        cat(&self.ws, Path::new(rel), &CatOptions::default())
            .expect("cat")
            .lines()
            .into_iter()
            .map(|l| l.address.to_string())
            .collect()
    }

    /// Address of one 1-based line.
    pub fn addr(&self, rel: &str, line: usize) -> String {
        self.addresses(rel)[line - 1].clone()
    }
}

/// Names of files in a directory (to check no temp file is left behind).
pub fn dir_entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The CPython standard library sources (`VIS_TEST_STDLIB`, else where the embedded
/// interpreter's `os.py` lives).
pub fn stdlib() -> PathBuf {
    if let Ok(path) = std::env::var("VIS_TEST_STDLIB") {
        return PathBuf::from(path);
    }
    use pyo3::prelude::*;
    pyo3::Python::initialize();
    pyo3::Python::attach(|py| {
        let os = py.import("os").expect("import os");
        let file: String = os
            .getattr("__file__")
            .and_then(|f| f.extract())
            .expect("os.__file__");
        PathBuf::from(file)
            .parent()
            .expect("stdlib dir")
            .to_path_buf()
    })
}
