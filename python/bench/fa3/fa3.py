"""ctypes wrapper around libfa3.so (FlashAttention-3 Hopper forward, sm_90a only).

    import fa3
    out, lse = fa3.forward(q, k, v, causal=False)

q: [batch, seqlen_q, heads, d], k/v: [batch, seqlen_k, heads_k, d]; torch CUDA tensors,
dtype torch.float8_e4m3fn or torch.bfloat16, last dim contiguous, d in {64, 128, 256},
heads % heads_k == 0.  Returns out [batch, seqlen_q, heads, d] bf16 (also for fp8 inputs) and
lse [batch, heads, seqlen_q] float32 (natural-log logsumexp of softmax_scale * q.k, incl. descales).
Causal masking is FA3's bottom-right-aligned convention (same as top-left when seqlen_q == seqlen_k).

Library path: $FA3_LIB, else libfa3.so next to this file.
"""
import ctypes
import os

import torch

DTYPE_E4M3 = 0
DTYPE_BF16 = 1
_DTYPES = {torch.bfloat16: DTYPE_BF16}
if hasattr(torch, "float8_e4m3fn"):
    _DTYPES[torch.float8_e4m3fn] = DTYPE_E4M3
HEAD_DIMS = (64, 128, 256)
_ABI_VERSION = 1

_lib = None
_num_sm = {}
_workspaces = {}


def lib_path():
    return os.environ.get("FA3_LIB") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "libfa3.so")


def _load():
    global _lib
    if _lib is not None:
        return _lib
    path = lib_path()
    lib = ctypes.CDLL(path)
    c_int, c_i64, c_vp, c_float = ctypes.c_int, ctypes.c_int64, ctypes.c_void_p, ctypes.c_float
    lib.fa3_abi_version.restype = c_int
    lib.fa3_abi_version.argtypes = []
    lib.fa3_workspace_bytes.restype = c_int
    lib.fa3_workspace_bytes.argtypes = []
    lib.fa3_last_error.restype = ctypes.c_char_p
    lib.fa3_last_error.argtypes = []
    lib.fa3_has_kernel.restype = c_int
    lib.fa3_has_kernel.argtypes = [c_int, c_int]
    lib.fa3_info.restype = c_int
    lib.fa3_info.argtypes = [ctypes.c_char_p, c_int]
    lib.fa3_fwd.restype = c_int
    lib.fa3_fwd.argtypes = (
        [c_int, c_int]                      # dtype, head_dim
        + [c_vp] * 5                        # q, k, v, out, lse
        + [c_i64] * 12                      # q/k/v/o (batch, row, head) strides
        + [c_int] * 5                       # batch, seqlen_q, seqlen_k, heads, heads_k
        + [c_float, c_int]                  # softmax_scale, is_causal
        + [c_vp] * 3                        # q/k/v descale
        + [c_i64] * 6                       # descale (batch, head) strides
        + [c_vp, c_int, c_int, ctypes.c_uint64]  # workspace, num_sm, device, stream
    )
    v = lib.fa3_abi_version()
    if v != _ABI_VERSION:
        raise RuntimeError(f"{path}: ABI version {v}, fa3.py expects {_ABI_VERSION}")
    _lib = lib
    return lib


def info():
    """One-line description: static cudart / driver versions, device, compiled kernels."""
    lib = _load()
    buf = ctypes.create_string_buffer(4096)
    rc = lib.fa3_info(buf, len(buf))
    return rc, buf.value.decode(errors="replace")


def available(dtype, head_dim):
    """True if the (dtype, head_dim) instantiation is compiled into the library."""
    if dtype not in _DTYPES:
        return False
    return bool(_load().fa3_has_kernel(_DTYPES[dtype], int(head_dim)))


def _workspace(device, stream_handle):
    # One zero-initialised int32 buffer per (device, stream); the C side re-zeroes the tile
    # counter with cudaMemsetAsync on `stream` before every causal launch.
    key = (device.index, stream_handle)
    ws = _workspaces.get(key)
    if ws is None:
        nbytes = _load().fa3_workspace_bytes()
        ws = torch.zeros((nbytes + 3) // 4, dtype=torch.int32, device=device)
        _workspaces[key] = ws
    return ws


def _descale_args(t, name, batch, heads_k, device):
    if t is None:
        return None, None, 0, 0
    if not isinstance(t, torch.Tensor):
        t = torch.tensor(t, dtype=torch.float32, device=device)
    t = t.to(device=device, dtype=torch.float32)
    if t.numel() == 1:
        t = t.reshape(1, 1).expand(batch, heads_k)
    if tuple(t.shape) != (batch, heads_k):
        raise ValueError(f"{name} must have shape (batch, heads_k) = ({batch}, {heads_k}), got {tuple(t.shape)}")
    return t, t.data_ptr(), t.stride(0), t.stride(1)


def forward(q, k, v, causal=False, softmax_scale=None, q_descale=None, k_descale=None, v_descale=None):
    """FA3 forward.  Returns (out bf16 [b, s_q, h, d], lse float32 [b, h, s_q]).

    q_descale/k_descale/v_descale: float32 [batch, heads_k] (or scalars) for fp8 inputs: the
    kernel computes with q*q_descale, k*k_descale, v*v_descale.
    """
    lib = _load()
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or not t.is_cuda:
            raise ValueError(f"{name} must be a CUDA tensor")
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-D [batch, seqlen, heads, headdim], got shape {tuple(t.shape)}")
        if t.stride(-1) != 1:
            raise ValueError(f"{name} must have a contiguous last dimension")
    if q.dtype not in _DTYPES:
        raise ValueError(f"unsupported dtype {q.dtype}; need torch.float8_e4m3fn or torch.bfloat16")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError("q, k, v must have the same dtype")
    if not (q.device == k.device == v.device):
        raise ValueError("q, k, v must be on the same device")
    b, sq, h, d = q.shape
    bk, sk, hk, dk = k.shape
    if tuple(v.shape) != (bk, sk, hk, dk) or bk != b or dk != d:
        raise ValueError(f"shape mismatch: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    if d not in HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {HEAD_DIMS}, got {d}")
    dt = _DTYPES[q.dtype]
    if dt == DTYPE_BF16 and any(x is not None for x in (q_descale, k_descale, v_descale)):
        raise ValueError("descale factors are only supported for float8_e4m3fn inputs")
    if softmax_scale is None:
        softmax_scale = d ** -0.5
    device = q.device

    out = torch.empty((b, sq, h, d), dtype=torch.bfloat16, device=device)
    lse = torch.empty((b, h, sq), dtype=torch.float32, device=device)

    qd, qd_p, qd_sb, qd_sh = _descale_args(q_descale, "q_descale", b, hk, device)
    kd, kd_p, kd_sb, kd_sh = _descale_args(k_descale, "k_descale", b, hk, device)
    vd, vd_p, vd_sb, vd_sh = _descale_args(v_descale, "v_descale", b, hk, device)

    with torch.cuda.device(device):
        stream = torch.cuda.current_stream(device).cuda_stream
        ws = _workspace(device, stream) if causal else None
        nsm = _num_sm.get(device.index)
        if nsm is None:
            nsm = _num_sm[device.index] = torch.cuda.get_device_properties(device).multi_processor_count
        rc = lib.fa3_fwd(
            dt, d,
            q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr(),
            q.stride(0), q.stride(1), q.stride(2),
            k.stride(0), k.stride(1), k.stride(2),
            v.stride(0), v.stride(1), v.stride(2),
            out.stride(0), out.stride(1), out.stride(2),
            b, sq, sk, h, hk,
            float(softmax_scale), int(bool(causal)),
            qd_p, kd_p, vd_p,
            qd_sb, qd_sh, kd_sb, kd_sh, vd_sb, vd_sh,
            None if ws is None else ws.data_ptr(), nsm, device.index, stream,
        )
    if rc != 0:
        msg = lib.fa3_last_error().decode(errors="replace")
        raise RuntimeError(f"fa3_fwd failed (code {rc}): {msg}")
    return out, lse
