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
    let mut r = std::io::BufReader::with_capacity(1 << 16, input);
    let bad = |what: &str| DbError::Type(format!("COPY data: {what}"));
    let mut header = [0u8; 19];
    read_exact(&mut r, &mut header)?;
    if &header[..11] != SIGNATURE {
        return Err(bad("no PGCOPY signature"));
    }
    let ext = u32::from_be_bytes([header[15], header[16], header[17], header[18]]) as usize;
    let mut skip = vec![0u8; ext];
    read_exact(&mut r, &mut skip)?;
    let mut row: Vec<u8> = Vec::new();
    let mut bounds: Vec<Option<(usize, usize)>> = Vec::new();
    loop {
        let mut n = [0u8; 2];
        read_exact(&mut r, &mut n)?;
        let fields = i16::from_be_bytes(n);
        if fields == -1 {
            return Ok(());
        }
        row.clear();
        bounds.clear();
        for _ in 0..fields.max(0) {
            let mut len = [0u8; 4];
            read_exact(&mut r, &mut len)?;
            let len = i32::from_be_bytes(len);
            if len < 0 {
                bounds.push(None);
                continue;
            }
            let at = row.len();
            row.resize(at + len as usize, 0);
            read_exact(&mut r, &mut row[at..])?;
            bounds.push(Some((at, at + len as usize)));
        }
        let fields: Vec<Option<&[u8]>> = bounds.iter().map(|b| b.map(|(from, to)| &row[from..to])).collect();
        f(&fields)?;
    }
}

fn read_exact(r: &mut impl Read, buf: &mut [u8]) -> Result<(), DbError> {
    r.read_exact(buf).map_err(|e| DbError::Closed(format!("reading COPY data: {e}")))
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
        let e = each_row(&mut &data[..30], &mut |_| Ok(())).unwrap_err();
        assert!(e.to_string().contains("COPY data"), "{e}");
        assert!(each_row(&mut &b"PGCOPY\n\xff\r\n\x01xxxxxxxx"[..], &mut |_| Ok(())).is_err());
    }
}
