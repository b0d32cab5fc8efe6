//! Reads a directory of policy files (`*.yaml`, `*.yml`) into a [`PolicySet`].

use super::PolicyHandle;
use super::spec::{PolicyFileError, PolicyLoadError, PolicySet};
use std::path::{Path, PathBuf};

/// The policy files of a directory, sorted by name, with their contents.
pub fn read_dir(dir: &Path) -> Result<Vec<(PathBuf, String)>, PolicyLoadError> {
    let io_err = |file: &Path, e: std::io::Error| PolicyLoadError {
        errors: vec![PolicyFileError {
            file: file.display().to_string(),
            line: None,
            column: None,
            message: e.to_string(),
        }],
    };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| io_err(dir, e))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).map_err(|e| io_err(&p, e))?;
            Ok((p, text))
        })
        .collect()
}

/// Parses files read by [`read_dir`].
pub fn parse_files(files: &[(PathBuf, String)]) -> Result<PolicySet, PolicyLoadError> {
    let named: Vec<(String, &str)> = files
        .iter()
        .map(|(p, t)| (p.display().to_string(), t.as_str()))
        .collect();
    PolicySet::from_files(named.iter().map(|(n, t)| (n.as_str(), *t)))
}

/// Loads every policy file of a directory.
pub fn load_dir(dir: &Path) -> Result<PolicySet, PolicyLoadError> {
    parse_files(&read_dir(dir)?)
}

impl PolicyHandle {
    /// A handle holding the policies of `dir`; fails if any file is invalid.
    pub fn load_dir(dir: impl AsRef<Path>) -> Result<Self, PolicyLoadError> {
        Ok(Self::new(load_dir(dir.as_ref())?))
    }

    /// Reloads `dir`; on error the current set stays in force and the error is returned.
    pub fn reload(&self, dir: impl AsRef<Path>) -> Result<(), PolicyLoadError> {
        let set = load_dir(dir.as_ref())?;
        self.replace(set);
        Ok(())
    }
}
