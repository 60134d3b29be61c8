//! Parsers of device outputs: pure functions of text and bytes.
