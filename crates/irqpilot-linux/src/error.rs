//! Errors of the text parsers. Readers add the path (see [`crate::root::Root`]).

/// A text format error: where (1-based line, 0 for the whole text) and what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    /// 1-based line number; 0 when the whole text is at fault (empty, binary).
    pub line: usize,
    /// What is wrong, naming the offending token.
    pub message: String,
}

impl ParseError {
    /// An error at `line`.
    pub fn new(line: usize, message: impl Into<String>) -> ParseError {
        ParseError {
            line,
            message: message.into(),
        }
    }
}
