//! CUDA for the **matrix** family, part 2 (`docs/lir.md` §2.11): Hopper's
//! `wgmma.mma_async` through one inline-PTX helper per form, its descriptors
//! through `tirx_wgmma_desc`, and the ordering instructions inline:
//!
//! ```text
//! for (int i = 0; i < 64; ++i) tirx_wgmma_fence_operand(acc[i]);   (unrolled)
//! asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
//! tirx_wgmma_m64n128k16_f32_bf16_bf16_ss(acc[0], ..., acc[63],
//!     tirx_wgmma_desc(&A_s[0], 0, 16, 1024, 1), tirx_wgmma_desc(&B_s[0], 2 * kt, 16, 1024, 1), 1);
//! asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
//! asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
//! for (int i = 0; i < 64; ++i) tirx_wgmma_fence_operand(acc[i]);   (unrolled)
//! ```
//!
//! The accumulator is passed by reference (`"+f"`), register by register, as
//! the instruction reads and writes it in place; A registers (the `rs` form)
//! by the address of their first element, read as one 32-bit word (as the
//! `mma.sync` helpers do). Every asm is `volatile`, so the compiler keeps
//! wgmmas, fences, commits and waits in program order. It does not know that a
//! wgmma writes its registers *later*, at the wait: so after every
//! `wgmma.wait_group` each register of the wgmmas that may be in flight there,
//! and before every `wgmma.fence` each register of the wgmmas it guards
//! ([`tirx_ir::lir::LKernel::wgmma_fences`]), goes through an empty `asm volatile` that reads
//! and writes it — later reads cannot be hoisted above the wait, and the
//! registers cannot be reused while a wgmma may still access them (CUTLASS's
//! `warpgroup_fence_operand`); registers no wgmma there uses are left free.
//! At a fence, the registers the next wgmmas overwrite without reading them (a
//! non-accumulating GEMM's) are defined anew instead (`"=f"`, no instruction):
//! their old values are dead, not kept alive across a loop's back edge.
//! `setmaxnreg` and `bar.arrive` are inline asm too.

use crate::emit::Ctx;
use crate::helpers::{Helper, WgmmaHelper};
use crate::CodegenError;
use std::collections::BTreeSet;
use std::fmt::Write;
use tirx_ir::lir::wgmma::{SmemDesc, Wgmma, WgmmaA, WgmmaIn, WgmmaSync};
use tirx_ir::lir::LExpr;
use tirx_ir::DType;

/// Registers printed per line of a wgmma call.
const ARGS_PER_LINE: usize = 8;

impl Ctx<'_> {
    pub(crate) fn wgmma(&mut self, w: &Wgmma) -> Result<(), CodegenError> {
        let k = self.k;
        let kind = w.kind(&|b| k.buf(b).dtype).map_err(CodegenError::InvalidLir)?;
        let h = WgmmaHelper {
            n: kind.n,
            a: kind.a,
            b: kind.b,
            acc_f16: kind.acc == DType::F16,
            regs_a: matches!(w.a, WgmmaA::Regs { .. }),
            trans_a: w.trans_a(),
            trans_b: w.trans_b(),
        };
        self.helpers.insert(Helper::Wgmma(h));
        let mut args = Vec::new();
        for i in &w.d_index {
            args.push(if h.acc_f16 { self.addr(w.d, i)? } else { self.element_of(w.d, i)? });
        }
        match &w.a {
            WgmmaA::Smem(s) => args.push(self.desc(s)?),
            WgmmaA::Regs { buf, index } => {
                for i in index {
                    args.push(self.addr(*buf, i)?);
                }
            }
        }
        args.push(self.desc(&w.b)?);
        args.push(self.e(&w.scale_d)?);
        let name = Helper::Wgmma(h).name();
        let mut lines: Vec<String> = args.chunks(ARGS_PER_LINE).map(|c| c.join(", ")).collect();
        let last = lines.len() - 1;
        for l in &mut lines[..last] {
            l.push(',');
        }
        lines[last].push_str(");");
        self.line(&format!("{name}("));
        for l in lines {
            self.line(&format!("    {l}"));
        }
        Ok(())
    }

    /// `tirx_wgmma_desc(&B_s[0], units, lbo, sbo, layout)`: the buffer's descriptor (loop-invariant:
    /// computed once) moved on `units` 16-byte units, the start element's offset divided exactly
    /// ([`units_of`]); where it does not divide so, `tirx_wgmma_desc(&B_s[i], 0, ...)`.
    fn desc(&mut self, s: &SmemDesc) -> Result<String, CodegenError> {
        self.helpers.insert(Helper::WgmmaDesc);
        let per_unit = 16 / (self.k.buf(s.buf).dtype.bytes() as i64).clamp(1, 16);
        let (at, units) = match units_of(&s.index, per_unit) {
            Some(units) => (self.addr(s.buf, &LExpr::i32(0))?, self.e(&units)?),
            None => (self.addr(s.buf, &s.index)?, "0".to_string()),
        };
        Ok(format!("tirx_wgmma_desc({at}, {units}, {}, {}, {})", s.lbo, s.sbo, s.swizzle.code()))
    }

    /// `buf[index]`.
    fn element_of(&mut self, b: tirx_ir::lir::LBufId, i: &LExpr) -> Result<String, CodegenError> {
        let i = self.e(i)?;
        Ok(format!("{}[{i}]", self.names.buf(b)))
    }

    /// `s` is the sync inside the kernel's body: its fence set is looked up by identity.
    pub(crate) fn wgmma_sync(&mut self, s: &WgmmaSync) -> Result<(), CodegenError> {
        match s {
            WgmmaSync::Fence => {
                self.fence_operands(s)?;
                self.line("asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\");");
            }
            WgmmaSync::Commit => self.line("asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\");"),
            WgmmaSync::Wait(n) => {
                self.line(&format!("asm volatile(\"wgmma.wait_group.sync.aligned {n};\" ::: \"memory\");"));
                self.fence_operands(s)?;
            }
        }
        Ok(())
    }

    /// Each register the sync `s` orders ([`tirx_ir::lir::LKernel::wgmma_fences`]) through an
    /// empty volatile asm, one 32-bit register a call, buffers in the order the kernel's wgmmas
    /// name them: a loop over each run of consecutive registers.
    fn fence_operands(&mut self, s: &WgmmaSync) -> Result<(), CodegenError> {
        let k = self.k;
        let Some(set) = self.fences.of(s) else {
            return Err(CodegenError::InvalidLir(format!("{} outside the kernel's body", s.name())));
        };
        let set = set.clone();
        let fresh = self.fences.fresh(s).cloned().unwrap_or_default();
        for b in k.wgmma_register_bufs() {
            let Some(starts) = set.get(&b) else { continue };
            let buf = k.buf(b);
            let word = buf.dtype != DType::F32;
            let per = if word { 4 / buf.dtype.bytes().max(1) as i64 } else { 1 };
            let new: BTreeSet<i64> =
                fresh.get(&b).map_or_else(BTreeSet::new, |f| starts.intersection(f).copied().collect());
            let old: BTreeSet<i64> = starts.difference(&new).copied().collect();
            let name = self.names.buf(b).to_string();
            let step = if per == 1 { "++i".to_string() } else { format!("i += {per}") };
            for (regs, helper) in [(old, Helper::WgmmaFenceOperand { word }), (new, Helper::WgmmaFreshOperand { word })]
            {
                if regs.is_empty() {
                    continue;
                }
                let call = format!("{}({}{name}[i])", helper.name(), if word { "&" } else { "" });
                self.helpers.insert(helper);
                for (lo, hi) in runs(&regs, per) {
                    self.line("#pragma unroll");
                    self.line(&format!("for (int i = {lo}; i < {hi}; {step}) {call};"));
                }
            }
        }
        Ok(())
    }
}

/// The runs `[lo, hi)` of registers `per` elements apart among `starts` (ascending).
fn runs(starts: &BTreeSet<i64>, per: i64) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = vec![];
    for &e in starts {
        match out.last_mut() {
            Some((_, hi)) if *hi == e => *hi = e + per,
            _ => out.push((e, e + per)),
        }
    }
    out
}

/// The helper: `D = A·B + scale_d·D` on a 64×N tile, issued by the warpgroup.
pub(crate) fn wgmma_source(h: WgmmaHelper) -> String {
    let kind = h.kind();
    let nd = kind.d_regs();
    let mut params: Vec<String> =
        (0..nd).map(|i| if h.acc_f16 { format!("void* d{i}") } else { format!("float& d{i}") }).collect();
    let mut ins = Vec::new();
    let mut body = String::new();
    if h.regs_a {
        params.extend((0..4).map(|i| format!("const void* a{i}")));
        for i in 0..4 {
            if h.a == WgmmaIn::TF32 {
                // tf32 registers hold f32 values rounded to tf32 (nearest, ties away), as for mma.sync.
                let _ = writeln!(body, "    unsigned a{i}_tf32;");
                let _ = writeln!(
                    body,
                    "    asm(\"cvt.rna.tf32.f32 %0, %1;\" : \"=r\"(a{i}_tf32) : \"f\"(*static_cast<const float*>(a{i})));"
                );
                ins.push(format!("\"r\"(a{i}_tf32)"));
            } else {
                ins.push(format!("\"r\"(*static_cast<const unsigned*>(a{i}))"));
            }
        }
    } else {
        params.push("unsigned long long desc_a".into());
        ins.push("\"l\"(desc_a)".into());
    }
    params.push("unsigned long long desc_b".into());
    ins.push("\"l\"(desc_b)".into());
    params.push("int scale_d".into());
    ins.push("\"r\"(scale_d)".into());
    let outs: Vec<String> = (0..nd)
        .map(|i| if h.acc_f16 { format!("\"+r\"(*static_cast<unsigned*>(d{i}))") } else { format!("\"+f\"(d{i})") })
        .collect();
    let a = if h.regs_a { format!("{{%{}, %{}, %{}, %{}}}", nd, nd + 1, nd + 2, nd + 3) } else { format!("%{nd}") };
    let na = if h.regs_a { 4 } else { 1 };
    let (b, p) = (format!("%{}", nd + na), nd + na + 1);
    // imm-trans exists for 16-bit inputs only; the register form has no trans-a.
    let trans = match (kind.a.transposable(), h.regs_a) {
        (false, _) => String::new(),
        (true, true) => format!(", {}", u8::from(h.trans_b)),
        (true, false) => format!(", {}, {}", u8::from(h.trans_a), u8::from(h.trans_b)),
    };
    let source = if h.regs_a { "A from registers" } else { "A from shared memory (descriptor)" };
    let major = |t: bool| if t { "MN-major" } else { "K-major" };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// wgmma.mma_async {}: D = A*B (+ D if scale_d) on a 64x{} tile by the whole warpgroup, asynchronously;",
        kind.ptx(),
        kind.n
    );
    let _ = writeln!(
        s,
        "// {source}{}, B {} (descriptor). D is defined again after wgmma.wait_group.",
        if h.regs_a { String::new() } else { format!(", {}", major(h.trans_a)) },
        major(h.trans_b)
    );
    let _ = writeln!(s, "__device__ __forceinline__ void {}({}) {{", Helper::Wgmma(h).name(), params.join(", "));
    s.push_str(&body);
    let _ = writeln!(s, "    asm volatile(");
    let _ = writeln!(s, "        \"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{p}, 0;\\n\"");
    let _ = writeln!(s, "        \"wgmma.mma_async.sync.aligned.{} \"", kind.ptx());
    let regs: Vec<String> = (0..nd).map(|i| format!("%{i}")).collect();
    let lines: Vec<String> = regs.chunks(16).map(|c| c.join(", ")).collect();
    for (i, l) in lines.iter().enumerate() {
        let (open, close) = (if i == 0 { "{" } else { "" }, if i + 1 == lines.len() { "}" } else { ", " });
        let _ = writeln!(s, "        \"{open}{l}{close}\"");
    }
    let _ = writeln!(s, "        \", {a}, {b}, p, 1, 1{trans};\\n}}\\n\"");
    let outs: Vec<String> = outs.chunks(ARGS_PER_LINE).map(|c| c.join(", ")).collect();
    let _ = writeln!(s, "        : {}", outs.join(",\n          "));
    let _ = writeln!(s, "        : {});", ins.join(", "));
    s.push_str("}\n");
    s
}

/// The descriptor helper (PTX ISA, "Matrix Descriptor Format").
pub(crate) fn desc_source() -> String {
    "// A wgmma shared-memory matrix descriptor: start address (bits 0-13, 16-byte units),\n\
     // leading and stride byte offsets (bits 16-29, 32-45, 16-byte units), base offset 0,\n\
     // layout (bits 62-63: 0 no swizzle, 1 128B, 2 64B, 3 32B); of `base` moved on `units` 16-byte\n\
     // units, added to the low word (CUTLASS's advance along K: the base's descriptor is computed\n\
     // once, each matrix one add; no carry out of the field, shared addresses lie below 2^18 bytes).\n\
     __device__ __forceinline__ unsigned long long tirx_wgmma_desc(const void* base, unsigned units, unsigned lbo, unsigned sbo, unsigned layout) {\n    \
     unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(base));\n    \
     unsigned lo = (((addr & 0x3FFFFu) >> 4) | ((lbo >> 4) << 16)) + units;\n    \
     unsigned hi = (sbo >> 4) | (layout << 30);\n    \
     return (static_cast<unsigned long long>(hi) << 32) | lo;\n}\n"
        .to_string()
}

/// `index / per_unit` where it divides exactly term by term (sums and differences of
/// constants and products by a constant, each a multiple of `per_unit`), else None: a
/// descriptor's start element in 16-byte units of `16 / per_unit`-byte elements.
pub(crate) fn units_of(index: &LExpr, per_unit: i64) -> Option<LExpr> {
    use tirx_ir::lir::LBinOp::{Add, Mul, Sub};
    match index {
        LExpr::Int(v, t) => (v % per_unit == 0).then(|| LExpr::Int(v / per_unit, *t)),
        LExpr::Bin(op @ (Add | Sub), a, b) => Some(LExpr::bin(*op, units_of(a, per_unit)?, units_of(b, per_unit)?)),
        LExpr::Bin(Mul, a, b) => match (a.as_ref(), b.as_ref()) {
            (_, LExpr::Int(..)) => Some(LExpr::bin(Mul, (**a).clone(), units_of(b, per_unit)?)),
            (LExpr::Int(..), _) => Some(LExpr::bin(Mul, units_of(a, per_unit)?, (**b).clone())),
            _ => None,
        },
        _ => None,
    }
}

/// A fence's fresh register (`tirx_ir::lir::wgmma_fences`): defined anew, its old value dead
/// (`word`: given by its address, 16- and 8-bit elements).
pub(crate) fn fresh_operand_source(word: bool) -> String {
    if word {
        "// A wgmma register (a 32-bit word of packed elements) the next wgmma overwrites without reading:\n\
         // its old value dead here (defined anew, no instruction), so the compiler keeps no copy of it alive.\n\
         __device__ __forceinline__ void tirx_wgmma_fresh_operand(void* r) {\n    \
         asm volatile(\"\" : \"=r\"(*static_cast<unsigned*>(r)) :: \"memory\");\n}\n"
            .to_string()
    } else {
        "// A wgmma register the next wgmma overwrites without reading: its old value dead here (defined\n\
         // anew, no instruction), so the compiler keeps no copy of it alive.\n\
         __device__ __forceinline__ void tirx_wgmma_fresh_operand(float& r) {\n    \
         asm volatile(\"\" : \"=f\"(r) :: \"memory\");\n}\n"
            .to_string()
    }
}

/// The register fence of one 32-bit register (`word`: given by its address, 16- and 8-bit elements).
pub(crate) fn fence_operand_source(word: bool) -> String {
    if word {
        "// Orders a wgmma register (a 32-bit word of packed elements) with wgmma.fence / wait_group.\n\
         __device__ __forceinline__ void tirx_wgmma_fence_operand(void* r) {\n    \
         asm volatile(\"\" : \"+r\"(*static_cast<unsigned*>(r)) :: \"memory\");\n}\n"
            .to_string()
    } else {
        "// Orders a wgmma register with wgmma.fence / wait_group: the compiler may not move its accesses across.\n\
         __device__ __forceinline__ void tirx_wgmma_fence_operand(float& r) {\n    \
         asm volatile(\"\" : \"+f\"(r) :: \"memory\");\n}\n"
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::{runs, units_of};
    use tirx_ir::lir::{LBinOp, LExpr, LVarId};
    use tirx_ir::DType;

    /// `e` at `vars` (integer sums, differences and products only).
    fn eval(e: &LExpr, vars: &[i64]) -> i64 {
        match e {
            LExpr::Int(v, _) => *v,
            LExpr::Var(v) => vars[v.0 as usize],
            LExpr::Bin(LBinOp::Add, a, b) => eval(a, vars) + eval(b, vars),
            LExpr::Bin(LBinOp::Sub, a, b) => eval(a, vars) - eval(b, vars),
            LExpr::Bin(LBinOp::Mul, a, b) => eval(a, vars) * eval(b, vars),
            _ => unreachable!("not in these tests"),
        }
    }

    #[test]
    fn descriptor_units_divide_exactly_or_not_at_all() {
        use LBinOp::{Add, Mul, Sub};
        let (i, j) = (LExpr::Var(LVarId(0)), LExpr::Var(LVarId(1)));
        let c = |v| LExpr::Int(v, DType::I32);
        // kt * 8192 + 16 + wg * 4096 - 4096 (bf16: 8 elements a unit)
        let a = LExpr::bin(
            Sub,
            LExpr::bin(
                Add,
                LExpr::bin(Add, LExpr::bin(Mul, i.clone(), c(8192)), c(16)),
                LExpr::bin(Mul, c(4096), j.clone()),
            ),
            c(4096),
        );
        let units = units_of(&a, 8).expect("divides");
        for vars in [[0, 1], [3, 2], [7, 1]] {
            assert_eq!(eval(&units, &vars) * 8, eval(&a, &vars));
        }
        // a term not a multiple of the unit, a product of two variables, a variable alone: none
        assert!(units_of(&LExpr::bin(Add, LExpr::bin(Mul, i.clone(), c(16)), c(8)), 16).is_none());
        assert!(units_of(&LExpr::bin(Mul, i.clone(), j.clone()), 16).is_none());
        assert!(units_of(&i, 1).is_none());
        assert_eq!(eval(&units_of(&c(0), 16).unwrap(), &[]), 0);
    }

    #[test]
    fn fences_loop_over_runs_of_registers() {
        // f32 registers 0..8 and 16..24; 16-bit words from 0, 2, 4 and 10.
        assert_eq!(runs(&(0..8).chain(16..24).collect(), 1), vec![(0, 8), (16, 24)]);
        assert_eq!(runs(&[0, 2, 4, 10].into_iter().collect(), 2), vec![(0, 6), (10, 12)]);
        assert!(runs(&Default::default(), 1).is_empty());
    }
}
