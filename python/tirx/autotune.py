"""Autotuning, in the spirit of `triton.autotune`: a kernel factory, a list of configurations,
and the factory arguments whose values key the choice.

    @tirx.autotune(configs=[{"threads": 128}, {"threads": 256}], key=["n", "dtype"])
    def softmax(n, dtype, threads):          # returns a @T.prim_func
        ...

    k = softmax(n=4096, dtype="bfloat16")    # a TunedKernel for that key
    k(x, y, rows)                            # first call: compile all, time all, keep the fastest

``prune(configs, **key_values)`` (optional) returns the configurations that apply to a key
(a row length that a thread count does not tile, say); a key none applies to is an error.
``launch_args(kernel, args)`` (optional) gives each candidate its own arguments from the call's,
timing and calls alike: a persistent kernel's grid sized to what that candidate keeps resident
(`Kernel.resident_ctas`), say. ``size(args)`` (optional) gives a call's size class, a part of the
key the factory does not see: each class is timed and chosen apart (a row kernel's rows in powers
of four, `tirx.ops._common.rows_class`: a choice timed on a test's five rows, where every candidate
is one launch's cost, is not kept for a batch of 100,000).

The first call of a key compiles every candidate (in threads: lowering releases the GIL) and,
on CUDA tensors, times each with CUDA events over ``rep`` launches of the call's own arguments
(the best of three rounds, interleaved)
(the buffers the kernel writes are saved and restored around the timing, so an in-place kernel
runs once for the caller), keeps the fastest per key in memory
and in ``autotune-v2.json`` beside the CUBIN cache (keyed by arch, tirx version, the factory's
source and the key), and says what it chose (``k.explain()``; ``TIRX_AUTOTUNE_VERBOSE=1``
prints every timing). The simulator is never timed: on NumPy arrays or CPU tensors the first
configuration runs (or the one cached for the GPU), and ``explain`` says so."""

import hashlib
import inspect
import json
import math
import os
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, List, Optional, Sequence

_memory: Dict[str, int] = {}


def _cache_file() -> str:
    base = os.environ.get("TIRX_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        base = os.path.join(xdg, "tirx")
    # (v2: candidates timed by the device, queued behind an idle kernel; v1 choices timed the host)
    return os.path.join(base, "autotune-v2.json")


def _load_disk() -> dict:
    try:
        with open(_cache_file()) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _store_disk(key: str, index: int) -> None:
    data = _load_disk()
    data[key] = index
    path = _cache_file()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache directory: the choice stays in memory


def _on_gpu(args) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)


def _fits(kernel, args) -> bool:
    """Whether ``kernel`` can run on the GPU of ``args`` at all: a kernel launched in clusters
    needs a GPC that holds a whole one (`Kernel.resident_ctas` 0: none does — Hopper's
    non-portable clusters of 16 on a GPU whose GPCs have fewer SMs than a cluster needs), where
    launching it fails. Arrays for the simulator: always."""
    if getattr(kernel, "cluster_size", 1) <= 1 or not _on_gpu(args):
        return True
    return bool(_resident(kernel, args))  # (None: the driver refuses the cluster shape itself)


def _device(args) -> int:
    """The GPU of ``args``' first CUDA tensor."""
    torch = sys.modules["torch"]
    return next(a.get_device() for a in args if isinstance(a, torch.Tensor) and a.is_cuda)


def _resident(kernel, args) -> Optional[int]:
    """The CTAs of ``kernel`` the GPU of ``args`` holds at once (`Kernel.resident_ctas`), shown
    beside its time: a candidate whose clusters leave SMs idle says so. ``None`` off the GPU or
    where the driver refuses its cluster shape."""
    from . import TirxError

    if not _on_gpu(args) or not hasattr(kernel, "resident_ctas"):
        return None
    try:
        return kernel.resident_ctas(_device(args))
    except TirxError:
        return None


# Rounds of timing every candidate (`_retimed`): each keeps its best.
TIMING_ROUNDS = 3

# Device cycles the GPU idles before a timed batch (~2 ms): longer than the host takes to queue
# the batch's launches, so they run back to back and the events time the device, not the host.
BACKLOG_CYCLES = 4_000_000


def _cuda_time(kernel, args, warmup: int, rep: int) -> float:
    """Milliseconds per launch of ``kernel(*args)``, CUDA events around ``rep`` launches queued
    behind an idle kernel (`torch.cuda._sleep`): a kernel shorter than its launch's host time
    (a decode GEMM's few µs) would otherwise time the host, the same for every candidate, and
    the choice between them would be noise (1024³: 0.69 of cuBLAS where the best candidate is
    at 1.04)."""
    import torch

    for _ in range(warmup):
        kernel(*args)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is not None:
        sleep(BACKLOG_CYCLES)
    start.record()
    for _ in range(rep):
        kernel(*args)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / rep


def _kept(cache_key: str, n: int) -> Optional[int]:
    """The choice kept for ``cache_key`` (in memory, else in the cache file) among ``n`` options,
    or None."""
    cached = _memory.get(cache_key)
    if cached is None:
        cached = _load_disk().get(cache_key)
    return cached if cached is not None and 0 <= cached < n else None


def _keep(cache_key: str, index: int) -> None:
    _memory[cache_key] = index
    _store_disk(cache_key, index)


def _retimed(times: List[float], indices: List[int], time_one: Callable[[int], float]) -> None:
    """`TIMING_ROUNDS` - 1 more rounds of timing over ``indices``, in reverse order then in order,
    each keeping its best in ``times``: one round's time of a candidate can be 15% off (clocks,
    the previous candidate's cache state: at 100 x 12344 x 4096 a tile timed at 0.035 ms in three
    processes lost to one of 0.041 in a fourth), and a choice is kept for good."""
    for r in range(1, TIMING_ROUNDS):
        for i in indices[::-1] if r % 2 else indices:
            times[i] = min(times[i], time_one(i))


def choose(name: str, options: Sequence[str], build: Callable[[int], Callable[[], object]], on_gpu: bool, timer=None, warmup: int = 5, rep: int = 20) -> int:
    """An op's choice among ways of running one call, each a launch or several (split-K's two
    kernels beside one), made as the tuner makes a kernel's: ``build(i)`` gives option ``i``'s
    run (a function of no arguments), and on the GPU each run is timed with CUDA events behind
    an idle kernel, the best of `TIMING_ROUNDS` interleaved rounds; the fastest is kept in memory
    and in the cache file under ``name`` and the options (with the target and tirx's version).
    Off the GPU the first option, untimed, unless ``timer(option, run) -> ms`` is given (tests).
    ``TIRX_AUTOTUNE_VERBOSE=1`` prints each time and the choice."""
    from . import _native
    from .runtime import default_target

    cache_key = f"{default_target()}|choice|{_native.version()}|{name}|{'/'.join(options)}"
    cached = _kept(cache_key, len(options))
    if cached is not None:
        return cached
    if timer is None and not on_gpu:
        return 0
    runs = [build(i) for i in range(len(options))]
    t = timer or (lambda option, run: _cuda_time(run, (), warmup, rep))
    times = [t(o, r) for o, r in zip(options, runs)]
    if timer is None:
        _retimed(times, list(range(len(runs))), lambda i: t(options[i], runs[i]))
    best = min(range(len(options)), key=times.__getitem__)
    _keep(cache_key, best)
    lines = [f"autotune choice {name}: " + ("timed by the given timer" if timer else f"timed over {rep} runs each, the best of {TIMING_ROUNDS} rounds")]
    lines += [f"  {'chosen' if i == best else '      '} {o}  {times[i]:.4f} ms" for i, o in enumerate(options)]
    _choices[name] = "\n".join(lines)
    if os.environ.get("TIRX_AUTOTUNE_VERBOSE"):
        print(_choices[name], file=sys.stderr)
    return best


# What each timed `choose` of this process measured and chose, by name (`choices`).
_choices: Dict[str, str] = {}


def choices() -> Dict[str, str]:
    """The choices `choose` timed in this process (an op's ways of running a call: matmul's
    split-K beside one kernel), each as text: every option's time and the one chosen."""
    return dict(_choices)


class TunedKernel:
    """The candidates of one key: compiled on first use, the winner chosen then."""

    def __init__(self, tuner: "Autotuner", key_values: dict, cache_key: str, configs: List[dict]):
        self.tuner, self.key_values, self.cache_key, self.configs = tuner, key_values, cache_key, configs
        self.kernels: Optional[List] = None
        # The choice, its timings and how it was made: of the size class of the last call made
        # through `__call__` (the tuner's ``size``; None without one); other classes' in `_classes`.
        self.size_class = None
        self._classes: Dict[object, tuple] = {}
        self.times: Optional[List[Optional[float]]] = None
        self.resident: Optional[List[Optional[int]]] = None
        self.choice: Optional[int] = None
        self.how = "not run yet"

    def _select(self, args) -> None:
        """Makes the size class of ``args`` the current one (its choice, times, explanation)."""
        if self.tuner.size is None:
            return
        cls = self.tuner.size(args)
        if cls == self.size_class:
            return
        if self.choice is not None:
            self._classes[self.size_class] = (self.choice, self.times, self.resident, self.how)
        self.size_class = cls
        self.choice, self.times, self.resident, self.how = self._classes.pop(cls, (None, None, None, "not run yet"))

    def _class_key(self) -> str:
        """The cache key of the current size class's choice."""
        return self.cache_key if self.size_class is None else f"{self.cache_key}|size={self.size_class}"

    def _compile(self) -> List:
        if self.kernels is None:
            import tirx

            def build(cfg):
                return tirx.compile(self.tuner.factory(**self.key_values, **cfg))

            with ThreadPoolExecutor(max_workers=min(8, len(self.configs))) as pool:
                self.kernels = list(pool.map(build, self.configs))
        return self.kernels

    def _choose(self, args) -> int:
        ks = self._compile()
        cached = _kept(self._class_key(), len(ks))
        if cached is not None:
            self.how = "cached (timed earlier on this GPU kind)"
            return cached
        timer = self.tuner.timer
        if timer is None and not _on_gpu(args):
            self.how = "simulator: not timed, the first configuration"
            return 0
        t = timer or (lambda k, a: _cuda_time(k, a, self.tuner.warmup, self.tuner.rep))
        # The candidates run on the call's own arguments: what they write is restored after
        # timing, so an in-place kernel (Y += X) runs exactly once for the caller.
        written = [a for p, a in zip(ks[0].params, args) if not p.is_scalar and p.written]
        saved = [a.clone() if hasattr(a, "clone") else a.copy() for a in written]
        # A candidate this GPU cannot launch (`_fits`) is not timed: it never wins. What loading a
        # candidate warns (ptxas: its wgmmas serialized) is shown for the chosen one only.
        timed = [self._timed(t, k, args) for k in ks]
        self.times = [took for took, _ in timed]
        if timer is None:  # (each candidate's best of the rounds; a candidate that does not fit stays inf)
            fits = [i for i, took in enumerate(self.times) if not math.isinf(took)]
            _retimed(self.times, fits, lambda i: t(ks[i], self._args(ks[i], args)))
        self.resident = [_resident(k, args) for k in ks]
        for a, s in zip(written, saved):
            a.copy_(s) if hasattr(a, "copy_") else a.__setitem__(Ellipsis, s)
        if all(math.isinf(x) for x in self.times):
            raise RuntimeError(f"{self.explain()}\ntirx.autotune: no configuration fits this GPU (each one's clusters exceed its GPCs)")
        best = min(range(len(ks)), key=lambda i: self.times[i])
        for w in timed[best][1]:
            warnings.warn(w.message, w.category, stacklevel=3)
        rounds = f", the best of {TIMING_ROUNDS} rounds" if timer is None else ""
        self.how = f"timed over {self.tuner.rep} launches each{rounds}"
        _keep(self._class_key(), best)
        if os.environ.get("TIRX_AUTOTUNE_VERBOSE"):
            self.choice = best  # (explain marks it)
            print(self.explain(), file=sys.stderr)
        return best

    def _timed(self, t, kernel, args):
        """``kernel``'s time on ``args`` (inf where it does not fit this GPU) and the warnings
        its first launch raised, held back."""
        with warnings.catch_warnings(record=True) as raised:
            warnings.simplefilter("always")
            took = t(kernel, self._args(kernel, args)) if _fits(kernel, args) else math.inf
        return took, raised

    def _args(self, kernel, args) -> tuple:
        """``kernel``'s arguments for the call's ``args`` (the tuner's ``launch_args``)."""
        adapt = self.tuner.launch_args
        return tuple(args) if adapt is None else tuple(adapt(kernel, args))

    def __call__(self, *args):
        self._select(args)
        if self.choice is None:
            self.choice = self._choose(args)
        k = self.kernels[self.choice]
        return k(*self._args(k, args))

    @property
    def kernel(self):
        """The chosen kernel (``None`` before the first call)."""
        return None if self.choice is None else self.kernels[self.choice]

    @property
    def config(self) -> Optional[dict]:
        """The chosen configuration (``None`` before the first call; under size classes, the
        choice of the last call made through `__call__`)."""
        return None if self.choice is None else self.configs[self.choice]

    def launcher(self, fixed_signature: bool = False) -> Callable:
        """``launch(*args)``: the chosen kernel's `Kernel.launcher` (``fixed_signature`` as there;
        its arguments adapted by the tuner's ``launch_args`` where ``adapts`` says they change),
        for the repeated eager calls of an op's plan; where nothing is chosen yet, the returned
        function's first call chooses (as a call would); under the tuner's ``size`` classes, the
        first call of each class chooses for it (and makes it current), later ones launch its
        choice without making it current, and with ``fixed_signature`` (the first call's shapes
        throughout: its class) the first call's class is the launcher's, looked up once."""
        size = self.tuner.size
        if size is None and self.choice is not None:
            return self._chosen_launcher(fixed_signature)
        by_class: Dict[object, Callable] = {}
        per_call = size is not None and not fixed_signature

        def launch(*args):
            cls = size(args) if per_call else None
            run = by_class.get(cls)
            if run is not None:
                return run(*args)
            out = self(*args)
            by_class[cls] = self._chosen_launcher(fixed_signature)
            return out

        return launch

    def _chosen_launcher(self, fixed_signature: bool) -> Callable:
        k = self.kernels[self.choice]
        fast, adapt, adapts = k.launcher(fixed_signature), self.tuner.launch_args, self.tuner.adapts
        if adapt is None or (adapts is not None and not adapts(self.config)):
            return fast  # (an op's every call: no adapter where it would change nothing)
        return lambda *args: fast(*adapt(k, args))

    def explain(self) -> str:
        """Each configuration, its time, and the choice."""
        size = "" if self.size_class is None else f" [size class {self.size_class}]"
        head = f"autotune {self.tuner.factory.__name__}({', '.join(f'{k}={v!r}' for k, v in self.key_values.items())}){size}: {self.how}"
        pruned = len(self.tuner.configs) - len(self.configs)
        lines = [head + (f" ({pruned} configuration(s) pruned: they do not apply)" if pruned else "")]
        for i, cfg in enumerate(self.configs):
            t = self.times[i] if self.times else None
            mark = "chosen" if i == self.choice else "      "
            timing = "" if t is None else "  does not fit this GPU (its clusters)" if math.isinf(t) else f"  {t:.4f} ms"
            n = self.resident[i] if self.resident else None
            held = "" if not n or (t is not None and math.isinf(t)) else f"  ({n} CTAs resident)"
            lines.append(f"  {mark} {cfg}{timing}{held}")
        return "\n".join(lines)


class Autotuner:
    def __init__(
        self,
        factory: Callable,
        configs: Sequence[dict],
        key: Sequence[str],
        warmup: int,
        rep: int,
        timer,
        prune=None,
        launch_args=None,
        adapts=None,
        size=None,
    ):
        if not configs:
            raise ValueError("tirx.autotune: give at least one configuration")
        params = inspect.signature(factory).parameters
        for name in key:
            if name not in params:
                raise TypeError(f"tirx.autotune: key `{name}` is not a parameter of {factory.__name__}{inspect.signature(factory)}")
        self.factory, self.configs, self.key = factory, [dict(c) for c in configs], list(key)
        self.warmup, self.rep, self.timer, self.prune, self.launch_args, self.adapts = warmup, rep, timer, prune, launch_args, adapts
        self.size = size
        try:
            src = inspect.getsource(factory)
        except (OSError, TypeError):
            src = factory.__qualname__
        from . import _native

        self._prefix = hashlib.sha256(f"{_native.version()}\n{src}\n{self.configs}".encode()).hexdigest()[:16]
        self._tuned: Dict[tuple, TunedKernel] = {}
        self._by_call: Dict[tuple, TunedKernel] = {}

    def __call__(self, *args, **kwargs) -> TunedKernel:
        # Calls are per launch (an op's every call): arguments seen before skip the binding.
        try:
            seen = (args, tuple(kwargs.items()))
            tuned = self._by_call.get(seen)
        except TypeError:  # an unhashable argument
            seen = tuned = None
        if tuned is not None:
            return tuned
        tuned = self._tuned_for(args, kwargs)
        if seen is not None:
            self._by_call[seen] = tuned
        return tuned

    def _tuned_for(self, args, kwargs) -> TunedKernel:
        bound = inspect.signature(self.factory).bind_partial(*args, **kwargs)
        given = set(bound.arguments)
        bound.apply_defaults()  # a key argument with a default may be left out
        # A defaulted parameter that a configuration sets is the configuration's (`tpr=0` beside
        # configs with and without `tpr`).
        tuned_names = {name for cfg in self.configs for name in cfg}
        values = {k: v for k, v in bound.arguments.items() if k in given or k not in tuned_names}
        missing = [k for k in self.key if k not in values]
        if missing:
            raise TypeError(f"tirx.autotune: {self.factory.__name__}() needs the key argument `{missing[0]}`")
        ident = tuple(sorted((k, repr(v)) for k, v in values.items()))
        tuned = self._tuned.get(ident)
        if tuned is None:
            from .runtime import default_target

            configs = self.configs
            if self.prune is not None:
                configs = [dict(c) for c in self.prune([dict(c) for c in configs], **values)]
                if not configs:
                    raise ValueError(f"tirx.autotune: no configuration of {self.factory.__name__} applies to {values}")
            keyed = ",".join(f"{k}={values[k]!r}" for k in self.key)
            # The candidates are part of the key: a cached index means nothing once they change.
            candidates = hashlib.sha1(repr(configs).encode()).hexdigest()[:12]
            cache_key = f"{default_target()}|{self.factory.__qualname__}|{self._prefix}|{keyed}|{candidates}"
            tuned = self._tuned[ident] = TunedKernel(self, values, cache_key, configs)
        return tuned


def autotune(configs: Sequence[dict], key: Sequence[str], warmup: int = 5, rep: int = 20, timer=None, prune=None, launch_args=None, adapts=None, size=None):
    """Decorates a kernel factory: ``factory(**key_args, **config)`` returns a ``@T.prim_func``;
    calling the decorated factory with the key arguments gives a :class:`TunedKernel`.
    ``prune(configs, **key_args)`` keeps the configurations that apply to a key;
    ``launch_args(kernel, args) -> args`` gives each compiled candidate its own arguments, and
    ``adapts(config) -> bool`` says for which configurations it changes them (None: all; the
    chosen kernel's `TunedKernel.launcher` calls it for those only);
    ``size(args) -> hashable``: the call's size class, chosen for apart (as a key value would be);
    ``timer(kernel, args) -> ms`` replaces the CUDA-event timing (for tests)."""
    return lambda factory: Autotuner(factory, configs, key, warmup, rep, timer, prune, launch_args, adapts, size)
