//! Raw collectives a kernel author calls (`T.cuda.warp_sum`, `T.cuda.cta_sum`,
//! `T.cuda.shfl_xor`, ...; docs/tile-primitives.md §6): each binds a new name
//! (`s = T.cuda.warp_sum(v, width=8)`) through the statement
//! [`StmtKind::Collective`], since bindings are immutable and a collective
//! lowers to shuffles and barriers, not to an expression. Also `buf.ptr_to([i])`,
//! the scratch address `T.cuda.cta_reduce` takes.

use crate::ast::{self, ExprKind as AK};
use crate::builder::{Builder, R};
use crate::eval::Args;
use crate::value::*;
use tirx_ir::hir::*;
use tirx_ir::lir::collective::SHUFFLE_TYPES;
use tirx_ir::{DType, Diagnostic, Span};

/// The element types a reduction collective computes on.
const REDUCE_TYPES: [DType; 7] = [DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32, DType::U32, DType::I64];

impl Builder<'_> {
    /// `buf.ptr_to([i, j])`: the address of one element.
    pub(crate) fn ptr_to(&mut self, buf: BufId, args: &[ast::Arg], span: Span) -> R<Val> {
        let (pos, kw) = self.eval_args(args)?;
        let mut a = Args::new("ptr_to".into(), pos, kw, span);
        let (v, vs) = a.req(self, "indices")?;
        a.finish(self)?;
        let items = match v {
            Val::Tuple(xs) | Val::List(xs) => xs,
            other => vec![other],
        };
        let b = self.buffer(buf).clone();
        if items.len() != b.shape.len() {
            return self.fail(
                Diagnostic::error(
                    vs,
                    format!("`{}` has {} dims but `ptr_to` got {} indices", b.name, b.shape.len(), items.len()),
                )
                .with_help(format!(
                    "pass one index per dim, e.g. `{}.ptr_to([{}])`",
                    b.name,
                    vec!["0"; b.shape.len()].join(", ")
                )),
            );
        }
        let mut idx = Vec::with_capacity(items.len());
        for (d, x) in items.into_iter().enumerate() {
            if let Val::Int(i) = x {
                if !(0..b.shape[d]).contains(&i) {
                    return self.fail(
                        Diagnostic::error(
                            vs,
                            format!("index {i} is outside dim {d} of `{}` (size {})", b.name, b.shape[d]),
                        )
                        .with_label("out of bounds"),
                    );
                }
            }
            idx.push(self.int_expr(x, vs)?);
        }
        Ok(Val::Ptr(buf, idx))
    }

    /// `name = T.cuda.<collective>(...)` (with `ann`, the annotation of `name: T.float32 = ...`).
    pub(crate) fn collective(
        &mut self,
        kind: CollKind,
        args: &[ast::Arg],
        target: Option<&ast::Expr>,
        ann: Option<(Val, Span)>,
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        let fname = format!("T.cuda.{}", kind.name());
        let Some(AK::Name(name)) = target.map(|t| &t.kind) else {
            return self.fail(
                Diagnostic::error(span, format!("`{fname}` produces a value that must be bound to a name"))
                    .with_label("not bound")
                    .with_help(format!("write `s = {fname}(...)`, then use `s`")),
            );
        };
        let tspan = target.map_or(span, |t| t.span);
        self.check_rebind(name, tspan)?;
        let (pos, kw) = self.eval_args(args)?;
        let mut a = Args::new(fname.clone(), pos, kw, span);
        let (v, vs) = a.req(self, "value")?;
        let value = self.scalar(v, vs)?;
        let op = match kind {
            CollKind::WarpReduce(op) => {
                let op = self.reduce_op(op, &mut a, &fname)?;
                self.value_type(&value, vs, &REDUCE_TYPES, &fname)?;
                let width = self.lane_count(&mut a, "width", 32, 2, &fname)?;
                Collective::WarpReduce { op, value, width }
            }
            CollKind::CtaReduce(op) => {
                let op = self.reduce_op(op, &mut a, &fname)?;
                self.value_type(&value, vs, &REDUCE_TYPES, &fname)?;
                let num_warps = match a.opt(self, "num_warps")? {
                    Some((n, ns)) => self.pow2(n, ns, 1, "num_warps")?,
                    None => return self.missing(span, &fname, "num_warps"),
                };
                let (scratch, index) = match a.opt(self, "scratch")? {
                    Some((Val::Ptr(b, idx), ps)) => {
                        let sb = self.buffer(b);
                        if !sb.scope.is_shared() {
                            let n = sb.name.clone();
                            return self.fail(
                                Diagnostic::error(
                                    ps,
                                    format!("the scratch of `{fname}` must be in shared memory; `{n}` is not"),
                                )
                                .with_help("allocate it with `T.alloc_buffer((num_warps,), dtype, scope=\"shared\")`"),
                            );
                        }
                        (b, idx)
                    }
                    Some((other, ps)) => {
                        return self.expected_kind("a scratch pointer like `scratch.ptr_to([0])`", &other, ps)
                    }
                    None => return self.missing(span, &fname, "scratch"),
                };
                Collective::CtaReduce { op, value, num_warps, scratch, index }
            }
            CollKind::Shfl(mode) => {
                self.value_type(&value, vs, &SHUFFLE_TYPES, &fname)?;
                let what = match mode {
                    ShuffleMode::Bfly => "lane_mask",
                    ShuffleMode::Down | ShuffleMode::Up => "delta",
                    ShuffleMode::Idx => "src_lane",
                };
                let (l, ls) = match a.opt(self, what)? {
                    Some(x) => x,
                    None => return self.missing(span, &fname, what),
                };
                let lane = self.int_expr(l, ls)?;
                let lane = if lane.dtype == DType::I32 { lane } else { self.lit_as(lane, DType::I32, ls)? };
                if let ExprKind::Int(c) = lane.kind {
                    if !(0..32).contains(&c) {
                        return self.fail(
                            Diagnostic::error(ls, format!("`{what}` {c} is outside 0..32"))
                                .with_label("not a lane offset")
                                .with_help("lanes are numbered 0..32 within a warp"),
                        );
                    }
                }
                let width = self.lane_count(&mut a, "width", 32, 1, &fname)?;
                Collective::Shuffle { mode, value, lane, width }
            }
        };
        a.finish(self)?;
        let dtype = op.value().dtype;
        self.binding_annotation(ann, dtype, &format!("`{fname}` of a {dtype} value is {dtype}"))?;
        self.require_device(span)?;
        let var = self.new_var(name, dtype, tspan);
        out.push(Stmt { kind: StmtKind::Collective { var, op }, span });
        Ok(())
    }

    /// The annotation of a statement's binding (`s: T.float32 = ...`): `T.let`, or the dtype
    /// it gives (`what`: the statement's value, said so, for the message).
    pub(crate) fn binding_annotation(&mut self, ann: Option<(Val, Span)>, dtype: DType, what: &str) -> R<()> {
        match ann {
            None | Some((Val::Builtin(Builtin::Let), _)) => Ok(()),
            Some((Val::Builtin(Builtin::DTypeFn(d)), _)) if d == dtype => Ok(()),
            Some((Val::Builtin(Builtin::DTypeFn(d)), asp)) => self.fail(
                Diagnostic::error(asp, format!("{what}, not {d}"))
                    .with_help(format!("annotate it `T.{dtype}`, or convert the value first")),
            ),
            Some((_, asp)) => {
                self.fail(Diagnostic::error(asp, "binding annotations must be `T.let` or a dtype like `T.int32`"))
            }
        }
    }

    /// The op of `warp_sum`, or the `op` argument of `warp_reduce`: "sum", "max" or "min".
    fn reduce_op(&mut self, given: Option<ReduceOp>, a: &mut Args, fname: &str) -> R<ReduceOp> {
        if let Some(op) = given {
            return Ok(op);
        }
        let (v, sp) = match a.opt(self, "op")? {
            Some(x) => x,
            None => return self.missing(a.span, fname, "op"),
        };
        match &v {
            Val::Str(s) => match ReduceOp::ALL.into_iter().find(|o| o.name() == s) {
                Some(op) => Ok(op),
                None => self.fail(
                    Diagnostic::error(sp, format!("unknown reduction `\"{s}\"`"))
                        .with_label("not an op")
                        .with_help("use \"sum\", \"max\" or \"min\""),
                ),
            },
            other => self.expected_kind("\"sum\", \"max\" or \"min\"", other, sp),
        }
    }

    /// A value type the collective moves.
    fn value_type(&mut self, e: &Expr, sp: Span, ok: &[DType], fname: &str) -> R<()> {
        if ok.contains(&e.dtype) {
            return Ok(());
        }
        let names: Vec<&str> = ok.iter().map(|t| t.name()).collect();
        self.fail(
            Diagnostic::error(sp, format!("`{fname}` of a {} value", e.dtype))
                .with_label(format!("{}", e.dtype))
                .with_help(format!("convert it first: `{fname}` takes {}", names.join(", "))),
        )
    }

    /// An optional lane count (`width=`): a power of two in `lo..=32`, `default` when absent.
    fn lane_count(&mut self, a: &mut Args, name: &str, default: u32, lo: u32, fname: &str) -> R<u32> {
        match a.opt(self, name)? {
            None => Ok(default),
            Some((v, sp)) => {
                let n = self.pow2(v, sp, lo, name)?;
                if n > 32 {
                    return self.fail(
                        Diagnostic::error(sp, format!("`{name}` of `{fname}` is {n}; a warp has 32 lanes"))
                            .with_help("use a power of two up to 32"),
                    );
                }
                Ok(n)
            }
        }
    }

    /// A compile-time power of two in `lo..=32`.
    fn pow2(&mut self, v: Val, sp: Span, lo: u32, name: &str) -> R<u32> {
        let n = self.const_int(v, sp)?;
        if n < i64::from(lo) || n > 32 || (n as u64).count_ones() != 1 {
            return self.fail(
                Diagnostic::error(sp, format!("`{name}` must be a power of two in {lo}..=32, found {n}"))
                    .with_label("not a power of two in range"),
            );
        }
        Ok(n as u32)
    }

    fn missing<T>(&mut self, span: Span, fname: &str, what: &str) -> R<T> {
        self.fail(
            Diagnostic::error(span, format!("`{fname}` is missing the argument `{what}`")).with_label("in this call"),
        )
    }
}
