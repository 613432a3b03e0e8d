//! LIR → flat register bytecode, compiled once per simulation.
//!
//! Every thread owns a register file laid out as
//! `[threadIdx.xyz, blockIdx.xyz | one register per LIR var | constants | temporaries]`;
//! constants are preloaded from a template, so literals cost nothing at run time.
//! Structured control flow becomes jumps; `&&`, `||` and `?:` short-circuit
//! like the C the CUDA generator prints. The compiler also validates the LIR
//! (ids, widths, buffer spaces) and reports malformed input as `InvalidKernel`.
//!
//! Expressions and structured statements are compiled here; the instruction
//! of a family statement by the family's module ([`Compile`]), to the scalar
//! core's instructions or to its own (`Ins::Family`).

use crate::error::{SimError, SimErrorKind};
use crate::family::FamilyIns;
use crate::value::{float_const, round_to, wrap_int};
use std::collections::HashMap;
use tirx_ir::hir::{MathFn, UnOp};
use tirx_ir::lir::{LBinOp, LBufId, LExpr, LKernel, LStmt, LStmtKind, RoundMode, RoundOp, Special};
use tirx_ir::{DType, Span};

pub(crate) type Reg = u32;

/// Registers 0..3 hold threadIdx.{x,y,z}, 3..6 blockIdx.{x,y,z}.
pub(crate) const SPECIAL_REGS: u32 = 6;
/// Temporaries are numbered from here while compiling, then moved after the constants.
const TEMP_TAG: u32 = 1 << 30;
/// The site of an instruction that can never report an error.
pub(crate) const NO_SITE: u32 = u32::MAX;
/// Trips of one `while` loop a thread may run before the simulator calls it a hang: threads
/// run one at a time until they block, so a loop waiting for another thread's atomic (a spin
/// lock) never ends here.
pub(crate) const MAX_WHILE_TRIPS: u64 = 1 << 24;

/// A bytecode instruction: the scalar core the interpreter runs inline, the CTA
/// barrier the scheduler releases, and every family's own instructions.
#[derive(Debug)]
pub(crate) enum Ins {
    Mov {
        dst: Reg,
        src: Reg,
    },
    Bin {
        op: LBinOp,
        ty: DType,
        dst: Reg,
        a: Reg,
        b: Reg,
        site: u32,
    },
    Un {
        op: UnOp,
        ty: DType,
        dst: Reg,
        a: Reg,
    },
    Cast {
        from: DType,
        to: DType,
        dst: Reg,
        a: Reg,
    },
    Math {
        f: MathFn,
        ty: DType,
        dst: Reg,
        a: Reg,
    },
    /// `op` on operands of type `ty` rounded once (`round`); operands the op does not take are ignored.
    Rounded {
        op: RoundOp,
        mode: RoundMode,
        ty: DType,
        dst: Reg,
        args: [Reg; 3],
    },
    Load {
        site: u32,
        buf: u32,
        dst: Reg,
        idx: Reg,
    },
    Store {
        site: u32,
        buf: u32,
        idx: Reg,
        val: Reg,
    },
    VecCopy {
        site: u32,
        dst: u32,
        dst_idx: Reg,
        src: u32,
        src_idx: Reg,
        lanes: u32,
        nc: bool,
    },
    Jmp {
        to: u32,
    },
    /// Jump when the register is zero / non-zero (conditions are bool- or int-valued).
    Jz {
        cond: Reg,
        to: u32,
    },
    Jnz {
        cond: Reg,
        to: u32,
    },
    /// Exit the loop at `exit` unless `var < end` (both normalised ints).
    LoopTest {
        var: Reg,
        end: Reg,
        exit: u32,
    },
    Inc {
        var: Reg,
        ty: DType,
    },
    /// A `while` loop's trip: counts it in `trips` and fails past [`MAX_WHILE_TRIPS`].
    WhileTrip {
        trips: Reg,
        site: u32,
    },
    /// `old = atomicAdd(&buf[idx], val)` (`old`: none when the value is dropped).
    Atomic {
        site: u32,
        buf: u32,
        idx: Reg,
        val: Reg,
        old: Option<Reg>,
    },
    /// `__syncthreads()`: the scheduler passes it when every thread of the CTA waits here.
    CtaBarrier {
        site: u32,
    },
    /// An instruction of a family, executed through its [`FamilyIns`].
    Family(Box<dyn FamilyIns>),
    Exit,
}

impl Ins {
    fn for_each_reg(&mut self, mut f: impl FnMut(&mut Reg)) {
        match self {
            Ins::Mov { dst, src } => {
                f(dst);
                f(src)
            }
            Ins::Bin { dst, a, b, .. } => {
                f(dst);
                f(a);
                f(b)
            }
            Ins::Un { dst, a, .. } | Ins::Cast { dst, a, .. } | Ins::Math { dst, a, .. } => {
                f(dst);
                f(a)
            }
            Ins::Rounded { dst, args, .. } => {
                f(dst);
                args.iter_mut().for_each(f)
            }
            Ins::Load { dst, idx, .. } => {
                f(dst);
                f(idx)
            }
            Ins::Store { idx, val, .. } => {
                f(idx);
                f(val)
            }
            Ins::VecCopy { dst_idx, src_idx, .. } => {
                f(dst_idx);
                f(src_idx)
            }
            Ins::Jz { cond, .. } | Ins::Jnz { cond, .. } => f(cond),
            Ins::LoopTest { var, end, .. } => {
                f(var);
                f(end)
            }
            Ins::Inc { var, .. } | Ins::WhileTrip { trips: var, .. } => f(var),
            Ins::Atomic { idx, val, old, .. } => {
                f(idx);
                f(val);
                old.iter_mut().for_each(f)
            }
            Ins::Family(i) => i.for_each_reg(&mut f),
            Ins::Jmp { .. } | Ins::CtaBarrier { .. } | Ins::Exit => {}
        }
    }

    /// The instruction as family type `T`'s, if it is one (a family's module
    /// recognising its own instructions, such as the waits it releases).
    pub(crate) fn family<T: FamilyIns>(&self) -> Option<&T> {
        match self {
            Ins::Family(i) => i.as_any().downcast_ref(),
            _ => None,
        }
    }
}

/// An LIR instruction family compiled to bytecode: implemented in the family's
/// module, reached from [`Compiler::stmt`] through [`as_compile`].
pub(crate) trait Compile {
    /// Compiles one instruction (the span of its statement is the compiler's).
    fn compile(&self, c: &mut Compiler<'_>) -> Result<(), SimError>;
}

/// Generates [`as_compile`] from the family list: a family type without
/// `impl Compile` does not compile.
macro_rules! compile_dispatch {
    ($($(#[$doc:meta])* $family:ident($ty:ty),)*) => {
        /// The instruction of a family statement, as something to compile; `None`
        /// for the structured statements, which the compiler handles itself.
        fn as_compile(s: &LStmtKind) -> Option<&dyn Compile> {
            match s {
                $(LStmtKind::$family(i) => Some(i),)*
                LStmtKind::Let { .. }
                | LStmtKind::For { .. }
                | LStmtKind::If { .. }
                | LStmtKind::While { .. }
                | LStmtKind::Comment(_) => None,
            }
        }
    };
}

tirx_ir::for_each_family!(compile_dispatch);

/// The compiled kernel.
pub(crate) struct Program {
    pub code: Vec<Ins>,
    /// Source span of each memory / barrier instruction (`site` ids).
    pub sites: Vec<Span>,
    pub nregs: usize,
    /// Register file template (constants filled in, everything else zero).
    pub template: Vec<u64>,
}

/// Compiles `k`; `storage[b]` is the buffer whose memory buffer `b` uses (`b`
/// itself but for a parameter passed the same array as an earlier one).
pub(crate) fn compile(k: &LKernel, storage: &[u32]) -> Result<Program, SimError> {
    let mut c = Compiler {
        k,
        storage,
        code: vec![],
        sites: vec![],
        consts: HashMap::new(),
        const_vals: vec![],
        top: 0,
        max_top: 0,
        span: Span::default(),
    };
    c.block(&k.body)?;
    c.code.push(Ins::Exit);
    Ok(c.finish())
}

pub(crate) struct Compiler<'k> {
    pub(crate) k: &'k LKernel,
    storage: &'k [u32],
    code: Vec<Ins>,
    sites: Vec<Span>,
    consts: HashMap<u64, Reg>,
    const_vals: Vec<u64>,
    top: u32,
    max_top: u32,
    /// Span of the statement being compiled, for errors.
    span: Span,
}

impl Compiler<'_> {
    fn finish(mut self) -> Program {
        let nvars = self.k.vars.len() as u32;
        let const_base = SPECIAL_REGS + nvars;
        let temp_base = const_base + self.const_vals.len() as u32;
        for ins in &mut self.code {
            ins.for_each_reg(|r| {
                if *r >= TEMP_TAG {
                    *r = temp_base + (*r - TEMP_TAG);
                }
            });
        }
        let nregs = (temp_base + self.max_top) as usize;
        let mut template = vec![0u64; nregs];
        for (i, v) in self.const_vals.iter().enumerate() {
            template[(const_base as usize) + i] = *v;
        }
        Program { code: self.code, sites: self.sites, nregs, template }
    }

    pub(crate) fn invalid(&self, msg: impl Into<String>) -> SimError {
        SimError::new(SimErrorKind::InvalidKernel, self.span, msg)
            .help("the lowered IR is malformed; this is a bug in the lowering, please report it")
    }

    pub(crate) fn temp(&mut self) -> Reg {
        let r = TEMP_TAG + self.top;
        self.top += 1;
        self.max_top = self.max_top.max(self.top);
        r
    }

    pub(crate) fn site(&mut self) -> u32 {
        self.sites.push(self.span);
        (self.sites.len() - 1) as u32
    }

    /// A constant register; the constant index is resolved in `finish`.
    fn constant(&mut self, bits: u64) -> Reg {
        let base = SPECIAL_REGS + self.k.vars.len() as u32;
        if let Some(r) = self.consts.get(&bits) {
            return *r;
        }
        let r = base + self.const_vals.len() as u32;
        self.const_vals.push(bits);
        self.consts.insert(bits, r);
        r
    }

    pub(crate) fn var_reg(&self, v: tirx_ir::lir::LVarId) -> Result<Reg, SimError> {
        if (v.0 as usize) < self.k.vars.len() {
            Ok(SPECIAL_REGS + v.0)
        } else {
            Err(self.invalid(format!("variable id {} is out of range", v.0)))
        }
    }

    pub(crate) fn buf(&self, b: LBufId) -> Result<u32, SimError> {
        if (b.0 as usize) < self.k.bufs.len() {
            Ok(self.storage.get(b.0 as usize).copied().unwrap_or(b.0))
        } else {
            Err(self.invalid(format!("buffer id {} is out of range", b.0)))
        }
    }

    pub(crate) fn emit(&mut self, i: Ins) -> u32 {
        self.code.push(i);
        (self.code.len() - 1) as u32
    }

    /// Emits a family's own instruction.
    pub(crate) fn emit_family(&mut self, i: impl FamilyIns) -> u32 {
        self.emit(Ins::Family(Box::new(i)))
    }

    fn here(&self) -> u32 {
        self.code.len() as u32
    }

    fn patch(&mut self, at: u32, target: u32) {
        match &mut self.code[at as usize] {
            Ins::Jmp { to } | Ins::Jz { to, .. } | Ins::Jnz { to, .. } => *to = target,
            Ins::LoopTest { exit, .. } => *exit = target,
            _ => {}
        }
    }

    fn block(&mut self, body: &[LStmt]) -> Result<(), SimError> {
        for s in body {
            let mark = self.top;
            self.span = s.span;
            self.stmt(s)?;
            self.top = mark;
        }
        Ok(())
    }

    fn stmt(&mut self, s: &LStmt) -> Result<(), SimError> {
        match &s.kind {
            LStmtKind::Let { var, value } => {
                let dst = self.var_reg(*var)?;
                let ty = self.k.var(*var).dtype;
                self.expr_into(value, ty, dst)?;
            }
            LStmtKind::For { var, begin, extent, body, .. } => self.for_loop(*var, begin, extent, body)?,
            LStmtKind::While { cond, body } => {
                // The trip count lives across the body (whose temporaries come after it).
                let trips = self.temp();
                let zero = self.int_const(0, DType::I64);
                self.emit(Ins::Mov { dst: trips, src: zero });
                let head = self.here();
                let c = self.cond(cond)?;
                let jz = self.emit(Ins::Jz { cond: c, to: 0 });
                let site = self.site();
                self.emit(Ins::WhileTrip { trips, site });
                let span = self.span;
                self.block(body)?;
                self.span = span;
                self.emit(Ins::Jmp { to: head });
                let exit = self.here();
                self.patch(jz, exit);
            }
            LStmtKind::If { cond, then_body, else_body } => {
                let c = self.cond(cond)?;
                let jz = self.emit(Ins::Jz { cond: c, to: 0 });
                self.block(then_body)?;
                if else_body.is_empty() {
                    let end = self.here();
                    self.patch(jz, end);
                } else {
                    let jmp = self.emit(Ins::Jmp { to: 0 });
                    let else_at = self.here();
                    self.patch(jz, else_at);
                    self.block(else_body)?;
                    let end = self.here();
                    self.patch(jmp, end);
                }
            }
            LStmtKind::Comment(_) => {}
            kind => {
                if let Some(i) = as_compile(kind) {
                    i.compile(self)?
                }
            }
        }
        Ok(())
    }

    fn for_loop(
        &mut self,
        var: tirx_ir::lir::LVarId,
        begin: &LExpr,
        extent: &LExpr,
        body: &[LStmt],
    ) -> Result<(), SimError> {
        let v = self.var_reg(var)?;
        let ty = self.k.var(var).dtype;
        if !ty.is_int() {
            return Err(self.invalid(format!("loop variable `{}` has type {ty}, not an integer", self.k.var(var).name)));
        }
        self.expr_into(begin, ty, v)?;
        let ext = self.expr_as(extent, ty)?;
        let end = self.temp();
        self.emit(Ins::Bin { op: LBinOp::Add, ty, dst: end, a: v, b: ext, site: NO_SITE });
        let head = self.emit(Ins::LoopTest { var: v, end, exit: 0 });
        let span = self.span;
        self.block(body)?;
        self.span = span;
        self.emit(Ins::Inc { var: v, ty });
        self.emit(Ins::Jmp { to: head });
        let exit = self.here();
        self.patch(head, exit);
        Ok(())
    }

    /// An element index: any integer expression, used as i64.
    pub(crate) fn index(&mut self, e: &LExpr) -> Result<Reg, SimError> {
        let t = self.ty(e)?;
        if !t.is_int() {
            return Err(self.invalid(format!("an index has type {t}; indices are integers")));
        }
        self.expr(e)
    }

    /// A branch condition register (any scalar; zero is false).
    fn cond(&mut self, e: &LExpr) -> Result<Reg, SimError> {
        let t = self.ty(e)?;
        if t.is_float() {
            self.expr_as(e, DType::Bool)
        } else {
            self.expr(e)
        }
    }

    /// The type an expression evaluates in (C-like promotion of mixed operands).
    pub(crate) fn ty(&self, e: &LExpr) -> Result<DType, SimError> {
        Ok(match e {
            LExpr::Int(_, t) | LExpr::Float(_, t) | LExpr::Cast(t, _) => *t,
            LExpr::Bool(_) => DType::Bool,
            LExpr::Var(v) => {
                self.var_reg(*v)?;
                self.k.var(*v).dtype
            }
            LExpr::Special(_) => DType::I32,
            LExpr::Bin(op, a, b) => {
                if op.is_compare() || op.is_logic() {
                    DType::Bool
                } else {
                    promote(self.ty(a)?, self.ty(b)?)
                }
            }
            LExpr::Un(UnOp::Not, _) => DType::Bool,
            LExpr::Un(_, a) => self.ty(a)?,
            LExpr::Select(_, a, b) => promote(self.ty(a)?, self.ty(b)?),
            LExpr::Math(f, args) => {
                let t = match args.first() {
                    Some(a) => self.ty(a)?,
                    None => return Err(self.invalid(format!("{}() without an argument", f.name()))),
                };
                if t.is_float() || *f == MathFn::Abs {
                    t
                } else {
                    DType::F32
                }
            }
            LExpr::Rounded(RoundOp::Cvt(t), ..) => *t,
            LExpr::Rounded(_, _, args) => self.rounded_operand_ty(args)?,
            LExpr::Load(b, _) => self.k.bufs[self.buf(*b)? as usize].dtype,
        })
    }

    /// The operand type of a rounded expression (the LIR makes them all equal).
    fn rounded_operand_ty(&self, args: &[LExpr]) -> Result<DType, SimError> {
        match args.first() {
            Some(a) => self.ty(a),
            None => Err(self.invalid("a rounded operation without operands")),
        }
    }

    /// Evaluates `e` converted to `ty` into `dst`.
    fn expr_into(&mut self, e: &LExpr, ty: DType, dst: Reg) -> Result<(), SimError> {
        let from = self.ty(e)?;
        let r = self.expr(e)?;
        if from != ty {
            self.emit(Ins::Cast { from, to: ty, dst, a: r });
        } else if r != dst {
            self.emit(Ins::Mov { dst, src: r });
        }
        Ok(())
    }

    /// Evaluates `e` converted to `ty` into some register.
    pub(crate) fn expr_as(&mut self, e: &LExpr, ty: DType) -> Result<Reg, SimError> {
        let from = self.ty(e)?;
        let r = self.expr(e)?;
        if from == ty {
            return Ok(r);
        }
        let dst = self.temp();
        self.emit(Ins::Cast { from, to: ty, dst, a: r });
        Ok(dst)
    }

    pub(crate) fn expr(&mut self, e: &LExpr) -> Result<Reg, SimError> {
        Ok(match e {
            LExpr::Int(v, t) => self.int_const(*v, *t),
            LExpr::Float(v, t) => {
                let bits = if t.is_float() { float_const(*t, *v) } else { wrap_int(*t, *v as i64) as u64 };
                self.constant(bits)
            }
            LExpr::Bool(b) => self.constant(*b as u64),
            LExpr::Var(v) => self.var_reg(*v)?,
            LExpr::Special(Special::ThreadIdx(d)) if *d < 3 => *d as u32,
            LExpr::Special(Special::BlockIdx(d)) if *d < 3 => 3 + *d as u32,
            LExpr::Special(s) => return Err(self.invalid(format!("{s:?} has no such dimension"))),
            LExpr::Bin(op, a, b) if op.is_logic() => self.short_circuit(*op, a, b)?,
            LExpr::Bin(op, a, b) => self.binary(*op, a, b)?,
            LExpr::Un(op, a) => {
                let t = self.ty(a)?;
                if *op == UnOp::BitNot && t.is_float() {
                    return Err(self.invalid(format!("`~` on a {t} value")));
                }
                let a = self.expr(a)?;
                let dst = self.temp();
                self.emit(Ins::Un { op: *op, ty: t, dst, a });
                dst
            }
            LExpr::Cast(to, a) => {
                let from = self.ty(a)?;
                let a = self.expr(a)?;
                let dst = self.temp();
                self.emit(Ins::Cast { from, to: *to, dst, a });
                dst
            }
            LExpr::Select(c, a, b) => {
                let ty = self.ty(e)?;
                let c = self.cond(c)?;
                let dst = self.temp();
                let jz = self.emit(Ins::Jz { cond: c, to: 0 });
                self.expr_into(a, ty, dst)?;
                let jmp = self.emit(Ins::Jmp { to: 0 });
                let else_at = self.here();
                self.patch(jz, else_at);
                self.expr_into(b, ty, dst)?;
                let end = self.here();
                self.patch(jmp, end);
                dst
            }
            LExpr::Math(f, args) => {
                if args.len() != 1 {
                    return Err(self.invalid(format!("{}() takes one argument, got {}", f.name(), args.len())));
                }
                let ty = self.ty(e)?;
                let a = self.expr_as(&args[0], ty)?;
                let dst = self.temp();
                self.emit(Ins::Math { f: *f, ty, dst, a });
                dst
            }
            LExpr::Rounded(op, mode, args) => {
                let ty = self.rounded_operand_ty(args)?;
                let mut regs = [0; 3];
                for (r, a) in regs.iter_mut().zip(args) {
                    *r = self.expr_as(a, ty)?;
                }
                let dst = self.temp();
                self.emit(Ins::Rounded { op: *op, mode: *mode, ty, dst, args: regs });
                dst
            }
            LExpr::Load(b, i) => {
                let buf = self.buf(*b)?;
                let idx = self.index(i)?;
                let dst = self.temp();
                let site = self.site();
                self.emit(Ins::Load { site, buf, dst, idx });
                dst
            }
        })
    }

    fn int_const(&mut self, v: i64, t: DType) -> Reg {
        let bits = if t.is_float() { round_to(t, v as f64).to_bits() } else { wrap_int(t, v) as u64 };
        self.constant(bits)
    }

    fn binary(&mut self, op: LBinOp, a: &LExpr, b: &LExpr) -> Result<Reg, SimError> {
        let ty = promote(self.ty(a)?, self.ty(b)?);
        if ty.is_float() && matches!(op, LBinOp::BitAnd | LBinOp::BitOr | LBinOp::BitXor | LBinOp::Shl | LBinOp::Shr) {
            return Err(self.invalid(format!("bitwise {op:?} on {ty} operands")));
        }
        let ra = self.expr_as(a, ty)?;
        let rb = self.expr_as(b, ty)?;
        let dst = self.temp();
        // Only a division can fault; other operators need no source location.
        let divides = matches!(op, LBinOp::Div | LBinOp::Rem | LBinOp::FloorDiv | LBinOp::FloorMod);
        let site = if divides && !ty.is_float() { self.site() } else { NO_SITE };
        self.emit(Ins::Bin { op, ty, dst, a: ra, b: rb, site });
        Ok(dst)
    }

    fn short_circuit(&mut self, op: LBinOp, a: &LExpr, b: &LExpr) -> Result<Reg, SimError> {
        let dst = self.temp();
        self.expr_into(a, DType::Bool, dst)?;
        let j = if op == LBinOp::And {
            self.emit(Ins::Jz { cond: dst, to: 0 })
        } else {
            self.emit(Ins::Jnz { cond: dst, to: 0 })
        };
        self.expr_into(b, DType::Bool, dst)?;
        let end = self.here();
        self.patch(j, end);
        Ok(dst)
    }
}

/// The common type of two operands: float beats int, wider beats narrower,
/// unsigned wins a tie of widths (C's usual arithmetic conversions).
pub(crate) fn promote(a: DType, b: DType) -> DType {
    if a == b {
        return a;
    }
    match (a.is_float(), b.is_float()) {
        (true, false) => a,
        (false, true) => b,
        (true, true) => {
            if a.bits() == b.bits() {
                DType::F32 // f16 with bf16, e4m3 with e5m2
            } else if a.bits() > b.bits() {
                a
            } else {
                b
            }
        }
        (false, false) => {
            if a == DType::Bool {
                b
            } else if b == DType::Bool || a.bits() > b.bits() {
                a
            } else if b.bits() > a.bits() || !b.is_signed() {
                b
            } else {
                a
            }
        }
    }
}
