//! # tirx-python: the native part of the `tirx` Python package
//!
//! The pure-Python front end (`python/tirx/script/`) evaluates a decorated
//! function the way the reference does and writes a closure-free kernel
//! script plus a map back into the user's file; this module parses, checks,
//! lowers and generates CUDA for it with the same crates as the `tirx` CLI,
//! renders every diagnostic in the user's file, simulates on host bytes, and
//! launches on device pointers (`docs/python.md`).
//!
//! Nothing panics across the boundary: user errors are `TirxError`, tirx bugs
//! `TirxInternalError` (a subclass), both carrying the rendered diagnostics.

mod gpu;
mod kernel;
mod layout;
mod names;
mod scalar;
pub mod srcmap;
mod torch_call;

use pyo3::create_exception;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

create_exception!(_native, TirxError, PyRuntimeError, "A user error: the diagnostics, rendered in the user's file.");
create_exception!(_native, TirxInternalError, TirxError, "A bug in tirx (the CLI's exit code 2).");

pub(crate) fn user_error(msg: impl Into<String>) -> PyErr {
    TirxError::new_err(msg.into())
}

pub(crate) fn internal_error(msg: impl Into<String>) -> PyErr {
    TirxInternalError::new_err(msg.into())
}

#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// Every tile op and its lowering variants in trial order (the dispatcher's registry).
#[pyfunction]
fn registered_variants() -> std::collections::BTreeMap<String, Vec<String>> {
    let reg = tirx_lower::Registry::cuda();
    tirx_ir::hir::TileOp::all()
        .map(|op| (op.name().to_string(), reg.for_op(op).iter().map(|v| v.name().to_string()).collect()))
        .collect()
}

/// An error the Python front end found itself, rendered like every other diagnostic:
/// `file:line:col`, the line, a caret under `span` (byte offsets into `text`), a help.
#[pyfunction]
#[pyo3(signature = (file, text, message, span = None, help = None))]
fn render_error(file: &str, text: &str, message: &str, span: Option<(u32, u32)>, help: Option<String>) -> String {
    let span = span.map_or(tirx_ir::Span::default(), |(lo, hi)| tirx_ir::Span { lo, hi });
    let mut d = tirx_ir::Diagnostic::error(span, message);
    if let Some(h) = help {
        d = d.with_help(h);
    }
    tirx_ir::diag::render(&[d], file, text, false)
}

/// The `tirx` command (`tirx._cli`, the package's console script): runs the command line
/// `argv` (the program name first) in this process, exactly as the `tirx` binary does, and
/// returns the exit status. A panic exits the process with 2, as the binary's does.
#[pyfunction]
fn cli_main(py: Python<'_>, argv: Vec<String>) -> u8 {
    tirx_cli::install_panic_hook();
    py.detach(|| tirx_cli::run(argv))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TirxError", m.py().get_type::<TirxError>())?;
    m.add("TirxInternalError", m.py().get_type::<TirxInternalError>())?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    m.add_function(wrap_pyfunction!(render_error, m)?)?;
    m.add_function(wrap_pyfunction!(registered_variants, m)?)?;
    m.add_function(wrap_pyfunction!(names::builtins, m)?)?;
    m.add_function(wrap_pyfunction!(kernel::parse, m)?)?;
    m.add_function(wrap_pyfunction!(kernel::parse_file, m)?)?;
    m.add_function(wrap_pyfunction!(gpu::device_info, m)?)?;
    m.add_function(wrap_pyfunction!(gpu::pointer_device, m)?)?;
    m.add_class::<kernel::Parsed>()?;
    m.add_class::<kernel::Lowered>()?;
    m.add_class::<layout::PyLayout>()?;
    m.add_function(wrap_pyfunction!(layout::mma_atom_shape_of, m)?)?;
    m.add_function(wrap_pyfunction!(layout::mma_atom_layout_of, m)?)?;
    m.add_function(wrap_pyfunction!(layout::mma_shared_layout_of, m)?)?;
    m.add_function(wrap_pyfunction!(layout::tcgen05_atom_layout_of, m)?)?;
    m.add_function(wrap_pyfunction!(layout::fragment_layout_of, m)?)?;
    Ok(())
}
