//! `lab serve`: the lab in a browser — its devices and queue, campaigns and their reports,
//! over the lab's store (docs/serve.md).

mod access;
mod cancel;
mod connections;
mod live;
mod live_parts;
mod login_limit;
mod pages;
mod raw_file;
mod report_cache;
mod routes;
mod serve_cmd;
mod submit;
mod submitted;

pub use serve_cmd::{ServeArgs, run};
