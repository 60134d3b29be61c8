//! The error every device-output parser returns: where the input is wrong, and how.

/// A parse failure. Text formats name the 1-based line (one past the last line when the
/// input ends too early); binary formats name the byte offset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("line {line}: {message}")]
    Line { line: usize, message: String },
    #[error("byte {offset}: {message}")]
    Byte { offset: u64, message: String },
}

impl ParseError {
    pub fn at(line: usize, message: impl Into<String>) -> Self {
        ParseError::Line { line, message: message.into() }
    }

    /// The 1-based line, for text formats.
    pub fn line(&self) -> Option<usize> {
        match self {
            ParseError::Line { line, .. } => Some(*line),
            ParseError::Byte { .. } => None,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            ParseError::Line { message, .. } | ParseError::Byte { message, .. } => message,
        }
    }
}
