//! What every asynchronous copy variant shares: the completion mbarrier ([`mbar`]).

use crate::variant::decline_rules;
use crate::variant::{Bug, Emitter};
use tirx_ir::hir::MbarRef;
use tirx_ir::lir::Mbar;
use tirx_ir::DType;

decline_rules! {
    /// The asynchronous copy family's decline predicates (the TMA and bulk-copy hardware rules among them).
    pub enum CopyAsyncRule {
        /// An access would not be aligned to its width.
        Alignment = "alignment",
        /// A TMA box extent is outside 1..=256.
        BoxDim = "box_dim",
        /// A bulk copy's contiguous chunk is not a positive multiple of 16 bytes.
        BulkChunk = "bulk_chunk",
        /// A copy that needs a cluster launch (multicast, a peer CTA).
        Cluster = "cluster",
        /// A region start is not a whole number of the descriptor dimension's unit.
        Coordinate = "coordinate",
        /// A multicast mask that is not an integer or names CTAs outside the cluster.
        CtaMask = "cta_mask",
        /// A configuration that applies to the other copy direction (`mbar`, `oob` on a store).
        Direction = "direction",
        /// A TMA descriptor's global address is not 16-byte aligned.
        GlobalBase = "global_base_alignment",
        /// A TMA descriptor's global dimension is outside (0, 2^32].
        GlobalDim = "global_dim",
        /// A tensor dimension is not a whole number of the descriptor dimension's unit.
        GlobalShape = "global_shape",
        /// A TMA descriptor's byte stride is not a multiple of 16 (or not below 2^40).
        GlobalStride = "global_stride_alignment",
        /// A TMA box's innermost run is not a multiple of 16 bytes.
        InnerBoxBytes = "inner_box_bytes",
        /// The innermost dimension of a TMA box is not the tensor's stride-1 dimension.
        InnerStride = "inner_stride",
        /// A TMA load without its completion mbarrier.
        Mbar = "mbar",
        /// A NaN out-of-bounds fill of a tensor that is not floating point.
        NanOobDtype = "nan_oob_dtype",
        /// No split of the region over the threads exists.
        Partition = "partition",
        /// A TMA reduction of an element type `cp.reduce.async.bulk.tensor .add` does not add.
        ReduceDtype = "reduce_dtype",
        /// A TMA descriptor would have more than 5 dimensions.
        Rank = "rank",
        /// A copy to a peer CTA without the peer's rank.
        RemoteCta = "remote_cta_id",
        /// The shared side of a TMA copy is not one dense box (a chain of strides from 1).
        SharedChain = "shared_chain",
        /// A TMA box does not start on its shared-memory alignment.
        SharedPointer = "shared_pointer",
        /// A swizzle the instruction cannot keep together.
        Swizzle = "swizzle",
        /// A swizzled TMA box's innermost run is not the swizzle's atom row.
        SwizzleInnerBox = "swizzle_inner_box",
    }
}

/// The LIR mbarrier of an `mbar=` argument: its array and int32 element index.
pub(crate) fn mbar(em: &mut Emitter, r: &MbarRef) -> Result<Mbar, Bug> {
    let idx = r.index.iter().map(|e| em.expr(e)).collect::<Result<Vec<_>, _>>()?;
    let (buf, index) = em.address(r.buf, &idx)?;
    Ok(Mbar { buf, index: em.builder().convert(index, DType::I32) })
}
