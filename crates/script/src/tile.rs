//! Tile-primitive calls `Tx.<scope>.<op>(operands..., dispatch=, **config)`:
//! operands bound to the op's row of the tile-op table ([`tirx_ir::op`]),
//! config keys checked against the op and typed there,
//! and the checks made before lowering (copy dtypes and region shapes,
//! elementwise operand shapes).

use crate::ast;
use crate::buffers::fmt_shape;
use crate::builder::{Builder, R};
use crate::value::*;
use tirx_ir::hir::*;
use tirx_ir::op::{
    self, normalize_axes, AttrKind, AttrValue, ConfigKey, Family, RawConfig, Slot, SlotDefault, SlotKind,
};
use tirx_ir::{Diagnostic, Span};
use tirx_layout::{ExecScope, Layout};

impl Builder<'_> {
    // ------------------------------------------------------------------ tile calls

    pub(crate) fn tile_call(&mut self, scope: ExecScope, op: TileOp, args: &[ast::Arg], span: Span) -> R<TileCall> {
        let (pos, kw) = self.eval_args(args)?;
        self.tile_call_of(scope, op, pos, kw, span)
    }

    /// A tile call from its evaluated operands (also what other statements desugar to).
    pub(crate) fn tile_call_of(
        &mut self,
        scope: ExecScope,
        op: TileOp,
        pos: Vec<crate::eval::Posarg>,
        kw: Vec<crate::eval::Kwarg>,
        span: Span,
    ) -> R<TileCall> {
        let sig = op.operands();
        let mut slots: Vec<Option<(Val, Span)>> = vec![None; sig.len()];
        if pos.len() > sig.len() {
            let sp = pos[sig.len()].1;
            return self.fail(
                Diagnostic::error(sp, format!("`{}` takes at most {} operands", op.name(), sig.len()))
                    .with_label("extra operand")
                    .with_help(format!("signature: {}", op.describe())),
            );
        }
        for (i, p) in pos.into_iter().enumerate() {
            slots[i] = Some(p);
        }
        let mut config = vec![];
        let mut dispatch = None;
        for (k, ksp, v, vsp) in kw {
            if let Some(i) = sig.iter().position(|s| s.names.contains(&k.as_str())) {
                if slots[i].is_some() {
                    return self.fail(
                        Diagnostic::error(ksp, format!("operand `{k}` given twice"))
                            .with_label("already given by position"),
                    );
                }
                slots[i] = Some((v, vsp));
                continue;
            }
            match (k.as_str(), v) {
                ("dispatch", Val::Str(s)) => dispatch = Some(s),
                ("dispatch", Val::None) => {}
                ("dispatch", other) => return self.expected_kind("a variant name string", &other, vsp),
                ("workspace", Val::None) => {}
                ("workspace", _) => {
                    return self.fail(
                        Diagnostic::error(ksp, "`workspace=` is not supported by these tile primitives")
                            .with_help("remove it"),
                    )
                }
                (_, v) => {
                    let raw = match v {
                        Val::Int(i) => RawConfig::Int(i),
                        Val::Float(f) => RawConfig::Float(f),
                        Val::Str(s) => RawConfig::Str(s),
                        Val::Bool(b) => RawConfig::Bool(b),
                        other => return self.expected_kind(&format!("a constant for config `{k}`"), &other, vsp),
                    };
                    config.push(self.config_entry(op, &k, ksp, &raw, vsp)?);
                }
            }
        }
        // `clip=True`: a memory region of the copy may leave its buffer (its elements outside are skipped).
        self.clip_call = op == TileOp::Copy
            && op.position(&op::CLIP).is_some_and(|i| matches!(slots.get(i), Some(Some((Val::Bool(true), _)))));
        let axes_given = op.position(&op::AXES).is_some_and(|i| slots.get(i).is_some_and(|s| s.is_some()));
        let mut out = vec![];
        let mut spans = vec![span; sig.len()];
        for (i, s) in sig.iter().enumerate() {
            let arg = match slots[i].take() {
                Some((v, sp)) => {
                    spans[i] = sp;
                    self.tile_arg(op, s, v, sp)?
                }
                None => match s.default {
                    SlotDefault::Required => {
                        return self.fail(
                            Diagnostic::error(span, format!("`{}` is missing its `{}` operand", op.name(), s.names[0]))
                                .with_label("in this call")
                                .with_help(format!("signature: {}", op.describe())),
                        )
                    }
                    SlotDefault::Dst => out.first().cloned().unwrap_or(TileArg::None),
                    SlotDefault::Absent => TileArg::None,
                    SlotDefault::Attr(d) => TileArg::Attr(d.value()),
                },
            };
            out.push(arg);
        }
        if op.family() == Family::Reduce && !axes_given {
            self.infer_lane_axes(op, &mut out);
        }
        let call = TileCall { op, scope, args: out, config, dispatch, span };
        self.check_tile(&call, &spans)?;
        Ok(call)
    }

    pub(crate) fn tile_arg(&mut self, op: TileOp, slot: &Slot, v: Val, sp: Span) -> R<TileArg> {
        let is_region = match &v {
            Val::Buffer(_) => true,
            Val::Sub(s) => s.indices.iter().any(|(i, _)| matches!(i, Index::Slice(..))),
            _ => false,
        };
        let what = format!("`{}` of `{}`", slot.names[0], op.name());
        match slot.kind {
            SlotKind::Attr(kind) => self.attr_value(kind, v, sp, &what).map(TileArg::Attr),
            SlotKind::Barrier => self.mbar_ref(v, sp).map(TileArg::Barrier),
            SlotKind::Mask => self.mask_fn(v, sp, &what).map(TileArg::Mask),
            SlotKind::Region => {
                self.box_region = op == TileOp::CopyAsync;
                self.clip_region = self.clip_call;
                let r = self.region(v, sp, &what);
                self.box_region = false;
                self.clip_region = false;
                Ok(TileArg::Region(r?))
            }
            SlotKind::RegionOrScalar if is_region => Ok(TileArg::Region(self.region(v, sp, &what)?)),
            SlotKind::RegionOrScalar | SlotKind::Scalar => {
                if let Val::Buffer(_) = v {
                    return self.fail(
                        Diagnostic::error(sp, format!("{what} must be a scalar, found a buffer"))
                            .with_help("pass a constant or an element like `s[0]`"),
                    );
                }
                Ok(TileArg::Scalar(self.scalar(v, sp)?))
            }
        }
    }

    /// `lambda i, j: cond`: each parameter an int32 variable (an element's coordinate in the
    /// region), the body evaluated with them bound in a scope of its own.
    fn mask_fn(&mut self, v: Val, sp: Span, what: &str) -> R<MaskFn> {
        let Val::Lambda(l) = v else {
            return self.fail(
                Diagnostic::error(sp, format!("{what} must be a lambda of the element's coordinates"))
                    .with_help("write `mask=lambda i, j: j > i` (one parameter per dim of the region)"),
            );
        };
        let (params, body) = *l;
        self.scopes.push(Default::default());
        self.ks().var_scopes.push(Default::default());
        let vars: Vec<VarId> = params.iter().map(|(n, s)| self.new_var(n, tirx_ir::DType::I32, *s)).collect();
        let cond = self.eval(&body).and_then(|c| self.scalar(c, body.span));
        self.ks().var_scopes.pop();
        self.scopes.pop();
        let cond = cond?;
        if cond.dtype != tirx_ir::DType::Bool {
            return self.fail(
                Diagnostic::error(
                    body.span,
                    format!("{what}: the lambda gives a {} value, not a condition", cond.dtype),
                )
                .with_help("compare coordinates: `lambda i, j: j > i + offset`"),
            );
        }
        Ok(MaskFn { params: vars, cond })
    }

    /// A compile-time op parameter: `axes=-1`, `axes=(0, 2)`, `accum=True`.
    fn attr_value(&mut self, kind: AttrKind, v: Val, sp: Span, what: &str) -> R<AttrValue> {
        let got = match (kind, &v) {
            (AttrKind::Bool, Val::Bool(b)) => Some(AttrValue::Bool(*b)),
            (AttrKind::Choice(names), Val::Str(s)) => {
                names.iter().find(|n| **n == s.as_str()).map(|n| AttrValue::Choice(n))
            }
            (AttrKind::Axes, Val::Int(i)) => Some(AttrValue::Axes(vec![*i])),
            (AttrKind::Axes, Val::Tuple(xs) | Val::List(xs)) => xs
                .iter()
                .map(|x| match x {
                    Val::Int(i) => Some(*i),
                    _ => None,
                })
                .collect::<Option<Vec<i64>>>()
                .map(AttrValue::Axes),
            _ => None,
        };
        match got {
            Some(a) => Ok(a),
            None => self.fail(
                Diagnostic::error(sp, format!("{what} must be {}, found {}", kind.expects(), v.kind_name()))
                    .with_label("not a compile-time constant of that kind")
                    .with_help(format!("pass {}", kind.expects())),
            ),
        }
    }

    /// `key=value` typed by the tile-op table: an unknown key, a key the op
    /// does not take and a value of the wrong kind are errors at the keyword.
    fn config_entry(&mut self, op: TileOp, k: &str, ksp: Span, raw: &RawConfig, vsp: Span) -> R<ConfigEntry> {
        let Some(key) = ConfigKey::from_name(k) else {
            let mut d = Diagnostic::error(ksp, format!("unknown config key `{k}` for `{}`", op.name()))
                .with_label("not a config key");
            let keys = op.spec().config.iter().map(|c| c.name());
            d = match closest(k, keys.clone()) {
                Some(c) => d.with_help(format!("did you mean `{c}`?")),
                None => d.with_help(format!("`{}` takes: {}", op.name(), keys.collect::<Vec<_>>().join(", "))),
            };
            return self.fail(d);
        };
        if !op.spec().config.contains(&key) {
            let takers: Vec<&str> =
                TileOp::all().filter(|o| o.spec().config.contains(&key)).map(|o| o.name()).collect();
            return self.fail(
                Diagnostic::error(ksp, format!("`{k}` does not apply to `{}`", op.name()))
                    .with_label(format!("not a config key of {} ops", op.family().name()))
                    .with_help(format!("`{k}` applies to: {}; remove it here", takers.join(", "))),
            );
        }
        match key.parse(raw) {
            Ok(value) => Ok(ConfigEntry { key, value, span: Span { lo: ksp.lo, hi: vsp.hi } }),
            Err(m) => self.fail(Diagnostic::error(vsp, m.clone()).with_label("unsupported value").with_help(m)),
        }
    }

    /// Checks before lowering, by the op's family: copy dtypes and region
    /// shapes; elementwise operands broadcast to the destination.
    /// `spans[i]` is where operand `i` was written (the call when it was not).
    pub(crate) fn check_tile(&mut self, call: &TileCall, spans: &[Span]) -> R<()> {
        match call.op.family() {
            Family::Copy | Family::CopyAsync | Family::Permute => self.check_copy(call),
            Family::Elementwise => self.check_broadcast(call),
            Family::Reduce => self.check_reduce(call, spans[2]),
            // Dtypes and fragments are the variants' to check (typed declines).
            Family::Gemm => self.check_gemm(call),
        }
    }

    /// `axes` not given: the last dim, unless the destination says otherwise — it has the
    /// extents the source keeps when its thread-distributed dims (every iter of the dim on a
    /// thread axis: `S[(32, 2, 2):(1@laneid, 2, 4)]`'s dim 0) are reduced, and not those of
    /// the last dim. Then the reduction is over those dims, as the reference's layout-driven
    /// warp reductions are. Only for whole-buffer register operands, whose layout is the region's.
    fn infer_lane_axes(&mut self, op: TileOp, args: &mut [TileArg]) {
        let (Some(ai), Some(si), Some(di)) =
            (op.position(&op::AXES), op.position(&op::SRC_REGION), op.position(&op::DST))
        else {
            return;
        };
        let (TileArg::Region(src), TileArg::Region(dst)) = (&args[si], &args[di]) else { return };
        let sb = self.buffer(src.buf);
        let se = extents(src);
        let whole = se == sb.shape && src.ranges.iter().all(|r| matches!(r.begin.kind, ExprKind::Int(0)));
        let Layout::Tile(tile) = &sb.layout else { return };
        if !whole || sb.scope != MemScope::Local || se.is_empty() {
            return;
        }
        let Ok((g, seps)) = tile.group(&se) else { return };
        let lanes: Vec<usize> = (0..se.len())
            .filter(|&d| {
                let its = g.shard[seps[d]..seps[d + 1]].iter().filter(|i| i.extent > 1);
                se[d] > 1 && its.clone().count() > 0 && its.clone().all(|i| i.axis.is_thread())
            })
            .collect();
        let de = squeezed(&extents(dst));
        let kept = |axes: &[usize]| -> Vec<i64> {
            squeezed(&se.iter().enumerate().filter(|(d, _)| !axes.contains(d)).map(|(_, &e)| e).collect::<Vec<_>>())
        };
        if !lanes.is_empty() && kept(&[se.len() - 1]) != de && kept(&lanes) == de {
            args[ai] = TileArg::Attr(AttrValue::Axes(lanes.iter().map(|&d| d as i64).collect()));
        }
    }

    /// Reduction operands: one dtype, valid `axes` of the source region, and a
    /// destination covering exactly the source's kept (spatial) extents.
    fn check_reduce(&mut self, call: &TileCall, axes_span: Span) -> R<()> {
        let (Some(dst), Some(src), Some(TileArg::Attr(AttrValue::Axes(axes)))) =
            (call.region(&op::DST), call.region(&op::SRC_REGION), call.arg(&op::AXES))
        else {
            return Ok(());
        };
        let (db, sb) = (self.buffer(dst.buf).clone(), self.buffer(src.buf).clone());
        if db.dtype != sb.dtype {
            return self.fail(
                Diagnostic::error(
                    src.span,
                    format!(
                        "reduction dtype mismatch: `{}` is {} but `{}` is {}",
                        sb.name, sb.dtype, db.name, db.dtype
                    ),
                )
                .with_label(format!("{}", sb.dtype))
                .with_secondary(dst.span, format!("{}", db.dtype))
                .with_help("reduce into a buffer of the source's dtype, then convert with `Tx.cast`"),
            );
        }
        let se = extents(src);
        let axes = match normalize_axes(axes, se.len()) {
            Ok(a) => a,
            Err(m) => {
                return self.fail(
                    Diagnostic::error(axes_span, format!("bad `axes` for `{}`: {m}", call.op.name()))
                        .with_secondary(src.span, format!("source region {}", fmt_shape(&se)))
                        .with_help("name dims of the source region, e.g. `axes=-1` for the last"),
                )
            }
        };
        let kept: Vec<i64> = se.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &e)| e).collect();
        let de = extents(dst);
        // Registers may also keep each reduced dim at a divisor of its extent: one
        // value per thread that dim is spread over (the variants check the threads).
        let per_thread = db.scope == MemScope::Local
            && sb.scope == MemScope::Local
            && de.len() == se.len()
            && (0..se.len()).all(|d| if axes.contains(&d) { se[d] % de[d] == 0 } else { de[d] == se[d] });
        if squeezed(&kept) != squeezed(&de) && !per_thread {
            return self.fail(
                Diagnostic::error(
                    dst.span,
                    format!(
                        "the destination region {} does not match the kept extents {} of the source {} reduced over axes {:?}",
                        fmt_shape(&de),
                        fmt_shape(&kept),
                        fmt_shape(&se),
                        axes
                    ),
                )
                .with_label(format!("region {}", fmt_shape(&de)))
                .with_secondary(src.span, format!("source {}", fmt_shape(&se)))
                .with_help("give the destination the source's extents without the reduced dims (unit dims may be kept); a register destination may instead keep each reduced dim at the number of threads it is spread over (one value per thread)"),
            );
        }
        Ok(())
    }

    /// Gemm operands are matrices that multiply, unit dims dropped: for `gemm`,
    /// A is M×K (K×M with `transpose_A`), B is K×N (N×K with `transpose_B`), C
    /// and D are M×N; for `gemm_async`, A is M×K (K×M with `transA`), B is N×K
    /// (K×N with `transB`), D is M×N.
    fn check_gemm(&mut self, call: &TileCall) -> R<()> {
        let is_async = call.op == TileOp::GemmAsync;
        // (D, transA, transB, B is stored N×K unless flagged); C only for `gemm`.
        let (d_slot, ta, tb, b_nk) = if is_async {
            (&op::ASYNC_D, &op::ASYNC_TRANS_A, &op::ASYNC_TRANS_B, true)
        } else {
            (&op::GEMM_D, &op::TRANS_A, &op::TRANS_B, false)
        };
        let (Some(d), Some(a), Some(b)) = (call.region(d_slot), call.region(&op::GEMM_A), call.region(&op::GEMM_B))
        else {
            return Ok(());
        };
        let c = if is_async { None } else { call.region(&op::GEMM_C) };
        let mut dims = vec![];
        for (name, r) in [("D", Some(d)), ("A", Some(a)), ("B", Some(b)), ("C", c)] {
            let Some(r) = r else { continue };
            let e = squeezed(&extents(r));
            if e.len() != 2 {
                return self.fail(
                    Diagnostic::error(
                        r.span,
                        format!(
                            "{} operand {name} must be a matrix: region {} has {} dims above 1",
                            call.op.name(),
                            fmt_shape(&extents(r)),
                            e.len()
                        ),
                    )
                    .with_label(format!("{name} is {}", fmt_shape(&extents(r))))
                    .with_help("give every gemm operand a 2-D region (unit dims are allowed)"),
                );
            }
            dims.push((e[0], e[1]));
        }
        let (dm, dn) = dims[0];
        let (am, ak) = if call.flag(ta) { (dims[1].1, dims[1].0) } else { dims[1] };
        let (bk, bn) = if call.flag(tb) != b_nk { (dims[2].1, dims[2].0) } else { dims[2] };
        let mismatch = if ak != bk {
            Some((b, format!("A has K = {ak} but B has K = {bk}")))
        } else if (am, bn) != (dm, dn) {
            Some((d, format!("D is {dm}×{dn} but A·B is {am}×{bn}")))
        } else {
            c.filter(|_| dims[3] != (dm, dn))
                .map(|c| (c, format!("C is {}×{} but D is {dm}×{dn}", dims[3].0, dims[3].1)))
        };
        let help = if is_async {
            "A is M×K (K×M with transA=True), B is N×K (K×N with transB=True), D is M×N"
        } else {
            "A is M×K (K×M with transpose_A=True), B is K×N (N×K with transpose_B=True), C and D are M×N"
        };
        match mismatch {
            None => Ok(()),
            Some((r, m)) => self.fail(
                Diagnostic::error(r.span, format!("{} operands do not multiply: {m}", call.op.name()))
                    .with_label("this operand")
                    .with_help(help),
            ),
        }
    }

    /// Copy operands: one dtype, equal regions once unit dims are dropped.
    fn check_copy(&mut self, call: &TileCall) -> R<()> {
        let (Some(dst), Some(src)) = (call.region(&op::DST), call.region(&op::SRC_REGION)) else { return Ok(()) };
        let (db, sb) = (self.buffer(dst.buf).clone(), self.buffer(src.buf).clone());
        // `permute_layout` says what it is (the reference's messages: "dtype mismatch", "slice shape mismatch").
        let (what, regions) = match call.op {
            TileOp::PermuteLayout => ("permute_layout", "permute_layout slice shape mismatch"),
            _ => ("copy", "copy operands cover different regions"),
        };
        if db.dtype != sb.dtype {
            return self.fail(
                Diagnostic::error(
                    src.span,
                    format!("{what} dtype mismatch: `{}` is {} but `{}` is {}", sb.name, sb.dtype, db.name, db.dtype),
                )
                .with_label(format!("{}", sb.dtype))
                .with_secondary(dst.span, format!("{}", db.dtype))
                .with_help("copy between buffers of one dtype; convert with `Tx.cast(dst, src)`"),
            );
        }
        let (de, se) = (extents(dst), extents(src));
        let (ds, ss) = (squeezed(&de), squeezed(&se));
        // An async bulk copy pairs elements in row-major order (TMA boxes of another
        // rank): its variants decide which shapes they move; the counts must match.
        let count = |e: &[i64]| e.iter().product::<i64>();
        let async_ok = call.op.family() == Family::CopyAsync && count(&de) == count(&se);
        if ds != ss && !async_ok {
            let (de, se) = (fmt_shape(&de), fmt_shape(&se));
            return self.fail(
                Diagnostic::error(
                    src.span,
                    format!(
                        "{regions}: dst {de} vs src {se} (unit dims dropped: {} vs {})",
                        fmt_shape(&ds),
                        fmt_shape(&ss)
                    ),
                )
                .with_label(format!("src region {se}"))
                .with_secondary(dst.span, format!("dst region {de}"))
                .with_help("make both regions the same shape, or reshape one buffer with `.view(...)`"),
            );
        }
        Ok(())
    }

    /// Every region operand of an elementwise op must match the destination
    /// region: NumPy broadcast (right-aligned, each dim equal or 1), or equal
    /// extents once unit dims are dropped.
    pub(crate) fn check_broadcast(&mut self, call: &TileCall) -> R<()> {
        let Some(TileArg::Region(dst)) = call.args.first() else { return Ok(()) };
        let want = extents(dst);
        for a in &call.args[1..] {
            let TileArg::Region(r) = a else { continue };
            let got = extents(r);
            let broadcasts =
                got.len() <= want.len() && got.iter().rev().zip(want.iter().rev()).all(|(g, w)| g == w || *g == 1);
            let fits = broadcasts || squeezed(&got) == squeezed(&want);
            if !fits {
                let (got, want) = (fmt_shape(&got), fmt_shape(&want));
                return self.fail(
                    Diagnostic::error(
                        r.span,
                        format!(
                            "operand region {got} does not match the destination region {want} of `{}`",
                            call.op.name()
                        ),
                    )
                    .with_label(format!("region {got}"))
                    .with_secondary(dst.span, format!("destination {want}"))
                    .with_help(
                        "give the operand the destination's extents, or extent 1 in the dims it broadcasts over",
                    ),
                );
            }
        }
        Ok(())
    }
}

/// A region's extents, one per dimension.
fn extents(r: &BufferRegion) -> Vec<i64> {
    r.ranges.iter().map(|x| x.extent).collect()
}

/// `extents` without its unit dimensions.
fn squeezed(extents: &[i64]) -> Vec<i64> {
    extents.iter().copied().filter(|&e| e != 1).collect()
}
