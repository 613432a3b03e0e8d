//! The builder's state — the script's scopes, the kernel being built, the diagnostics, the
//! compile-time work left — and what every part of the build uses on it (`fail`, `charge`,
//! `define`). The statements are built in `build`, expressions evaluated in `eval`, each kind of
//! call in its own module (`tile`, `buffers`, `asynch`, `ptx`, ...), all as methods of [`Builder`].

use crate::value::*;
use std::collections::HashMap;
use tirx_ir::hir::*;
use tirx_ir::{Diagnostic, Span};

pub(crate) type R<T> = Result<T, ()>;

pub(crate) struct Builder<'s> {
    pub src: &'s str,
    pub diags: Vec<Diagnostic>,
    /// Innermost last; `scopes[0]` is the module.
    pub scopes: Vec<HashMap<String, Val>>,
    pub k: Option<KState>,
    pub(crate) kernel_done: Option<Kernel>,
    /// Compile-time work left ([`MAX_WORK`] at the start; see [`Builder::charge`]).
    pub work: usize,
    /// [`crate::MAX_DIAGS`] reached: the remaining statements are skipped.
    pub(crate) stopped: bool,
    /// Evaluating a `copy_async` operand: a global region may leave its tensor (a TMA
    /// box loads the fill value there and stores clipped; lowering refuses it for the
    /// other variants), so its constant bounds are not checked here.
    pub box_region: bool,
    /// Evaluating the operands of a `copy(..., clip=True)`: its memory regions may leave
    /// their buffers (lowering guards each element), so their constant bounds are not checked.
    pub clip_region: bool,
    /// The tile call being built is a `copy(..., clip=True)` (set per call, before its operands).
    pub clip_call: bool,
}

pub(crate) struct KState {
    pub kernel: Kernel,
    /// `T.device_entry()` seen (or its absence already reported).
    pub device: bool,
    pub device_span: Option<Span>,
    /// Names bound to runtime variables in each scope (immutable bindings).
    pub var_scopes: Vec<HashMap<String, Span>>,
    /// Names the kernel assigns at more than one place (or with `+=`): bound to a
    /// runtime value, such a name is a mutable scalar ([`Val::Scalar`]).
    pub mutable: std::collections::HashSet<String>,
    /// The scope ids declared so far, in order (`MBarrier.init` elects thread 0 with them).
    pub scope_ids: Vec<(ScopeIdKind, Vec<VarId>)>,
    /// `T.SMEMPool()`s created so far.
    pub pools: u32,
}

impl<'s> Builder<'s> {
    pub fn new(src: &'s str) -> Builder<'s> {
        let mut module = HashMap::new();
        // Not "__main__": a script's `if __name__ == "__main__":` test harness is skipped.
        module.insert("__name__".to_string(), Val::Str("tirx_script".into()));
        Builder {
            src,
            diags: vec![],
            scopes: vec![module],
            k: None,
            kernel_done: None,
            work: MAX_WORK,
            stopped: false,
            box_region: false,
            clip_region: false,
            clip_call: false,
        }
    }

    pub fn fail<T>(&mut self, d: Diagnostic) -> R<T> {
        self.diags.push(d);
        Err(())
    }

    /// Spends `n` units of compile-time work (items built or copied); past
    /// [`MAX_WORK`] in one script, the expression at `span` is an error.
    pub fn charge(&mut self, n: usize, span: Span) -> R<()> {
        match self.work.checked_sub(n) {
            Some(left) => {
                self.work = left;
                Ok(())
            }
            None => {
                self.work = 0;
                self.fail(
                    Diagnostic::error(span, "too much compile-time work")
                        .with_label(format!("the script builds or copies more than {MAX_WORK} values in all"))
                        .with_help("compute smaller constants; large tables belong in buffers, not in the script"),
                )
            }
        }
    }

    pub fn define(&mut self, name: &str, v: Val) {
        if let Some(s) = self.scopes.last_mut() {
            s.insert(name.to_string(), v);
        }
    }

    pub fn buffer(&self, b: BufId) -> &Buffer {
        let k = self.k.as_ref().expect("buffers exist only inside a kernel");
        &k.kernel.buffers[b.0 as usize]
    }

    pub(crate) fn ks(&mut self) -> &mut KState {
        self.k.as_mut().expect("inside a kernel")
    }
}
