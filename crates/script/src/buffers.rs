//! Buffers: declarations (`T.Buffer`, `T.match_buffer`, `T.alloc_*`, views),
//! scalar loads and stores, and regions, with their checks (dtype, bounds,
//! layout/shape agreement, no scalar access to thread-partitioned buffers).

use crate::ast::{self, ExprKind as AK};
use crate::builder::{Builder, R};
use crate::eval::Args;
use crate::value::*;
use tirx_ir::hir::*;
use tirx_ir::{DType, Diagnostic, Span};
use tirx_layout::{Axis, Injectivity, IterRef, Layout, TileLayout};

/// A parameter's `strides=`: constants (as their layout) or run-time expressions.
enum Strides {
    Const(Layout, Span),
    Dyn(Vec<Expr>),
}

/// Largest number of elements a buffer may declare (guards size arithmetic).
const MAX_ELEMS: i64 = 1 << 40;

impl Builder<'_> {
    /// Shape, dtype, scope, layout of `T.Buffer` / `T.match_buffer` / `T.alloc_*`.
    pub(crate) fn declare_buffer(
        &mut self,
        name: &str,
        a: &mut Args,
        default_scope: MemScope,
        scope_kw: bool,
        origin: BufferOrigin,
        span: Span,
    ) -> R<BufId> {
        let (sv, ss) = a.req(self, "shape")?;
        let (shape, dyn_outer) = if origin == BufferOrigin::Param {
            self.param_shape(sv, ss, name)?
        } else {
            self.constant_shape_only(&sv, &format!("`{name}`"))?;
            (self.shape_of(sv, ss)?, None)
        };
        let dtype = match a.opt(self, "dtype")? {
            Some((v, sp)) => self.dtype_of(v, sp)?,
            None => DType::F32,
        };
        let mut scope = default_scope;
        if scope_kw {
            if let Some((v, sp)) = a.opt(self, "scope")? {
                scope = self.mem_scope(v, sp)?;
                if dyn_outer.is_some() && scope != MemScope::Global {
                    return self.fail(
                        Diagnostic::error(sp, format!("`{name}` has a run-time dim 0, so it must be a global buffer"))
                            .with_label(format!("{} memory", scope.name()))
                            .with_help("shared and local sizes are compile-time constants; drop `scope=`"),
                    );
                }
                // A kernel's arguments are global memory; a shared or register handle is a
                // device-function parameter, which kernels here do not have.
                if origin == BufferOrigin::Param && scope != MemScope::Global {
                    return self.fail(
                        Diagnostic::error(sp, format!("a kernel parameter in {} memory", scope.name()))
                            .with_label("kernel arguments are global memory")
                            .with_help(format!(
                                "allocate the tile inside the kernel: `{name} = T.alloc_buffer(shape, dtype, scope=\"{}\")`, \
                                 or drop `scope=` for a global argument",
                                scope.name()
                            )),
                    );
                }
            }
        }
        let strides = self.buffer_strides(a, name, &shape, &origin, dyn_outer.is_some())?;
        let layout =
            match a.kw("layout") {
                Some((v, sp)) if strides.is_some() && v != Val::None => {
                    return self.fail(
                        Diagnostic::error(sp, format!("`{name}` is given both `strides=` and `layout=`"))
                            .with_label("a second description of its addresses")
                            .with_help("keep one: `strides=` for a plain strided view, `layout=` for anything else"),
                    )
                }
                Some((v, sp)) if dyn_outer.is_some() && v != Val::None => return self.fail(
                    Diagnostic::error(sp, format!("`{name}` has a run-time dim 0, so its layout is row-major"))
                        .with_label("an explicit layout")
                        .with_help(
                            "remove `layout=`: a symbolic buffer is addressed row-major with constant inner strides",
                        ),
                ),
                Some((v, sp)) => self.layout_for(v, sp, &shape, name, scope)?,
                None => match &strides {
                    Some(Strides::Const(l, sp)) => self.layout_for(Val::Layout(l.clone()), *sp, &shape, name, scope)?,
                    _ => Layout::Tile(TileLayout::row_major(&shape)),
                },
            };
        a.kw("align");
        a.finish(self)?;
        let dyn_strides = match strides {
            Some(Strides::Dyn(v)) => Some(v),
            _ => None,
        };
        Ok(self.add_buffer(Buffer {
            name: name.to_string(),
            shape,
            dtype,
            scope,
            layout,
            origin,
            span,
            dyn_outer,
            dyn_strides,
        }))
    }

    /// `strides=(s0, s1, ...)` of a parameter buffer: one element stride per dim, each a
    /// constant at least 0 or an integer expression of scalar parameters. All constant:
    /// the strided layout they describe (none if row-major); else, or with a run-time
    /// dim 0 (whose layout is row-major), the expressions (`Buffer::dyn_strides`).
    fn buffer_strides(
        &mut self,
        a: &mut Args,
        name: &str,
        shape: &[i64],
        origin: &BufferOrigin,
        dynamic_rows: bool,
    ) -> R<Option<Strides>> {
        let Some((v, sp)) = a.kw("strides") else { return Ok(None) };
        let items = match v {
            Val::None => return Ok(None),
            Val::Tuple(xs) | Val::List(xs) => xs,
            other => vec![other],
        };
        if *origin != BufferOrigin::Param {
            return self.fail(
                Diagnostic::error(sp, format!("`strides=` on `{name}`, which is not a kernel parameter"))
                    .with_label("only a parameter's strides can differ from row-major")
                    .with_help("give an allocation its addresses with `layout=`, e.g. `layout=S[(64, 64):(72, 1)]`"),
            );
        }
        if items.len() != shape.len() {
            return self.fail(
                Diagnostic::error(sp, format!("`{name}` has {} dims but {} strides", shape.len(), items.len()))
                    .with_label("one element stride per dim")
                    .with_help(format!("give {} strides, innermost last", shape.len())),
            );
        }
        let mut exprs = Vec::with_capacity(items.len());
        for x in items {
            let e = self.param_expr(x, sp, &format!("a stride of `{name}`"))?;
            if let ExprKind::Int(c) = e.kind {
                if c < 0 {
                    return self.fail(
                        Diagnostic::error(e.span, format!("stride {c} of `{name}` is negative"))
                            .with_label("a negative stride")
                            .with_help("pass the tensor with non-negative strides (flip it outside the kernel)"),
                    );
                }
            }
            exprs.push(e);
        }
        let consts: Option<Vec<i64>> = exprs
            .iter()
            .map(|e| match e.kind {
                ExprKind::Int(c) => Some(c),
                _ => None,
            })
            .collect();
        let row_major: Vec<i64> = TileLayout::row_major(shape).shard.iter().map(|i| i.stride).collect();
        Ok(Some(match consts {
            Some(c) if c == row_major => return Ok(None),
            Some(c) if !dynamic_rows => {
                let iters = shape.iter().zip(&c).map(|(&n, &st)| tirx_layout::Iter::new(n, st, Axis::M)).collect();
                Strides::Const(Layout::Tile(TileLayout::new(iters, vec![], Default::default())), sp)
            }
            _ => Strides::Dyn(exprs),
        }))
    }

    pub(crate) fn add_buffer(&mut self, b: Buffer) -> BufId {
        let ks = self.ks();
        ks.kernel.buffers.push(b);
        BufId(ks.kernel.buffers.len() as u32 - 1)
    }

    pub(crate) fn shape_of(&mut self, v: Val, span: Span) -> R<Vec<i64>> {
        let items = match v {
            Val::Tuple(xs) | Val::List(xs) => xs,
            other => vec![other],
        };
        if items.is_empty() {
            return self.fail(
                Diagnostic::error(span, "a buffer shape needs at least one dimension").with_label("empty shape"),
            );
        }
        let mut shape = vec![];
        let mut total: i64 = 1;
        for x in items {
            let e = self.positive_int(x, span)?;
            total = total.saturating_mul(e);
            shape.push(e);
        }
        if total > MAX_ELEMS {
            return self.fail(
                Diagnostic::error(span, format!("buffer of {total} elements is too large"))
                    .with_label("too many elements"),
            );
        }
        Ok(shape)
    }

    pub(crate) fn mem_scope(&mut self, v: Val, span: Span) -> R<MemScope> {
        match v {
            Val::Str(s) => match MemScope::from_name(&s) {
                Some(m) => Ok(m),
                None => {
                    let names = ["global", "shared", "shared.dyn", "local"];
                    let d = Diagnostic::error(span, format!("unknown memory scope `{s}`")).with_label("not a scope");
                    self.fail(did_you_mean(d, &s, &names, "scopes", true))
                }
            },
            other => self.expected_kind("a scope string like \"shared\"", &other, span),
        }
    }

    /// A `layout=` value of buffer `name` in `scope`, checked against the buffer
    /// shape and for injectivity (no two elements in one slot).
    pub(crate) fn layout_for(&mut self, v: Val, span: Span, shape: &[i64], name: &str, scope: MemScope) -> R<Layout> {
        let layout = match v {
            Val::Layout(l) => l,
            Val::Spec(s) => Layout::Tile(s.into_tile()),
            Val::None => return Ok(Layout::Tile(TileLayout::row_major(shape))),
            other => {
                return self.expected_kind("a layout (`TileLayout(S[...])` or `ComposeLayout(...)`)", &other, span)
            }
        };
        if let Err(e) = layout.validate().and_then(|_| layout.scope()) {
            return self.fail(Diagnostic::error(span, format!("invalid layout: {e}")).with_label("this layout"));
        }
        let tile = match &layout {
            Layout::Tile(t) => t,
            Layout::Compose(c) => {
                // A bare swizzle (trivial tile) stretches over the buffer shape.
                if is_trivial_tile(&c.tile) {
                    return Ok(layout);
                }
                &c.tile
            }
        };
        if tile.shard.is_empty() {
            return Ok(layout);
        }
        let size = tile.shard.iter().fold(1i64, |acc, it| acc.saturating_mul(it.extent));
        let want = shape.iter().fold(1i64, |acc, &e| acc.saturating_mul(e));
        if size != want {
            let sh = fmt_shape(shape);
            // The reference silently applies a larger layout to a smaller buffer (a `(1, k)` local
            // buffer given the warp tile's `S[(32, k)]`); here a layout describes the whole buffer.
            let help = if size > want && scope == MemScope::Local {
                format!(
                    "a layout describes the whole buffer (tirx does not apply a larger one to part of it, as the reference does): give this buffer its own layout (`S[{sh}]`, or none for row-major) and see the threads' buffers as one warp tile with `.view`, e.g. `acc.view(32, 64, layout=S[(32, 64):(1@laneid, 1)])` for a `(1, 64)` buffer per lane"
                )
            } else {
                "make the layout extents multiply to the buffer's element count".to_string()
            };
            return self.fail(
                Diagnostic::error(span, format!("layout covers {size} elements but the buffer shape {sh} has {want}"))
                    .with_label(format!("{size} elements"))
                    .with_help(help),
            );
        }
        self.check_injective(tile, span, shape, name, scope)?;
        self.check_homes(tile, span, name)?;
        Ok(layout)
    }

    /// Every home lies where it can exist: storage at offset 0 or above (a
    /// negative stride needs an offset that lifts it), each thread axis inside
    /// the hardware's range (32 lanes, 4 warps of a warpgroup, ...).
    fn check_homes(&mut self, tile: &TileLayout, span: Span, name: &str) -> R<()> {
        let fail = |this: &mut Self, msg: String, help: String| {
            this.fail(Diagnostic::error(span, msg).with_label("this layout").with_help(help))
        };
        let (lo, _) = match tile.reach(None) {
            Ok(r) => r,
            Err(e) => return fail(self, format!("invalid layout for `{name}`: {e}"), "check the strides".into()),
        };
        if lo < 0 {
            return fail(
                self,
                format!("the layout of `{name}` reaches storage offset {lo}, before the buffer's first element"),
                format!("a negative stride counts down from the layout's offset: add `+ {}` to the layout", -lo),
            );
        }
        for axis in tile.thread_axes() {
            let Some(limit) = axis.hw_limit() else { continue };
            let (lo, hi) = match tile.reach(Some(axis)) {
                Ok(r) => r,
                Err(e) => return fail(self, format!("invalid layout for `{name}`: {e}"), "check the strides".into()),
            };
            if lo < 0 || hi >= limit {
                let bad = if lo < 0 { lo } else { hi };
                return fail(
                    self,
                    format!("the layout of `{name}` places an element at {axis} {bad}; {axis} runs 0..{limit}"),
                    format!("choose {axis} strides and offsets that keep every element in 0..{limit}"),
                );
            }
        }
        Ok(())
    }

    /// Two elements of one buffer must never share a home: a store to one would
    /// overwrite the other (docs/layout-model.md §1.8). `tile` admits `shape`.
    fn check_injective(&mut self, tile: &TileLayout, span: Span, shape: &[i64], name: &str, scope: MemScope) -> R<()> {
        let c = match tile.injectivity() {
            Ok(Injectivity::Collides(c)) => c,
            // Undecided (a huge entangled layout) is not proof of a bug.
            Ok(Injectivity::Injective | Injectivity::Unknown { .. }) => return Ok(()),
            Err(e) => {
                return self.fail(Diagnostic::error(span, format!("invalid layout: {e}")).with_label("this layout"))
            }
        };
        let at = |x: i64| fmt_index(&tirx_layout::apply::split_coord(x, shape));
        let memory: Vec<(Axis, i64)> = c.at.iter().filter(|(a, _)| a.is_memory()).map(|(a, v)| (*a, *v)).collect();
        let threads: Vec<String> =
            tile.thread_axes().into_iter().map(|a| format!("{a} {}", c.at.get(&a).copied().unwrap_or(0))).collect();
        let (noun, unit) = match scope {
            MemScope::Local => ("register", "a (thread, register)"),
            MemScope::Shared | MemScope::SharedDyn => ("shared-memory offset", "an address"),
            MemScope::Global => ("global-memory offset", "an address"),
        };
        let slot = match memory.as_slice() {
            [] => format!("{noun} 0"),
            [(Axis::M, v)] => format!("{noun} {v}"),
            more => {
                let parts: Vec<String> = more.iter().map(|(a, v)| format!("{a} {v}")).collect();
                format!("{noun} ({})", parts.join(", "))
            }
        };
        let whose = if threads.is_empty() { String::new() } else { format!(" of thread ({})", threads.join(", ")) };
        let iter = |r: IterRef| {
            let kind = if r.replica { "replica iter" } else { "iter" };
            let it = tile.iter_at(r).copied().unwrap_or(tirx_layout::Iter::m(1, 1));
            format!("{kind} {} (extent {}, stride {})", r.index, it.extent, it.stride)
        };
        let overlap = match c.iters.as_slice() {
            [one] => format!("{} repeats one home", iter(*one)),
            many => {
                let named: Vec<String> = many.iter().map(|&r| iter(r)).collect();
                format!("{} overlap", named.join(" and "))
            }
        };
        let mut help = format!("on `{}`, {overlap}", c.axis);
        if let Some((r, need)) = c.fix {
            let mut fixed = tile.clone();
            let target = if r.replica { &mut fixed.replica } else { &mut fixed.shard };
            if let Some(it) = target.get_mut(r.index) {
                it.stride = if it.stride < 0 { -need } else { need };
            }
            let name = iter(r);
            let name = name.split(" (").next().unwrap_or("the iter");
            help.push_str(&format!("; {name} needs a stride of at least {need} to clear the iters of smaller stride"));
            if fixed.injectivity() == Ok(Injectivity::Injective) {
                help.push_str(&format!(", e.g. `{fixed}`"));
            }
        }
        if c.iters.iter().all(|r| !r.replica) {
            help.push_str("; to keep copies of an element on purpose, use a replica `R[...]`");
        }
        self.fail(
            Diagnostic::error(
                span,
                format!(
                    "non-injective layout for `{name}`: elements {} and {} both map to {slot}{whose}",
                    at(c.first),
                    at(c.second)
                ),
            )
            .with_label(format!("two elements share {slot}"))
            .with_note(format!("every element needs {unit} of its own, else a store to one overwrites the other"))
            .with_help(help),
        )
    }

    // ------------------------------------------------------------------ buffers

    pub(crate) fn target_name(&mut self, target: Option<&ast::Expr>, span: Span, what: &str) -> R<(String, Span)> {
        match target.map(|t| (&t.kind, t.span)) {
            Some((AK::Name(n), sp)) => {
                self.check_rebind(n, sp)?;
                Ok((n.clone(), sp))
            }
            _ => self.fail(
                Diagnostic::error(span, format!("{what} must be assigned to a name"))
                    .with_help(format!("write `A = {what}(...)`")),
            ),
        }
    }

    pub(crate) fn alloc(
        &mut self,
        kind: AllocKind,
        args: &[ast::Arg],
        target: Option<&ast::Expr>,
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        let fname = self.builtin_name(Builtin::Alloc(kind));
        let (name, _) = self.target_name(target, span, &fname)?;
        let (pos, kw) = self.eval_args(args)?;
        let mut a = Args::new(fname, pos, kw, span);
        let (default_scope, scope_kw) = match kind {
            AllocKind::Buffer => (MemScope::Global, true),
            AllocKind::Shared => (MemScope::Shared, false),
            AllocKind::Local => (MemScope::Local, false),
        };
        self.require_device(span)?;
        let b = self.declare_buffer(&name, &mut a, default_scope, scope_kw, BufferOrigin::Alloc, span)?;
        self.define(&name, Val::Buffer(b));
        out.push(Stmt { kind: StmtKind::Alloc(b), span });
        Ok(())
    }

    pub(crate) fn match_buffer(&mut self, args: &[ast::Arg], target: Option<&ast::Expr>, span: Span) -> R<()> {
        let (name, _) = self.target_name(target, span, "T.match_buffer")?;
        if self.ks().device {
            return self.fail(
                Diagnostic::error(span, "`T.match_buffer` after `T.device_entry()`")
                    .with_help("bind parameters at the top of the kernel, before `T.device_entry()`"),
            );
        }
        if self.ks().kernel.buffers.iter().any(|b| b.origin == BufferOrigin::Alloc) {
            return self.fail(
                Diagnostic::error(span, "`T.match_buffer` after a buffer allocation")
                    .with_help("bind parameters first"),
            );
        }
        let (pos, kw) = self.eval_args(args)?;
        let mut a = Args::new("T.match_buffer".into(), pos, kw, span);
        let (h, hs) = a.req(self, "param")?;
        let pname = match h {
            Val::Handle(p) => p,
            other => return self.expected_kind("a `T.handle` parameter", &other, hs),
        };
        let idx = self.ks().kernel.params.iter().position(|p| p.name == pname);
        let Some(idx) = idx else { return self.fail(Diagnostic::error(hs, format!("`{pname}` is not a parameter"))) };
        if self.ks().kernel.params[idx].buffer.is_some() {
            return self.fail(
                Diagnostic::error(hs, format!("parameter `{pname}` is already bound to a buffer"))
                    .with_help("call `T.match_buffer` once per handle"),
            );
        }
        let b = self.declare_buffer(&name, &mut a, MemScope::Global, true, BufferOrigin::Param, span)?;
        self.ks().kernel.params[idx].buffer = Some(b);
        self.define(&name, Val::Buffer(b));
        Ok(())
    }

    /// `X_local = X.local(*shape)` / `X_v = X.view(*shape, layout=...)`.
    pub(crate) fn view(
        &mut self,
        base: BufId,
        m: Method,
        args: &[ast::Arg],
        target: &ast::Expr,
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        if m == Method::Sub {
            let n = self.buffer(base).name.clone();
            return self.fail(
                Diagnostic::error(span, format!("`{n}.sub` is indexed, not called"))
                    .with_help(format!("write `V = {n}.sub[i, :, j, :]`")),
            );
        }
        let what = if m == Method::Local { ".local" } else { ".view" };
        let (name, _) = self.target_name(Some(target), span, what)?;
        let (pos, kw) = self.eval_args(args)?;
        let mut a = Args::new(what.trim_start_matches('.').into(), vec![], kw, span);
        let b = self.buffer(base).clone();
        self.check_viewable(&b, span)?;
        let shape_given = if pos.is_empty() {
            None
        } else {
            let sp = pos.iter().map(|p| p.1).fold(pos[0].1, Span::to);
            // `X.view((32, 8))` and `X.view(32, 8)` both work.
            let v = if pos.len() == 1 { pos[0].0.clone() } else { Val::Tuple(pos.into_iter().map(|p| p.0).collect()) };
            if let Val::Str(_) = v {
                return self.fail(
                    Diagnostic::error(sp, "dtype views are not supported")
                        .with_help("allocate a buffer of the wanted dtype"),
                );
            }
            self.constant_shape_only(&v, &format!("view `{name}`"))?;
            Some((self.shape_of(v, sp)?, sp))
        };
        let (shape, layout, origin) = match m {
            // `p = X.ptr_to([0])` binds a pointer value, not a view (`Builder::assign`).
            Method::PtrTo => return self.fail(Diagnostic::error(span, "`ptr_to` gives a pointer, not a buffer view")),
            Method::Local => {
                if b.scope != MemScope::Local {
                    return self.fail(
                        Diagnostic::error(
                            span,
                            format!("`.local()` needs a register buffer; `{}` is in {}", b.name, b.scope.name()),
                        )
                        .with_help("`.local()` gives a thread its registers of a `scope=\"local\"` buffer"),
                    );
                }
                // The thread's registers in physical order (the reference's semantics since its
                // #20076): element `i` of `X.local()` is register `i`; the span counts gaps and
                // offsets; `layout=` asks for another (e.g. storage-coordinate) view.
                let storage = storage(&b.layout);
                let n = match storage.span(Some(Axis::M)) {
                    Ok(n) => n.max(1),
                    Err(e) => {
                        return self.fail(
                            Diagnostic::error(span, format!("cannot size the registers of `{}`: {e}", b.name))
                                .with_help("check the layout's extents and strides"),
                        )
                    }
                };
                let explicit = a.kw("layout");
                let shape = match (shape_given, &explicit) {
                    // `X.local(layout=L)`: L's elements, L's order (it must stay inside the registers).
                    (None, Some((v, lsp))) => {
                        let l = match v {
                            Val::Layout(l) => l.clone(),
                            Val::Spec(s) => Layout::Tile(s.clone().into_tile()),
                            other => return self.expected_kind("a layout", other, *lsp),
                        };
                        match l.size(None) {
                            Ok(k) => vec![k],
                            Err(e) => {
                                return self.fail(Diagnostic::error(*lsp, format!("cannot size this layout: {e}")))
                            }
                        }
                    }
                    (None, None) => vec![n],
                    (Some((s, _)), Some(_)) => s,
                    (Some((s, sp)), None) => {
                        let got = s.iter().product::<i64>();
                        if got != n {
                            let sh = fmt_shape(&s);
                            return self.fail(
                                Diagnostic::error(
                                    sp,
                                    format!(
                                        "local view shape {sh} has {got} elements but each thread holds {n} registers"
                                    ),
                                )
                                .with_help(format!("use `{}.local({n})`, or a shape of {n} elements", b.name)),
                            );
                        }
                        s
                    }
                };
                let layout = match explicit {
                    Some((v, lsp)) => {
                        let l = self.layout_for(v, lsp, &shape, &name, MemScope::Local)?;
                        match l.span(None) {
                            Ok(reach) if reach <= n => l,
                            _ => {
                                return self.fail(
                                    Diagnostic::error(
                                        lsp,
                                        format!("this layout reaches past the {n} registers of `{}`", b.name),
                                    )
                                    .with_help("a local view addresses the thread's registers 0..span of its storage"),
                                )
                            }
                        }
                    }
                    None => Layout::Tile(TileLayout::row_major(&shape)),
                };
                (shape, layout, BufferOrigin::LocalView { base })
            }
            Method::View | Method::Sub => {
                let Some((shape, sp)) = shape_given else {
                    return self.fail(
                        Diagnostic::error(span, "`.view` needs the new shape").with_help("write `X.view(32, 8)`"),
                    );
                };
                let layout = match a.kw("layout") {
                    Some((v, lsp)) => self.layout_for(v, lsp, &shape, &name, b.scope)?,
                    None => Layout::Tile(TileLayout::row_major(&shape)),
                };
                // A view may cover part of its base (`[4, 4]:(16, 1)` of a 4x16
                // buffer) but must not reach past the base's storage.
                let (base_span, reach) = match (b.layout.span(None), layout.span(None)) {
                    (Ok(base), Ok(view)) => (base, view),
                    (Err(e), _) | (_, Err(e)) => {
                        return self.fail(
                            Diagnostic::error(sp, format!("cannot size view `{name}` of `{}`: {e}", b.name))
                                .with_label("storage size unknown")
                                .with_help("check the extents and strides of both layouts"),
                        )
                    }
                };
                let capacity = b.shape.iter().product::<i64>().max(base_span);
                if reach > capacity {
                    let s1 = fmt_shape(&shape);
                    return self.fail(
                        Diagnostic::error(
                            sp,
                            format!("view {s1} reaches {reach} elements but `{}` holds {capacity}", b.name),
                        )
                        .with_label("too large for its base")
                        .with_help("a view must fit in its base buffer; check the shape and the layout strides"),
                    );
                }
                (shape, layout, BufferOrigin::View { base })
            }
        };
        a.finish(self)?;
        self.declare_view(name, &b, (shape, layout, origin), span, out)
    }

    /// `V = X.sub[i, :, j, 0:4]`: the view of a sub-region of `X`, as the
    /// reference's numpy-style indexer: an index drops its dim, a slice keeps
    /// it (narrowed), missing trailing dims are kept whole. Its layout is `X`'s
    /// sliced at the region (unit dims dropped), so it prints and re-reads as
    /// `V = X.view(shape, layout=...)`. Indices are compile-time constants.
    pub(crate) fn sub_view(
        &mut self,
        base: BufId,
        idx: &ast::Expr,
        target: &ast::Expr,
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        let (name, _) = self.target_name(Some(target), span, ".sub")?;
        let b = self.buffer(base).clone();
        self.check_viewable(&b, span)?;
        let Val::Sub(s) = self.buffer_subscript(base, idx, idx.span)? else {
            return self.fail(Diagnostic::error(idx.span, "`.sub[...]` takes indices and slices"));
        };
        if s.indices.len() > b.shape.len() {
            let (n, r) = (s.indices.len(), b.shape.len());
            return self.fail(
                Diagnostic::error(idx.span, format!("`{}` has {r} dimension(s) but `.sub` got {n} indices", b.name))
                    .with_label("too many indices")
                    .with_help(format!("shape is {}", fmt_shape(&b.shape))),
            );
        }
        let mut region = Vec::with_capacity(b.shape.len());
        let mut shape = Vec::new();
        for (d, &dim) in b.shape.iter().enumerate() {
            let (begin, extent, keep) = match s.indices.get(d) {
                None => (0, dim, true),
                Some((Index::Point(v), sp)) => (self.sub_const(v.clone(), *sp)?, 1, false),
                Some((Index::Slice(lo, hi, sp), _)) => {
                    let lo = match lo {
                        Some(v) => self.sub_const((**v).clone(), *sp)?,
                        None => 0,
                    };
                    let hi = match hi {
                        Some(v) => self.sub_const((**v).clone(), *sp)?,
                        None => dim,
                    };
                    (lo, hi.saturating_sub(lo), true)
                }
            };
            let sp = s.indices.get(d).map_or(idx.span, |x| x.1);
            if extent <= 0 {
                return self.fail(
                    Diagnostic::error(sp, format!("empty view: extent {extent} in dimension {d} of `{}`", b.name))
                        .with_label("empty slice"),
                );
            }
            let r = Range { begin: Expr { kind: ExprKind::Int(begin), dtype: DType::I32, span: sp }, extent };
            self.check_range(&b, d, &r, sp)?;
            region.push((begin, extent));
            if keep {
                shape.push(extent);
            }
        }
        if shape.is_empty() {
            return self.fail(
                Diagnostic::error(
                    idx.span,
                    format!("`.sub` with an index for every dim of `{}` is one element", b.name),
                )
                .with_label("no dimension left")
                .with_help("keep a dimension with a slice (`i:i + 1`), or index the element itself: `X[i, j]`"),
            );
        }
        let layout = match b.layout.slice(&b.shape, &region, tirx_layout::Fusion::None) {
            Ok(l) => drop_unit_iters(l),
            Err(e) => {
                return self.fail(
                    Diagnostic::error(idx.span, format!("cannot slice the layout of `{}` here: {e}", b.name))
                        .with_label(format!("layout {}", b.layout))
                        .with_help("view a region the layout can express, or copy the region with a tile call"),
                )
            }
        };
        self.declare_view(name, &b, (shape, layout, BufferOrigin::View { base }), span, out)
    }

    /// A view is checked against its base's storage, which a buffer with a
    /// run-time dim 0 has no size for at compile time: such a buffer has no views.
    fn check_viewable(&mut self, b: &Buffer, span: Span) -> R<()> {
        if b.is_symbolic() {
            return self.fail(
                Diagnostic::error(span, format!("`{}` has a run-time dim 0 and has no views", b.name))
                    .with_label("view of a symbolic buffer")
                    .with_help(format!("use regions of `{}` directly", b.name)),
            );
        }
        if b.has_dyn_strides() {
            return self.fail(
                Diagnostic::error(span, format!("`{}` has run-time strides and has no views", b.name))
                    .with_label("view of a buffer with run-time strides")
                    .with_help(format!("use regions of `{}` directly", b.name)),
            );
        }
        Ok(())
    }

    /// Declares the view `name` of `base` (its element type and memory) and
    /// allocates it in place: the tail of `.view`, `.local` and `.sub`, so that
    /// every view is declared alike.
    fn declare_view(
        &mut self,
        name: String,
        base: &Buffer,
        (shape, layout, origin): (Vec<i64>, Layout, BufferOrigin),
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        self.require_device(span)?;
        let id = self.add_buffer(Buffer {
            name: name.clone(),
            shape,
            dtype: base.dtype,
            scope: base.scope,
            layout,
            origin,
            span,
            dyn_outer: None,
            dyn_strides: None,
        });
        self.define(&name, Val::Buffer(id));
        out.push(Stmt { kind: StmtKind::Alloc(id), span });
        Ok(())
    }

    /// A `.sub` index: a compile-time integer.
    fn sub_const(&mut self, v: Val, span: Span) -> R<i64> {
        match v {
            Val::Int(i) => Ok(i),
            Val::Expr(Expr { kind: ExprKind::Int(i), .. }) => Ok(i),
            _ => self.fail(
                Diagnostic::error(span, "`.sub` indices must be compile-time integers")
                    .with_label("depends on a runtime value")
                    .with_help("pass the region to the tile call instead: `Tx.copy(dst, X[i, 0:4, j, 0:4])`"),
            ),
        }
    }

    // ------------------------------------------------------------------ loads, stores, regions

    pub(crate) fn load(&mut self, s: Sub) -> R<Expr> {
        let idx = self.point_indices(&s)?;
        let dtype = self.buffer(s.buf).dtype;
        Ok(Expr { kind: ExprKind::Load(s.buf, idx), dtype, span: s.span })
    }

    /// Checks a scalar access `B[i, j]` and returns its indices.
    pub(crate) fn point_indices(&mut self, s: &Sub) -> R<Vec<Expr>> {
        let b = self.buffer(s.buf).clone();
        if let Some(axes) = thread_axes(&b.layout) {
            return self.fail(
                Diagnostic::error(
                    s.span,
                    format!("cannot index `{}` directly: its layout has thread axes ({axes})", b.name),
                )
                .with_label("scalar access to a thread-partitioned buffer")
                .with_help(format!(
                    "index this thread's registers instead: `{0}_local = {0}.local()` then `{0}_local[i]`",
                    b.name
                )),
            );
        }
        if s.indices.len() != b.shape.len() {
            let (n, r) = (s.indices.len(), b.shape.len());
            return self.fail(
                Diagnostic::error(s.span, format!("`{}` has {r} dimension(s) but {n} index(es) were given", b.name))
                    .with_label("wrong number of indices")
                    .with_help(format!("index every dimension of shape {}", self.shape_text(&b))),
            );
        }
        let mut out = vec![];
        for (d, (ix, sp)) in s.indices.iter().enumerate() {
            let Index::Point(v) = ix else {
                return self.fail(
                    Diagnostic::error(*sp, "a slice is a region, not a scalar")
                        .with_label("region index in a scalar access")
                        .with_help("use an integer index here, or pass the region to a tile primitive"),
                );
            };
            let e = self.int_expr(v.clone(), *sp)?;
            if let ExprKind::Int(i) = e.kind {
                // A run-time dim 0 has no constant upper end (lowering checks it at launch).
                let limit = if d == 0 && b.is_symbolic() { i64::MAX } else { b.shape[d] };
                if i < 0 || i >= limit {
                    return self.fail(
                        Diagnostic::error(
                            *sp,
                            format!(
                                "index {i} is out of bounds for dimension {d} of `{}` (extent {})",
                                b.name, b.shape[d]
                            ),
                        )
                        .with_label("out of bounds")
                        .with_help(format!("`{}` has shape {}", b.name, self.shape_text(&b))),
                    );
                }
            }
            out.push(e);
        }
        Ok(out)
    }

    pub(crate) fn store(&mut self, target: &ast::Expr, v: Val, vspan: Span, span: Span, out: &mut Vec<Stmt>) -> R<()> {
        let tv = self.eval(target)?;
        let Val::Sub(s) = tv else {
            return self.fail(
                Diagnostic::error(target.span, "only buffer elements can be assigned by index")
                    .with_label("not a buffer"),
            );
        };
        let indices = self.point_indices(&s)?;
        self.store_elem(s.buf, indices, v, vspan, target.span, span, out)
    }

    /// `buf[indices] = v` with `v` converted to the buffer's dtype (a literal) or
    /// an error at `vspan` (`tspan`: the element written).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn store_elem(
        &mut self,
        buf: BufId,
        indices: Vec<Expr>,
        v: Val,
        vspan: Span,
        tspan: Span,
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        let b = self.buffer(buf).clone();
        let value = self.scalar(v, vspan)?;
        let value = if value.dtype == b.dtype {
            value
        } else if crate::eval::is_literal(&value) {
            self.lit_as(value, b.dtype, tspan)?
        } else {
            let (vd, bd) = (value.dtype, b.dtype);
            return self.fail(
                Diagnostic::error(vspan, format!("dtype mismatch: storing {vd} into `{}` of {bd}", b.name))
                    .with_label(format!("this is {vd}"))
                    .with_secondary(tspan, format!("element of {bd}"))
                    .with_help(format!("cast it: `T.cast(..., \"{bd}\")`")),
            );
        };
        self.int_literal_fits(&value, tspan)?;
        self.require_device(span)?;
        out.push(Stmt { kind: StmtKind::Store { buf, indices, value }, span });
        Ok(())
    }

    /// A region operand: a bare buffer (all of it) or a subscript.
    pub(crate) fn region(&mut self, v: Val, span: Span, what: &str) -> R<BufferRegion> {
        match v {
            Val::Buffer(b) if self.buffer(b).is_symbolic() => {
                let n = self.buffer(b).name.clone();
                self.fail(
                    Diagnostic::error(
                        span,
                        format!("`{n}` has a run-time dim 0: a region of it needs constant extents"),
                    )
                    .with_label(format!("all of `{n}`"))
                    .with_help(format!("take a tile of it, e.g. `{n}[bx * 64 : bx * 64 + 64, ...]`")),
                )
            }
            Val::Buffer(b) => {
                let zero = |sp| Expr { kind: ExprKind::Int(0), dtype: DType::I32, span: sp };
                let ranges = self.buffer(b).shape.iter().map(|&e| Range { begin: zero(span), extent: e }).collect();
                Ok(BufferRegion { buf: b, ranges, span })
            }
            Val::Sub(s) => self.sub_region(s),
            other => self.expected_kind(&format!("a buffer region for {what}"), &other, span),
        }
    }

    pub(crate) fn sub_region(&mut self, s: Sub) -> R<BufferRegion> {
        let b = self.buffer(s.buf).clone();
        if s.indices.len() > b.shape.len() {
            let (n, r) = (s.indices.len(), b.shape.len());
            return self.fail(
                Diagnostic::error(s.span, format!("`{}` has {r} dimension(s) but the region gives {n}", b.name))
                    .with_label("too many indices")
                    .with_help(format!("shape is {}", self.shape_text(&b))),
            );
        }
        let mut ranges = vec![];
        for d in 0..b.shape.len() {
            let dim = b.shape[d];
            if d == 0 && b.is_symbolic() {
                self.symbolic_dim_slice(&b, &s)?;
            }
            let r = match s.indices.get(d) {
                None => Range { begin: Expr { kind: ExprKind::Int(0), dtype: DType::I32, span: s.span }, extent: dim },
                Some((Index::Point(v), sp)) => Range { begin: self.int_expr(v.clone(), *sp)?, extent: 1 },
                Some((Index::Slice(lo, hi, sp), _)) => {
                    let begin = match lo {
                        Some(v) => self.int_expr((**v).clone(), *sp)?,
                        None => Expr { kind: ExprKind::Int(0), dtype: DType::I32, span: *sp },
                    };
                    let extent = match hi {
                        None => match begin.kind {
                            // Saturating: a huge negative start is then reported out of bounds.
                            ExprKind::Int(b0) => dim.saturating_sub(b0),
                            _ => {
                                return self.fail(
                                    Diagnostic::error(*sp, "an open-ended slice needs a constant start")
                                        .with_help("write `x : x + n`"),
                                )
                            }
                        },
                        Some(v) => {
                            let end = self.int_expr((**v).clone(), *sp)?;
                            let e = self.extent_between(&begin, &end, *sp)?;
                            match e.kind {
                                ExprKind::Int(x) => x,
                                _ => {
                                    return self.fail(
                                        Diagnostic::error(*sp, "region extents must be compile-time constants")
                                            .with_label("extent depends on a runtime value")
                                            .with_help("write the slice as `x : x + n` with a constant `n`"),
                                    )
                                }
                            }
                        }
                    };
                    if extent <= 0 {
                        return self.fail(
                            Diagnostic::error(
                                *sp,
                                format!("empty region: extent {extent} in dimension {d} of `{}`", b.name),
                            )
                            .with_label("empty slice"),
                        );
                    }
                    Range { begin, extent }
                }
            };
            let sp = s.indices.get(d).map_or(s.span, |x| x.1);
            self.check_range(&b, d, &r, sp)?;
            ranges.push(r);
        }
        Ok(BufferRegion { buf: s.buf, ranges, span: s.span })
    }

    /// `(n, 128)`: the shape as the source wrote it (a run-time dim 0 as its text).
    pub(crate) fn shape_text(&self, b: &Buffer) -> String {
        let dims: Vec<String> = (0..b.shape.len()).map(|d| self.dim_text(b, d)).collect();
        if dims.len() == 1 {
            format!("({},)", dims[0])
        } else {
            format!("({})", dims.join(", "))
        }
    }

    fn dim_text(&self, b: &Buffer, d: usize) -> String {
        match (&b.dyn_outer, d) {
            (Some(e), 0) => self.src.get(e.span.lo as usize..e.span.hi as usize).unwrap_or("?").to_string(),
            _ => b.shape[d].to_string(),
        }
    }

    /// Dim 0 of a symbolic buffer has no constant size: a region must give it a
    /// begin and a constant extent (`bx * 64 : bx * 64 + 64`), not `:` or `x:`.
    fn symbolic_dim_slice(&mut self, b: &Buffer, s: &Sub) -> R<()> {
        let open = match s.indices.first() {
            None => Some(s.span),
            Some((Index::Slice(lo, None, sp), _)) => Some(lo.as_ref().map_or(*sp, |_| *sp)),
            _ => None,
        };
        let Some(at) = open else { return Ok(()) };
        self.fail(
            Diagnostic::error(
                at,
                format!("dim 0 of `{}` is a run-time value: the region needs a constant extent there", b.name),
            )
            .with_label("to the end of a run-time dimension")
            .with_help("write the rows as `x : x + k` with a constant `k`"),
        )
    }

    pub(crate) fn check_range(&mut self, b: &Buffer, d: usize, r: &Range, sp: Span) -> R<()> {
        if (self.box_region && b.scope == MemScope::Global) || (self.clip_region && b.scope != MemScope::Local) {
            return Ok(());
        }
        // A run-time dim 0: only its lower end is known here (lowering checks the rest).
        let dim = if d == 0 && b.is_symbolic() { i64::MAX } else { b.shape[d] };
        let oob = match r.begin.kind {
            ExprKind::Int(lo) => lo < 0 || lo.checked_add(r.extent).is_none_or(|hi| hi > dim),
            _ => r.extent > dim,
        };
        if oob {
            let shown = match r.begin.kind {
                ExprKind::Int(lo) => format!("{lo}:{}", lo.saturating_add(r.extent)),
                _ => format!("extent {}", r.extent),
            };
            return self.fail(
                Diagnostic::error(
                    sp,
                    format!(
                        "region {shown} is out of bounds for dimension {d} of `{}` (extent {})",
                        b.name,
                        self.dim_text(b, d)
                    ),
                )
                .with_label("out of bounds")
                .with_help(format!("`{}` has shape {}", b.name, self.shape_text(b))),
            );
        }
        Ok(())
    }
}

/// An element index, `(0, 4)` (one dimension: `(4,)`).
fn fmt_index(c: &[i64]) -> String {
    fmt_shape(c)
}

pub(crate) fn fmt_shape(s: &[i64]) -> String {
    let items: Vec<String> = s.iter().map(i64::to_string).collect();
    if items.len() == 1 {
        format!("({},)", items[0])
    } else {
        format!("({})", items.join(", "))
    }
}

/// The thread axes in a layout's shard, as text, when there are any.
pub(crate) fn thread_axes(l: &Layout) -> Option<String> {
    let tile = match l {
        Layout::Tile(t) => t,
        Layout::Compose(c) => &c.tile,
    };
    let mut axes: Vec<&str> = tile.shard.iter().filter(|i| i.axis.is_thread()).map(|i| i.axis.name()).collect();
    axes.dedup();
    if axes.is_empty() {
        None
    } else {
        Some(axes.join(", "))
    }
}

/// `storage()`: the layout with every thread-axis iter and offset dropped.
pub(crate) fn storage(l: &Layout) -> Layout {
    let strip = |t: &TileLayout| {
        let keep = |v: &Vec<tirx_layout::Iter>| v.iter().copied().filter(|i| i.axis.is_memory()).collect::<Vec<_>>();
        let offset = t.offset.iter().filter(|(a, _)| a.is_memory()).map(|(a, v)| (*a, *v)).collect();
        TileLayout::new(keep(&t.shard), keep(&t.replica), offset)
    };
    match l {
        Layout::Tile(t) => Layout::Tile(strip(t)),
        Layout::Compose(c) => Layout::Compose(tirx_layout::ComposeLayout { swizzle: c.swizzle, tile: strip(&c.tile) }),
    }
}

/// The layout without its extent-1 iters (a sliced-away dim addresses nothing).
fn drop_unit_iters(l: Layout) -> Layout {
    let strip = |t: TileLayout| {
        let keep = |v: Vec<tirx_layout::Iter>| v.into_iter().filter(|i| i.extent != 1).collect::<Vec<_>>();
        TileLayout::new(keep(t.shard), keep(t.replica), t.offset)
    };
    match l {
        Layout::Tile(t) => Layout::Tile(strip(t)),
        Layout::Compose(c) => Layout::Compose(tirx_layout::ComposeLayout { swizzle: c.swizzle, tile: strip(c.tile) }),
    }
}

fn is_trivial_tile(t: &TileLayout) -> bool {
    let nonunit: Vec<_> = t.shard.iter().filter(|i| i.extent != 1).collect();
    t.replica.is_empty()
        && t.offset.values().all(|&v| v == 0)
        && nonunit.len() <= 1
        && nonunit.iter().all(|i| i.axis == Axis::M && i.stride == 1)
}
