//! PostgreSQL's binary `COPY … TO STDOUT` format, read row by row from a stream: a
//! campaign's million measurements come this way, in large chunks, each field borrowed
//! from the buffer (no value and no string per field). The format:
//! <https://www.postgresql.org/docs/current/sql-copy.html#id-1.9.3.55.9.4>.

use std::io::Read;

use super::conn::DbError;

/// What gets each row: its fields, `None` for NULL.
pub type EachRow<'f> = dyn FnMut(&[Option<&[u8]>]) -> Result<(), DbError> + 'f;

/// `PGCOPY\n\377\r\n\0`, then a flags word and a header extension length.
const SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";

/// Reads every row of `input` (binary COPY output) and hands its fields to `f`, `None`
/// for NULL.
pub fn each_row(input: &mut dyn Read, f: &mut EachRow<'_>) -> Result<(), DbError> {
    let mut rows = CopyRows::default();
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        let n = match input.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(DbError::Closed(format!("reading COPY data: {e}"))),
        };
        if n == 0 {
            return rows.end();
        }
        rows.feed(&chunk[..n], f)?;
    }
}

/// A binary COPY stream read as it comes, in chunks of any size (the server sends one
/// message a row): each whole row is handed on at once, read in place in the chunk; only
/// a row cut between two chunks is copied, to be finished by the next.
#[derive(Default)]
pub struct CopyRows {
    /// The header was read.
    started: bool,
    /// The end marker was read.
    ended: bool,
    /// The start of a row (or of the header) that the last chunk cut.
    pending: Vec<u8>,
    /// Where each field of the row being handed on is, reused row after row.
    bounds: Vec<Option<(usize, usize)>>,
}

impl CopyRows {
    /// Hands on every row that `chunk` (after what an earlier chunk left) completes.
    pub fn feed(&mut self, chunk: &[u8], f: &mut EachRow<'_>) -> Result<(), DbError> {
        if self.pending.is_empty() {
            let used = self.rows_in(chunk, f)?;
            self.pending.extend_from_slice(&chunk[used..]);
        } else {
            let mut data = std::mem::take(&mut self.pending);
            data.extend_from_slice(chunk);
            let used = self.rows_in(&data, f)?;
            data.drain(..used);
            self.pending = data;
        }
        if self.ended && !self.pending.is_empty() {
            return Err(DbError::Type("COPY data: bytes after the end".into()));
        }
        Ok(())
    }

    /// The stream ended: an error unless it ended where the format says.
    pub fn end(&self) -> Result<(), DbError> {
        if self.ended {
            Ok(())
        } else {
            Err(DbError::Closed("reading COPY data: it ended before its end marker".into()))
        }
    }

    /// Hands on the whole rows at the start of `data`; how many bytes they took.
    fn rows_in(&mut self, data: &[u8], f: &mut EachRow<'_>) -> Result<usize, DbError> {
        let bad = |what: &str| DbError::Type(format!("COPY data: {what}"));
        let mut at = 0;
        if !self.started {
            if data.len() < 19 {
                return Ok(0);
            }
            if &data[..11] != SIGNATURE {
                return Err(bad("no PGCOPY signature"));
            }
            let ext = u32::from_be_bytes([data[15], data[16], data[17], data[18]]) as usize;
            if data.len() < 19 + ext {
                return Ok(0);
            }
            self.started = true;
            at = 19 + ext;
        }
        let mut fields: Vec<Option<&[u8]>> = Vec::new();
        while !self.ended {
            let Some(n) = data.get(at..at + 2) else { break };
            let count = i16::from_be_bytes([n[0], n[1]]);
            if count == -1 {
                self.ended = true;
                at += 2;
                break;
            }
            // Where this row's fields are, if all of it is here.
            self.bounds.clear();
            let mut next = at + 2;
            let mut whole = true;
            for _ in 0..count.max(0) {
                let Some(len) = data.get(next..next + 4) else {
                    whole = false;
                    break;
                };
                let len = i32::from_be_bytes([len[0], len[1], len[2], len[3]]);
                next += 4;
                if len < 0 {
                    self.bounds.push(None);
                    continue;
                }
                let end = next + len as usize;
                if end > data.len() {
                    whole = false;
                    break;
                }
                self.bounds.push(Some((next, end)));
                next = end;
            }
            if !whole {
                break;
            }
            fields.clear();
            fields.extend(self.bounds.iter().map(|b| b.map(|(from, to)| &data[from..to])));
            f(&fields)?;
            at = next;
        }
        Ok(at)
    }
}

/// Runs `COPY (query) TO STDOUT (FORMAT binary)` on the async client and hands each row
/// to `f`: the whole stream read in the one runtime call this is awaited in.
pub async fn copy_out_async(client: &tokio_postgres::Client, query: &str, f: &mut EachRow<'_>) -> Result<(), DbError> {
    use futures_util::StreamExt;
    let stream = client.copy_out(&format!("COPY ({query}) TO STDOUT (FORMAT binary)")).await?;
    let mut stream = std::pin::pin!(stream);
    let mut rows = CopyRows::default();
    while let Some(chunk) = stream.next().await {
        rows.feed(&chunk?, f)?;
    }
    rows.end()
}

/// A binary `BIGINT` field.
pub fn int8(field: Option<&[u8]>) -> Result<i64, DbError> {
    match field {
        Some(b) if b.len() == 8 => Ok(i64::from_be_bytes(b.try_into().unwrap_or_default())),
        _ => Err(DbError::Type("COPY data: not a BIGINT".into())),
    }
}

/// A binary `DOUBLE PRECISION` field.
pub fn float8(field: Option<&[u8]>) -> Result<f64, DbError> {
    match field {
        Some(b) if b.len() == 8 => Ok(f64::from_be_bytes(b.try_into().unwrap_or_default())),
        _ => Err(DbError::Type("COPY data: not a DOUBLE PRECISION".into())),
    }
}

/// A binary `TEXT` field.
pub fn text(field: Option<&[u8]>) -> Result<&str, DbError> {
    std::str::from_utf8(field.ok_or_else(|| DbError::Type("COPY data: a NULL text".into()))?)
        .map_err(|e| DbError::Type(format!("COPY data: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_nulls_are_read_from_the_binary_format() {
        let mut data = SIGNATURE.to_vec();
        data.extend(0u32.to_be_bytes());
        data.extend(0u32.to_be_bytes());
        for (i, name) in [(7i64, Some("cpu_pct")), (8, None)] {
            data.extend(2i16.to_be_bytes());
            data.extend(8i32.to_be_bytes());
            data.extend(i.to_be_bytes());
            match name {
                Some(n) => {
                    data.extend((n.len() as i32).to_be_bytes());
                    data.extend(n.as_bytes());
                }
                None => data.extend((-1i32).to_be_bytes()),
            }
        }
        data.extend((-1i16).to_be_bytes());
        let mut got = Vec::new();
        each_row(&mut data.as_slice(), &mut |f| {
            got.push((int8(f[0])?, f[1].map(|b| text(Some(b)).unwrap().to_string())));
            Ok(())
        })
        .unwrap();
        assert_eq!(got, [(7, Some("cpu_pct".into())), (8, None)]);
        // The same rows whatever the chunks the stream comes in, down to a byte at a time.
        for size in 1..data.len() {
            let mut rows = CopyRows::default();
            let mut again = Vec::new();
            for chunk in data.chunks(size) {
                rows.feed(chunk, &mut |f| {
                    again.push((int8(f[0])?, f[1].map(|b| text(Some(b)).unwrap().to_string())));
                    Ok(())
                })
                .unwrap();
            }
            rows.end().unwrap();
            assert_eq!(again, got, "in chunks of {size}");
        }
        let e = each_row(&mut &data[..30], &mut |_| Ok(())).unwrap_err();
        assert!(e.to_string().contains("COPY data"), "{e}");
        assert!(each_row(&mut &b"PGCOPY\n\xff\r\n\x01xxxxxxxx"[..], &mut |_| Ok(())).is_err());
    }
}
