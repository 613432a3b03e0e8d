//! Asynchronous copy variants (`Tx.<scope>.copy_async(dst, src, dispatch=..., **config)`),
//! one module each:
//!
//! | variant | prio | accepts |
//! |---|---|---|
//! | [`ldgsts`] | 20 | global → shared with `cp.async` (4/8/16 B), the partition of the synchronous `gmem_smem` |
//!
//! An async copy only issues: the data lands when the kernel's completion
//! mechanism says so (`cp.async.commit_group` + `cp.async.wait_group` for
//! ldgsts), and the kernel — not the variant — writes those (the reference's
//! contract; docs/tile-primitives.md §3.17, §8).

pub mod ldgsts;

use crate::dispatch::Registry;

pub fn register(r: &mut Registry) {
    r.register(Box::new(ldgsts::Ldgsts));
}
