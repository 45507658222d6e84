//! The ipfw-syntax lexer: one line into tokens with their columns.
//!
//! A token is a word (any run of characters other than white space, `{`, `}` and `,`), or
//! one of the punctuation characters `{`, `}`, `,`. `#` and `//` start a comment that runs
//! to the end of the line, wherever they appear (no ipfw word contains them). Columns are
//! 1-based and count characters, not bytes, so that an editor's column matches.

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Word,
    LBrace,
    RBrace,
    Comma,
}

/// A token of one line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token<'a> {
    pub kind: Kind,
    pub text: &'a str,
    /// 1-based column of its first character.
    pub column: u32,
}

/// The tokens of `line` (without its comment), and the column just past its last
/// character (where "end of line" errors point).
pub fn lex_line<'a>(line: &'a str) -> (Vec<Token<'a>>, u32) {
    let mut toks = Vec::new();
    let mut word_start: Option<(usize, u32)> = None;
    let mut col = 0u32;
    let mut end_col = 1u32;
    let mut chars = line.char_indices().peekable();
    let flush = |toks: &mut Vec<Token<'a>>, start: &mut Option<(usize, u32)>, end: usize| {
        if let Some((b, c)) = start.take() {
            toks.push(Token {
                kind: Kind::Word,
                text: &line[b..end],
                column: c,
            });
        }
    };
    while let Some((i, ch)) = chars.next() {
        col += 1;
        let comment = ch == '#' || (ch == '/' && chars.peek().map(|&(_, c)| c) == Some('/'));
        if comment {
            flush(&mut toks, &mut word_start, i);
            return (toks, end_col);
        }
        let punct = match ch {
            '{' => Some(Kind::LBrace),
            '}' => Some(Kind::RBrace),
            ',' => Some(Kind::Comma),
            _ => None,
        };
        if ch.is_whitespace() || punct.is_some() {
            flush(&mut toks, &mut word_start, i);
            if let Some(kind) = punct {
                toks.push(Token {
                    kind,
                    text: &line[i..i + 1],
                    column: col,
                });
                end_col = col + 1;
            }
        } else {
            if word_start.is_none() {
                word_start = Some((i, col));
            }
            end_col = col + 1;
        }
    }
    flush(&mut toks, &mut word_start, line.len());
    (toks, end_col)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<(&str, u32)> {
        lex_line(line)
            .0
            .iter()
            .map(|t| (t.text, t.column))
            .collect()
    }

    #[test]
    fn words_punctuation_and_columns() {
        assert_eq!(
            words("add queue 1 out src-ip { 1.2.3.4,5.6.7.0/24 }"),
            vec![
                ("add", 1),
                ("queue", 5),
                ("1", 11),
                ("out", 13),
                ("src-ip", 17),
                ("{", 24),
                ("1.2.3.4", 26),
                (",", 33),
                ("5.6.7.0/24", 34),
                ("}", 45)
            ]
        );
        assert_eq!(lex_line("  sched 1  ").1, 10);
    }

    #[test]
    fn comments_and_unicode_columns() {
        assert_eq!(
            words("table 1 add 1.2.3.0/24 20 // to queue 20"),
            words("table 1 add 1.2.3.0/24 20")
        );
        assert_eq!(words("# all comment"), vec![]);
        assert_eq!(words("a#b c"), vec![("a", 1)]);
        // a two-byte character counts as one column
        assert_eq!(words("é x"), vec![("é", 1), ("x", 3)]);
        // IPv6 colons and prefix slashes are part of words
        assert_eq!(words("2001:db8::/32"), vec![("2001:db8::/32", 1)]);
    }
}
