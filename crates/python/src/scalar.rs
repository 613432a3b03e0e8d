//! A kernel's scalar argument as Python passes it, read by the general launch path and the
//! per-call path on PyTorch tensors alike.

use pyo3::FromPyObject;
use tirx_ir::lir::ScalarValue;

/// A scalar argument from Python: an `int` or a `float` (the caller has rejected `bool`).
#[derive(FromPyObject, Clone, Copy)]
pub enum PyScalar {
    Int(i64),
    Float(f64),
}

impl PyScalar {
    pub fn value(self) -> ScalarValue {
        match self {
            PyScalar::Int(v) => ScalarValue::Int(v),
            PyScalar::Float(v) => ScalarValue::Float(v),
        }
    }
}
