//! copy_async → tma_explicit (priority 10, docs/tile-primitives.md §3.20).
//!
//! **Accepts** what `tma_auto` does (thread scope, sm_90, global ↔ shared, one
//! dtype and as many elements on each side, `mbar=` on loads) when the global
//! tensor maps to a descriptor directly: one stride per buffer dim, the
//! innermost stride 1 (`inner_stride`; `layout` otherwise), and the shared region
//! is one dense box in row-major order (`shared_chain`); then the descriptor must
//! pass the hardware rules as is (`rank`, `box_dim`, `inner_box_bytes`,
//! `swizzle_inner_box`, `global_stride_alignment`, `global_dim`,
//! `global_base_alignment`, `shared_pointer`, `nan_oob_dtype`) — nothing is
//! regrouped, promoted or split: one call, one instruction. Its global region may
//! leave the tensor (it is not bounds-checked when forced with
//! `dispatch="tma_explicit"`): a load fills the outside with zeros, or NaN with
//! `oob="nan"` (float tensors), a store clips it. Config: `oob`, `cache_hint`,
//! `tensormap_l2_promotion`, `use_tma_reduce="add"` (stores, as `tma_auto`); a load in a cluster launch may multicast to the
//! CTAs of `cta_mask=` (as `tma_auto`, docs/tile-primitives.md §3.20).
//!
//! **Algorithm**: `globalDim` is the buffer's shape reversed (a run-time row count
//! as its expression), `globalStrides` its strides in bytes, `boxDim` the region's
//! extents and the coordinates its starts, all innermost first; the shared start
//! is the region's (pre-swizzle) offset. The descriptor is built on the host and
//! passed as a kernel parameter (`A_tmap`); equal descriptors are shared.
//!
//! **Generated code** (`Tx.copy_async(O[r0:r0 + 64, c0:c0 + 64], O_s[0:64, 0:64], dispatch="tma_explicit")`):
//! ```text
//! tma.store.2d O_tmap[c0, r0] <- O_s[0]
//! ```
//!
//! Differences from the reference: `gather4` and `src_selector` (sm_100) and
//! `tma_dtype`, `use_tma_reduce`, `prefetch_tensormap` are not supported (an
//! unknown config key at the script). A buffer with run-time strides (`strides=` of
//! scalar parameters, §7.7) is addressed here and by `tma_auto` only: its
//! `globalStrides` are expressions the launch evaluates (multiples of 16 bytes,
//! below 2^40, checked there), the innermost stride must be the constant 1.

use super::call::CopyAsyncRule;
use super::tma::{self, Coord, Dim, TmaPlan};
use crate::variant::{Bug, CallCx, Decline, Emitter, Plan, Variant};
use tirx_ir::op::{ConfigKey, Family};
use tirx_ir::Arch;

pub struct TmaExplicit;

impl Variant for TmaExplicit {
    fn name(&self) -> &'static str {
        "tma_explicit"
    }
    fn priority(&self) -> u8 {
        10
    }
    fn family(&self) -> Family {
        Family::CopyAsync
    }
    fn honours(&self) -> &'static [ConfigKey] {
        tma::HONOURS
    }
    /// The descriptor takes run-time strides: the launch encodes them.
    fn runtime_strides(&self) -> bool {
        true
    }
    fn min_arch(&self) -> Arch {
        Arch::SM_90
    }

    fn plan(&self, cx: &CallCx) -> Result<Plan, Decline> {
        let ops = tma::operands(cx)?;
        let cfg = tma::config(cx, &ops)?;
        let (g_reg, s_reg) = if cfg.load { (ops.src, ops.dst) } else { (ops.dst, ops.src) };
        let gb = cx.buf(g_reg.buf);
        let gv = tma::global_view(cx, g_reg.buf)?;
        let swizzle = tma::shared_swizzle(cx, s_reg.buf)?;
        let smem = crate::operand::memory(cx, s_reg)?;
        if !smem.is_dense_chain() {
            return Err(Decline::new(
                CopyAsyncRule::SharedChain,
                format!(
                    "the shared region of `{}` is {} once sliced, not one dense box in row-major order; copy it in boxes that are (or use dispatch=\"tma_auto\")",
                    cx.buf(s_reg.buf).name,
                    smem.tile
                ),
            ));
        }
        let elem = i64::from(gb.dtype.bytes());
        let dims: Vec<Dim> = (0..g_reg.ranges.len())
            .rev()
            .map(|d| Dim {
                size: gv.sizes[d].clone(),
                stride: gv.strides[d].mul_int(elem),
                boxed: g_reg.ranges[d].extent,
                coord: Coord::of(&g_reg.ranges[d].begin, 1),
                issue: None,
            })
            .collect();
        let p = TmaPlan {
            cfg,
            global: g_reg.buf,
            dtype: tma::dtype_of(gb.dtype)?,
            base_offset: gv.base * elem,
            dims,
            issues: vec![],
            swizzle,
            smem,
            elem,
        };
        tma::validate(cx, &p)?;
        let mut plan = Plan::new(p.summary(), ());
        plan.rounds = Some(1);
        plan.notes.push(p.descriptor_note(cx));
        plan.data = Box::new(p);
        Ok(plan)
    }

    fn emit(&self, plan: &Plan, _cx: &CallCx, em: &mut Emitter) -> Result<(), Bug> {
        tma::emit(plan.data::<TmaPlan>("tma_explicit")?, em)
    }
}
