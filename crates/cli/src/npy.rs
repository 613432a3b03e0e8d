//! `.npy` arguments and outputs of `tirx sim` / `tirx run`.
//!
//! `NAME=path.npy` names a kernel parameter by its buffer name (the
//! `match_buffer` name). An argument's dtype and shape must equal the buffer's
//! exactly; parameters without an argument start zeroed.
//!
//! A buffer whose layout is padded (its storage holds more elements than its
//! logical shape, e.g. rows of 16 stored 20 apart), or whose strides are run-time
//! values (`strides=(lda, 1)`), is read and written as its flat storage: a 1-D
//! array of that many elements.
//!
//! Narrow floats follow numpy / ml_dtypes conventions. On input, bfloat16
//! accepts `|V2`/`<V2` (what `np.save` writes for an ml_dtypes array) and the plain
//! `<u2` bit pattern; float8 accepts `|V1`/`<V1` and `|u1`, and also `<f1`, which
//! ml_dtypes 0.6 writes for `float8_e5m2` (numpy itself cannot load it). On output,
//! bfloat16 is written as `<u2` and float8 as `|u1` bit patterns: read them back
//! with `np.load(f).view(ml_dtypes.bfloat16)` (or `float8_e4m3fn`, `float8_e5m2`).
//! Every other dtype is written with its own numpy descr (`<f2`, `<f4`, `|b1`, ...).

use crate::exit::Failure;
use npyz::{TypeChar, WriterBuilder};
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use tirx_ir::lir::{LBuf, LKernel};
use tirx_ir::DType;

/// One byte buffer per kernel parameter, filled from the `NAME=file.npy` specs (zeros elsewhere).
pub fn load_args(specs: &[String], k: &LKernel) -> Result<Vec<Vec<u8>>, Failure> {
    load_args_or(specs, k, |b| tirx_sim::try_zeroed_bytes(byte_len(b)?))
}

/// [`load_args`] where `fill` gives the contents of every parameter no spec
/// names, or `None` when the host cannot allocate them.
pub fn load_args_or(
    specs: &[String],
    k: &LKernel,
    fill: impl Fn(&LBuf) -> Option<Vec<u8>>,
) -> Result<Vec<Vec<u8>>, Failure> {
    let mut given: Vec<Option<Vec<u8>>> = vec![None; k.params.len()];
    for spec in specs {
        let (i, path) = param_of(spec, k, "--arg")?;
        given[i] = Some(read_npy(Path::new(path), k.buf(k.params[i]))?);
    }
    given
        .into_iter()
        .zip(&k.params)
        .map(|(g, p)| match g {
            Some(bytes) => Ok(bytes),
            None => fill(k.buf(*p)).ok_or_else(|| too_large(k.buf(*p))),
        })
        .collect()
}

/// The bytes of parameter `b`, when they fit the address space.
pub fn byte_len(b: &LBuf) -> Option<usize> {
    usize::try_from(b.elems.max(0)).ok()?.checked_mul(b.dtype.bytes() as usize)
}

/// A parameter the host cannot hold: its size in bytes and what to do.
fn too_large(b: &LBuf) -> Failure {
    let bytes = (b.elems.max(0) as u64).saturating_mul(u64::from(b.dtype.bytes()));
    Failure::User(format!(
        "error: parameter `{}` ({} × {}, shape {}) needs {} of host memory, which cannot be allocated\n\
         help: use a smaller shape for `{}`",
        b.name,
        b.elems,
        b.dtype,
        shape_str(&logical_shape(b)),
        tirx_sim::bytes_text(bytes),
        b.name
    ))
}

/// Writes the parameters named by `NAME=file.npy` specs from `bufs` (one per kernel parameter).
pub fn save_outs(specs: &[String], k: &LKernel, bufs: &[Vec<u8>]) -> Result<(), Failure> {
    for spec in specs {
        let (i, path) = param_of(spec, k, "--out")?;
        let data = bufs.get(i).ok_or_else(|| Failure::Internal(format!("no buffer for parameter {i}")))?;
        write_npy(Path::new(path), k.buf(k.params[i]), data)?;
    }
    Ok(())
}

/// Splits `NAME=path` and finds the parameter named `NAME`.
fn param_of<'s>(spec: &'s str, k: &LKernel, flag: &str) -> Result<(usize, &'s str), Failure> {
    let names = || {
        let bufs = k.params.iter().map(|p| format!("`{}`", k.buf(*p).name)).collect::<Vec<_>>().join(", ");
        let scalars: Vec<String> = k.scalars.iter().map(|s| format!("`{}`", k.var(s.var).name)).collect();
        if scalars.is_empty() {
            bufs
        } else {
            format!("{bufs} (scalars, `NAME=VALUE`: {})", scalars.join(", "))
        }
    };
    let Some((name, path)) = spec.split_once('=') else {
        return Err(Failure::User(format!(
            "{flag} `{spec}`: expected NAME=file.npy, where NAME is one of {}",
            names()
        )));
    };
    let i = k.params.iter().position(|p| k.buf(*p).name == name).ok_or_else(|| {
        Failure::User(format!(
            "{flag} `{spec}`: kernel `{}` has no parameter buffer `{name}`; its parameters are {}",
            k.name,
            names()
        ))
    })?;
    if path.is_empty() {
        return Err(Failure::User(format!("{flag} `{spec}`: the file name is empty")));
    }
    Ok((i, path))
}

fn shape_str(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    }
}

/// The numpy type chars and sizes accepted for a buffer dtype (first = what we write).
fn accepted(t: DType) -> &'static [(TypeChar, u64)] {
    use TypeChar::*;
    match t {
        DType::Bool => &[(Bool, 1)],
        DType::I8 => &[(Int, 1)],
        DType::I16 => &[(Int, 2)],
        DType::I32 => &[(Int, 4)],
        DType::I64 => &[(Int, 8)],
        DType::U8 => &[(Uint, 1)],
        DType::U16 => &[(Uint, 2)],
        DType::U32 => &[(Uint, 4)],
        DType::U64 => &[(Uint, 8)],
        DType::F16 => &[(Float, 2)],
        DType::F32 => &[(Float, 4)],
        DType::F64 => &[(Float, 8)],
        DType::BF16 => &[(Uint, 2), (RawData, 2)],
        DType::F8E4M3 | DType::F8E5M2 => &[(Uint, 1), (RawData, 1)],
    }
}

/// The array shape a buffer's `.npy` has: its logical shape, or its flat storage
/// when the layout is padded or the strides are run-time values.
fn file_shape(b: &LBuf) -> Vec<u64> {
    let logical = logical_shape(b);
    if logical.iter().product::<u64>() == b.elems.max(0) as u64 && b.strides.is_none() {
        logical
    } else {
        vec![b.elems.max(0) as u64]
    }
}

fn logical_shape(b: &LBuf) -> Vec<u64> {
    b.shape.iter().map(|d| (*d).max(0) as u64).collect()
}

/// ml_dtypes 0.6 saves `float8_e5m2` arrays with descr `'<f1'`, which no npy
/// parser accepts; for a float8 buffer read those bytes as the raw `'|V1'` they are.
/// (Same length, so the header stays valid.)
fn normalize_fp8_descr(bytes: &mut [u8], dtype: DType) {
    if !matches!(dtype, DType::F8E4M3 | DType::F8E5M2) {
        return;
    }
    let header_end = bytes.len().min(4096);
    for pat in [&b"'descr': '<f1'"[..], &b"'descr': '|f1'"[..]] {
        if let Some(i) = bytes[..header_end].windows(pat.len()).position(|w| w == pat) {
            bytes[i + pat.len() - 4..i + pat.len() - 1].copy_from_slice(b"|V1");
        }
    }
}

fn read_npy(path: &Path, b: &LBuf) -> Result<Vec<u8>, Failure> {
    let io_err = |e: std::io::Error| Failure::User(format!("cannot read {}: {e}", path.display()));
    // A regular file no larger than the buffer's data plus the largest header we parse.
    let data = u64::try_from(b.elems.max(0)).unwrap_or(0).saturating_mul(u64::from(b.dtype.bytes()));
    let limit = data.saturating_add(crate::npy_header::MAX_HEADER_BYTES as u64 + 16);
    let mut raw_file = crate::input::read_file(path, limit, "`.npy`")?;
    normalize_fp8_descr(&mut raw_file, b.dtype);
    // The header is parsed with limits first (npyz's own parser is exponential in its nesting).
    let npy = crate::npy_header::open(&raw_file).map_err(io_err)?;
    let want_shape = file_shape(b);
    let descr = npy.dtype().descr().trim_matches('\'').to_string();
    let padded = if want_shape.len() == 1 && b.shape.len() != 1 {
        format!(" (its layout is padded: pass the flat storage of logical shape {})", shape_str(&logical_shape(b)))
    } else {
        String::new()
    };
    let mismatch = || {
        Failure::User(format!(
            "{}: buffer `{}` is {} with shape {}{padded}, but the file holds {descr} with shape {}",
            path.display(),
            b.name,
            b.dtype,
            shape_str(&want_shape),
            shape_str(npy.shape())
        ))
    };
    let npyz::DType::Plain(ts) = npy.dtype() else {
        return Err(mismatch());
    };
    if !accepted(b.dtype).contains(&(ts.type_char(), ts.size_field())) || npy.shape() != want_shape.as_slice() {
        return Err(mismatch());
    }
    // A header that promises more data than the file holds is refused before
    // anything is sized from it (the decoded arrays are as large as the file).
    let want_bytes = (b.elems.max(0) as u64).saturating_mul(u64::from(b.dtype.bytes()));
    if (raw_file.len() as u64) < want_bytes {
        return Err(Failure::User(format!(
            "{}: the header says shape {} ({want_bytes} bytes of data) but the file has only {} bytes",
            path.display(),
            shape_str(&want_shape),
            raw_file.len()
        )));
    }
    if npy.order() == npyz::Order::Fortran && want_shape.iter().filter(|d| **d > 1).count() > 1 {
        return Err(Failure::User(format!(
            "{}: the array is stored in Fortran order; save it with np.ascontiguousarray(...) first",
            path.display()
        )));
    }
    let raw = ts.type_char() == TypeChar::RawData;
    let bytes = match (b.dtype, raw) {
        (DType::Bool, _) => npy.into_vec::<bool>().map(|v| v.into_iter().map(|x| x as u8).collect()),
        (DType::I8, _) => npy.into_vec::<i8>().map(|v| v.into_iter().flat_map(i8::to_le_bytes).collect()),
        (DType::I16, _) => npy.into_vec::<i16>().map(|v| v.into_iter().flat_map(i16::to_le_bytes).collect()),
        (DType::I32, _) => npy.into_vec::<i32>().map(|v| v.into_iter().flat_map(i32::to_le_bytes).collect()),
        (DType::I64, _) => npy.into_vec::<i64>().map(|v| v.into_iter().flat_map(i64::to_le_bytes).collect()),
        (DType::U16 | DType::BF16, false) => {
            npy.into_vec::<u16>().map(|v| v.into_iter().flat_map(u16::to_le_bytes).collect())
        }
        (DType::U8 | DType::F8E4M3 | DType::F8E5M2, false) => npy.into_vec::<u8>(),
        (DType::U32, _) => npy.into_vec::<u32>().map(|v| v.into_iter().flat_map(u32::to_le_bytes).collect()),
        (DType::U64, _) => npy.into_vec::<u64>().map(|v| v.into_iter().flat_map(u64::to_le_bytes).collect()),
        (DType::F16, _) => {
            npy.into_vec::<npyz::half::f16>().map(|v| v.into_iter().flat_map(|x| x.to_bits().to_le_bytes()).collect())
        }
        (DType::F32, _) => npy.into_vec::<f32>().map(|v| v.into_iter().flat_map(f32::to_le_bytes).collect()),
        (DType::F64, _) => npy.into_vec::<f64>().map(|v| v.into_iter().flat_map(f64::to_le_bytes).collect()),
        // ml_dtypes arrays: raw little-endian bit patterns.
        (DType::BF16, true) => {
            npy.into_vec::<npyz::FixedSizeBytes<2>>().map(|v| v.into_iter().flat_map(|x| x.0).collect())
        }
        (_, true) => npy.into_vec::<npyz::FixedSizeBytes<1>>().map(|v| v.into_iter().flat_map(|x| x.0).collect()),
    };
    let bytes = bytes.map_err(io_err)?;
    let want = b.elems.max(0) as usize * b.dtype.bytes() as usize;
    if bytes.len() != want {
        return Err(Failure::User(format!(
            "{}: expected {want} bytes of data for `{}`, found {}",
            path.display(),
            b.name,
            bytes.len()
        )));
    }
    Ok(bytes)
}

fn write_npy(path: &Path, b: &LBuf, data: &[u8]) -> Result<(), Failure> {
    let shape = file_shape(b);
    let io_err = |e: std::io::Error| Failure::User(format!("cannot write {}: {e}", path.display()));
    let out = BufWriter::new(File::create(path).map_err(io_err)?);
    let n = b.dtype.bytes() as usize;
    let chunks = data.chunks_exact(n);
    macro_rules! write_as {
        ($t:ty, $descr:expr, $conv:expr) => {{
            let dtype = npyz::DType::Plain($descr.parse().map_err(|e| Failure::Internal(format!("{e}")))?);
            let mut w =
                npyz::WriteOptions::<$t>::new().dtype(dtype).shape(&shape).writer(out).begin_nd().map_err(io_err)?;
            w.extend(chunks.map($conv)).map_err(io_err)?;
            w.finish().map_err(io_err)
        }};
    }
    let le2 = |c: &[u8]| [c[0], c[1]];
    let le4 = |c: &[u8]| [c[0], c[1], c[2], c[3]];
    let le8 = |c: &[u8]| [c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]];
    match b.dtype {
        DType::Bool => write_as!(bool, "|b1", |c: &[u8]| c[0] != 0),
        DType::I8 => write_as!(i8, "|i1", |c: &[u8]| c[0] as i8),
        DType::U8 | DType::F8E4M3 | DType::F8E5M2 => write_as!(u8, "|u1", |c: &[u8]| c[0]),
        DType::I16 => write_as!(i16, "<i2", |c: &[u8]| i16::from_le_bytes(le2(c))),
        DType::U16 | DType::BF16 => write_as!(u16, "<u2", |c: &[u8]| u16::from_le_bytes(le2(c))),
        DType::F16 => {
            write_as!(npyz::half::f16, "<f2", |c: &[u8]| npyz::half::f16::from_bits(u16::from_le_bytes(le2(c))))
        }
        DType::I32 => write_as!(i32, "<i4", |c: &[u8]| i32::from_le_bytes(le4(c))),
        DType::U32 => write_as!(u32, "<u4", |c: &[u8]| u32::from_le_bytes(le4(c))),
        DType::F32 => write_as!(f32, "<f4", |c: &[u8]| f32::from_le_bytes(le4(c))),
        DType::I64 => write_as!(i64, "<i8", |c: &[u8]| i64::from_le_bytes(le8(c))),
        DType::U64 => write_as!(u64, "<u8", |c: &[u8]| u64::from_le_bytes(le8(c))),
        DType::F64 => write_as!(f64, "<f8", |c: &[u8]| f64::from_le_bytes(le8(c))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tirx_ir::lir::{LBufId, Space};

    fn kernel(dtype: DType, shape: Vec<i64>) -> LKernel {
        let elems = shape.iter().product();
        LKernel {
            params: vec![LBufId(0), LBufId(1)],
            bufs: vec![
                LBuf {
                    name: "A".into(),
                    dtype,
                    space: Space::Global,
                    elems,
                    shape: shape.clone(),
                    dynamic: false,
                    dyn_rows: None,
                    strides: None,
                    align: 0,
                },
                LBuf {
                    name: "B".into(),
                    dtype,
                    space: Space::Global,
                    elems,
                    shape,
                    dynamic: false,
                    dyn_rows: None,
                    strides: None,
                    align: 0,
                },
            ],
            ..LKernel::new("k", [1, 1, 1], [1, 1, 1])
        }
    }

    fn tmp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("tirx-npy-{}-{name}", std::process::id()))
    }

    #[test]
    fn every_dtype_roundtrips() {
        for t in DType::ALL {
            let k = kernel(t, vec![2, 3]);
            let data: Vec<u8> = (0..6 * t.bytes() as usize)
                .map(|i| (i * 37 % 251) as u8 % if t == DType::Bool { 2 } else { 255 })
                .collect();
            let p = tmp(&format!("{t}.npy"));
            save_outs(&[format!("B={}", p.display())], &k, &[vec![], data.clone()]).unwrap();
            let got = load_args(&[format!("A={}", p.display())], &k).unwrap();
            assert_eq!(got[0], data, "{t}");
            assert_eq!(got[1], vec![0; data.len()], "unnamed parameters start zeroed");
            let _ = std::fs::remove_file(p);
        }
    }

    #[test]
    fn mismatches_name_both_sides() {
        let k = kernel(DType::F32, vec![4]);
        let p = tmp("f64.npy");
        save_outs(&[format!("B={}", p.display())], &kernel(DType::F64, vec![4]), &[vec![], vec![0; 32]]).unwrap();
        let Err(Failure::User(m)) = load_args(&[format!("A={}", p.display())], &k) else { panic!("must fail") };
        assert!(m.contains("`A` is float32 with shape (4,)") && m.contains("<f8 with shape (4,)"), "{m}");
        let Err(Failure::User(m)) = load_args(&["C=x.npy".into()], &k) else { panic!("must fail") };
        assert!(m.contains("no parameter buffer `C`") && m.contains("`A`, `B`"), "{m}");
        let Err(Failure::User(m)) = load_args(&["A".into()], &k) else { panic!("must fail") };
        assert!(m.contains("NAME=file.npy"), "{m}");
        let _ = std::fs::remove_file(p);
    }

    /// An `.npy` file as `np.save` writes it, with `descr` and a 1-D `shape`.
    fn npy_bytes(descr: &str, n: usize, data: &[u8]) -> Vec<u8> {
        crate::npy_header::tests::file(
            &format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({n},), }}"),
            data,
        )
    }

    #[test]
    fn ml_dtypes_void_arrays_are_accepted_for_bf16() {
        // np.save of an ml_dtypes bfloat16 array: descr '<V2' (or '|V2').
        for descr in ["|V2", "<V2"] {
            let p = tmp("v2.npy");
            std::fs::write(&p, npy_bytes(descr, 2, &[0x80, 0x3f, 0x00, 0x40])).unwrap(); // bf16 1.0, 2.0
            let k = kernel(DType::BF16, vec![2]);
            let got = load_args(&[format!("A={}", p.display())], &k).unwrap();
            assert_eq!(got[0], vec![0x80, 0x3f, 0x00, 0x40], "{descr}");
            let _ = std::fs::remove_file(p);
        }
    }

    /// ml_dtypes 0.6: float8_e4m3fn saves as '<V1', float8_e5m2 as '<f1'.
    #[test]
    fn ml_dtypes_float8_files_are_accepted() {
        for (t, descr) in [(DType::F8E4M3, "<V1"), (DType::F8E5M2, "<f1"), (DType::F8E5M2, "|u1")] {
            let p = tmp("f8.npy");
            std::fs::write(&p, npy_bytes(descr, 3, &[0x38, 0x3c, 0xc0])).unwrap();
            let got = load_args(&[format!("A={}", p.display())], &kernel(t, vec![3])).unwrap();
            assert_eq!(got[0], vec![0x38, 0x3c, 0xc0], "{t} {descr}");
            let _ = std::fs::remove_file(p);
        }
        // '<f1' is only taken as raw fp8 bits for a float8 buffer.
        let p = tmp("f1.npy");
        std::fs::write(&p, npy_bytes("<f1", 3, &[1, 2, 3])).unwrap();
        assert!(load_args(&[format!("A={}", p.display())], &kernel(DType::U8, vec![3])).is_err());
        let _ = std::fs::remove_file(p);
    }

    /// A parameter the host cannot hold is a user error with its size, never an abort.
    #[test]
    fn a_parameter_too_large_for_the_host_is_refused_with_its_size() {
        let k = kernel(DType::F32, vec![1 << 31, 1 << 31]);
        let Err(Failure::User(m)) = load_args(&[], &k) else { panic!("must fail") };
        assert!(m.contains("`A` (4611686018427387904 × float32, shape (2147483648, 2147483648))"), "{m}");
        assert!(m.contains("18446744073709551615 bytes") && m.contains("help: use a smaller shape"), "{m}");
        let Err(Failure::User(m)) = load_args_or(&[], &kernel(DType::F32, vec![4]), |_| None) else { panic!() };
        assert!(m.contains("needs 16 bytes of host memory"), "{m}");
    }

    /// A padded layout (rows of 4 stored 5 apart) is passed as its flat storage.
    #[test]
    fn padded_buffers_use_their_flat_storage() {
        let mut k = kernel(DType::F32, vec![2, 4]);
        for b in &mut k.bufs {
            b.elems = 9;
        }
        let data: Vec<u8> = (0..36).collect();
        let p = tmp("padded.npy");
        save_outs(&[format!("B={}", p.display())], &k, &[vec![], data.clone()]).unwrap();
        assert_eq!(load_args(&[format!("A={}", p.display())], &k).unwrap()[0], data);
        let logical = tmp("logical.npy");
        save_outs(&[format!("B={}", logical.display())], &kernel(DType::F32, vec![2, 4]), &[vec![], vec![0; 32]])
            .unwrap();
        let Err(Failure::User(m)) = load_args(&[format!("A={}", logical.display())], &k) else { panic!("must fail") };
        assert!(m.contains("shape (9,) (its layout is padded: pass the flat storage of logical shape (2, 4))"), "{m}");
        let _ = std::fs::remove_file(p);
        let _ = std::fs::remove_file(logical);
    }
}
