//! Scope-id checks (docs/tile-primitives.md §1.2): the declarations of a kernel,
//! wherever they stand, go through the shared closure
//! ([`tirx_ir::scope_ids::infer_extents`]); a kernel with device code must also
//! end up with a thread count.

use std::collections::BTreeMap;
use tirx_ir::hir::{Kernel, StmtKind};
use tirx_ir::scope_ids::{collect_defs, infer_extents};
use tirx_ir::Diagnostic;

pub use tirx_ir::scope_ids::Binding;

/// Resolves every binding's fused extent, or explains what is inconsistent
/// or missing. The map holds declared and inferred bindings.
pub fn infer_scope_extents(k: &Kernel) -> Result<BTreeMap<Binding, i64>, Vec<Diagnostic>> {
    let ext = infer_extents(&collect_defs(&k.body))
        .map_err(|errs| errs.into_iter().map(Diagnostic::from).collect::<Vec<_>>())?;
    if k.body.iter().any(|s| matches!(s.kind, StmtKind::DeviceEntry)) {
        ext.require_threads(k.span).map_err(|e| vec![Diagnostic::from(e)])?;
    }
    Ok(ext.iter().collect())
}
