//! What every asynchronous copy variant shares: the completion mbarrier ([`mbar`]).

use crate::variant::{Bug, Emitter};
use tirx_ir::hir::MbarRef;
use tirx_ir::lir::Mbar;
use tirx_ir::DType;

/// The LIR mbarrier of an `mbar=` argument: its array and int32 element index.
pub(crate) fn mbar(em: &mut Emitter, r: &MbarRef) -> Result<Mbar, Bug> {
    let idx = r.index.iter().map(|e| em.expr(e)).collect::<Result<Vec<_>, _>>()?;
    let (buf, index) = em.address(r.buf, &idx)?;
    Ok(Mbar { buf, index: em.builder().convert(index, DType::I32) })
}
