//! `T.cuda.atomic_add(p, v)` (docs/tile-primitives.md §8.11): an atomic read-modify-write of
//! one element of a global or shared integer buffer, bound to a name (`old = ...`, the value
//! before the addition) or a statement of its own (the value dropped), through
//! [`StmtKind::Atomic`].

use crate::ast;
use crate::builder::{Builder, R};
use crate::eval::Args;
use crate::names::atomic_name;
use crate::value::*;
use tirx_ir::hir::*;
use tirx_ir::lir::ATOMIC_TYPES;
use tirx_ir::{Diagnostic, Span};

impl Builder<'_> {
    /// `[old =] T.cuda.atomic_<op>(p, value)` (with `ann`, the annotation of `old: T.int32 = ...`).
    pub(crate) fn atomic(
        &mut self,
        op: AtomicOp,
        args: &[ast::Arg],
        target: Option<&ast::Expr>,
        ann: Option<(Val, Span)>,
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        let fname = format!("T.cuda.{}", atomic_name(op));
        let name = match target.map(|t| &t.kind) {
            None => None,
            Some(ast::ExprKind::Name(n)) => Some(n.clone()),
            Some(_) => {
                return self.fail(
                    Diagnostic::error(target.map_or(span, |t| t.span), format!("`{fname}` binds a plain name"))
                        .with_help(format!("write `old = {fname}(p, v)`")),
                )
            }
        };
        let tspan = target.map_or(span, |t| t.span);
        if let Some(n) = &name {
            // (as a collective's: the statement declares its name; a mutable scalar's store
            // would need a second, hidden binding, which the printed kernel could not name)
            if self.is_mutable(n, &Val::Int(0)) {
                return self.fail(
                    Diagnostic::error(
                        tspan,
                        format!("`{fname}` binds a new name; the kernel assigns `{n}` elsewhere too"),
                    )
                    .with_label("a mutable scalar")
                    .with_help(format!("bind it once and assign that: `t = {fname}(p, v)`, then `{n} = t`")),
                );
            }
            self.check_rebind(n, tspan)?;
        }
        let (pos, kw) = self.eval_args(args)?;
        let mut a = Args::new(fname.clone(), pos, kw, span);
        let (p, ps) = a.req(self, "ptr")?;
        let (v, vs) = a.req(self, "value")?;
        a.finish(self)?;
        let elem = self.atomic_elem(p, ps, &fname)?;
        let dtype = self.buffer(elem.buf).dtype;
        let value = self.scalar(v, vs)?;
        let value = match value.kind {
            ExprKind::Int(_) if value.dtype != dtype => {
                let e = self.lit_as(value, dtype, vs)?;
                self.int_literal_fits(&e, vs)?;
                e
            }
            _ if value.dtype != dtype => {
                let from = value.dtype;
                return self.fail(
                    Diagnostic::error(vs, format!("`{fname}` adds a {from} value to a {dtype} element"))
                        .with_label(format!("this is {from}"))
                        .with_help(format!("cast it: `T.cast(..., \"{dtype}\")`")),
                );
            }
            _ => value,
        };
        self.binding_annotation(ann, dtype, &format!("`{fname}` of a {dtype} element returns {dtype}"))?;
        self.require_device(span)?;
        let var = name.map(|n| self.new_var(&n, dtype, tspan));
        out.push(Stmt { kind: StmtKind::Atomic { var, atomic: Atomic { op, elem, value } }, span });
        Ok(())
    }

    /// The element operand `W.ptr_to([i])`: global or shared, of an atomic's dtype.
    fn atomic_elem(&mut self, v: Val, sp: Span, fname: &str) -> R<MbarRef> {
        let Val::Ptr(buf, index) = v else {
            return self.expected_kind("an element's address like `W.ptr_to([i])`", &v, sp);
        };
        let b = self.buffer(buf);
        let (n, sc, dt) = (b.name.clone(), b.scope.name(), b.dtype);
        if b.scope == MemScope::Local {
            return self.fail(
                Diagnostic::error(sp, format!("`{fname}` of `{n}`, a local buffer"))
                    .with_label("registers are a thread's own")
                    .with_help("atomics are for global or shared memory; a thread updates its own registers with a plain store"),
            );
        }
        if !ATOMIC_TYPES.contains(&dt) {
            let ok: Vec<&str> = ATOMIC_TYPES.iter().map(|t| t.name()).collect();
            return self.fail(
                Diagnostic::error(sp, format!("`{fname}` of `{n}` ({sc} {dt})"))
                    .with_label(format!("{dt} element"))
                    .with_help(format!("atomics take {} elements", ok.join(", "))),
            );
        }
        Ok(MbarRef { buf, index, span: sp })
    }
}
