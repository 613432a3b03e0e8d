//! [`LKernel::validate`]: the LIR's well-formedness and typing rules (see [`crate::lir`]).
//!
//! Lowering bugs surface here with a message naming the statement, instead of
//! as uncompilable CUDA or a simulator crash. Checked: ids in range, buffers
//! and launch shape, variables declared before use and never redeclared while
//! in scope, expression typing and index types here; the operand rules of each
//! instruction family in its module (`memory`, `pair`, `matrix`, `collective`, `asynch`, `bounds`), through
//! the helpers of [`Checker`].

use crate::dtype::DType;
use crate::hir::{MathFn, UnOp};
use crate::lir::{LBinOp, LBufId, LExpr, LKernel, LStmt, LStmtKind, LVarId, Space, Special};
use crate::scope_ids::MAX_CTA_THREADS;

/// Hardware barriers per CTA (`bar.sync` ids 0..16).
pub const NAMED_BARRIERS: i64 = 16;

/// CTAs per cluster a kernel may ask for without the non-portable opt-in.
pub const PORTABLE_CLUSTER_CTAS: u32 = 8;

/// CTAs per cluster at most: Hopper's non-portable size, which the runtime opts the kernel into
/// (`CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED`) when its cluster is over
/// [`PORTABLE_CLUSTER_CTAS`]; whether such a cluster fits the GPU's GPCs is the driver's answer
/// at launch (`resident_ctas`).
pub const MAX_CLUSTER_CTAS: u32 = 16;

/// Buffers with at least this many elements need 64-bit indices.
const I64_INDEX_ELEMS: i64 = 1 << 31;

impl LKernel {
    /// Checks the kernel against the LIR rules; the error names the first violation.
    pub fn validate(&self) -> Result<(), String> {
        let mut c = Checker { k: self, in_scope: vec![false; self.vars.len()], located: false };
        c.header()?;
        c.launch()?;
        // Scalar parameters are declared by the signature, for the whole body.
        for s in &self.scalars {
            c.declare(s.var)?;
        }
        c.tmaps()?;
        c.block(&self.body)?;
        c.mbarriers_exclusive()
    }
}

/// The typing context: which variables are in scope. Family modules add their
/// `impl Checker` with one method per instruction, called from their
/// [`Instr::check`](super::Instr::check).
pub struct Checker<'a> {
    pub(crate) k: &'a LKernel,
    in_scope: Vec<bool>,
    /// Whether the error being returned already names its (innermost) statement.
    located: bool,
}

pub type Check = Result<(), String>;

impl Checker<'_> {
    fn header(&self) -> Check {
        let k = self.k;
        if k.grid.contains(&0) || k.block.contains(&0) {
            return Err(format!("grid {:?} and block {:?} must be non-zero in every dimension", k.grid, k.block));
        }
        // Wide enough for any three u32 (`threads_per_cta` would overflow on absurd blocks).
        let threads: u128 = k.block.iter().map(|&d| u128::from(d)).product();
        if threads > MAX_CTA_THREADS as u128 {
            return Err(format!("block {:?} has {threads} threads; CUDA allows at most {MAX_CTA_THREADS}", k.block));
        }
        for (i, b) in k.bufs.iter().enumerate() {
            if b.elems < 1 {
                return Err(format!("buffer `{}` has {} elements", b.name, b.elems));
            }
            if b.dynamic && b.space != Space::Shared {
                return Err(format!("buffer `{}` is dynamic but not in shared memory", b.name));
            }
            if b.space == Space::Global && !k.params.contains(&LBufId(i as u32)) {
                return Err(format!("global buffer `{}` is not a kernel parameter", b.name));
            }
        }
        for (n, &p) in k.params.iter().enumerate() {
            let b = self.buf(p)?;
            if b.space != Space::Global {
                return Err(format!("parameter {n} (`{}`) is not a global buffer", b.name));
            }
            if k.params[..n].contains(&p) {
                return Err(format!("buffer `{}` is passed twice as a parameter", b.name));
            }
        }
        Ok(())
    }

    /// Scalar parameters, symbolic grid dims and buffer sizes, launch checks (`launch`).
    fn launch(&self) -> Check {
        let k = self.k;
        let total = k.params.len() + k.scalars.len();
        for (n, s) in k.scalars.iter().enumerate() {
            let v = self.var(s.var)?;
            if !crate::lir::launch::SCALAR_DTYPES.contains(&v.dtype) {
                return Err(format!(
                    "scalar parameter `{}` is {}; scalar parameters are int32, int64, uint32, float32 or float64",
                    v.name, v.dtype
                ));
            }
            if s.index >= total || k.scalars[..n].iter().any(|o| o.index == s.index || o.var == s.var) {
                return Err(format!(
                    "scalar parameter `{}` has position {} of {total}, taken or out of range",
                    v.name, s.index
                ));
            }
        }
        let int_param = |e: &crate::lir::SymExpr, what: &str| -> Check {
            let mut bad = None;
            e.params(&mut |p| {
                let ok =
                    k.scalars.iter().any(|s| s.var == p) && k.vars.get(p.0 as usize).is_some_and(|v| v.dtype.is_int());
                if !ok && bad.is_none() {
                    bad = Some(p);
                }
            });
            match bad {
                Some(p) => Err(format!("{what} reads variable #{}, which is not an integer scalar parameter", p.0)),
                None => Ok(()),
            }
        };
        for (d, e) in k.grid_dims.iter().enumerate() {
            if let Some(e) = e {
                int_param(e, &format!("grid dimension {d}"))?;
            }
        }
        for b in &k.bufs {
            if let Some(r) = &b.dyn_rows {
                if b.space != Space::Global || b.shape.is_empty() {
                    return Err(format!("buffer `{}` has a symbolic dim 0 but is not a global buffer", b.name));
                }
                int_param(r, &format!("dim 0 of `{}`", b.name))?;
            }
        }
        for c in &k.checks {
            int_param(&c.cond, &format!("launch check `{}`", c.what))?;
        }
        for m in &k.tmaps {
            for (i, d) in m.dims.iter().enumerate() {
                int_param(d, &format!("globalDim[{i}] of tensor map `{}`", m.name))?;
            }
        }
        self.cluster_shape()
    }

    /// Clusters: at most 16 CTAs (Hopper's non-portable size), dividing a constant grid.
    fn cluster_shape(&self) -> Check {
        let k = self.k;
        let size: u64 = k.cluster.iter().map(|&d| u64::from(d)).product();
        if k.cluster.contains(&0) || size > u64::from(MAX_CLUSTER_CTAS) {
            return Err(format!("cluster {:?}: 1 to {MAX_CLUSTER_CTAS} CTAs per cluster", k.cluster));
        }
        for d in 0..3 {
            if k.grid_dims[d].is_none() && !k.grid[d].is_multiple_of(k.cluster[d]) {
                return Err(format!("grid {:?} is not a whole number of clusters {:?}", k.grid, k.cluster));
            }
        }
        Ok(())
    }

    pub(crate) fn buf(&self, b: LBufId) -> Result<&crate::lir::LBuf, String> {
        self.k
            .bufs
            .get(b.0 as usize)
            .ok_or_else(|| format!("buffer id {} out of range ({} buffers)", b.0, self.k.bufs.len()))
    }

    pub(crate) fn var(&self, v: LVarId) -> Result<&crate::lir::LVar, String> {
        self.k
            .vars
            .get(v.0 as usize)
            .ok_or_else(|| format!("variable id {} out of range ({} variables)", v.0, self.k.vars.len()))
    }

    fn block(&mut self, body: &[LStmt]) -> Check {
        let mut declared = Vec::new();
        for s in body {
            if let Err(m) = self.stmt(s, &mut declared) {
                if self.located {
                    return Err(m);
                }
                self.located = true;
                return Err(format!("{m} (statement at source bytes {}..{})", s.span.lo, s.span.hi));
            }
        }
        for v in declared {
            self.in_scope[v] = false;
        }
        Ok(())
    }

    pub(crate) fn declare(&mut self, v: LVarId) -> Result<usize, String> {
        let name = &self.var(v)?.name;
        let i = v.0 as usize;
        if self.in_scope[i] {
            return Err(format!("variable `{name}` is declared again while still in scope"));
        }
        self.in_scope[i] = true;
        Ok(i)
    }

    fn stmt(&mut self, s: &LStmt, declared: &mut Vec<usize>) -> Check {
        match &s.kind {
            LStmtKind::Let { var, value } => {
                let t = self.expr(value)?;
                let v = self.var(*var)?;
                if t != v.dtype {
                    return Err(format!("`let {}: {}` is initialised with a {t} value", v.name, v.dtype));
                }
                declared.push(self.declare(*var)?);
            }
            LStmtKind::For { var, begin, extent, body, .. } => {
                let v = self.var(*var)?;
                if !is_index(v.dtype) {
                    return Err(format!("loop variable `{}` is {}, not int32/int64", v.name, v.dtype));
                }
                for (what, e) in [("begin", begin), ("extent", extent)] {
                    let t = self.expr(e)?;
                    if t != v.dtype {
                        return Err(format!("loop `{}`: {what} is {t}, the variable is {}", v.name, v.dtype));
                    }
                }
                let i = self.declare(*var)?;
                self.block(body)?;
                self.in_scope[i] = false;
            }
            LStmtKind::While { cond, body } => {
                self.expect(cond, DType::Bool, "while condition")?;
                self.block(body)?;
            }
            LStmtKind::If { cond, then_body, else_body } => {
                self.expect(cond, DType::Bool, "if condition")?;
                self.block(then_body)?;
                self.block(else_body)?;
            }
            LStmtKind::Comment(_) => {}
            kind => {
                // Every instruction: its family's rules, then the variable it declares.
                let Some(i) = kind.instr() else { return Ok(()) };
                i.check(self)?;
                if let Some(v) = i.defines() {
                    declared.push(self.declare(v)?);
                }
            }
        }
        Ok(())
    }

    pub(crate) fn expect(&self, e: &LExpr, want: DType, what: &str) -> Check {
        let t = self.expr(e)?;
        if t != want {
            return Err(format!("{what} is {t}, expected {want}"));
        }
        Ok(())
    }

    /// A constant index `e` into `b` must be a multiple of `multiple` (the access
    /// is `multiple` elements wide and must be naturally aligned).
    pub(crate) fn aligned(&self, b: LBufId, e: &LExpr, multiple: i64, what: &str) -> Check {
        match e {
            LExpr::Int(v, _) if v % multiple != 0 => {
                Err(format!("{what}: index {v} into `{}` is not a multiple of {multiple}", self.buf(b)?.name))
            }
            _ => Ok(()),
        }
    }

    /// An element index into `b`: int32 or int64, and int64 for buffers of ≥ 2^31 elements.
    pub(crate) fn index(&self, b: LBufId, e: &LExpr) -> Check {
        let buf = self.buf(b)?;
        let t = self.expr(e)?;
        if !is_index(t) {
            return Err(format!("index into `{}` is {t}, not int32/int64", buf.name));
        }
        if buf.elems >= I64_INDEX_ELEMS && t != DType::I64 {
            return Err(format!("`{}` has {} elements (>= 2^31); its indices must be int64", buf.name, buf.elems));
        }
        Ok(())
    }

    /// Type-checks `e` and returns its type (agrees with [`LKernel::dtype_of`]).
    pub(crate) fn expr(&self, e: &LExpr) -> Result<DType, String> {
        Ok(match e {
            LExpr::Int(v, t) => {
                if !t.is_int() {
                    return Err(format!("integer literal {v} typed {t}"));
                }
                if !int_fits(*v, *t) {
                    return Err(format!("integer literal {v} does not fit {t}"));
                }
                *t
            }
            LExpr::Float(v, t) => {
                if !t.is_float() {
                    return Err(format!("float literal {v} typed {t}"));
                }
                *t
            }
            LExpr::Bool(_) => DType::Bool,
            LExpr::Var(v) => {
                let var = self.var(*v)?;
                if !self.in_scope[v.0 as usize] {
                    return Err(format!("variable `{}` is used outside the scope that declares it", var.name));
                }
                var.dtype
            }
            LExpr::Special(Special::ThreadIdx(a) | Special::BlockIdx(a)) => {
                if *a > 2 {
                    return Err(format!("hardware index axis {a} (only x, y, z exist)"));
                }
                DType::I32
            }
            LExpr::Bin(op, a, b) => self.binary(*op, self.expr(a)?, self.expr(b)?)?,
            LExpr::Un(op, a) => {
                let t = self.expr(a)?;
                let ok = match op {
                    UnOp::Neg => t.is_int() || t.is_float(),
                    UnOp::Not => t == DType::Bool,
                    UnOp::BitNot => t.is_int(),
                };
                if !ok {
                    return Err(format!("unary {op:?} on {t}"));
                }
                if *op == UnOp::Not {
                    DType::Bool
                } else {
                    t
                }
            }
            LExpr::Cast(t, a) => {
                self.expr(a)?;
                *t
            }
            LExpr::Select(c, a, b) => {
                self.expect(c, DType::Bool, "select condition")?;
                let (ta, tb) = (self.expr(a)?, self.expr(b)?);
                if ta != tb {
                    return Err(format!("select branches are {ta} and {tb}"));
                }
                ta
            }
            LExpr::Math(f, args) => {
                let [a] = args.as_slice() else {
                    return Err(format!("{} takes one argument, got {}", f.name(), args.len()));
                };
                let t = self.expr(a)?;
                let ok = t.is_float() || (*f == MathFn::Abs && t.is_int());
                if !ok {
                    return Err(format!("{} of a {t} value", f.name()));
                }
                t
            }
            LExpr::Rounded(op, mode, args) => self.rounded(*op, *mode, args)?,
            LExpr::Load(b, i) => {
                self.index(*b, i)?;
                self.buf(*b)?.dtype
            }
        })
    }

    fn binary(&self, op: LBinOp, a: DType, b: DType) -> Result<DType, String> {
        if a != b {
            return Err(format!("{op:?} of {a} and {b}; operands must have equal types"));
        }
        let ok = match op {
            LBinOp::And | LBinOp::Or => a == DType::Bool,
            LBinOp::Eq | LBinOp::Ne => true,
            LBinOp::BitAnd | LBinOp::BitOr | LBinOp::BitXor | LBinOp::Shl | LBinOp::Shr => a.is_int(),
            _ => a.is_int() || a.is_float(),
        };
        if !ok {
            return Err(format!("{op:?} on {a} operands"));
        }
        Ok(if op.is_compare() || op.is_logic() { DType::Bool } else { a })
    }
}

fn is_index(t: DType) -> bool {
    matches!(t, DType::I32 | DType::I64)
}

fn int_fits(v: i64, t: DType) -> bool {
    t.int_range().is_none_or(|(lo, hi)| (lo..=hi).contains(&v))
}

#[cfg(test)]
mod tests {
    use crate::dtype::DType;
    use crate::lir::{LBuf, LBufId, LExpr, LKernel, LStmt, LStmtKind, LVar, LVarId, MemOp, Space, Special, SyncOp};
    use crate::Span;

    /// `B[tid] = A[tid]`, 32 float32 elements.
    fn copy(block: [u32; 3]) -> LKernel {
        let buf = |name| LBuf::flat(name, DType::F32, Space::Global, 32);
        let tid = || LExpr::Var(LVarId(0));
        let stmt = |k| LStmt::new(k, Span::default());
        LKernel {
            params: vec![LBufId(0), LBufId(1)],
            bufs: vec![buf("A"), buf("B")],
            vars: vec![LVar { name: "tid".into(), dtype: DType::I32 }],
            body: vec![
                stmt(LStmtKind::Let { var: LVarId(0), value: LExpr::Special(Special::ThreadIdx(0)) }),
                stmt(LStmtKind::Memory(MemOp::Store {
                    buf: LBufId(1),
                    index: tid(),
                    value: LExpr::Load(LBufId(0), Box::new(tid())),
                })),
            ],
            ..LKernel::new("copy", [1, 1, 1], block)
        }
    }

    #[test]
    fn named_barriers_take_an_id_and_whole_warps() {
        let with = |id: LExpr, threads: u32| {
            let mut k = copy([128, 1, 1]);
            k.body.push(LStmt::new(LStmtKind::Sync(SyncOp::NamedBarrier { id, threads }), Span::default()));
            k.validate()
        };
        assert_eq!(with(LExpr::i32(1), 128), Ok(()));
        assert_eq!(with(LExpr::bin(crate::lir::LBinOp::Add, LExpr::Var(LVarId(0)), LExpr::i32(1)), 64), Ok(()));
        for (id, words) in [(0, "barrier 0 is `__syncthreads`'"), (16, "outside 1..16")] {
            let err = with(LExpr::i32(id), 128).unwrap_err();
            assert!(err.contains(words), "{err}");
        }
        for threads in [0, 48, 256] {
            let err = with(LExpr::i32(1), threads).unwrap_err();
            assert!(err.contains("a multiple of 32 threads, at most the CTA's 128"), "{err}");
        }
        let err = with(LExpr::Float(1.0, DType::F32), 128).unwrap_err();
        assert!(err.contains("named barrier id is float32"), "{err}");
    }

    #[test]
    fn block_size_is_checked_without_overflow() {
        assert_eq!(copy([32, 1, 1]).validate(), Ok(()));
        let err = copy([64, 32, 1]).validate().unwrap_err();
        assert!(err.contains("2048 threads; CUDA allows at most 1024"), "{err}");
        let err = copy([u32::MAX, u32::MAX, 2]).validate().unwrap_err();
        assert!(err.contains("CUDA allows at most 1024"), "{err}");
    }

    /// `copy` with a scalar `n` (var 1) at signature position 1, rows `n` of both buffers,
    /// a grid of `n` CTAs and the launch check `n <= 32`.
    fn with_scalar(t: DType) -> LKernel {
        use crate::lir::{LaunchCheck, ScalarParam, SymExpr, SymOp};
        let mut k = copy([1, 1, 1]);
        k.vars.push(LVar { name: "n".into(), dtype: t });
        k.scalars.push(ScalarParam { var: LVarId(1), index: 1 });
        let n = || SymExpr::Param(LVarId(1));
        k.grid_dims[0] = Some(n());
        k.grid[0] = i32::MAX as u32;
        k.bufs.iter_mut().for_each(|b| b.dyn_rows = Some(n()));
        let cond = SymExpr::bin(SymOp::Le, n(), SymExpr::Int(32));
        k.checks.push(LaunchCheck { cond, what: "rows of `A`".into(), span: Span::new(3, 9) });
        k
    }

    #[test]
    fn scalar_parameters_are_typed_and_in_scope() {
        use crate::lir::{ParamRef, ScalarValue};
        let k = with_scalar(DType::I32);
        assert_eq!(k.validate(), Ok(()));
        assert_eq!(
            k.signature(),
            [ParamRef::Buffer(LBufId(0)), ParamRef::Scalar(LVarId(1)), ParamRef::Buffer(LBufId(1))]
        );
        let err = with_scalar(DType::F16).validate().unwrap_err();
        assert!(err.contains("scalar parameter `n` is float16"), "{err}");
        // A float parameter cannot size anything.
        let err = with_scalar(DType::F32).validate().unwrap_err();
        assert!(err.contains("grid dimension 0 reads variable #1, which is not an integer scalar parameter"), "{err}");
        let mut twice = with_scalar(DType::I32);
        twice.scalars[0].index = 7;
        assert!(twice.validate().unwrap_err().contains("position 7 of 3"));
        // The launch: sizes, grid, bounds shapes concrete; the check evaluated.
        let s = k.specialize(&[ScalarValue::Int(8)]).unwrap();
        assert_eq!((s.grid, s.bufs[0].elems, s.bufs[0].shape.clone()), ([8, 1, 1], 8, vec![8]));
        assert!(s.checks.is_empty() && s.grid_dims.iter().all(Option::is_none));
        assert!(s.bufs.iter().all(|b| b.dyn_rows.is_none()));
        assert_eq!(s.validate(), Ok(()));
        let e = k.specialize(&[ScalarValue::Int(40)]).unwrap_err();
        assert_eq!(e.message, "launch check `n <= 32` fails with n = 40 (rows of `A`)");
        assert_eq!(e.span, Span::new(3, 9));
        let e = k.specialize(&[ScalarValue::Int(0)]).unwrap_err();
        assert!(e.message.contains("grid dimension x `n` is 0 with n = 0"), "{}", e.message);
        let e = k.specialize(&[]).unwrap_err();
        assert!(e.message.contains("takes 1 scalar argument(s) (`n`), 0 given"), "{}", e.message);
    }
}
