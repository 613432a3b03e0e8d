//! The header of a `.npy` file, parsed with limits.
//!
//! npyz parses the header's Python literal with a backtracking parser that is
//! exponential in the nesting depth (a 128-byte header of 24 nested tuples
//! hangs it), allocates the header length a file claims before reading it, and
//! overflows on a shape whose product does not fit. So the header is parsed
//! here first, in one linear pass with a size and depth limit, into the three
//! fields a `.npy` header has (`descr`, `fortran_order`, `shape`); npyz then
//! reads the data behind a small canonical header written from those fields.
//!
//! Format (numpy's `format.py`): `\x93NUMPY`, major and minor version, the
//! header length (u16 for version 1.0, u32 for 2.0 and 3.0), then the header: a
//! Python dict literal padded with spaces and a newline.

use std::io::{self, Cursor, Read};

/// Longest header accepted (numpy itself refuses headers over 10,000 bytes by default).
pub const MAX_HEADER_BYTES: usize = 64 << 10;
/// Deepest nesting of brackets in a header (a plain header nests 2 deep: dict, shape tuple).
pub const MAX_DEPTH: usize = 8;
/// Most values (items, keys, nested values) in a header.
pub const MAX_VALUES: usize = 4096;
/// Most dimensions of a shape (numpy's own limit is 64).
pub const MAX_DIMS: usize = 64;

/// The fields of a `.npy` header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The numpy type string (`<f4`, `|b1`, ...).
    pub descr: String,
    pub fortran_order: bool,
    pub shape: Vec<u64>,
    /// Byte offset of the data in the file.
    pub data_offset: usize,
}

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("invalid .npy header: {}", msg.into()))
}

/// Parses the header at the start of `bytes` (a whole `.npy` file, or at least its header).
pub fn parse(bytes: &[u8]) -> io::Result<Header> {
    if bytes.len() < 8 || &bytes[..6] != b"\x93NUMPY" {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "not a .npy file (no \\x93NUMPY magic)"));
    }
    let (len, start) = match (bytes[6], bytes[7]) {
        (1, 0) => (bytes.get(8..10).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize), 10),
        (2, 0) | (3, 0) => (bytes.get(8..12).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize), 12),
        (major, minor) => return Err(invalid(format!("unsupported format version {major}.{minor}"))),
    };
    let len = len.ok_or_else(|| invalid("the file ends inside the header length"))?;
    if len > MAX_HEADER_BYTES {
        return Err(invalid(format!("the header claims {len} bytes, more than the {MAX_HEADER_BYTES} accepted")));
    }
    let end = start + len;
    let text = bytes.get(start..end).ok_or_else(|| {
        invalid(format!("the header claims {len} bytes but the file has only {}", bytes.len().saturating_sub(start)))
    })?;
    let text = std::str::from_utf8(text).map_err(|_| invalid("the header is not text"))?;
    let mut p = Lexer { s: text.as_bytes(), pos: 0, values: 0 };
    let dict = p.value(0)?;
    p.skip_ws();
    if p.pos != p.s.len() {
        return Err(invalid(format!("unexpected text after the header dict at byte {}", p.pos)));
    }
    fields(dict, end)
}

/// An npyz reader: a canonical header, then the data of the original file.
pub type NpyData<'a> = npyz::NpyFile<io::Chain<Cursor<Vec<u8>>, &'a [u8]>>;

/// An `npyz` reader over the data of `bytes`, after [`parse`] accepted its header.
pub fn open(bytes: &[u8]) -> io::Result<NpyData<'_>> {
    let h = parse(bytes)?;
    let dims: Vec<String> = h.shape.iter().map(u64::to_string).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let fortran = if h.fortran_order { "True" } else { "False" };
    let text = format!("{{'descr': '{}', 'fortran_order': {fortran}, 'shape': {shape}, }}\n", h.descr);
    let len = u16::try_from(text.len()).map_err(|_| invalid("the header is too long"))?;
    let mut canonical = b"\x93NUMPY\x01\x00".to_vec();
    canonical.extend(len.to_le_bytes());
    canonical.extend(text.as_bytes());
    npyz::NpyFile::new(Cursor::new(canonical).chain(&bytes[h.data_offset..]))
}

/// The three fields of the header dict.
fn fields(v: Lit, data_offset: usize) -> io::Result<Header> {
    let Lit::Dict(entries) = v else { return Err(invalid("the header is not a dict")) };
    let mut descr = None;
    let mut fortran_order = None;
    let mut shape = None;
    for (k, v) in entries {
        let Lit::Str(k) = k else { return Err(invalid("a header key is not a string")) };
        match k.as_str() {
            "descr" => descr = Some(v),
            "fortran_order" => fortran_order = Some(v),
            "shape" => shape = Some(v),
            _ => {}
        }
    }
    let missing = |k: &str| invalid(format!("the header has no '{k}'"));
    let descr = match descr.ok_or_else(|| missing("descr"))? {
        Lit::Str(s)
            if !s.is_empty()
                && s.len() <= 32
                && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"<>|=[]".contains(&b)) =>
        {
            s
        }
        Lit::Str(s) => return Err(invalid(format!("unsupported descr {s:?}"))),
        Lit::Seq(_) => return Err(invalid("structured dtypes (a list 'descr') are not supported; save a plain array")),
        _ => return Err(invalid("'descr' is not a string")),
    };
    let fortran_order = match fortran_order.ok_or_else(|| missing("fortran_order"))? {
        Lit::Bool(b) => b,
        _ => return Err(invalid("'fortran_order' is not True or False")),
    };
    let Lit::Seq(dims) = shape.ok_or_else(|| missing("shape"))? else {
        return Err(invalid("'shape' is not a tuple"));
    };
    if dims.len() > MAX_DIMS {
        return Err(invalid(format!("'shape' has {} dimensions, more than {MAX_DIMS}", dims.len())));
    }
    let shape = dims
        .into_iter()
        .map(|d| match d {
            Lit::Int(n) => u64::try_from(n).map_err(|_| invalid(format!("'shape' has the dimension {n}"))),
            _ => Err(invalid("'shape' holds something other than integers")),
        })
        .collect::<io::Result<Vec<u64>>>()?;
    if shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)).is_none() {
        return Err(invalid(format!("the shape {shape:?} has more elements than fit in 64 bits")));
    }
    Ok(Header { descr, fortran_order, shape, data_offset })
}

/// A Python literal as a header may hold it.
#[derive(Debug)]
enum Lit {
    Str(String),
    Int(i128),
    Bool(bool),
    None,
    /// A tuple or list.
    Seq(Vec<Lit>),
    Dict(Vec<(Lit, Lit)>),
}

/// A one-pass recursive-descent parser: every byte is looked at a bounded
/// number of times, the recursion is at most [`MAX_DEPTH`] deep.
struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
    values: usize,
}

impl Lexer<'_> {
    fn skip_ws(&mut self) {
        while self.pos < self.s.len() && matches!(self.s[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.pos).copied()
    }

    fn err(&self, what: &str) -> io::Error {
        invalid(format!("{what} at byte {}", self.pos))
    }

    fn value(&mut self, depth: usize) -> io::Result<Lit> {
        self.values += 1;
        if self.values > MAX_VALUES {
            return Err(invalid(format!("more than {MAX_VALUES} values")));
        }
        let c = self.peek().ok_or_else(|| self.err("unexpected end"))?;
        match c {
            b'{' | b'(' | b'[' => {
                if depth >= MAX_DEPTH {
                    return Err(invalid(format!("nested more than {MAX_DEPTH} levels deep")));
                }
                self.pos += 1;
                self.container(c, depth + 1)
            }
            b'\'' | b'"' => self.string(),
            b'u' | b'b' if matches!(self.s.get(self.pos + 1), Some(b'\'' | b'"')) => {
                self.pos += 1;
                self.string()
            }
            b'-' | b'+' | b'0'..=b'9' => self.int(),
            _ => {
                let word_end = self.s[self.pos..]
                    .iter()
                    .position(|b| !b.is_ascii_alphanumeric() && *b != b'_')
                    .map_or(self.s.len(), |n| self.pos + n);
                let v = match &self.s[self.pos..word_end] {
                    b"True" => Lit::Bool(true),
                    b"False" => Lit::Bool(false),
                    b"None" => Lit::None,
                    _ => return Err(self.err("expected a value")),
                };
                self.pos = word_end;
                Ok(v)
            }
        }
    }

    /// After the opening bracket `open`: items up to the closing one.
    fn container(&mut self, open: u8, depth: usize) -> io::Result<Lit> {
        let close = match open {
            b'{' => b'}',
            b'(' => b')',
            _ => b']',
        };
        let mut items = vec![];
        let mut entries = vec![];
        let mut comma = false;
        loop {
            if self.peek() == Some(close) {
                self.pos += 1;
                break;
            }
            let v = self.value(depth)?;
            if open == b'{' {
                if self.peek() != Some(b':') {
                    return Err(self.err("expected `:`"));
                }
                self.pos += 1;
                let value = self.value(depth)?;
                entries.push((v, value));
            } else {
                items.push(v);
            }
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    comma = true;
                }
                Some(c) if c == close => {}
                _ => return Err(self.err(&format!("expected `,` or `{}`", close as char))),
            }
        }
        Ok(match open {
            b'{' => Lit::Dict(entries),
            // `(x)` is just `x`; `(x,)` and `()` are tuples.
            b'(' if items.len() == 1 && !comma => items.pop().unwrap_or(Lit::None),
            _ => Lit::Seq(items),
        })
    }

    fn string(&mut self) -> io::Result<Lit> {
        let quote = self.s[self.pos];
        self.pos += 1;
        let mut out = Vec::new();
        while let Some(&c) = self.s.get(self.pos) {
            self.pos += 1;
            match c {
                b'\\' => {
                    let Some(&e) = self.s.get(self.pos) else { break };
                    self.pos += 1;
                    out.push(match e {
                        b'n' => b'\n',
                        b't' => b'\t',
                        other => other,
                    });
                }
                c if c == quote => return Ok(Lit::Str(String::from_utf8_lossy(&out).into_owned())),
                b'\n' => break,
                c => out.push(c),
            }
        }
        Err(self.err("unterminated string"))
    }

    fn int(&mut self) -> io::Result<Lit> {
        let neg = self.s[self.pos] == b'-';
        if matches!(self.s[self.pos], b'-' | b'+') {
            self.pos += 1;
        }
        let start = self.pos;
        let mut n: i128 = 0;
        while let Some(d) = self.s.get(self.pos).filter(|b| b.is_ascii_digit()) {
            n = n
                .checked_mul(10)
                .and_then(|n| n.checked_add(i128::from(d - b'0')))
                .ok_or_else(|| self.err("integer too large"))?;
            self.pos += 1;
        }
        if self.pos == start {
            return Err(self.err("expected digits"));
        }
        // Python 2 longs (`3L`), as old numpy wrote shapes.
        if matches!(self.s.get(self.pos), Some(b'L' | b'l')) {
            self.pos += 1;
        }
        Ok(Lit::Int(if neg { -n } else { n }))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A `.npy` file with header `dict` (padded as numpy pads it) and `data`.
    pub(crate) fn file(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut h = dict.to_string();
        while !(10 + h.len() + 1).is_multiple_of(64) {
            h.push(' ');
        }
        h.push('\n');
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend((h.len() as u16).to_le_bytes());
        bytes.extend(h.as_bytes());
        bytes.extend(data);
        bytes
    }

    #[test]
    fn numpy_headers_parse() {
        let f = file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", &[0; 24]);
        let h = parse(&f).unwrap();
        assert_eq!(
            (h.descr.as_str(), h.fortran_order, h.shape.as_slice(), h.data_offset),
            ("<f4", false, &[2, 3][..], 128)
        );
        let h = parse(&file("{\"descr\": \"|u1\", \"fortran_order\": True, \"shape\": (5,)}", &[])).unwrap();
        assert_eq!((h.descr.as_str(), h.fortran_order, h.shape.as_slice()), ("|u1", true, &[5][..]));
        assert_eq!(
            parse(&file("{'descr': '<i8', 'fortran_order': False, 'shape': ()}", &[])).unwrap().shape,
            Vec::<u64>::new()
        );
        assert_eq!(
            parse(&file("{'descr':'<i8','fortran_order':False,'shape':(3L, 4L)}", &[])).unwrap().shape,
            vec![3, 4]
        );
    }

    #[test]
    fn the_data_reads_back_through_npyz() {
        let data: Vec<u8> = [1.5f32, -2.0, 3.25].iter().flat_map(|x| x.to_le_bytes()).collect();
        let f = file("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", &data);
        let npy = open(&f).unwrap();
        assert_eq!(npy.shape(), &[3]);
        assert_eq!(npy.into_vec::<f32>().unwrap(), vec![1.5, -2.0, 3.25]);
    }

    fn err(bytes: &[u8]) -> String {
        parse(bytes).unwrap_err().to_string()
    }

    #[test]
    fn bad_headers_are_errors() {
        assert!(err(b"hello").contains("not a .npy file"));
        assert!(err(b"\x93NUMPY\x09\x00\x10\x00").contains("unsupported format version 9.0"));
        assert!(err(b"\x93NUMPY\x02\x00\xff\xff\xff\xff").contains("more than the 65536 accepted"));
        assert!(err(b"\x93NUMPY\x01\x00\x40\x00{}").contains("the file has only 2"));
        assert!(err(&file("{'descr': '<f4', 'shape': (1,)}", &[])).contains("no 'fortran_order'"));
        assert!(
            err(&file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", &[])).contains("structured")
        );
        assert!(err(&file("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", &[])).contains("dimension -1"));
        let huge = "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}";
        assert!(err(&file(huge, &[])).contains("more elements than fit in 64 bits"));
        assert!(
            err(&file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", &[])).contains("after the header")
        );
    }

    /// The reproducer of the hang: 24 nested lists in a 128-byte header (npyz's
    /// parser is exponential in this nesting); tuples and dicts alike.
    #[test]
    fn deep_nesting_is_refused_at_once() {
        for (open_b, close_b) in [("[", "]"), ("(", ")"), ("{", "}")] {
            let shape = format!("{}{}", open_b.repeat(24), close_b.repeat(24));
            let f = file(&format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}}}"), &[]);
            assert_eq!(f.len(), 128);
            let t = std::time::Instant::now();
            assert!(err(&f).contains("nested more than 8 levels deep"), "{}", err(&f));
            assert!(open(&f).is_err());
            assert!(t.elapsed().as_millis() < 100, "{:?}", t.elapsed());
        }
    }
}

/// Fuzzing the header parser with mutated numpy headers (token insertions,
/// deletions, swaps, repeats; mutated version and length fields). Properties:
/// `parse` and `open` return (no panic; a watchdog fails the run when one
/// input takes over 10 s) and, where npyz's own parser also accepts the
/// original bytes, both read the same descr, order and shape.
///
/// `fuzz_short` runs in `cargo test`; the long run:
/// `FUZZ_CASES=100000 cargo test -p tirx-cli --release --lib -- --ignored fuzz`.
#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::prelude::*;
    use proptest::sample::Index;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    static ACCEPTED: AtomicUsize = AtomicUsize::new(0);

    const HEADERS: &[&str] = &[
        "{'descr': '<f4', 'fortran_order': False, 'shape': (32, 8), }",
        "{'descr': '|u1', 'fortran_order': True, 'shape': (5,), }",
        "{'descr': '<V2', 'fortran_order': False, 'shape': (), }",
        "{\"descr\": \"<i8\", \"fortran_order\": false, \"shape\": [2, 3]}",
        "{'descr':'<f8','fortran_order':False,'shape':(3L, 4L)}",
        "{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '<f2', 'fortran_order': False, 'shape': (1, 1, 1, 1), 'extra': None, }",
    ];

    const TOKENS: &[&str] = &[
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        ",",
        ":",
        "'",
        "\"",
        " ",
        "0",
        "1",
        "-1",
        "L",
        "18446744073709551616",
        "4294967296",
        "True",
        "False",
        "None",
        "((((((((((((((((((((((((",
        "))))))))",
        "\\",
        "\n",
        "u'",
        "b'",
        "'shape': (1,)",
        "'descr': '<f4'",
        "\u{e9}",
        "\u{0}",
        "+",
        "-",
        "1e5",
        "0x10",
    ];

    #[derive(Clone, Debug)]
    enum Mutation {
        Delete(Index, u8),
        Insert(Index, Index),
        Swap(Index, Index, u8),
        Repeat(Index, u8, u8),
        /// Overwrite one of the 10 prefix bytes (magic, version, length).
        Prefix(u8, u8),
    }

    fn mutation() -> impl Strategy<Value = Mutation> {
        prop_oneof![
            2 => (any::<Index>(), 1u8..6).prop_map(|(a, n)| Mutation::Delete(a, n)),
            4 => (any::<Index>(), any::<Index>()).prop_map(|(a, t)| Mutation::Insert(a, t)),
            1 => (any::<Index>(), any::<Index>(), 1u8..6).prop_map(|(a, b, n)| Mutation::Swap(a, b, n)),
            1 => (any::<Index>(), 1u8..8, 2u8..30).prop_map(|(a, n, k)| Mutation::Repeat(a, n, k)),
            1 => (6u8..10, any::<u8>()).prop_map(|(i, v)| Mutation::Prefix(i, v)),
        ]
    }

    /// A `.npy` file with header `dict`, the mutations applied to the header
    /// text (the length field follows it unless a mutation overwrote it), and `data`.
    fn mutated(dict: &str, muts: &[Mutation], data: &[u8]) -> Vec<u8> {
        let mut h = dict.as_bytes().to_vec();
        let mut prefix = *b"\x93NUMPY\x01\x00\x00\x00";
        let mut fixed_len = None;
        for m in muts {
            let n = h.len().max(1);
            match m {
                Mutation::Delete(a, len) => {
                    let at = a.index(n).min(h.len());
                    h.drain(at..(at + *len as usize).min(h.len()));
                }
                Mutation::Insert(a, t) => {
                    let at = a.index(n + 1).min(h.len());
                    h.splice(at..at, TOKENS[t.index(TOKENS.len())].bytes());
                }
                Mutation::Swap(x, y, len) => {
                    let len = *len as usize;
                    if h.len() > 2 * len {
                        let (i, j) = (x.index(h.len() - len), y.index(h.len() - len));
                        let (lo, hi) = (i.min(j), i.max(j));
                        if hi >= lo + len {
                            for k in 0..len {
                                h.swap(lo + k, hi + k);
                            }
                        }
                    }
                }
                Mutation::Repeat(a, len, times) => {
                    let at = a.index(n).min(h.len());
                    let piece = h[at..(at + *len as usize).min(h.len())].to_vec();
                    for _ in 1..*times {
                        h.splice(at..at, piece.iter().copied());
                    }
                }
                Mutation::Prefix(i, v) => {
                    prefix[*i as usize] = *v;
                    if *i >= 8 {
                        fixed_len = Some(());
                    }
                }
            }
        }
        while !(10 + h.len() + 1).is_multiple_of(64) {
            h.push(b' ');
        }
        h.push(b'\n');
        if fixed_len.is_none() {
            prefix[8..10].copy_from_slice(&(h.len().min(0xffff) as u16).to_le_bytes());
        }
        let mut bytes = prefix.to_vec();
        bytes.extend(h);
        bytes.extend(data);
        bytes
    }

    static CURRENT: Mutex<Option<(Instant, Vec<u8>)>> = Mutex::new(None);
    const HANG: Duration = Duration::from_secs(10);

    /// Fails the whole run, naming the input, when one input takes over [`HANG`].
    fn watchdog() {
        static START: std::sync::Once = std::sync::Once::new();
        START.call_once(|| {
            std::thread::spawn(|| loop {
                std::thread::sleep(Duration::from_millis(500));
                if let Some((t, input)) = CURRENT.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                    if t.elapsed() > HANG {
                        let text = String::from_utf8_lossy(input);
                        crate::out::errln!("npy fuzz: input took over {HANG:?} (a hang):\n{text:?}");
                        std::process::exit(3);
                    }
                }
            });
        });
    }

    /// Nesting depth of brackets in `bytes` (npyz's parser is only fed shallow headers).
    fn depth(bytes: &[u8]) -> usize {
        let (mut d, mut most) = (0usize, 0usize);
        for b in bytes {
            match b {
                b'(' | b'[' | b'{' => {
                    d += 1;
                    most = most.max(d);
                }
                b')' | b']' | b'}' => d = d.saturating_sub(1),
                _ => {}
            }
        }
        most
    }

    fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
        *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), bytes.to_vec()));
        let parsed = parse(bytes);
        let opened = open(bytes);
        let Ok(h) = parsed else { return Ok(()) };
        ACCEPTED.fetch_add(1, Ordering::Relaxed);
        prop_assert!(h.data_offset <= bytes.len());
        if let Ok(npy) = &opened {
            prop_assert_eq!(npy.shape(), h.shape.as_slice());
            prop_assert_eq!(npy.order() == npyz::Order::Fortran, h.fortran_order);
        }
        // Differential: npyz on the original bytes, where its parser is safe to run.
        if depth(bytes) <= 4 {
            if let Ok(theirs) = npyz::NpyFile::new(bytes) {
                prop_assert_eq!(theirs.shape(), h.shape.as_slice());
                prop_assert_eq!(theirs.order() == npyz::Order::Fortran, h.fortran_order);
                if let Ok(npy) = &opened {
                    prop_assert_eq!(theirs.dtype().descr(), npy.dtype().descr());
                }
            }
        }
        Ok(())
    }

    fn input() -> impl Strategy<Value = Vec<u8>> {
        (any::<Index>(), prop::collection::vec(mutation(), 0..6), prop::collection::vec(any::<u8>(), 0..40))
            .prop_map(|(pick, muts, data)| mutated(HEADERS[pick.index(HEADERS.len())], &muts, &data))
    }

    fn run(cases: u32) {
        watchdog();
        let config = ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() };
        proptest!(config, |(bytes in input())| {
            check(&bytes)?;
        });
        *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    #[test]
    fn fuzz_short() {
        run(2000);
    }

    #[test]
    #[ignore = "long run: FUZZ_CASES=100000 cargo test -p tirx-cli --release --lib -- --ignored fuzz"]
    fn fuzz_long() {
        let cases = std::env::var("FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(100_000);
        let start = Instant::now();
        run(cases);
        let ok = ACCEPTED.load(Ordering::Relaxed);
        crate::out::errln!("fuzz_long (npy headers): {cases} inputs in {:.1?}; {ok} headers accepted", start.elapsed());
    }
}
