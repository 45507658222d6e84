//! Configuration errors. A syntax error names the place (file, line, column) and the
//! offending token; a semantic error names the object (`queue 3: ...`).
//!
//! An error is one short line whatever the input: user text longer than [`QUOTE_CHARS`]
//! is quoted cut ([`cut`]: its start and its length), so that a one-line 50 MB file gives
//! an error of a few hundred bytes and not three copies of the line. Our own messages cut
//! the text they quote where they quote it; messages made by other crates (toml, serde,
//! pspat-units, the scheduler registry), which quote it whole, are bounded on their way
//! into a [`ConfigError`] ([`ConfigError::syntax`], [`ConfigError::invalid`]).

use std::borrow::Cow;

/// Longest user text an error quotes whole, in characters. Longer than any word of a valid
/// configuration (an IPv6 prefix with its length is at most 43), short enough that an
/// error quoting three texts stays one line.
pub const QUOTE_CHARS: usize = 48;

/// How many characters of a longer text [`cut`] keeps.
const KEPT_CHARS: usize = 32;

/// Longest message kept whole, in characters; past it (other crates' messages quoting text
/// with spaces in it), its start and end are kept around `...`.
const MESSAGE_CHARS: usize = 200;

/// Why a configuration was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The text could not be read as the front end's syntax.
    #[error("{origin}:{line}:{column}: {message} (at `{token}`)")]
    Syntax {
        /// File name (or `<string>`).
        origin: String,
        /// 1-based line.
        line: u32,
        /// 1-based column, in characters.
        column: u32,
        /// The offending token, as written (empty at end of input), [`cut`] if long.
        token: String,
        /// What was wrong, and what was expected.
        message: String,
    },
    /// The text parsed, but the configuration it describes is inconsistent; the message
    /// names the object (`queue 3: sched 9 is not defined`). Also a file that cannot be
    /// read as a configuration (missing, not a regular file, too large).
    #[error("{0}")]
    Invalid(String),
}

impl ConfigError {
    /// A syntax error at `line`:`column` of `origin`; the token is [`cut`] and the message
    /// bounded (see the module doc).
    pub fn syntax(origin: &str, line: u32, column: u32, token: &str, message: &str) -> Self {
        ConfigError::Syntax {
            origin: origin.to_owned(),
            line,
            column,
            token: cut(token).into_owned(),
            message: bound(message),
        }
    }

    /// A configuration refused for what it means: `origin` (file name, and place if known,
    /// written as is) then the bounded message.
    pub fn invalid(origin: &str, message: &str) -> Self {
        ConfigError::Invalid(format!("{origin}: {}", bound(message)))
    }
}

/// A pspat-units error on `text`: its message when `text` is short enough to quote (the
/// message quotes it, and parts of it, whole), otherwise that `text`, [`cut`], is not
/// `what` (`a bandwidth`).
pub(crate) fn unit_error(text: &str, what: &str, e: impl std::fmt::Display) -> String {
    if text.char_indices().nth(QUOTE_CHARS).is_none() {
        e.to_string()
    } else {
        format!("'{}' is not {what}", cut(text))
    }
}

/// `text` if it has at most [`QUOTE_CHARS`] characters; otherwise its first characters,
/// `...` and its length in bytes: `xxxxxxxx...(1048576 bytes)`.
pub fn cut(text: &str) -> Cow<'_, str> {
    match text.char_indices().nth(QUOTE_CHARS) {
        None => Cow::Borrowed(text),
        Some(_) => {
            let end = text
                .char_indices()
                .nth(KEPT_CHARS)
                .map_or(text.len(), |(i, _)| i);
            Cow::Owned(format!("{}...({} bytes)", &text[..end], text.len()))
        }
    }
}

/// A message from another crate made one short line: every word (a run without white
/// space) longer than [`QUOTE_CHARS`] is [`cut`], keeping the quotes and punctuation around
/// it; if still longer than [`MESSAGE_CHARS`], its middle is left out; line breaks become
/// spaces.
pub(crate) fn bound(message: &str) -> String {
    let long_word = message
        .split_whitespace()
        .any(|w| w.char_indices().nth(QUOTE_CHARS).is_some());
    let mut out = if long_word {
        let mut out = String::new();
        let mut rest = message;
        while !rest.is_empty() {
            let space = rest.len() - rest.trim_start().len();
            out.push_str(&rest[..space]);
            rest = &rest[space..];
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            out.push_str(&cut_word(&rest[..end]));
            rest = &rest[end..];
        }
        out
    } else {
        message.to_owned()
    };
    if out.contains(['\n', '\r']) {
        out = out.replace(['\n', '\r'], " ");
    }
    if out.char_indices().nth(MESSAGE_CHARS).is_some() {
        let head = out
            .char_indices()
            .nth(MESSAGE_CHARS * 2 / 3)
            .map_or(0, |(i, _)| i);
        let tail = out
            .char_indices()
            .rev()
            .nth(MESSAGE_CHARS / 4)
            .map_or(out.len(), |(i, _)| i);
        out = format!(
            "{}...({} bytes left out)...{}",
            &out[..head],
            tail - head,
            &out[tail..]
        );
    }
    out
}

/// A word [`cut`], its opening quotes and closing quotes or punctuation kept.
fn cut_word(word: &str) -> Cow<'_, str> {
    if word.char_indices().nth(QUOTE_CHARS).is_none() {
        return Cow::Borrowed(word);
    }
    let open = word.len() - word.trim_start_matches(['\'', '"', '`', '(']).len();
    let open = open.min(2);
    let body = &word[open..];
    let close = body.len()
        - body
            .trim_end_matches(['\'', '"', '`', ')', ',', ';', ':', '.'])
            .len();
    let close = close.min(3);
    let (body, end) = body.split_at(body.len() - close);
    Cow::Owned(format!("{}{}{end}", &word[..open], cut(body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_kept_and_long_text_cut_with_its_length() {
        let t = "x".repeat(QUOTE_CHARS);
        assert_eq!(cut(&t), t.as_str());
        let t = "x".repeat(QUOTE_CHARS + 1);
        assert_eq!(cut(&t), format!("{}...(49 bytes)", "x".repeat(KEPT_CHARS)));
        // cut on a character boundary; the length is in bytes
        let t = "é".repeat(100);
        assert_eq!(cut(&t), format!("{}...(200 bytes)", "é".repeat(KEPT_CHARS)));
    }

    #[test]
    fn a_message_keeps_its_words_and_cuts_the_long_ones() {
        let m = "unknown field `queue`, expected one of `id`, `type`";
        assert_eq!(bound(m), m);
        let x = "x".repeat(1000);
        assert_eq!(
            bound(&format!("unit '{x}' in '1{x}', expected\nbw")),
            format!(
                "unit '{}...(1000 bytes)' in '1{}...(1001 bytes)', expected bw",
                "x".repeat(KEPT_CHARS),
                "x".repeat(KEPT_CHARS - 1)
            )
        );
        // text with spaces: its middle goes
        let words = "ab ".repeat(10_000);
        let b = bound(&format!("invalid type: string \"{words}\", expected u32"));
        assert!(b.len() < MESSAGE_CHARS + 40, "{b}");
        assert!(b.starts_with("invalid type: string \"ab ab"), "{b}");
        assert!(b.ends_with("ab \", expected u32"), "{b}");
        assert!(b.contains("bytes left out)"), "{b}");
    }
}
