//! Reading a tool's JSON report back (for the analysis).

use std::path::Path;

use serde::de::DeserializeOwned;

use crate::error::AnalysisError;

/// Reads and parses the JSON file at `path`.
pub(crate) fn read<T: DeserializeOwned>(path: &Path) -> Result<T, AnalysisError> {
    let text = std::fs::read_to_string(path).map_err(|source| AnalysisError::Read {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| AnalysisError::Json {
        path: path.to_owned(),
        source,
    })
}
