//! A power trace's full-rate samples as a NumPy `.npy` file (format 1.0): a user loads
//! them in one line, `numpy.load("current.npy")`, as amperes in a float32 array. The format:
//! <https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html> — the magic
//! string, the version, a little-endian u16 header length, an ASCII dict header padded with
//! spaces and ended by a newline so the data starts at a multiple of 64 bytes, then the
//! values, little-endian.

/// `values` as the bytes of a one-dimensional `<f4` `.npy` file.
pub fn npy_f32(values: &[f32]) -> Vec<u8> {
    let dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}", values.len());
    // magic (6) + version (2) + header length (2) + dict + padding + '\n'.
    let unpadded = 10 + dict.len() + 1;
    let header_len = dict.len() + 1 + (64 - unpadded % 64) % 64;
    let mut out = Vec::with_capacity(10 + header_len + 4 * values.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header_len as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.resize(10 + header_len - 1, b' ');
    out.push(b'\n');
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_is_aligned_and_the_values_follow_it_little_endian() {
        for n in [0usize, 1, 7, 1000, 123_456] {
            let values: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 3.0).collect();
            let bytes = npy_f32(&values);
            assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
            let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
            assert_eq!((10 + header_len) % 64, 0, "data aligned to 64 bytes");
            let header = std::str::from_utf8(&bytes[10..10 + header_len]).unwrap();
            assert!(header.starts_with(&format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({n},), }}")));
            assert!(header.ends_with('\n'));
            let data = &bytes[10 + header_len..];
            assert_eq!(data.len(), 4 * n);
            let back: Vec<f32> = data.chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            assert_eq!(back, values);
        }
    }
}
