//! CUDA for the **matrix** family, as calls of small inline-PTX helpers:
//!
//! * `ldmatrix` / `stmatrix`: one helper per (direction, `.x{num}`, `.trans`),
//!   taking this lane's row address and its fragment registers:
//!   `tirx_ldmatrix_x2(&A_smem[row * 64 + col], &R[0], &R[2]);`
//! * `mma.sync`: one helper per form, taking D by reference, C by value and each
//!   32-bit register of A and B by the address of its first element (16-bit and
//!   8-bit elements packed in it), like the ldmatrix helpers:
//!   `tirx_mma_m16n8k16_f32_f16_f16_f32(acc[0], acc[1], acc[2], acc[3], &a[0], &a[2],
//!   &a[4], &a[6], &b[0], &b[2], acc[0], acc[1], acc[2], acc[3]);`
//!   The indices are constants, so after inlining every operand is a register.
//!   tf32 multiplicands are rounded with `cvt.rna.tf32.f32` inside the helper.

use crate::emit::{Ctx, Emit};
use crate::helpers::{mma_kind, Helper};
use crate::CodegenError;
use std::fmt::Write;
use tirx_ir::lir::{LBufId, LExpr, MatrixDir, MatrixMove, MatrixOp, Mma, MmaIn, MmaShape};

impl Emit for MatrixOp {
    fn emit(&self, cx: &mut Ctx) -> Result<bool, CodegenError> {
        cx.matrix(self)?;
        Ok(true)
    }
}

impl Ctx<'_> {
    fn matrix(&mut self, m: &MatrixOp) -> Result<(), CodegenError> {
        match m {
            MatrixOp::Move(m) => self.matrix_move(m),
            MatrixOp::Mma(m) => self.mma(m),
            MatrixOp::Wgmma(w) => self.wgmma(w),
            MatrixOp::WgmmaSync(s) => self.wgmma_sync(s),
        }
    }

    fn matrix_move(&mut self, m: &MatrixMove) -> Result<(), CodegenError> {
        let h = Helper::Matrix { store: m.dir == MatrixDir::Store, num: m.num, trans: m.trans };
        self.helpers.insert(h);
        let mut args = vec![self.addr(m.smem, &m.smem_index)?];
        for i in &m.reg_index {
            args.push(self.addr(m.regs, i)?);
        }
        self.line(&format!("{}({});", h.name(), args.join(", ")));
        Ok(())
    }

    fn mma(&mut self, m: &Mma) -> Result<(), CodegenError> {
        let k = self.k;
        let kind = m.kind(&|b| k.buf(b).dtype).map_err(CodegenError::InvalidLir)?;
        let h = Helper::Mma { shape: kind.shape, a: kind.a, b: kind.b };
        self.helpers.insert(h);
        let mut args = Vec::new();
        for (b, idx, by_address) in
            [(m.d, &m.d_index, false), (m.a, &m.a_index, true), (m.b, &m.b_index, true), (m.c, &m.c_index, false)]
        {
            for i in idx {
                args.push(if by_address { self.addr(b, i)? } else { self.element(b, i)? });
            }
        }
        self.line(&format!("{}({});", h.name(), args.join(", ")));
        Ok(())
    }

    /// `buf[index]`.
    fn element(&mut self, b: LBufId, i: &LExpr) -> Result<String, CodegenError> {
        let i = self.e(i)?;
        Ok(format!("{}[{i}]", self.names.buf(b)))
    }
}

/// The helper: `D = A·B + C` on one 16×8 tile by the whole warp.
pub(crate) fn mma_source(shape: MmaShape, a: MmaIn, b: MmaIn) -> String {
    let kind = mma_kind(shape, a, b);
    let [na, nb, _] = kind.regs();
    let (acc, acc_c) = if a.is_int() { ("int", "r") } else { ("float", "f") };
    let word = |t: MmaIn| if t == MmaIn::TF32 { "float" } else { "unsigned" };
    let mut params: Vec<String> = (0..4).map(|i| format!("{acc}& d{i}")).collect();
    params.extend((0..na).map(|i| format!("const void* a{i}")));
    params.extend((0..nb).map(|i| format!("const void* b{i}")));
    params.extend((0..4).map(|i| format!("{acc} c{i}")));
    let mut s = String::new();
    let _ = writeln!(s, "// mma.sync {}: D = A*B + C on one 16x8 tile, all 32 lanes of the warp.", shape.name());
    let _ =
        writeln!(s, "__device__ __forceinline__ void {}({}) {{", Helper::Mma { shape, a, b }.name(), params.join(", "));
    // tf32 operands are f32 values rounded to tf32 (nearest, ties away) as the PTX ISA requires.
    let mut ins = Vec::new();
    for (t, p, n) in [(a, "a", na), (b, "b", nb)] {
        for i in 0..n {
            let reg = format!("*static_cast<const {}*>({p}{i})", word(t));
            if t == MmaIn::TF32 {
                let _ = writeln!(s, "    unsigned {p}{i}_tf32;");
                let _ = writeln!(s, "    asm(\"cvt.rna.tf32.f32 %0, %1;\" : \"=r\"({p}{i}_tf32) : \"f\"({reg}));");
                ins.push(format!("\"r\"({p}{i}_tf32)"));
            } else {
                ins.push(format!("\"r\"({reg})"));
            }
        }
    }
    ins.extend((0..4).map(|i| format!("\"{acc_c}\"(c{i})")));
    let group = |from: usize, n: usize| {
        let r: Vec<String> = (from..from + n).map(|i| format!("%{i}")).collect();
        format!("{{{}}}", r.join(", "))
    };
    let ops = [group(0, 4), group(4, na), group(4 + na, nb), group(4 + na + nb, 4)].join(", ");
    let outs: Vec<String> = (0..4).map(|i| format!("\"={acc_c}\"(d{i})")).collect();
    // No `volatile`: the asm only maps registers to registers, so the compiler may schedule it freely.
    let _ = writeln!(s, "    asm(\"mma.sync.aligned.{} {ops};\"", kind.ptx());
    let _ = writeln!(s, "        : {}", outs.join(", "));
    let _ = writeln!(s, "        : {});", ins.join(", "));
    s.push_str("}\n");
    s
}

/// `ldmatrix`/`stmatrix` of `num` 8x8 b16 tiles: this lane's row address and
/// its `num` 32-bit fragment registers (each two 16-bit elements in memory).
pub(crate) fn helper_source(store: bool, num: u8, trans: bool) -> String {
    let (load, instr) = (!store, if store { "stmatrix" } else { "ldmatrix" });
    let n = usize::from(num);
    let regs: Vec<String> = (0..n).map(|i| format!("void* r{i}")).collect();
    let ptx_regs: Vec<String> = (0..n).map(|i| format!("%{}", if load { i } else { i + 1 })).collect();
    let addr_slot = if load { n } else { 0 };
    let t = if trans { ".trans" } else { "" };
    let body = if load {
        format!("{{{}}}, [%{addr_slot}]", ptx_regs.join(", "))
    } else {
        format!("[%{addr_slot}], {{{}}}", ptx_regs.join(", "))
    };
    let reg = |i: usize| format!("*static_cast<unsigned*>(r{i})");
    let mut s = String::new();
    let name = Helper::Matrix { store, num, trans }.name();
    let _ = writeln!(s, "__device__ __forceinline__ void {name}(const void* row, {}) {{", regs.join(", "));
    let _ = writeln!(s, "    unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(row));");
    let _ = writeln!(s, "    asm volatile(\"{instr}.sync.aligned.m8n8.x{num}{t}.shared.b16 {body};\"");
    if load {
        let outs: Vec<String> = (0..n).map(|i| format!("\"=r\"({})", reg(i))).collect();
        let _ = writeln!(s, "                 : {}", outs.join(", "));
        let _ = writeln!(s, "                 : \"r\"(addr)");
    } else {
        let ins: Vec<String> = (0..n).map(|i| format!("\"r\"({})", reg(i))).collect();
        let _ = writeln!(s, "                 :");
        let _ = writeln!(s, "                 : \"r\"(addr), {}", ins.join(", "));
    }
    // "memory": the asm reads (ldmatrix) or writes (stmatrix) shared memory the compiler cannot see.
    let _ = writeln!(s, "                 : \"memory\");");
    s.push_str("}\n");
    s
}
