//! Read a kernel script, parse and check it; render diagnostics on failure.
#![allow(dead_code)]
use crate::exit::Failure;
use tirx_ir::hir::Kernel;

pub struct Source {
    pub name: String,
    pub text: String,
}

pub fn load_kernel(_path: &std::path::Path) -> Result<(Kernel, Source), Failure> {
    Err(Failure::Internal("the script front end is not wired yet".into()))
}
