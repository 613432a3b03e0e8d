"""Ready kernels written in TIRx, called like `torch.nn.functional`: each takes CUDA tensors
(one launch on the current stream), CPU tensors or NumPy arrays (the simulator) and returns a
new result. Each module holds its kernel in the same language users write; a size a kernel does
not handle is a clear error, never a wrong result. With PyTorch, each is also the registered op
`torch.ops.tirx.<name>`, so `torch.compile(fullgraph=True)` traces through it (all registered
when this module is imported after torch, else by the first call of any of them, or of any
kernel, on tensors outside a compiled function);
eager calls run the kernel directly (the dispatcher's round trip would only add microseconds)."""

import sys

from . import attention as _attention
from . import attention_backward as _attention_backward
from . import cross_entropy as _cross_entropy
from . import grouped_mm as _grouped_mm
from . import matmul as _matmul
from . import norm as _norm
from . import norm_backward as _norm_backward  # noqa: F401  (the norms' backward kernels)
from . import softmax as _softmax
from ..torch_op import compiling as _compiling
from ..torch_op import when_torch_loaded as _when_torch_loaded
from .attention import kvcache_attention, scaled_dot_product_attention, varlen_attention
from .attention_backward import scaled_dot_product_attention_backward, varlen_attention_backward
from .cross_entropy import cross_entropy, cross_entropy_backward
from .grouped_mm import grouped_mm, scaled_grouped_mm
from .matmul import addmm, gated_mm, linear, matmul, scaled_mm
from .norm import add_layer_norm, add_rms_norm, layer_norm, layer_norm_backward, rms_norm, rms_norm_backward
from .softmax import log_softmax, log_softmax_backward, softmax, softmax_backward

__all__ = [
    "add_layer_norm",
    "addmm",
    "add_rms_norm",
    "cross_entropy",
    "cross_entropy_backward",
    "gated_mm",
    "grouped_mm",
    "kvcache_attention",
    "layer_norm",
    "layer_norm_backward",
    "linear",
    "log_softmax",
    "log_softmax_backward",
    "matmul",
    "rms_norm",
    "rms_norm_backward",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_backward",
    "scaled_grouped_mm",
    "scaled_mm",
    "softmax",
    "softmax_backward",
    "varlen_attention",
    "varlen_attention_backward",
]


def _register_torch_ops():
    """Every op's `torch.ops.tirx.<name>`: they must exist before torch.compile traces a call of
    them (Dynamo cannot trace a registration)."""
    _softmax.register_torch_op()
    _softmax.register_log_torch_op()
    _norm.register_torch_op()
    _norm.register_layer_norm_torch_op()
    _norm.register_add_rms_norm_torch_op()
    _norm.register_add_layer_norm_torch_op()
    _matmul.register_torch_op()
    _matmul.register_addmm_torch_op()
    _matmul.register_scaled_mm_torch_op()
    _matmul.register_gated_torch_op()
    _grouped_mm.register_torch_op()
    _grouped_mm.register_scaled_torch_op()
    _cross_entropy.register_torch_op()
    _attention_backward.register_backward_op()
    _attention.register_torch_op()
    _attention.register_fp8_torch_op()
    _attention.register_kvcache_torch_op()
    _attention_backward.register_varlen_backward_op()
    _attention.register_varlen_torch_op()


# With PyTorch loaded, now; else on the first call outside a trace once it is (a later
# torch.compile then finds them all, whichever op was called first).
if "torch" in sys.modules:
    _compiling()  # and torch kept, for the calls that Dynamo traces (`torch_op.loaded_torch`)
    _register_torch_ops()
else:
    _when_torch_loaded(_register_torch_ops)
