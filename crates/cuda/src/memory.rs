//! CUDA for the **memory** family: `buf[i] = v;`, vector copies as one
//! `uint4`/`uint2`/`unsigned`/... access per side (`float4`/`float2` for float32), so that ptxas emits 128-bit
//! loads and stores (`__ldg` for the non-coherent path), and PTX vector
//! accesses as one inline `asm volatile` naming the instruction with all its
//! qualifiers, each register bound to its 32-bit (or 16-bit) word of the local
//! array:
//!
//! ```text
//! asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
//!              : "=r"(*reinterpret_cast<unsigned*>(&v[0])), ... : "l"(&A[i]) : "memory");
//! ```
//!
//! Every asm is `volatile` with a `"memory"` clobber, so it stays in program
//! order with the thread's other accesses (the compiler cannot see inside).
//!
//! Shared addresses are shared-window addresses (`__cvta_generic_to_shared`).

use crate::ctype::vector_type;
use crate::emit::{Ctx, Emit};
use crate::CodegenError;
use tirx_ir::lir::{ptx_form, AtomicOp, CacheHint, LBinOp, LBufId, LExpr, LVarId, MemOp, PtxDir, PtxVec, Space};
use tirx_ir::DType;

impl Emit for MemOp {
    fn emit(&self, cx: &mut Ctx) -> Result<bool, CodegenError> {
        match self {
            MemOp::Store { buf, index, value } => cx.store(*buf, index, value)?,
            MemOp::VecCopy { dst, dst_index, src, src_index, lanes, cache } => {
                cx.vec_copy((*dst, dst_index), (*src, src_index), *lanes, *cache)?
            }
            MemOp::PtxVec(p) => cx.ptx_vec(p)?,
            MemOp::Atomic { op, buf, index, value, old } => cx.atomic(*op, *buf, index, value, *old)?,
        }
        Ok(true)
    }
}

impl Ctx<'_> {
    /// `const int old = atomicAdd(&W[i], v);`, or the bare call when nothing reads `old`
    /// (ptxas then emits a reduction, `RED`, instead of `ATOM`).
    fn atomic(
        &mut self,
        op: AtomicOp,
        buf: LBufId,
        index: &LExpr,
        value: &LExpr,
        old: Option<LVarId>,
    ) -> Result<(), CodegenError> {
        let f = match op {
            AtomicOp::Add => "atomicAdd",
        };
        let (p, v) = (self.addr(buf, index)?, self.e(value)?);
        let call = format!("{f}({p}, {v})");
        match old.filter(|v| self.live_vars.contains(v)) {
            Some(var) => {
                let t = self.k.var(var).dtype;
                let n = self.names.declare(var, &self.k.var(var).name);
                self.line(&format!("const {} {n} = {call};", crate::ctype::c_type(t)));
            }
            None => self.line(&format!("{call};")),
        }
        Ok(())
    }

    fn store(&mut self, buf: LBufId, index: &LExpr, value: &LExpr) -> Result<(), CodegenError> {
        let (i, v) = (self.e(index)?, self.e(value)?);
        self.line(&format!("{}[{i}] = {v};", self.names.buf(buf)));
        Ok(())
    }

    fn vec_copy(
        &mut self,
        (dst, dst_index): (LBufId, &LExpr),
        (src, src_index): (LBufId, &LExpr),
        lanes: u32,
        cache: CacheHint,
    ) -> Result<(), CodegenError> {
        let t = self.k.buf(dst).dtype;
        if lanes == 1 && cache == CacheHint::Default {
            let (d, s) = (self.e(dst_index)?, self.e(src_index)?);
            self.line(&format!("{}[{d}] = {}[{s}];", self.names.buf(dst), self.names.buf(src)));
            return Ok(());
        }
        let bits = lanes * t.bits();
        // float32 moves as float2 / float4: an accumulator copied through an integer view is
        // bit-cast register by register, which ptxas counts as reads of a wgmma's registers in
        // flight and serializes the wgmmas (C7514; stream-K's partial sums stored from `acc`).
        let vt = match (t, bits) {
            (DType::F32, 64) => Some("float2"),
            (DType::F32, 128) => Some("float4"),
            _ => vector_type(bits),
        }
        .ok_or_else(|| CodegenError::InvalidLir(format!("vector copy of {lanes} x {t} ({bits} bits)")))?;
        let lhs = self.view(vt, false, dst, dst_index)?;
        let rhs = match cache {
            CacheHint::Default => self.view(vt, true, src, src_index)?,
            CacheHint::NonCoherent => {
                format!("__ldg(reinterpret_cast<const {vt}*>({}))", self.addr(src, src_index)?)
            }
        };
        self.line(&format!("{lhs} = {rhs};"));
        Ok(())
    }
}

impl Ctx<'_> {
    fn ptx_vec(&mut self, p: &PtxVec) -> Result<(), CodegenError> {
        let (m, r) = (self.k.buf(p.mem), self.k.buf(p.reg));
        let bad = || CodegenError::InvalidLir(format!("PTX access of {} bytes of {}", p.bytes, r.dtype));
        let (_, words, bits) = ptx_form(p.bytes).ok_or_else(bad)?;
        let (space, elem_bytes) = (m.space, r.dtype.bytes());
        let (word_t, constraint) = if bits == 16 { ("unsigned short", "h") } else { ("unsigned", "r") };
        let io = if matches!(p.dir, PtxDir::St) { "" } else { "=" };
        let mut regs = Vec::with_capacity(words as usize);
        for w in 0..words {
            let word = self.word(p.reg, &p.reg_index, w, bits / 8, elem_bytes, word_t)?;
            regs.push(format!("\"{io}{constraint}\"({word})"));
        }
        let addr = self.addr(p.mem, &p.mem_index)?;
        let addr = match space {
            Space::Shared => format!("\"r\"(static_cast<unsigned>(__cvta_generic_to_shared({addr})))"),
            _ => format!("\"l\"({addr})"),
        };
        let slots = |from: u32| (from..from + words).map(|i| format!("%{i}")).collect::<Vec<_>>().join(", ");
        let vec = |from: u32| if words == 1 { slots(from) } else { format!("{{{}}}", slots(from)) };
        let instr = p.instruction(space);
        let regs = regs.join(", ");
        // The instruction on its own line, its operands on the next.
        let (asm, operands) = match p.dir {
            PtxDir::Ld(_) => (format!("{instr} {}, [%{words}];", vec(0)), format!(": {regs} : {addr}")),
            PtxDir::St => (format!("{instr} [%0], {};", vec(1)), format!(":: {addr}, {regs}")),
        };
        self.line(&format!("asm volatile(\"{asm}\""));
        self.line(&format!("             {operands} : \"memory\");"));
        Ok(())
    }

    /// Register word `w` (of `word_bytes`) of the local array `reg` from element
    /// `index` on, as an lvalue: `*reinterpret_cast<unsigned*>(&v[2])`, or
    /// `reinterpret_cast<unsigned*>(&v[i])[1]` when an element is wider than a word.
    fn word(
        &mut self,
        reg: LBufId,
        index: &LExpr,
        w: u32,
        word_bytes: u32,
        elem_bytes: u32,
        word_t: &str,
    ) -> Result<String, CodegenError> {
        if elem_bytes > word_bytes {
            return Ok(format!("reinterpret_cast<{word_t}*>({})[{w}]", self.addr(reg, index)?));
        }
        let step = i64::from(w * (word_bytes / elem_bytes));
        let at = match index {
            LExpr::Int(v, t) => LExpr::Int(v + step, *t),
            _ if step == 0 => index.clone(),
            _ => {
                let t = self.k.dtype_of(index);
                LExpr::Bin(LBinOp::Add, Box::new(index.clone()), Box::new(LExpr::Int(step, t)))
            }
        };
        self.view(word_t, false, reg, &at)
    }
}
