//! Reading a tool's JSON report back, and the analysis's other files as text.

use std::path::Path;

use serde::de::DeserializeOwned;

use crate::error::AnalysisError;

/// Reads the file at `path` as text (an error names the file).
pub(crate) fn read_text(path: &Path) -> Result<String, AnalysisError> {
    std::fs::read_to_string(path).map_err(|source| AnalysisError::Read {
        path: path.to_owned(),
        source,
    })
}

/// Reads and parses the JSON file at `path`.
pub(crate) fn read<T: DeserializeOwned>(path: &Path) -> Result<T, AnalysisError> {
    let text = read_text(path)?;
    serde_json::from_str(&text).map_err(|source| AnalysisError::Json {
        path: path.to_owned(),
        source,
    })
}
