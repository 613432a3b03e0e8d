"""Ready kernels written in TIRx, called like `torch.nn.functional`: each takes CUDA tensors
(one launch on the current stream), CPU tensors or NumPy arrays (the simulator) and returns a
new result. Each module holds its kernel in the same language users write; a size a kernel does
not handle is a clear error, never a wrong result. With PyTorch, each is also the registered op
`torch.ops.tirx.<name>`, so `torch.compile(fullgraph=True)` traces through it."""

from .norm import rms_norm
from .softmax import softmax

__all__ = ["rms_norm", "softmax"]
