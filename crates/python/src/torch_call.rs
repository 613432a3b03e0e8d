//! The per-call path of a kernel called on PyTorch CUDA tensors (`Kernel.__call__`): every
//! argument read and checked here, without a Python frame, then one launch. A call this path
//! does not take on (another array library, a dtype, shape, contiguity or device that is wrong,
//! a scalar that is out of range or of the wrong kind) returns `false` and Python's general
//! path (`tirx.device.launch`) runs it or says what is wrong: the two accept the same calls.

use crate::scalar::PyScalar;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyTuple, PyType};
use tirx_ir::lir::{LKernel, ParamRef};
use tirx_ir::DType;

/// What the torch path needs of PyTorch, given once per kernel by `tirx.device`.
pub struct TorchSig {
    /// `torch.Tensor` and `torch.nn.Parameter`: other subclasses (fake, functional, distributed
    /// tensors) take the general path.
    tensor: [Py<PyType>; 2],
    /// Per buffer parameter, the `torch.dtype` its tensor must have (None: PyTorch has none).
    dtypes: Vec<Option<Py<PyAny>>>,
    /// `torch._C._cuda_getCurrentRawStream`.
    stream: Py<PyAny>,
    /// The call's arguments in signature order.
    slots: Vec<Slot>,
}

/// One argument of a call: a buffer, or a scalar of its parameter's dtype.
#[derive(Clone, Copy)]
enum Slot {
    Buffer,
    Scalar(DType),
}

impl TorchSig {
    pub fn new(k: &LKernel, tensor: [Py<PyType>; 2], dtypes: Vec<Option<Py<PyAny>>>, stream: Py<PyAny>) -> Self {
        let slots = k
            .signature()
            .into_iter()
            .filter_map(|p| match p {
                ParamRef::Buffer(_) => Some(Slot::Buffer),
                ParamRef::Scalar(v) => Some(Slot::Scalar(k.var(v).dtype)),
                ParamRef::TensorMap(_) => None,
            })
            .collect();
        TorchSig { tensor, dtypes, stream, slots }
    }
}

/// A checked call: the scalar values, then the buffers' tensors in parameter order.
pub struct Call<'py> {
    pub scalars: Vec<PyScalar>,
    pub tensors: Vec<Bound<'py, PyAny>>,
}

/// The arguments of a call split by kind, the scalars checked (`None`: the general path).
pub fn split<'py>(sig: &TorchSig, args: &Bound<'py, PyTuple>) -> Option<Call<'py>> {
    if args.len() != sig.slots.len() {
        return None;
    }
    let mut call = Call { scalars: Vec::new(), tensors: Vec::with_capacity(sig.dtypes.len()) };
    for (slot, a) in sig.slots.iter().zip(args.iter()) {
        match *slot {
            Slot::Buffer => call.tensors.push(a),
            Slot::Scalar(dtype) => call.scalars.push(scalar(dtype, &a)?),
        }
    }
    Some(call)
}

/// Where round-to-nearest of a float dtype reaches inf (max + half an ulp): a finite argument
/// at least this large is an error of the general path.
fn inf_at(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 65520.0,
        DType::BF16 => (2.0 - 2f64.powi(-8)) * 2f64.powi(127),
        DType::F32 => (2.0 - 2f64.powi(-24)) * 2f64.powi(127),
        _ => f64::INFINITY,
    }
}

/// A Python `int` in an integer parameter's range, or an `int` or `float` for a float one
/// that does not overflow it: as `Kernel.scalar_args` takes them.
fn scalar(dtype: DType, a: &Bound<'_, PyAny>) -> Option<PyScalar> {
    if a.is_instance_of::<PyBool>() {
        return None;
    }
    if let Some((lo, hi)) = dtype.int_range() {
        let v: i64 = a.cast::<PyInt>().ok()?.extract().ok()?;
        return (lo..=hi).contains(&v).then_some(PyScalar::Int(v));
    }
    if a.is_instance_of::<PyFloat>() {
        let v: f64 = a.extract().ok()?;
        return (!v.is_finite() || v.abs() < inf_at(dtype)).then_some(PyScalar::Float(v));
    }
    let v: f64 = a.cast::<PyInt>().ok()?.extract().ok()?;
    (v.abs() < inf_at(dtype)).then_some(PyScalar::Float(v))
}

/// The device and the data pointers of `tensors` when each is a CUDA `torch.Tensor` of its
/// parameter's dtype, with `layout(i)`'s shape and strides (`None`: contiguous), all on one
/// device (`None` otherwise).
pub fn pointers(
    sig: &TorchSig,
    tensors: &[Bound<'_, PyAny>],
    layout: impl Fn(usize) -> (Vec<i64>, Option<Vec<i64>>),
) -> PyResult<Option<(usize, Vec<u64>)>> {
    let mut ptrs = Vec::with_capacity(tensors.len());
    let mut device: Option<i64> = None;
    for (i, (t, want)) in tensors.iter().zip(&sig.dtypes).enumerate() {
        let py = t.py();
        let Some(want) = want else { return Ok(None) };
        let ty = t.get_type();
        if !sig.tensor.iter().any(|x| ty.is(x.bind(py))) || !t.getattr(intern!(py, "dtype"))?.is(want.bind(py)) {
            return Ok(None);
        }
        let got = t.getattr(intern!(py, "shape"))?;
        let got = got.cast::<PyTuple>().map_err(PyErr::from)?;
        let (shape, strides) = layout(i);
        if got.len() != shape.len() {
            return Ok(None);
        }
        for (d, w) in got.iter().zip(&shape) {
            if d.extract::<i64>()? != *w {
                return Ok(None);
            }
        }
        let laid_out = match strides {
            None => t.call_method0(intern!(py, "is_contiguous"))?.is_truthy()?,
            Some(want) => {
                let got = t.call_method0(intern!(py, "stride"))?.extract::<Vec<i64>>()?;
                // (a dim of one element has any stride)
                got.len() == want.len() && got.iter().zip(&want).zip(&shape).all(|((g, w), &n)| n == 1 || g == w)
            }
        };
        if !laid_out {
            return Ok(None);
        }
        let d: i64 = t.call_method0(intern!(py, "get_device"))?.extract()?;
        if d < 0 || device.is_some_and(|x| x != d) {
            return Ok(None);
        }
        let ptr: u64 = t.call_method0(intern!(py, "data_ptr"))?.extract()?;
        if !ptr.is_multiple_of(ARRAY_ALIGN) {
            return Ok(None); // (the general path says why)
        }
        device = Some(d);
        ptrs.push(ptr);
    }
    Ok(device.map(|d| (d as usize, ptrs)))
}

/// The alignment a kernel assumes of every array's start (its vector accesses; docs/lir.md).
const ARRAY_ALIGN: u64 = 16;

/// PyTorch's current stream on `device`.
pub fn stream(sig: &TorchSig, py: Python<'_>, device: usize) -> PyResult<usize> {
    sig.stream.bind(py).call1((device,))?.extract()
}
