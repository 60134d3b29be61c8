//! Raw files in one place (docs/artifacts.md): the `RawFiles` interface over a folder or a
//! bucket, the bucket's client, the `raw_files` table, and the upload that counts only
//! once the object read back matches.

mod bucket;
mod command_credentials;
mod raw_file_row;
#[expect(clippy::module_inception, reason = "the file is named for its one type, `RawFiles`")]
mod raw_files;
mod raw_files_error;
mod transfer;

pub use bucket::{Bucket, Chunks};
pub use raw_file_row::RawFileRow;
pub use raw_files::{Place, RawFiles};
pub use raw_files_error::RawFilesError;
pub use transfer::{MANIFEST, files_under, hash_file, note_failure, rows_for, upload_confirmed};
