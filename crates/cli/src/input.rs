//! Reading input files with a size cap: only regular files (`/dev/zero`, a
//! FIFO or a directory is refused before anything is read), at most `limit`
//! bytes (checked on the metadata and again while reading, in case the file grows).

use crate::exit::Failure;
use std::io::Read;
use std::path::Path;

/// Largest kernel script `tirx` reads. Real kernels are under 100 KiB; the front end
/// needs up to ~80 bytes of tokens and syntax tree per byte of a pathological
/// script (`x = y` repeated), so 4 MiB keeps the worst case near 330 MB.
pub const MAX_SCRIPT_BYTES: u64 = 4 << 20;

/// The bytes of the regular file `path`, at most `limit` of them; `what` names
/// the file's role in messages ("kernel script").
pub fn read_file(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>, Failure> {
    let name = path.display();
    let cannot = |e: std::io::Error| Failure::User(format!("error: cannot read `{name}`: {e}"));
    let meta = std::fs::metadata(path).map_err(cannot)?;
    if !meta.is_file() {
        let kind = if meta.is_dir() { "a directory" } else { "not a regular file" };
        return Err(Failure::User(format!("error: cannot read `{name}`: it is {kind}; give a {what} file")));
    }
    let too_big =
        || Failure::User(format!("error: `{name}` is larger than {} (the most a {what} may be)", human(limit)));
    if meta.len() > limit {
        return Err(too_big());
    }
    let file = std::fs::File::open(path).map_err(cannot)?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes).map_err(cannot)?;
    if bytes.len() as u64 > limit {
        return Err(too_big());
    }
    Ok(bytes)
}

/// `16 MiB`, `64 KiB`, `100 bytes`.
pub fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(r: Result<Vec<u8>, Failure>) -> String {
        match r {
            Err(Failure::User(m)) => m,
            other => panic!("expected a user error, got {other:?}"),
        }
    }

    #[test]
    fn special_files_and_directories_are_refused() {
        let m = message(read_file(Path::new("/dev/zero"), 100, "kernel script"));
        assert!(m.contains("`/dev/zero`") && m.contains("not a regular file"), "{m}");
        let m = message(read_file(&std::env::temp_dir(), 100, "kernel script"));
        assert!(m.contains("a directory"), "{m}");
    }

    #[test]
    fn files_over_the_limit_are_refused() {
        let p = std::env::temp_dir().join(format!("tirx-input-{}.py", std::process::id()));
        std::fs::write(&p, [b'x'; 2048]).unwrap();
        let m = message(read_file(&p, 1024, "kernel script"));
        assert!(m.contains("larger than 1 KiB"), "{m}");
        assert_eq!(read_file(&p, 2048, "kernel script").unwrap().len(), 2048);
        std::fs::remove_file(p).ok();
    }
}
