"""The native per-call path on PyTorch tensors (`Lowered.call_torch`, issue 28 item 1) takes
exactly the calls the general path accepts and leaves every other one to it (which says what
is wrong). Checked on the CPU with stand-in tensors: a call that passes every check reaches
the stream query, which here raises instead of launching."""

import pytest

import tirx
from tirx import T


class Reached(Exception):
    """The stream query: every argument passed."""


def stream_of(device):
    raise Reached(device)


class Cuda:
    """What the path reads of a tensor: dtype, shape, contiguity, device, pointer."""

    def __init__(self, dtype, shape, contiguous=True, device=0):
        self.dtype, self.shape, self._contiguous, self._device = dtype, tuple(shape), contiguous, device

    def is_contiguous(self):
        return self._contiguous

    def get_device(self):
        return self._device

    def data_ptr(self):
        return 0x10000


class Other(Cuda):
    """A subclass (as a fake or distributed tensor is): the general path's."""


F32, F16 = object(), object()


def _given(k):
    k._l.set_torch((Cuda, Cuda), [F32 if p.dtype == "float32" else F16 for p in k.params if not p.is_scalar], stream_of)
    return k


def _plain():
    @T.prim_func
    def plain(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (4, 32), "float32")
        B = T.match_buffer(B_ptr, (4, 32), "float16")
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([32])
        for r in range(4):
            B[r, tid] = T.cast(A[r, tid], "float16")

    return _given(tirx.compile(plain, "sm_90a"))


def _sized():
    @T.prim_func
    def sized(A_ptr: T.handle, n: T.int32, s: T.float32):
        A = T.match_buffer(A_ptr, (n, 32), "float32")
        T.device_entry()
        T.cta_id([n])
        tid = T.thread_id([32])
        T.assume(n % 2 == 0)
        A[0, tid] = A[0, tid] * s

    return _given(tirx.compile(sized, "sm_90a"))


def test_a_valid_call_reaches_the_launch_on_its_device():
    k = _plain()
    with pytest.raises(Reached) as e:
        k._l.call_torch((Cuda(F32, (4, 32), device=1), Cuda(F16, (4, 32), device=1)))
    assert e.value.args == (1,)


@pytest.mark.parametrize(
    "args",
    [
        (Cuda(F16, (4, 32)), Cuda(F16, (4, 32))),  # dtype
        (Cuda(F32, (4, 31)), Cuda(F16, (4, 32))),  # shape
        (Cuda(F32, (128,)), Cuda(F16, (4, 32))),  # rank
        (Cuda(F32, (4, 32), contiguous=False), Cuda(F16, (4, 32))),
        (Cuda(F32, (4, 32), device=-1), Cuda(F16, (4, 32), device=-1)),  # CPU tensors: the simulator
        (Cuda(F32, (4, 32), device=0), Cuda(F16, (4, 32), device=1)),  # two devices
        (Other(F32, (4, 32)), Cuda(F16, (4, 32))),  # a subclass
        (Cuda(F32, (4, 32)),),  # count
        (Cuda(F32, (4, 32)), Cuda(F16, (4, 32)), 3),
    ],
)
def test_anything_else_is_left_to_the_general_path(args):
    assert _plain()._l.call_torch(args) is False


def test_scalars_are_checked_as_the_general_path_checks_them():
    k = _sized()
    buf = Cuda(F32, (6, 32))
    with pytest.raises(Reached):
        k._l.call_torch((buf, 6, 2.0))
    with pytest.raises(Reached):
        k._l.call_torch((buf, 6, 2))  # an int for a float parameter
    for n, s in ((True, 2.0), (6.0, 2.0), (2**31, 2.0), (6, 1e39), (6, "2"), (6, 10**400)):
        assert k._l.call_torch((buf, n, s)) is False, (n, s)
    assert k._l.call_torch((Cuda(F32, (4, 32)), 6, 2.0)) is False  # the shape at n = 6
    with pytest.raises(Reached):
        k._l.call_torch((buf, 6, float("inf")))  # inf itself passes, as in the general path
    with pytest.raises(tirx.TirxError, match="n % 2 == 0"):
        k._l.call_torch((Cuda(F32, (5, 32)), 5, 2.0))  # a failed launch check is raised


def test_without_torch_given_nothing_is_taken():
    @T.prim_func
    def untouched(A_ptr: T.handle):
        A = T.match_buffer(A_ptr, (32,), "float32")
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([32])
        A[tid] = 0.0

    assert tirx.compile(untouched, "sm_90a")._l.call_torch((Cuda(F32, (32,)),)) is False


def test_the_launcher_takes_the_native_path_first_and_the_general_one_after():
    """`Kernel.launcher` (an op's plan's repeated calls): a valid call reaches the native launch;
    any other takes `__call__`'s general path, with its errors, or the simulator on NumPy arrays."""
    import numpy as np

    k = _plain()
    launch = k.launcher()
    with pytest.raises(Reached):
        launch(Cuda(F32, (4, 32)), Cuda(F16, (4, 32)))
    with pytest.raises(TypeError, match="takes 2 arguments"):
        launch(Cuda(F32, (4, 32)))
    a, b = np.arange(128, dtype=np.float32).reshape(4, 32), np.zeros((4, 32), np.float16)
    launch(a, b)
    np.testing.assert_array_equal(b, a.astype(np.float16))


def test_a_fixed_signature_launcher_checks_its_first_call_and_launches_later_ones_from_their_pointers(monkeypatch):
    """`Kernel.launcher(fixed_signature=True)` (an op's plan, made per signature of its tensors):
    the first call that succeeds takes the checked native path, each later one the launch from
    the tensors' data pointers on the then current stream; a kernel with scalar parameters, and
    arrays for the simulator, the checked path at every call."""
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")

    class OnCuda(torch.Tensor):
        is_cuda = property(lambda self: True)

        def get_device(self):
            return 0

    class Other(OnCuda):
        pass

    calls, fail = [], [True]

    class Native:  # the kernel's native object, recording what each call takes
        def __init__(self, real):
            self.real = real

        def call_torch(self, args):
            calls.append(("checked", len(args)))
            if fail and len(args) == 2:
                fail.clear()
                raise ValueError("a first call that fails")
            return isinstance(args[0], OnCuda)  # (else the general path's: NumPy arrays simulated)

        def launch(self, dev, stream, ptrs, scalars=()):
            calls.append(("launch", dev, stream, tuple(ptrs)))

        def __getattr__(self, name):
            return getattr(self.real, name)

    stream = [7]
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda dev: stream[0])
    k = _plain()
    k._l = Native(k._l)
    launch = k.launcher(fixed_signature=True)
    a, b = torch.zeros(4, 32).as_subclass(OnCuda), torch.zeros(4, 32, dtype=torch.float16).as_subclass(OnCuda)
    with pytest.raises(ValueError, match="a first call that fails"):
        launch(a, b)
    launch(a, b)
    stream[0] = 8
    a2 = torch.ones(4, 32).as_subclass(OnCuda)
    launch(a2, b)
    launch(a, b)
    assert calls == [("checked", 2)] * 2 + [("launch", 0, 8, (a2.data_ptr(), b.data_ptr())), ("launch", 0, 8, (a.data_ptr(), b.data_ptr()))]
    calls.clear()
    launch(a, torch.zeros(4, 32, dtype=torch.float16).as_subclass(Other))  # (another type: checked)
    assert calls == [("checked", 2)]
    calls.clear()
    launch = k.launcher(fixed_signature=True)
    x, y = np.zeros((4, 32), np.float32), np.zeros((4, 32), np.float16)
    launch(x, y)
    launch(x, y)
    assert calls == [("checked", 2)] * 4  # (each call: the native path's refusal, then the general path's own try)
    calls.clear()
    s = _sized()
    s._l = Native(s._l)
    launch = s.launcher(fixed_signature=True)
    launch(a, 4, 2.0)
    launch(a, 4, 2.0)
    assert calls == [("checked", 3)] * 2
