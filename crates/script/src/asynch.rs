//! The kernel's own asynchronous-copy and mbarrier instructions
//! (docs/tile-primitives.md §8): `T.ptx.cp_async.commit_group()`,
//! `T.ptx.mbarrier.try_wait(p, 0)`, ... in every spelling the reference uses
//! (`T.ptx` in [`crate::names`]), each one [`StmtKind::Async`] statement; and the
//! objects its kernels build them with: `T.SMEMPool()` (dynamic shared memory
//! carved in allocation order) and `MBarrier(pool, depth)` (one barrier per
//! pipeline stage, `init` by one thread, `wait`/`arrive` per stage). The
//! objects exist only here: they become buffer declarations and plain
//! statements, which is what the printer writes back.

use crate::ast::{self};
use crate::builder::{Builder, R};
use crate::eval::Args;
use crate::names::{script_names, Namespace};
use crate::value::*;
use tirx_ir::hir::*;
use tirx_ir::{DType, Diagnostic, Span};

/// The largest `align=` a dynamic shared allocation honours: every `shared.dyn`
/// buffer starts at a multiple of it (docs/tile-primitives.md §2.7).
pub const MAX_DYN_ALIGN: i64 = tirx_ir::target::DYN_SMEM_ALIGN as i64;

impl Builder<'_> {
    /// `T.ptx.<path>(...)` as a statement: the path must be a `T.ptx` name of [`crate::names`].
    pub(crate) fn ptx_path_stmt(
        &mut self,
        path: &str,
        args: &[ast::Arg],
        target: Option<&ast::Expr>,
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        if let Some(v) = crate::ptx_vec::parse_vec_path(path) {
            return match v {
                Ok(p) => self.ptx_vec_stmt(path, p, args, target, span, out),
                Err(m) => self.fail(
                    Diagnostic::error(span, format!("`T.ptx.{path}`: {m}"))
                        .with_label("in this instruction")
                        .with_help("write e.g. `T.ptx.st.shared.v4.f32(smem.ptr_to([0]), a, b, c, d)`"),
                ),
            };
        }
        match PtxOp::from_path(path) {
            Some(op) => self.ptx_stmt(op, args, target, span, out),
            None => {
                let mut d = Diagnostic::error(span, format!("`T.ptx.{path}` is not an instruction tirx knows"))
                    .with_label("unknown PTX instruction");
                if let Some(c) = closest(path, script_names(Namespace::Ptx)) {
                    d = d.with_help(format!("did you mean `T.ptx.{c}`?"));
                }
                let names: Vec<String> = script_names(Namespace::Ptx).map(|p| format!("T.ptx.{p}")).collect();
                self.fail(d.with_note(format!("known: {}", names.join(", "))))
            }
        }
    }

    /// One PTX instruction: asynchronous-copy and mbarrier ones here, the rest in `crate::ptx`.
    pub(crate) fn ptx_stmt(
        &mut self,
        op: PtxOp,
        args: &[ast::Arg],
        target: Option<&ast::Expr>,
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        let fname = op.script_name();
        self.no_target(target, &format!("`{fname}`"))?;
        let (pos, kw) = self.eval_args(args)?;
        let mut a = Args::new(fname.clone(), pos, kw, span);
        let stmt = match op {
            PtxOp::WgmmaFence
            | PtxOp::WgmmaCommit
            | PtxOp::WgmmaWait
            | PtxOp::SetMaxNReg(_)
            | PtxOp::BarSync
            | PtxOp::BarArrive
            | PtxOp::GridDepWait
            | PtxOp::GridDepLaunch => {
                let p = self.ptx_sync(op, &mut a)?;
                a.finish(self)?;
                self.require_device(span)?;
                out.push(Stmt { kind: StmtKind::Ptx(p), span });
                return Ok(());
            }
            PtxOp::CommitGroup => AsyncStmt::CommitGroup,
            PtxOp::WaitGroup => {
                let n = match a.opt(self, "n")? {
                    Some((v, sp)) => self.group_count(v, sp)?,
                    None => 0,
                };
                AsyncStmt::WaitGroup(n)
            }
            PtxOp::MbarInit => {
                let bar = self.mbar_arg(&mut a, &fname)?;
                let count = self.u32_arg(&mut a, "count", &fname)?;
                AsyncStmt::MbarInit { bar, count }
            }
            PtxOp::MbarArrive => {
                let bar = self.mbar_arg(&mut a, &fname)?;
                if let Some((v, sp)) = a.opt(self, "count")? {
                    let c = self.int_expr(v, sp)?;
                    if !matches!(c.kind, ExprKind::Int(1)) {
                        return self.fail(
                            Diagnostic::error(
                                sp,
                                format!("`{fname}` arrives once; a count other than 1 is not supported"),
                            )
                            .with_help("call it once per arrival, or drop the count"),
                        );
                    }
                }
                let (cta, cta_scope) = self.remote_arrive_args(&mut a, &fname)?;
                AsyncStmt::MbarArrive { bar, cta, cta_scope }
            }
            PtxOp::MbarArriveExpectTx => {
                let bar = self.mbar_arg(&mut a, &fname)?;
                let bytes = self.u32_arg(&mut a, "tx_count", &fname)?;
                AsyncStmt::MbarArriveExpectTx { bar, bytes }
            }
            PtxOp::MbarWait => {
                let bar = self.mbar_arg(&mut a, &fname)?;
                let parity = self.u32_arg(&mut a, "phase", &fname)?;
                AsyncStmt::MbarWait { bar, parity }
            }
            PtxOp::FenceProxyAsync => {
                if let Some((v, sp)) = a.opt(self, "space")? {
                    if v != Val::Str("shared::cta".into()) {
                        return self.fail(
                            Diagnostic::error(sp, "`fence.proxy.async` orders the CTA's shared memory only")
                                .with_label("not supported")
                                .with_help("write `T.ptx.fence.proxy_async(\"shared::cta\")`"),
                        );
                    }
                }
                AsyncStmt::FenceProxyAsync
            }
            PtxOp::FenceMbarrierInit => AsyncStmt::FenceMbarrierInit,
            PtxOp::BulkCommitGroup => AsyncStmt::BulkCommitGroup,
            PtxOp::BulkWaitGroup | PtxOp::BulkWaitGroupRead => {
                let n = match a.opt(self, "n")? {
                    Some((v, sp)) => self.group_count(v, sp)?,
                    None => 0,
                };
                AsyncStmt::BulkWaitGroup { n, read: op == PtxOp::BulkWaitGroupRead }
            }
            PtxOp::ClusterArrive => AsyncStmt::ClusterArrive { relaxed: false },
            PtxOp::ClusterArriveRelaxed => AsyncStmt::ClusterArrive { relaxed: true },
            PtxOp::ClusterWait | PtxOp::ClusterSync => AsyncStmt::ClusterWait,
            PtxOp::GridGroupSync => {
                let word = self.group_word(&mut a, &fname)?;
                let size = self.u32_arg(&mut a, "size", &fname)?;
                AsyncStmt::GridGroupSync { word, size }
            }
        };
        a.finish(self)?;
        self.require_device(span)?;
        if op == PtxOp::ClusterSync {
            out.push(Stmt { kind: StmtKind::Async(AsyncStmt::ClusterArrive { relaxed: false }), span });
        }
        out.push(Stmt { kind: StmtKind::Async(stmt), span });
        Ok(())
    }

    /// The `n` of `wait_group(n)`: a compile-time count of pending groups.
    fn group_count(&mut self, v: Val, sp: Span) -> R<u32> {
        let n = self.const_int(v, sp)?;
        match u32::try_from(n) {
            Ok(n) if n <= 64 => Ok(n),
            _ => self.fail(
                Diagnostic::error(sp, format!("`wait_group({n})`: the count of groups left pending must be 0..=64"))
                    .with_label("out of range"),
            ),
        }
    }

    /// An int32 operand (`T.uint32(1)`, a count, a phase): literals are retyped,
    /// other integer values converted.
    fn u32_arg(&mut self, a: &mut Args, name: &str, fname: &str) -> R<Expr> {
        let Some((v, sp)) = a.opt(self, name)? else {
            return self.fail(
                Diagnostic::error(a.span, format!("`{fname}` is missing the argument `{name}`"))
                    .with_label("in this call"),
            );
        };
        let e = self.int_expr(v, sp)?;
        Ok(match e.kind {
            ExprKind::Int(_) => Expr { dtype: DType::I32, ..e },
            _ if e.dtype == DType::I32 => e,
            _ => Expr { kind: ExprKind::Cast(Box::new(e)), dtype: DType::I32, span: sp },
        })
    }

    /// The barrier operand: `bar.ptr_to([i])` of a shared int64 (or uint64) buffer.
    /// An arrive's optional `cta_id=`: the cluster rank of the CTA whose barrier it arrives on.
    fn cta_id_arg(&mut self, a: &mut Args) -> R<Option<Expr>> {
        match a.opt(self, "cta_id")? {
            Some((v, sp)) => Ok(Some(self.int_expr(v, sp)?)),
            None => Ok(None),
        }
    }

    /// A remote arrive's `cta_id=` and `scope=`: `"cluster"` (the default: a release at cluster
    /// scope) or `"cta"` (CUTLASS's remote arrive, no fence: it orders the reads before it only).
    fn remote_arrive_args(&mut self, a: &mut Args, fname: &str) -> R<(Option<Expr>, bool)> {
        let cta = self.cta_id_arg(a)?;
        let Some((v, sp)) = a.opt(self, "scope")? else {
            return Ok((cta, false));
        };
        let cta_scope = match &v {
            Val::Str(s) if s == "cluster" => false,
            Val::Str(s) if s == "cta" => true,
            _ => {
                return self.fail(
                    Diagnostic::error(sp, format!("`{fname}`'s `scope=` is \"cluster\" or \"cta\""))
                        .with_label("not a release scope")
                        .with_help("\"cluster\" (the default) releases everything before the arrive to the peer; \"cta\" only the reads before it"),
                )
            }
        };
        if cta.is_none() {
            return self.fail(
                Diagnostic::error(sp, format!("`{fname}`'s `scope=` is for a remote arrive"))
                    .with_label("no `cta_id=`")
                    .with_help("an arrive on this CTA's own barrier releases at CTA scope: drop `scope=`, or name the peer with `cta_id=`"),
            );
        }
        Ok((cta, cta_scope))
    }

    fn mbar_arg(&mut self, a: &mut Args, fname: &str) -> R<MbarRef> {
        let Some((v, sp)) = a.opt(self, "bar")? else {
            return self.fail(
                Diagnostic::error(a.span, format!("`{fname}` is missing its barrier"))
                    .with_label("in this call")
                    .with_help("pass the barrier's address, e.g. `mbar.ptr_to([0])`"),
            );
        };
        self.mbar_ref(v, sp)
    }

    /// The word of a grid group barrier: `W.ptr_to([i])` of a global int32 (or uint32) buffer.
    fn group_word(&mut self, a: &mut Args, fname: &str) -> R<MbarRef> {
        let Some((v, sp)) = a.opt(self, "word")? else {
            return self.fail(
                Diagnostic::error(a.span, format!("`{fname}` is missing its barrier word"))
                    .with_label("in this call")
                    .with_help(
                        "pass the address of a global int32 word the group's CTAs share, e.g. `bars.ptr_to([group])`",
                    ),
            );
        };
        let Val::Ptr(buf, index) = v else {
            return self.expected_kind("a global word's address like `bars.ptr_to([group])`", &v, sp);
        };
        let b = self.buffer(buf);
        if b.scope != MemScope::Global || !matches!(b.dtype, DType::I32 | DType::U32) {
            let (n, sc, dt) = (b.name.clone(), b.scope.name(), b.dtype);
            return self.fail(
                Diagnostic::error(sp, format!("`{n}` ({sc} {dt}) cannot hold a grid group barrier"))
                    .with_label("not a global int32 word")
                    .with_help("the CTAs meet on a 32-bit word in global memory: a kernel parameter of dtype \"int32\", zero before the first launch"),
            );
        }
        Ok(MbarRef { buf, index, span: sp })
    }

    /// A barrier address value (`mbar.ptr_to([i])`) as an operand.
    pub(crate) fn mbar_ref(&mut self, v: Val, sp: Span) -> R<MbarRef> {
        let Val::Ptr(buf, index) = v else {
            return self.expected_kind("a barrier address like `mbar.ptr_to([0])`", &v, sp);
        };
        let b = self.buffer(buf);
        if !b.scope.is_shared() || !matches!(b.dtype, DType::I64 | DType::U64) {
            let (n, sc, dt) = (b.name.clone(), b.scope.name(), b.dtype);
            return self.fail(
                Diagnostic::error(sp, format!("`{n}` ({sc} {dt}) cannot hold mbarriers"))
                    .with_label("not a barrier")
                    .with_help("an mbarrier is a 64-bit word in shared memory: use `MBarrier(pool, depth)` or `T.alloc_buffer((n,), \"int64\", scope=\"shared\")`"),
            );
        }
        Ok(MbarRef { buf, index, span: sp })
    }

    // ------------------------------------------------------------------ SMEMPool

    /// `pool = T.SMEMPool()`.
    pub(crate) fn smem_pool(&mut self, args: &[ast::Arg], target: Option<&ast::Expr>, span: Span) -> R<()> {
        let (name, _) = self.target_name(target, span, "T.SMEMPool")?;
        let (pos, kw) = self.eval_args(args)?;
        let mut a = Args::new("T.SMEMPool".into(), pos, kw, span);
        if let Some((v, sp)) = a.opt(self, "ptr")? {
            if v != Val::None {
                return self.fail(
                    Diagnostic::error(sp, "a pool over a caller-managed pointer is not supported")
                        .with_help("write `T.SMEMPool()`: the pool carves the kernel's dynamic shared memory"),
                );
            }
        }
        a.finish(self)?;
        self.require_device(span)?;
        let ks = self.ks();
        ks.pools += 1;
        let id = ks.pools;
        self.define(&name, Val::Pool(id));
        Ok(())
    }

    /// `A_s = pool.alloc(shape, dtype, align=, layout=)`: a `shared.dyn` buffer,
    /// placed after the pool's earlier allocations.
    pub(crate) fn pool_alloc(
        &mut self,
        args: &[ast::Arg],
        target: Option<&ast::Expr>,
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        let (name, _) = self.target_name(target, span, "pool.alloc")?;
        let (pos, mut kw) = self.eval_args(args)?;
        // The reference spells "no layout" `layout="default"`.
        kw.retain(|k| !(k.0 == "layout" && k.2 == Val::Str("default".into())));
        let mut a = Args::new("pool.alloc".into(), pos, kw, span);
        self.pool_scope_and_align(&mut a)?;
        let b = self.declare_buffer(&name, &mut a, MemScope::SharedDyn, false, BufferOrigin::Alloc, span)?;
        self.define(&name, Val::Buffer(b));
        out.push(Stmt { kind: StmtKind::Alloc(b), span });
        Ok(())
    }

    /// `scope=` (only `"shared.dyn"`) and `align=` of a pool allocation.
    fn pool_scope_and_align(&mut self, a: &mut Args) -> R<()> {
        if let Some((v, sp)) = a.kw("strides") {
            if v != Val::None {
                return self.fail(
                    Diagnostic::error(sp, "`strides=` is not supported").with_help("give the buffer a `layout=`"),
                );
            }
        }
        if let Some((v, sp)) = a.kw("scope") {
            if v != Val::Str("shared.dyn".into()) {
                return self.fail(
                    Diagnostic::error(sp, "a pool carves dynamic shared memory: its buffers are `shared.dyn`")
                        .with_label("not supported")
                        .with_help("drop `scope=`, or allocate the buffer with `T.alloc_buffer`"),
                );
            }
        }
        if let Some((v, sp)) = a.kw("align") {
            self.check_align(v, sp, MAX_DYN_ALIGN)?;
        }
        Ok(())
    }

    /// `align=`: -1 or 0 (the default), or a power of two up to `max` bytes.
    pub(crate) fn check_align(&mut self, v: Val, sp: Span, max: i64) -> R<()> {
        let n = self.const_int(v, sp)?;
        if n == -1 || n == 0 || (n > 0 && n <= max && n & (n - 1) == 0) {
            return Ok(());
        }
        self.fail(
            Diagnostic::error(sp, format!("`align={n}`: this allocation can be aligned to a power of two up to {max} bytes"))
                .with_label("unsupported alignment")
                .with_help(format!(
                    "every `shared.dyn` buffer starts at a multiple of {MAX_DYN_ALIGN} bytes and every other array at a multiple of 16"
                )),
        )
    }

    // ------------------------------------------------------------------ MBarrier

    /// `mbar = MBarrier(pool, depth, phase_offset=0, leader=None)`: `depth`
    /// barrier words in the pool, named after `mbar`.
    pub(crate) fn mbarrier_new(
        &mut self,
        args: &[ast::Arg],
        target: Option<&ast::Expr>,
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        let (name, nspan) = self.target_name(target, span, "MBarrier")?;
        let (pos, kw) = self.eval_args(args)?;
        let mut a = Args::new("MBarrier".into(), pos, kw, span);
        let (pool, ps) = a.req(self, "pool")?;
        if !matches!(pool, Val::Pool(_)) {
            return self.expected_kind("a shared memory pool (`pool = T.SMEMPool()`)", &pool, ps);
        }
        let (d, ds) = a.req(self, "depth")?;
        let depth = self.positive_int(d, ds)?;
        if depth > 64 {
            return self.fail(Diagnostic::error(ds, format!("{depth} barriers: at most 64 per MBarrier")));
        }
        let phase_offset = match a.opt(self, "phase_offset")? {
            Some((v, sp)) => match self.const_int(v, sp)? {
                x @ (0 | 1) => x,
                x => return self.fail(Diagnostic::error(sp, format!("`phase_offset={x}`: a parity is 0 or 1"))),
            },
            None => 0,
        };
        let leader = match a.opt(self, "leader")? {
            Some((Val::None, _)) | None => None,
            Some((v, sp)) => Some(self.bool_expr(v, sp)?),
        };
        a.finish(self)?;
        self.require_device(span)?;
        let layout = tirx_layout::Layout::Tile(tirx_layout::TileLayout::row_major(&[depth]));
        let buf = self.add_buffer(Buffer {
            name: name.clone(),
            shape: vec![depth],
            dtype: DType::I64,
            scope: MemScope::SharedDyn,
            layout,
            origin: BufferOrigin::Alloc,
            span: nspan,
            dyn_outer: None,
            dyn_strides: None,
        });
        out.push(Stmt { kind: StmtKind::Alloc(buf), span });
        self.define(&name, Val::MBarrier(Box::new(MbarObj { buf, depth, phase_offset, leader })));
        Ok(())
    }

    /// `mbar.init(count)`, `mbar.wait(stage, phase)`, `mbar.arrive(stage)` as statements.
    pub(crate) fn mbar_method_stmt(
        &mut self,
        o: &MbarObj,
        m: MbarMethod,
        args: &[ast::Arg],
        target: Option<&ast::Expr>,
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        let bname = self.buffer(o.buf).name.clone();
        let fname = format!("{bname}.{}", mbar_method_name(m));
        if m == MbarMethod::PtrTo {
            return self.fail(
                Diagnostic::error(span, format!("`{fname}` is an address, not a statement"))
                    .with_help(format!("pass it to an instruction: `T.ptx.mbarrier.arrive({bname}.ptr_to([0]))`")),
            );
        }
        self.no_target(target, &format!("`{fname}`"))?;
        let (pos, kw) = self.eval_args(args)?;
        let mut a = Args::new(fname.clone(), pos, kw, span);
        let bar = |index: Expr| MbarRef { buf: o.buf, index: vec![index], span };
        match m {
            MbarMethod::Init => {
                let count = self.u32_arg(&mut a, "count", &fname)?;
                a.finish(self)?;
                self.require_device(span)?;
                let init: Vec<Stmt> = (0..o.depth)
                    .map(|i| {
                        let index = Expr { kind: ExprKind::Int(i), dtype: DType::I32, span };
                        Stmt {
                            kind: StmtKind::Async(AsyncStmt::MbarInit { bar: bar(index), count: count.clone() }),
                            span,
                        }
                    })
                    .collect();
                let leader = match &o.leader {
                    Some(c) => Some(c.clone()),
                    None => self.thread0(span, &fname)?,
                };
                match leader {
                    Some(cond) => {
                        out.push(Stmt { kind: StmtKind::If { cond, then_body: init, else_body: vec![] }, span })
                    }
                    None => out.extend(init),
                }
            }
            MbarMethod::Wait | MbarMethod::Arrive => {
                let (sv, ss) = a.req(self, "stage")?;
                let stage = self.int_expr(sv, ss)?;
                self.stage_in_range(&stage, o.depth, ss, &bname)?;
                let kind = if m == MbarMethod::Wait {
                    let mut parity = self.u32_arg(&mut a, "phase", &fname)?;
                    if o.phase_offset != 0 {
                        let one = Expr { kind: ExprKind::Int(o.phase_offset), dtype: DType::I32, span };
                        parity = Expr {
                            kind: ExprKind::Binary(BinOp::BitXor, Box::new(parity), Box::new(one)),
                            dtype: DType::I32,
                            span,
                        };
                    }
                    AsyncStmt::MbarWait { bar: bar(stage), parity }
                } else {
                    let (cta, cta_scope) = self.remote_arrive_args(&mut a, &fname)?;
                    AsyncStmt::MbarArrive { bar: bar(stage), cta, cta_scope }
                };
                a.finish(self)?;
                self.require_device(span)?;
                out.push(Stmt { kind: StmtKind::Async(kind), span });
            }
            MbarMethod::PtrTo => {}
        }
        Ok(())
    }

    fn stage_in_range(&mut self, stage: &Expr, depth: i64, sp: Span, name: &str) -> R<()> {
        if let ExprKind::Int(s) = stage.kind {
            if !(0..depth).contains(&s) {
                return self.fail(
                    Diagnostic::error(sp, format!("stage {s} of `{name}`, which has {depth}"))
                        .with_label("out of range")
                        .with_help(format!("stages are 0..{depth}")),
                );
            }
        }
        Ok(())
    }

    /// The condition "thread 0 of the CTA" from the thread ids declared so far
    /// (all of one chain down to the thread equal to 0); `None` when the kernel
    /// declares none (one thread per CTA).
    fn thread0(&mut self, span: Span, fname: &str) -> R<Option<Expr>> {
        use ScopeIdKind as K;
        const CHAINS: [&[ScopeIdKind]; 4] = [
            &[K::ThreadId],
            &[K::WarpId, K::LaneId],
            &[K::WarpgroupId, K::ThreadIdInWg],
            &[K::WarpgroupId, K::WarpIdInWg, K::LaneId],
        ];
        let ids = self.ks().scope_ids.clone();
        let var = |k: K| ids.iter().find(|(kind, _)| *kind == k).map(|(_, v)| v.clone());
        for chain in CHAINS {
            let Some(vars) = chain.iter().map(|k| var(*k)).collect::<Option<Vec<Vec<VarId>>>>() else { continue };
            let eqs = vars.into_iter().flatten().map(|v| {
                let x = Expr { kind: ExprKind::Var(v), dtype: DType::I32, span };
                let zero = Expr { kind: ExprKind::Int(0), dtype: DType::I32, span };
                Expr { kind: ExprKind::Binary(BinOp::Eq, Box::new(x), Box::new(zero)), dtype: DType::Bool, span }
            });
            let cond = eqs.reduce(|a, b| Expr {
                kind: ExprKind::Binary(BinOp::And, Box::new(a), Box::new(b)),
                dtype: DType::Bool,
                span,
            });
            return Ok(cond);
        }
        let thread_level = |k: &K| !matches!(k, K::CtaId | K::ClusterId | K::CtaIdInCluster);
        if ids.iter().any(|(k, _)| thread_level(k)) {
            return self.fail(
                Diagnostic::error(
                    span,
                    format!("`{fname}` is run by thread 0 of the CTA, which the declared ids do not single out"),
                )
                .with_help(
                    "declare the thread index first (`tid = T.thread_id([n])`), or pass `leader=` to `MBarrier`",
                ),
            );
        }
        Ok(None)
    }
}
