"""Kernel calls on device arrays (docs/python.md §5.2).

A call takes one CUDA array per kernel parameter: a PyTorch tensor, a CuPy array, or anything
with ``__cuda_array_interface__`` or DLPack. Each is checked against its parameter (dtype,
shape, contiguity, one device for all) and the kernel is launched on that device and on the
current stream of the array library (PyTorch's current stream when PyTorch is loaded), with no
copy and no synchronisation. CPU tensors run in the simulator instead (``runtime.Kernel``).
"""

from __future__ import annotations

import ctypes
import sys
from typing import Optional, Sequence, Tuple

from . import _native

# Kernel dtypes PyTorch has under the same name (its float4 has none).
_TORCH_NAMES = frozenset(
    ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
    + ("float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2")
)

# DLPack dtype codes: (code, bits) per kernel dtype.
_DL = {
    "int8": (0, 8),
    "int16": (0, 16),
    "int32": (0, 32),
    "int64": (0, 64),
    "uint8": (1, 8),
    "uint16": (1, 16),
    "uint32": (1, 32),
    "uint64": (1, 64),
    "float16": (2, 16),
    "float32": (2, 32),
    "float64": (2, 64),
    "bfloat16": (4, 16),
    "bool": (6, 8),
    "float8_e4m3fn": (10, 8),
    "float8_e5m2": (12, 8),
}


def compute_capability(ordinal: int = 0) -> Optional[Tuple[int, int]]:
    """The GPU's compute capability, or None without a usable GPU (or with TIRX_DEVICE=sim)."""
    import os

    if os.environ.get("TIRX_DEVICE") == "sim":
        return None
    info = _native.device_info(ordinal)
    return None if info is None else tuple(info[1])


class _Arg:
    __slots__ = ("ptr", "device")

    def __init__(self, ptr: int, device: int):
        self.ptr, self.device = ptr, device


# The alignment a kernel assumes of every array's start (docs/lir.md): a view starting elsewhere
# (a slice of a flat buffer) is refused before the launch, not left to fault.
ARRAY_ALIGN = 16


def _fail(kernel, i: int, msg: str, exc=TypeError):
    p = kernel.params[i]
    return exc(f"{kernel.name}(): argument {i} (`{p}`) {msg}")


def _strides_text(strides) -> str:
    return f"strides {tuple(strides)} (the kernel's `strides=`)"


def _same_strides(got, want, shape) -> bool:
    """Strides that address the same elements (a dim of one element has any stride)."""
    return all(n == 1 or g == w for g, w, n in zip(got, want, shape))


def _torch_arg(kernel, i: int, t, shape, strides=None) -> Optional[_Arg]:
    import torch

    p = kernel.params[i]
    want = getattr(torch, p.dtype, None) if p.dtype in _TORCH_NAMES else None
    if t.dtype != want:
        raise _fail(kernel, i, f"is a tensor of {t.dtype}")
    if tuple(t.shape) != shape:
        raise _fail(kernel, i, f"has shape {tuple(t.shape)}", ValueError)
    if strides is None and not t.is_contiguous():
        raise _fail(kernel, i, "is not contiguous: pass `.contiguous()`", ValueError)
    if strides is not None and not _same_strides(t.stride(), strides, shape):
        raise _fail(kernel, i, f"has strides {tuple(t.stride())}, the kernel takes {_strides_text(strides)}", ValueError)
    if not t.is_cuda:
        return None
    return _Arg(t.data_ptr(), t.get_device())


def _cai_arg(kernel, i: int, a, shape, strides=None) -> _Arg:
    from .runtime import numpy_dtype

    p = kernel.params[i]
    cai = a.__cuda_array_interface__
    ptr = cai["data"][0]
    if cai.get("data", (0, False))[1]:
        raise _fail(kernel, i, "is read-only", ValueError)
    import numpy as np

    if np.dtype(cai["typestr"]) != numpy_dtype(p.dtype):
        raise _fail(kernel, i, f"has typestr {cai['typestr']}")
    if tuple(cai["shape"]) != shape:
        raise _fail(kernel, i, f"has shape {tuple(cai['shape'])}", ValueError)
    got = cai.get("strides")
    item = numpy_dtype(p.dtype).itemsize
    if strides is not None:
        if not _same_strides(got or _row_major(shape, item), tuple(s * item for s in strides), shape):
            raise _fail(kernel, i, f"has byte strides {got}, the kernel takes {_strides_text(strides)}", ValueError)
    elif got is not None and tuple(got) != _row_major(shape, item):
        raise _fail(kernel, i, "is not contiguous", ValueError)
    dev = getattr(getattr(a, "device", None), "id", None)
    if dev is None:
        dev = _native.pointer_device(ptr)
    return _Arg(ptr, dev)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

_KDL_CUDA = 2


def _row_major(shape, item: int) -> tuple:
    """The byte strides of a row-major array of ``shape``."""
    want, acc = [], item
    for d in reversed(shape):
        want.append(acc)
        acc *= d
    return tuple(reversed(want))


def _dlpack_arg(kernel, i: int, a, shape, strides=None):
    """Reads the DLTensor of ``a.__dlpack__()`` (the capsule stays unconsumed: its
    destructor releases it; ``a`` keeps the memory alive across the launch)."""
    p = kernel.params[i]
    dev_type, _ = a.__dlpack_device__()
    if dev_type != _KDL_CUDA:
        return None
    cap = a.__dlpack__()
    t = _DLTensor.from_address(_get_pointer(cap, b"dltensor"))
    code, bits = _DL.get(p.dtype, (None, None))
    if (t.dtype.code, t.dtype.bits, t.dtype.lanes) != (code, bits, 1):
        raise _fail(kernel, i, f"has DLPack dtype code {t.dtype.code}, {t.dtype.bits} bits")
    got = tuple(t.shape[k] for k in range(t.ndim))
    if got != shape:
        raise _fail(kernel, i, f"has shape {got}", ValueError)
    shape = got
    if strides is not None:
        have = tuple(t.strides[k] for k in range(t.ndim)) if t.strides else tuple(_row_major(shape, 1))
        if not _same_strides(have, strides, shape):
            raise _fail(kernel, i, f"has strides {have}, the kernel takes {_strides_text(strides)}", ValueError)
    elif t.strides and not _same_strides([t.strides[k] for k in range(t.ndim)], _row_major(shape, 1), shape):
        raise _fail(kernel, i, "is not contiguous", ValueError)
    return _Arg((t.data or 0) + t.byte_offset, t.device.device_id)


def _device_arg(kernel, i: int, a, shape, strides=None) -> Optional[_Arg]:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(a, torch.Tensor):
        return _torch_arg(kernel, i, a, shape, strides)
    if hasattr(a, "__cuda_array_interface__"):
        return _cai_arg(kernel, i, a, shape, strides)
    if hasattr(a, "__dlpack__") and hasattr(a, "__dlpack_device__"):
        return _dlpack_arg(kernel, i, a, shape, strides)
    raise _fail(kernel, i, f"is a {type(a).__name__}: pass a CUDA tensor (PyTorch, CuPy, DLPack) or a NumPy array")


def current_stream(device: int) -> int:
    """The current stream of the loaded array library on ``device`` (0: the legacy default stream)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        return raw(device) if raw is not None else torch.cuda.current_stream(device).cuda_stream
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        return cupy.cuda.get_current_stream().ptr
    return 0


def _give_torch(kernel, torch) -> bool:
    """Gives the kernel's native call path (`Lowered.call_torch`) what it checks PyTorch
    tensors against, once (True then): later calls on valid CUDA tensors skip this module."""
    if kernel.__dict__.get("_torch_given"):
        return False
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is None:
        return False
    dtypes = [getattr(torch, p.dtype) if p.dtype in _TORCH_NAMES else None for p in kernel.params if not p.is_scalar]
    kernel._l.set_torch((torch.Tensor, torch.nn.Parameter), dtypes, raw)
    kernel._torch_given = True
    return True


def launch(kernel, args: Sequence) -> None:
    """Launches ``kernel`` on CUDA arrays (and the scalar arguments, each in signature order)
    ``args`` (asynchronous, on the current stream)."""
    torch = sys.modules.get("torch")
    if torch is not None and _give_torch(kernel, torch) and kernel._l.call_torch(tuple(args)):
        return None
    scalars = kernel.scalar_args(args)
    shapes, strides = kernel.layouts(scalars)
    bufs = [i for i, p in enumerate(kernel.params) if not p.is_scalar]
    parsed = [_device_arg(kernel, i, args[i], shapes[i], strides[i]) for i in bufs]
    if not parsed or any(p is None for p in parsed):
        if all(p is None for p in parsed):
            return kernel.simulate(*[a if p.is_scalar else _host_array(a) for p, a in zip(kernel.params, args)])
        host = [i for i, p in zip(bufs, parsed) if p is None]
        raise _fail(kernel, host[0], "is on the CPU while other arguments are on a GPU", ValueError)
    dev = parsed[0].device
    for i, p in zip(bufs, parsed):
        if p.device != dev:
            raise _fail(kernel, i, f"is on GPU {p.device}, argument {bufs[0]} on GPU {dev}", ValueError)
        if p.ptr % ARRAY_ALIGN:
            raise _fail(
                kernel,
                i,
                f"starts at {p.ptr:#x}, not on {ARRAY_ALIGN} bytes: kernels assume aligned arrays (their vector "
                "accesses), as the CUDA allocators give them; pass a copy (`t.clone()`)",
                ValueError,
            )
    kernel._l.launch(dev, current_stream(dev), [p.ptr for p in parsed], scalars)


def _host_array(a):
    """A NumPy view of a CPU tensor (bf16/fp8 through ml_dtypes), sharing its memory."""
    import numpy as np

    torch = sys.modules.get("torch")
    if torch is not None and isinstance(a, torch.Tensor):
        if a.dtype in (torch.bfloat16, getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)):
            from .runtime import numpy_dtype

            name = str(a.dtype).replace("torch.", "")
            raw = a.view(torch.int16 if a.dtype == torch.bfloat16 else torch.int8).numpy()
            return raw.view(numpy_dtype(name))
        return a.numpy()
    return np.asarray(a)
