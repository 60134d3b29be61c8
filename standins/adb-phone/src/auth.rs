//! adbd's side of AUTH (protocol.txt "AUTH"): send a random TOKEN; a SIGNATURE made by a
//! key the phone already trusts lets the host in, anything else gets a new TOKEN; an
//! RSAPUBLICKEY is the host asking the user to allow it. `accept` allows it at once (the
//! user tapped Allow) and remembers the key in ROOT/adb_keys, like /data/misc/adb/adb_keys;
//! `never` never answers, so the host lists the phone `unauthorized`.
//!
//! Signatures are really checked: adb signs the token as a SHA-1 digest with RSA PKCS#1 v1.5,
//! and its public key is the mincrypt `RSAPublicKey` struct (word count, n0inv, n, R² mod n,
//! exponent, little-endian words) in base64. The modular exponentiation follows mincrypt's
//! Montgomery routine, which that struct is laid out for.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

pub const TOKEN_SIZE: usize = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// ro.adb.secure=0: CNXN at once.
    Off,
    Accept,
    Never,
}

/// What the connection does with one AUTH packet from the host.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Online,
    /// Send another TOKEN (the host then tries its next key, or its public key).
    Retry,
    /// Say nothing: the user has not allowed this host.
    Wait,
}

pub struct Auth {
    mode: AuthMode,
    keys_file: PathBuf,
    token: [u8; TOKEN_SIZE],
}

impl Auth {
    pub fn new(mode: AuthMode, root: &Path) -> Auth {
        Auth { mode, keys_file: root.join("adb_keys"), token: [0; TOKEN_SIZE] }
    }

    pub fn mode(&self) -> AuthMode {
        self.mode
    }

    /// A fresh token to send in AUTH(TOKEN).
    pub fn new_token(&mut self) -> Vec<u8> {
        let mut urandom = fs::File::open("/dev/urandom").expect("/dev/urandom");
        urandom.read_exact(&mut self.token).expect("/dev/urandom");
        self.token.to_vec()
    }

    pub fn signature(&self, signature: &[u8]) -> Verdict {
        if self.mode == AuthMode::Never {
            return Verdict::Retry;
        }
        let keys = fs::read_to_string(&self.keys_file).unwrap_or_default();
        let trusted = keys.lines().filter_map(PublicKey::parse).any(|k| k.verifies(&self.token, signature));
        if trusted { Verdict::Online } else { Verdict::Retry }
    }

    pub fn public_key(&self, data: &[u8]) -> Verdict {
        if self.mode == AuthMode::Never {
            return Verdict::Wait;
        }
        let line = String::from_utf8_lossy(data).trim_end_matches('\0').trim().to_string();
        if PublicKey::parse(&line).is_none() {
            return Verdict::Wait;
        }
        let mut keys = fs::read_to_string(&self.keys_file).unwrap_or_default();
        if !keys.lines().any(|l| l == line) {
            keys.push_str(&line);
            keys.push('\n');
            if fs::write(&self.keys_file, keys).is_err() {
                return Verdict::Wait;
            }
        }
        Verdict::Online
    }
}

/// mincrypt's RSAPublicKey: `len` 32-bit words of modulus, little-endian.
pub struct PublicKey {
    n0inv: u32,
    n: Vec<u32>,
    rr: Vec<u32>,
    exponent: u32,
}

/// DER of DigestInfo { sha1, NULL } before the 20 digest bytes (PKCS#1 v1.5).
const SHA1_DIGEST_INFO: [u8; 15] =
    [0x30, 0x21, 0x30, 0x09, 0x06, 0x05, 0x2b, 0x0e, 0x03, 0x02, 0x1a, 0x05, 0x00, 0x04, 0x14];

impl PublicKey {
    /// Parses one `adbkey.pub` line: base64 of the struct, then optionally ` user@host`.
    pub fn parse(line: &str) -> Option<PublicKey> {
        let b64 = line.split_whitespace().next()?;
        let bytes = STANDARD.decode(b64).ok()?;
        let word =
            |i: usize| -> Option<u32> { Some(u32::from_le_bytes(bytes.get(i * 4..i * 4 + 4)?.try_into().ok()?)) };
        let len = word(0)? as usize;
        if len == 0 || len > 128 || bytes.len() != (3 + 2 * len) * 4 {
            return None;
        }
        let n = (0..len).map(|i| word(2 + i)).collect::<Option<Vec<_>>>()?;
        let rr = (0..len).map(|i| word(2 + len + i)).collect::<Option<Vec<_>>>()?;
        Some(PublicKey { n0inv: word(1)?, n, rr, exponent: word(2 + 2 * len)? })
    }

    pub fn verifies(&self, token: &[u8], signature: &[u8]) -> bool {
        let bytes = self.n.len() * 4;
        if signature.len() != bytes || token.len() != TOKEN_SIZE || self.exponent != 65537 {
            return false;
        }
        let m = self.modpow_f4(signature);
        let pad_end = bytes - TOKEN_SIZE - SHA1_DIGEST_INFO.len() - 1;
        m[0] == 0
            && m[1] == 1
            && m[2..pad_end].iter().all(|b| *b == 0xff)
            && m[pad_end] == 0
            && m[pad_end + 1..bytes - TOKEN_SIZE] == SHA1_DIGEST_INFO
            && &m[bytes - TOKEN_SIZE..] == token
    }

    /// `input`^65537 mod n, big-endian bytes in and out.
    fn modpow_f4(&self, input: &[u8]) -> Vec<u8> {
        let len = self.n.len();
        let a: Vec<u32> =
            (0..len).map(|i| u32::from_be_bytes(input[(len - 1 - i) * 4..(len - i) * 4].try_into().unwrap())).collect();
        let mut ar = self.mont_mul(&a, &self.rr); // a·R mod n
        for _ in 0..8 {
            let aar = self.mont_mul(&ar, &ar);
            ar = self.mont_mul(&aar, &aar); // 16 squarings: a^65536·R
        }
        let mut out = self.mont_mul(&ar, &a); // a^65537
        if self.ge_n(&out) {
            self.sub_n(&mut out);
        }
        out.iter().rev().flat_map(|w| w.to_be_bytes()).collect()
    }

    fn mont_mul(&self, a: &[u32], b: &[u32]) -> Vec<u32> {
        let mut c = vec![0u32; self.n.len()];
        for &ai in a {
            self.mont_mul_add(&mut c, ai, b);
        }
        c
    }

    /// c = (c + a·b) / R mod n, one word of `a` at a time.
    fn mont_mul_add(&self, c: &mut [u32], a: u32, b: &[u32]) {
        let len = self.n.len();
        let mut x = u64::from(a) * u64::from(b[0]) + u64::from(c[0]);
        let d0 = (x as u32).wrapping_mul(self.n0inv);
        let mut y = u64::from(d0) * u64::from(self.n[0]) + u64::from(x as u32);
        for i in 1..len {
            x = (x >> 32) + u64::from(a) * u64::from(b[i]) + u64::from(c[i]);
            y = (y >> 32) + u64::from(d0) * u64::from(self.n[i]) + u64::from(x as u32);
            c[i - 1] = y as u32;
        }
        x = (x >> 32) + (y >> 32);
        c[len - 1] = x as u32;
        if x >> 32 != 0 {
            self.sub_n(c);
        }
    }

    fn sub_n(&self, a: &mut [u32]) {
        let mut borrow: i64 = 0;
        for (ai, ni) in a.iter_mut().zip(&self.n) {
            borrow += i64::from(*ai) - i64::from(*ni);
            *ai = borrow as u32;
            borrow >>= 32;
        }
    }

    fn ge_n(&self, a: &[u32]) -> bool {
        for (ai, ni) in a.iter().zip(&self.n).rev() {
            if ai != ni {
                return ai > ni;
            }
        }
        true
    }
}
