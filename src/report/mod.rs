//! Reports: tables, Markdown, CSV and JSON from a campaign in the store.
