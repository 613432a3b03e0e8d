//! # tirx-script
//!
//! Kernel scripts in the TVMScript TIRx subset → HIR ([`tirx_ir::hir`]).
//!
//! ```text
//! from tvm.script import tirx as T
//! from tvm.script.tirx import tile as Tx
//! from tvm.tirx.layout import S, TileLayout, laneid
//!
//! shape, dtype = (32, 8), "float32"
//! r_layout = TileLayout(S[shape : (1 @ laneid, 1)])
//!
//! @T.prim_func
//! def kernel(A_ptr: T.handle):
//!     A = T.match_buffer(A_ptr, shape, dtype)
//!     T.device_entry(); T.cta_id([1]); T.lane_id([32]); tid = T.thread_id([32])
//!     R = T.alloc_buffer(shape, dtype, scope="local", layout=r_layout)
//!     Tx.warp.copy(R[0:32, 0:8], A[0:32, 0:8])
//! ```
//!
//! Pipeline: `lexer` (tokens with `Indent`/`Dedent`) → `parser` (a Python
//! subset AST; on a syntax error it skips to the end of the statement and
//! goes on) → `build` (statements), `eval` (expressions: module constants and
//! `layouts` are Python values, runtime scalars become HIR; `layout_ops` gives
//! layout values their methods and helpers, docs/layout-model.md §2.14), `buffers`
//! (declarations, loads, stores, regions) and `tile` (tile calls), each
//! checking its operands → `scope_ids` (extent inference and consistency,
//! docs/tile-primitives.md §1.2).
//! Every user error is a [`Diagnostic`] on the exact operand, with a fix when
//! there is one; one run reports all independent errors.
//!
//! [`names`] is the one table of the language's builtin names (`T.*`, `T.cuda.*`,
//! `T.ptx.*`, `Tx.*`, the layout and pipeline modules): the lookups and the "did you
//! mean" lists read it, and the Python package builds its namespaces from it.
//!
//! [`print_kernel`] renders HIR back to the same syntax, so that
//! `parse(print(k))` equals `k` up to spans ([`same_kernel`], [`normalize_spans`]).

mod affine;
mod ast;
mod asynch;
mod atomic;
mod buffers;
mod build;
mod builder;
mod collective;
mod eval;
mod layout_ops;
mod layouts;
mod lexer;
pub mod names;
mod parser;
mod print;
mod ptx;
mod ptx_vec;
mod scope_ids;
mod spans;
mod symbolic;
mod tile;
mod value;

pub use print::print_kernel;

/// Evaluates one layout expression with the script's layout builders,
/// helpers and methods in scope (as `tirx layout` does when an expression uses
/// them): `S[(8, 64)].tile_to((16, 128), (8, 64))`, `mma_shared_layout("float16", 3, (64, 256))`.
/// Errors are diagnostics with byte spans into `text`.
pub fn eval_layout(text: &str) -> Result<tirx_layout::Layout, Vec<Diagnostic>> {
    layout_ops::eval_layout(text)
}

/// Each stage (lexer, parser, builder) stops checking a file once it has
/// collected this many diagnostics, and says so once: a 16 MiB file of `$`
/// must not become 16 million diagnostics (gigabytes, a minute).
pub const MAX_DIAGS: usize = 1000;

/// The message of the diagnostic that says a stage stopped at [`MAX_DIAGS`].
pub const STOPPED: &str = "too many errors: stopped checking the file here";

/// Pushes the "stopped here" diagnostic at `at` unless one is there already.
pub(crate) fn stop_reporting(diags: &mut Vec<tirx_ir::Diagnostic>, at: tirx_ir::Span) {
    if !diags.iter().any(|d| d.message == STOPPED) {
        diags.push(
            tirx_ir::Diagnostic::error(at, STOPPED)
                .with_note(format!("each stage stops after {MAX_DIAGS} diagnostics"))
                .with_help("fix the errors above first"),
        );
    }
}
pub use scope_ids::{infer_scope_extents, Binding};
pub use spans::{normalize_spans, same_kernel};
use tirx_ir::hir::Kernel;
use tirx_ir::Diagnostic;

/// Parses and checks a kernel script. Errors come back as diagnostics (all of
/// them, not just the first); warnings are dropped (see [`parse_kernel_with_warnings`]).
pub fn parse_kernel(name: &str, text: &str) -> Result<Kernel, Vec<Diagnostic>> {
    parse_kernel_with_warnings(name, text).map(|(k, _)| k)
}

/// Like [`parse_kernel`], also returning warnings of a successful parse.
/// `name` (the file name) is not part of the diagnostics, which carry byte
/// spans; render them with `tirx_ir::diag::render(&diags, name, text, color)`.
pub fn parse_kernel_with_warnings(_name: &str, text: &str) -> Result<(Kernel, Vec<Diagnostic>), Vec<Diagnostic>> {
    let mut diags = vec![];
    let tokens = lexer::lex(text, &mut diags);
    let stmts = parser::parse(tokens, &mut diags);
    let (kernel, mut more) = builder::Builder::new(text).module(&stmts, diags.iter().any(Diagnostic::is_error));
    diags.append(&mut more);
    match kernel {
        Some(k) if !diags.iter().any(Diagnostic::is_error) => match infer_scope_extents(&k) {
            Ok(_) => Ok((k, diags)),
            Err(mut errs) => {
                errs.append(&mut diags);
                errs.sort_by_key(|d| (d.span().lo, d.span().hi));
                Err(errs)
            }
        },
        _ => {
            diags.sort_by_key(|d| (d.span().lo, d.span().hi));
            Err(diags)
        }
    }
}
