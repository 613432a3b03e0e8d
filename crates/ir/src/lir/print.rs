//! Readable per-thread pseudo-code for an [`LKernel`] (`tirx lower --emit tir`).
//!
//! One statement per line, two-space indent, expressions with C precedence and
//! only the parentheses precedence needs. Vector and warp-collective operations
//! keep their LIR names so the output reads as "what each thread does"; each
//! instruction family prints its statements in its own module:
//!
//! ```text
//! for f in 0..8 {
//!   vcopy<4> A_smem[f * 128 + tid * 4] <- A[f * 128 + tid * 4]
//! }
//! ```

use crate::dtype::DType;
use crate::hir::UnOp;
use crate::lir::{LBinOp, LBufId, LExpr, LKernel, LStmt, LStmtKind, LVarId, Space, Special};
use std::fmt::{self, Write};

impl fmt::Display for LKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [bx, by, bz] = self.block;
        writeln!(f, "kernel {}  grid={}  block=({bx}, {by}, {bz})", self.name, self.grid_text())?;
        for p in self.signature() {
            match p {
                super::ParamRef::Buffer(b) => writeln!(f, "  param  {}", BufDecl(self, b))?,
                super::ParamRef::Scalar(v) => {
                    let t = self.vars.get(v.0 as usize).map_or("?", |x| x.dtype.name());
                    writeln!(f, "  param  {}: {t}", var_name(self, v))?
                }
                super::ParamRef::TensorMap(m) => writeln!(f, "  param  {}", TmapDecl(self, m))?,
            }
        }
        if self.cluster != [1, 1, 1] {
            let [x, y, z] = self.cluster;
            writeln!(f, "  cluster ({x}, {y}, {z})")?;
        }
        for c in &self.checks {
            writeln!(f, "  check  {}  // {}", self.sym_text(&c.cond), c.what)?;
        }
        for (i, b) in self.bufs.iter().enumerate() {
            let id = LBufId(i as u32);
            if b.space != Space::Global || !self.params.contains(&id) {
                let kind = match (b.space, b.dynamic) {
                    (Space::Shared, true) => "shared.dyn",
                    (Space::Shared, false) => "shared",
                    (Space::Local, _) => "local",
                    (Space::Global, _) => "global",
                };
                writeln!(f, "  {kind:<6} {}", BufDecl(self, id))?;
            }
        }
        writeln!(f, "{{")?;
        let mut p = Printer { k: self, out: String::new() };
        p.block(&self.body, 1);
        f.write_str(&p.out)?;
        writeln!(f, "}}")
    }
}

/// `A_tmap: tensormap(A, float16, dims=[64, 8, 4], strides=[512, 128], box=[64, 8, 4], swizzle=128B)`.
struct TmapDecl<'a>(&'a LKernel, super::TmapId);

impl fmt::Display for TmapDecl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = self.0;
        let Some(m) = k.tmaps.get(self.1 .0 as usize) else {
            return write!(f, "tmap#{}: <missing>", self.1 .0);
        };
        let buf = k.bufs.get(m.buf.0 as usize).map_or("?", |b| b.name.as_str());
        let list = |v: Vec<String>| v.join(", ");
        let dims = list(m.dims.iter().map(|d| k.sym_text(d)).collect());
        let strides = list(m.strides.iter().map(|s| k.sym_text(s)).collect());
        let boxes = list(m.boxes.iter().map(u32::to_string).collect());
        write!(f, "{}: tensormap({buf}", m.name)?;
        if m.base_offset != 0 {
            write!(f, " + {} B", m.base_offset)?;
        }
        write!(f, ", {}, dims=[{dims}], strides=[{strides}], box=[{boxes}]", m.dtype.name())?;
        if m.swizzle > 0 {
            write!(f, ", swizzle={}B", m.swizzle_bytes())?;
        }
        if m.l2_promotion != 2 {
            write!(f, ", l2_promotion={}", m.l2_promotion)?;
        }
        if m.oob_nan {
            write!(f, ", oob=nan")?;
        }
        write!(f, ")")
    }
}

/// `A: float32[1024] (32, 32)`.
struct BufDecl<'a>(&'a LKernel, LBufId);

impl fmt::Display for BufDecl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(b) = self.0.bufs.get(self.1 .0 as usize) else {
            return write!(f, "buf#{}: <missing>", self.1 .0);
        };
        let dims = shape_text(self.0, b);
        match &b.dyn_rows {
            Some(_) if b.shape.len() > 1 => write!(f, "{}: {}[{} * {}]", b.name, b.dtype, dims[0], b.row_elems())?,
            Some(_) => write!(f, "{}: {}[{}]", b.name, b.dtype, dims[0])?,
            None => write!(f, "{}: {}[{}]", b.name, b.dtype, b.elems)?,
        }
        if b.shape.len() > 1 {
            write!(f, " as ({})", dims.join(", "))?;
        }
        Ok(())
    }
}

/// The dims of `b` as text: dim 0 of a symbolic buffer is its expression.
pub(crate) fn shape_text(k: &LKernel, b: &super::LBuf) -> Vec<String> {
    let mut dims: Vec<String> = b.shape.iter().map(i64::to_string).collect();
    if let (Some(r), Some(d0)) = (&b.dyn_rows, dims.first_mut()) {
        *d0 = k.sym_text(r);
    }
    dims
}

/// The output being built. Family modules add their `impl Printer` with one
/// method per instruction, called from their [`Instr::print`](super::Instr::print).
pub struct Printer<'a> {
    pub(crate) k: &'a LKernel,
    out: String,
}

impl Printer<'_> {
    pub(crate) fn line(&mut self, depth: usize, text: &str) {
        for _ in 0..depth {
            self.out.push_str("  ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn block(&mut self, body: &[LStmt], depth: usize) {
        for s in body {
            self.stmt(s, depth);
        }
    }

    pub(crate) fn e(&self, e: &LExpr) -> String {
        let mut s = String::new();
        write_expr(self.k, e, &mut s);
        s
    }

    pub(crate) fn at(&self, b: LBufId, i: &LExpr) -> String {
        format!("{}[{}]", buf_name(self.k, b), self.e(i))
    }

    fn stmt(&mut self, s: &LStmt, d: usize) {
        match &s.kind {
            LStmtKind::Let { var, value } => {
                let ty = self.k.vars.get(var.0 as usize).map_or("?", |v| v.dtype.name());
                let text = format!("let {}: {ty} = {}", var_name(self.k, *var), self.e(value));
                self.line(d, &text);
            }
            LStmtKind::For { var, begin, extent, unroll, body } => {
                let name = var_name(self.k, *var);
                let range = match begin {
                    LExpr::Int(0, _) => format!("0..{}", self.e(extent)),
                    _ => format!("{0}..{0} + {1}", self.e(begin), self.e(extent)),
                };
                let kw = if *unroll { "unroll " } else { "" };
                self.line(d, &format!("{kw}for {name} in {range} {{"));
                self.block(body, d + 1);
                self.line(d, "}");
            }
            LStmtKind::While { cond, body } => {
                self.line(d, &format!("while {} {{", self.e(cond)));
                self.block(body, d + 1);
                self.line(d, "}");
            }
            LStmtKind::If { cond, then_body, else_body } => {
                self.line(d, &format!("if {} {{", self.e(cond)));
                self.block(then_body, d + 1);
                self.else_chain(else_body, d);
            }
            LStmtKind::Comment(c) => {
                for l in c.lines() {
                    self.line(d, &format!("// {l}"));
                }
            }
            kind => {
                if let Some(i) = kind.instr() {
                    let text = i.print(self);
                    self.line(d, &text);
                }
            }
        }
    }
}

impl Printer<'_> {
    pub(crate) fn buf_name(&self, b: LBufId) -> String {
        buf_name(self.k, b)
    }

    pub(crate) fn var_name(&self, v: LVarId) -> String {
        var_name(self.k, v)
    }

    /// `} else if c {` for an else branch that is exactly one `if`, then `}`.
    fn else_chain(&mut self, else_body: &[LStmt], d: usize) {
        match else_body {
            [] => {}
            [LStmt { kind: LStmtKind::If { cond, then_body, else_body }, .. }] => {
                self.line(d, &format!("}} else if {} {{", self.e(cond)));
                self.block(then_body, d + 1);
                return self.else_chain(else_body, d);
            }
            _ => {
                self.line(d, "} else {");
                self.block(else_body, d + 1);
            }
        }
        self.line(d, "}");
    }
}

const UNARY: u8 = 12;
const ATOM: u8 = 13;

fn prec(e: &LExpr) -> u8 {
    match e {
        LExpr::Bin(op, ..) => op.c_infix().map_or(ATOM, |(_, p)| p),
        LExpr::Un(..) => UNARY,
        LExpr::Int(v, _) if *v < 0 => UNARY,
        LExpr::Float(v, _) if *v < 0.0 => UNARY,
        _ => ATOM,
    }
}

fn suffix(t: DType) -> &'static str {
    match t {
        DType::I32 | DType::F32 | DType::Bool => "",
        DType::I8 => "i8",
        DType::I16 => "i16",
        DType::I64 => "i64",
        DType::U8 => "u8",
        DType::U16 => "u16",
        DType::U32 => "u32",
        DType::U64 => "u64",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::F64 => "f64",
        DType::F8E4M3 => "e4m3",
        DType::F8E5M2 => "e5m2",
    }
}

/// Whether `child` (an operand of infix `parent`) needs parentheses: where C
/// precedence requires them, and around mixed operands of bit operations, `%`
/// or `/` next to `*`, and `&&` inside `||`, where readers expect them.
fn needs_parens(parent: LBinOp, child: &LExpr, right: bool) -> bool {
    let (Some((_, pp)), cp) = (parent.c_infix(), prec(child)) else {
        return false;
    };
    if cp < pp || (right && cp == pp) {
        return true;
    }
    let LExpr::Bin(cop, ..) = child else {
        return false;
    };
    let bitwise = matches!(parent, LBinOp::BitAnd | LBinOp::BitOr | LBinOp::BitXor | LBinOp::Shl | LBinOp::Shr);
    let multiplicative = |o: LBinOp| matches!(o, LBinOp::Mul | LBinOp::Div | LBinOp::Rem);
    (bitwise && cop.c_infix().is_some() && *cop != parent)
        || (multiplicative(parent) && multiplicative(*cop) && *cop != parent)
        || (parent == LBinOp::Or && *cop == LBinOp::And)
}

fn write_expr(k: &LKernel, e: &LExpr, out: &mut String) {
    let sub = |x: &LExpr, parens: bool, out: &mut String| {
        if parens {
            out.push('(');
            write_expr(k, x, out);
            out.push(')');
        } else {
            write_expr(k, x, out);
        }
    };
    match e {
        LExpr::Int(v, t) => {
            let _ = write!(out, "{v}{}", suffix(*t));
        }
        LExpr::Float(v, t) => {
            let _ = write!(out, "{v:?}{}", suffix(*t));
        }
        LExpr::Bool(b) => {
            let _ = write!(out, "{b}");
        }
        LExpr::Var(v) => out.push_str(&var_name(k, *v)),
        LExpr::Special(Special::ThreadIdx(a)) => {
            let _ = write!(out, "threadIdx.{}", axis_name(*a));
        }
        LExpr::Special(Special::BlockIdx(a)) => {
            let _ = write!(out, "blockIdx.{}", axis_name(*a));
        }
        LExpr::Bin(op, a, b) => match op.c_infix() {
            Some((sym, _)) => {
                sub(a, needs_parens(*op, a, false), out);
                let _ = write!(out, " {sym} ");
                sub(b, needs_parens(*op, b, true), out);
            }
            None => {
                let name = match op {
                    LBinOp::FloorDiv => "floordiv",
                    LBinOp::FloorMod => "floormod",
                    LBinOp::Min => "min",
                    _ => "max",
                };
                let _ = write!(out, "{name}(");
                write_expr(k, a, out);
                out.push_str(", ");
                write_expr(k, b, out);
                out.push(')');
            }
        },
        LExpr::Un(op, a) => {
            out.push_str(match op {
                UnOp::Neg => "-",
                UnOp::Not => "!",
                UnOp::BitNot => "~",
            });
            sub(a, prec(a) < ATOM, out);
        }
        LExpr::Cast(t, a) => {
            let _ = write!(out, "{t}(");
            write_expr(k, a, out);
            out.push(')');
        }
        LExpr::Select(c, a, b) => {
            out.push_str("select(");
            write_expr(k, c, out);
            out.push_str(", ");
            write_expr(k, a, out);
            out.push_str(", ");
            write_expr(k, b, out);
            out.push(')');
        }
        LExpr::Math(f, args) => write_call(k, f.name(), args, out),
        LExpr::Rounded(op, mode, args) => write_call(k, &op.spelled(*mode), args, out),
        LExpr::Load(b, i) => {
            let _ = write!(out, "{}[", buf_name(k, *b));
            write_expr(k, i, out);
            out.push(']');
        }
    }
}

/// `name(a, b, ...)`.
fn write_call(k: &LKernel, name: &str, args: &[LExpr], out: &mut String) {
    let _ = write!(out, "{name}(");
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_expr(k, a, out);
    }
    out.push(')');
}

fn axis_name(a: u8) -> char {
    match a {
        0 => 'x',
        1 => 'y',
        _ => 'z',
    }
}

/// The buffer's name, or `buf#N` for an id out of range (printing never panics).
fn buf_name(k: &LKernel, b: LBufId) -> String {
    k.bufs.get(b.0 as usize).map_or_else(|| format!("buf#{}", b.0), |x| x.name.clone())
}

fn var_name(k: &LKernel, v: LVarId) -> String {
    k.vars.get(v.0 as usize).map_or_else(|| format!("var#{}", v.0), |x| x.name.clone())
}
