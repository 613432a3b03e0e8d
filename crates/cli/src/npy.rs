//! `.npy` arguments and outputs of `tirx sim` / `tirx run`.
#![allow(dead_code)]
use crate::exit::Failure;
use tirx_ir::lir::LKernel;

pub fn load_args(_specs: &[String], _k: &LKernel) -> Result<Vec<Vec<u8>>, Failure> {
    Err(Failure::Internal("npy arguments are not wired yet".into()))
}

pub fn save_outs(_specs: &[String], _k: &LKernel, _bufs: &[Vec<u8>]) -> Result<(), Failure> {
    Err(Failure::Internal("npy outputs are not wired yet".into()))
}
