"""`tirx.autotune` (issue 28 item 3): candidates compiled once per key, the fastest kept per key
in memory and on disk, the simulator never timed, in-place kernels run once for the caller.
Timings here come from an injected timer; on the GPU, from CUDA events (also tested there)."""

import json
import math
import os
import sys

import numpy as np
import pytest

import tirx
from tirx import T


def scale(n, dtype, threads):
    @T.prim_func
    def scale_add(X_ptr: T.handle, Y_ptr: T.handle):
        X = T.match_buffer(X_ptr, (n,), dtype)
        Y = T.match_buffer(Y_ptr, (n,), dtype)
        T.device_entry()
        bx = T.cta_id([n // threads])
        t = T.thread_id([threads])
        Y[bx * threads + t] = Y[bx * threads + t] + X[bx * threads + t] * 2.0

    return scale_add


CONFIGS = [{"threads": 32}, {"threads": 64}, {"threads": 128}]


def test_the_simulator_is_never_timed_and_runs_the_first_configuration(tmp_path, monkeypatch):
    monkeypatch.setenv("TIRX_CACHE_DIR", str(tmp_path))
    tuned = tirx.autotune(configs=CONFIGS, key=["n", "dtype"])(scale)
    k = tuned(n=256, dtype="float32")
    x, y = np.arange(256, dtype=np.float32), np.ones(256, np.float32)
    k(x, y)
    np.testing.assert_array_equal(y, 1 + 2 * x)
    assert k.kernel is k.kernels[0] and "simulator: not timed" in k.explain()
    assert tuned(n=256, dtype="float32") is k and tuned(n=512, dtype="float32") is not k


def test_the_fastest_is_kept_per_key_in_memory_and_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("TIRX_CACHE_DIR", str(tmp_path))
    timed = []

    def timer(kernel, args):  # candidate 64 threads "fastest"; each runs on the real arguments
        kernel(*args)
        timed.append(kernel.meta["block"][0])
        return {32: 3.0, 64: 1.0, 128: 2.0}[kernel.meta["block"][0]]

    tuned = tirx.autotune(configs=CONFIGS, key=["n"], timer=timer)(scale)
    k = tuned(n=1024, dtype="float32")
    x, y = np.arange(1024, dtype=np.float32), np.ones(1024, np.float32)
    k(x, y)
    assert sorted(timed) == [32, 64, 128]
    # In place (Y += 2X): the timing runs were undone, the caller's call ran once.
    np.testing.assert_array_equal(y, 1 + 2 * x)
    assert k.kernel.meta["block"][0] == 64
    text = k.explain()
    assert "timed over" in text and "chosen {'threads': 64}" in text and "1.0000 ms" in text, text
    data = json.load(open(os.path.join(tmp_path, "autotune-v2.json")))
    assert list(data.values()) == [1] and "n=1024" in next(iter(data))
    # A new process (a fresh tuner) takes the disk's choice without timing.
    timed.clear()
    again = tirx.autotune(configs=CONFIGS, key=["n"], timer=timer)(scale)(n=1024, dtype="float32")
    again(x, y)
    assert timed == [] and again.kernel.meta["block"][0] == 64 and "cached" in again.explain()


def test_each_candidate_gets_its_own_arguments(tmp_path, monkeypatch):
    """``launch_args`` adapts the call's arguments per candidate, for timing and for the call
    (a persistent grid sized per candidate): here each writes only its first ``threads`` elements."""
    monkeypatch.setenv("TIRX_CACHE_DIR", str(tmp_path))
    seen = []

    def timer(kernel, args):
        seen.append((kernel.meta["block"][0], args[0].shape[0]))
        return {32: 3.0, 64: 1.0, 128: 2.0}[kernel.meta["block"][0]]

    def own(kernel, args):  # the first `threads` elements: one CTA
        t = kernel.meta["block"][0]
        return args[0][:t], args[1][:t]

    def one_cta(dtype, threads):  # n = threads
        return scale(threads, dtype, threads)

    k = tirx.autotune(configs=CONFIGS, key=["dtype"], timer=timer, launch_args=own)(one_cta)(dtype="float32")
    x, y = np.arange(256, dtype=np.float32), np.ones(256, np.float32)
    k(x, y)
    assert sorted(seen) == [(32, 32), (64, 64), (128, 128)]
    assert k.kernel.meta["block"][0] == 64
    np.testing.assert_array_equal(y[:64], 1 + 2 * x[:64])  # the chosen candidate's own arguments
    np.testing.assert_array_equal(y[64:], 1)


def test_a_launcher_chooses_on_its_first_call_then_launches_the_choice(tmp_path, monkeypatch):
    """`TunedKernel.launcher` (an op's plan's launches): the first call tunes, the later ones run
    the chosen kernel with its own arguments (``launch_args``), timed no more."""
    monkeypatch.setenv("TIRX_CACHE_DIR", str(tmp_path))
    seen = []

    def timer(kernel, args):
        seen.append(kernel.meta["block"][0])
        return {32: 3.0, 64: 1.0, 128: 2.0}[kernel.meta["block"][0]]

    def own(kernel, args):
        t = kernel.meta["block"][0]
        return args[0][:t], args[1][:t]

    def one_cta(dtype, threads):
        return scale(threads, dtype, threads)

    tuned = tirx.autotune(configs=CONFIGS, key=["dtype"], timer=timer, launch_args=own)(one_cta)(dtype="float16")
    launch = tuned.launcher()
    x, y = np.arange(256, dtype=np.float16), np.ones(256, np.float16)
    launch(x, y)
    launch(x, y)
    assert sorted(seen) == [32, 64, 128] and tuned.kernel.meta["block"][0] == 64
    np.testing.assert_array_equal(y[:64], 1 + 4 * x[:64])  # (twice, the chosen candidate's arguments)
    np.testing.assert_array_equal(y[64:], 1)
    tuned.launcher()(x, y)  # (chosen already: straight to the kernel)
    np.testing.assert_array_equal(y[:64], 1 + 6 * x[:64])
    assert len(seen) == 3


def test_a_launcher_skips_the_argument_adapter_where_adapts_says_it_changes_nothing(tmp_path, monkeypatch):
    """``adapts(config)``: the configurations whose arguments ``launch_args`` changes; the chosen
    kernel's launcher calls the adapter for those only (an op's every call), the tuner's timing
    and direct calls for every one."""
    monkeypatch.setenv("TIRX_CACHE_DIR", str(tmp_path))
    adapted = []

    def own(kernel, args):
        adapted.append(kernel.meta["block"][0])
        return args

    def one_cta(dtype, threads):
        return scale(threads, dtype, threads)

    timer = lambda kernel, args: {32: 1.0, 64: 2.0, 128: 3.0}[kernel.meta["block"][0]]  # noqa: E731
    for adapts, per_launch in ((lambda cfg: cfg["threads"] != 32, 0), (lambda cfg: True, 1), (None, 1)):
        tuner = tirx.autotune(configs=CONFIGS, key=["dtype"], timer=timer, launch_args=own, adapts=adapts)(one_cta)
        tuned = tuner(dtype="float32")
        x, y = np.arange(32, dtype=np.float32), np.ones(32, np.float32)
        tuned(x, y)  # (the first tuner times every candidate, adapting each; the later ones find its choice)
        assert tuned.kernel.meta["block"][0] == 32 and len(adapted) >= 1
        adapted.clear()
        launch = tuned.launcher()
        launch(x, y)
        launch(x, y)
        assert len(adapted) == 2 * per_launch
        np.testing.assert_array_equal(y, 1 + 6 * x)
        adapted.clear()


def test_configuration_errors():
    with pytest.raises(ValueError, match="at least one configuration"):
        tirx.autotune(configs=[], key=["n"])(scale)
    with pytest.raises(TypeError, match="key `m` is not a parameter"):
        tirx.autotune(configs=CONFIGS, key=["m"])(scale)
    with pytest.raises(TypeError, match="needs the key argument `n`"):
        tirx.autotune(configs=CONFIGS, key=["n"])(scale)(dtype="float32")


def test_configurations_that_do_not_apply_are_pruned_per_key(tmp_path, monkeypatch):
    monkeypatch.setenv("TIRX_CACHE_DIR", str(tmp_path))

    def prune(configs, n, **_):  # a grid of n // threads CTAs needs threads to divide n
        return [c for c in configs if n % c["threads"] == 0]

    tuned = tirx.autotune(configs=CONFIGS, key=["n"], prune=prune, timer=lambda k, a: 1.0)(scale)
    k = tuned(n=96, dtype="float32")
    x, y = np.arange(96, dtype=np.float32), np.zeros(96, np.float32)
    k(x, y)
    np.testing.assert_array_equal(y, 2 * x)
    assert [kk.meta["block"][0] for kk in k.kernels] == [32]
    assert "2 configuration(s) pruned" in k.explain()
    with pytest.raises(ValueError, match="no configuration of scale applies"):
        tuned(n=48, dtype="float32")


def test_on_the_gpu_candidates_are_timed_with_cuda_events(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    monkeypatch.setenv("TIRX_CACHE_DIR", str(tmp_path))
    k = tirx.autotune(configs=CONFIGS, key=["n"], rep=5)(scale)(n=1 << 20, dtype="float32")
    x = torch.randn(1 << 20, device="cuda")
    y = torch.ones_like(x)
    k(x, y)
    torch.testing.assert_close(y, 1 + 2 * x)
    assert k.times is not None and all(t > 0 for t in k.times) and "timed over 5" in k.explain()
    # each candidate's occupancy beside its time: what a design leaves idle is read off explain
    assert k.resident == [kk.resident_ctas() for kk in k.kernels] and "CTAs resident)" in k.explain(), k.explain()


def test_cuda_timing_keeps_each_candidates_best_of_interleaved_rounds(tmp_path, monkeypatch):
    """The CUDA-event timing runs `TIMING_ROUNDS` rounds over the candidates (in order, reversed,
    in order) and keeps each one's best: a candidate slowed in one round (clocks, cache state)
    still wins. A given ``timer`` is the caller's: once each."""
    at = __import__("sys").modules["tirx.autotune"]
    monkeypatch.setenv("TIRX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(at, "_on_gpu", lambda args: True)
    monkeypatch.setattr(at, "_fits", lambda kernel, args: kernel.meta["block"][0] != 128)
    monkeypatch.setattr(at, "_resident", lambda kernel, args: None)
    noisy = {32: [2.0, 2.5, 2.2], 64: [4.0, 1.5, 1.8]}  # (64 threads: slowed in the first round)
    timed = []

    def cuda_time(kernel, args, warmup, rep):
        threads = kernel.meta["block"][0]
        timed.append(threads)
        return noisy[threads][sum(t == threads for t in timed) - 1]

    monkeypatch.setattr(at, "_cuda_time", cuda_time)
    k = tirx.autotune(configs=CONFIGS, key=["n"])(scale)(n=7168, dtype="float32")  # (a key no other test tuned)
    x, y = np.arange(7168, dtype=np.float32), np.ones(7168, np.float32)
    k(x, y)
    assert timed == [32, 64, 64, 32, 32, 64] and at.TIMING_ROUNDS == 3
    assert k.times[:2] == [2.0, 1.5] and math.isinf(k.times[2]) and k.kernel.meta["block"][0] == 64
    assert "the best of 3 rounds" in k.explain(), k.explain()
    np.testing.assert_array_equal(y, 1 + 2 * x)


def test_a_configuration_the_gpu_cannot_launch_is_not_timed(tmp_path, monkeypatch):
    """A candidate whose clusters no GPC holds (`autotune._fits`: the driver's occupancy, 0 clusters)
    is never launched: it is shown as not fitting and never chosen; none fitting is an error."""
    at = __import__("sys").modules["tirx.autotune"]
    monkeypatch.setenv("TIRX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(at, "_fits", lambda kernel, args: kernel.meta["block"][0] != 64)
    timed = []

    def timer(kernel, args):
        timed.append(kernel.meta["block"][0])
        return {32: 3.0, 64: 1.0, 128: 2.0}[kernel.meta["block"][0]]

    k = tirx.autotune(configs=CONFIGS, key=["n"], timer=timer)(scale)(n=3072, dtype="float32")  # (a key no other test tuned)
    k(np.arange(3072, dtype=np.float32), np.ones(3072, np.float32))
    assert sorted(timed) == [32, 128] and k.kernel.meta["block"][0] == 128
    assert "{'threads': 64}  does not fit this GPU" in k.explain(), k.explain()
    monkeypatch.setattr(at, "_fits", lambda kernel, args: False)
    k = tirx.autotune(configs=CONFIGS, key=["n"], timer=timer)(scale)(n=6144, dtype="float32")
    with pytest.raises(RuntimeError, match="no configuration fits this GPU"):
        k(np.arange(6144, dtype=np.float32), np.ones(6144, np.float32))


def test_only_the_chosen_candidates_load_warnings_are_shown(tmp_path, monkeypatch):
    """What a candidate's first launch warns (on the GPU: ptxas's serialized wgmmas, raised when
    it is loaded) is held back while the candidates are timed; the chosen one's is shown once
    the choice is made."""
    monkeypatch.setenv("TIRX_CACHE_DIR", str(tmp_path))

    def timer(kernel, args):  # each candidate "warns when loaded"; 64 threads the fastest
        threads = kernel.meta["block"][0]
        import warnings

        warnings.warn(f"ptxas: wgmmas serialized in the {threads}-thread form", tirx.TirxWarning)
        return {32: 3.0, 64: 1.0, 128: 2.0}[threads]

    tuned = tirx.autotune(configs=CONFIGS, key=["n"], timer=timer)(scale)
    with pytest.warns(tirx.TirxWarning) as raised:  # (a size no other test tunes: choices are kept in memory)
        k = tuned(n=5120, dtype="float32")
        k(np.arange(5120, dtype=np.float32), np.ones(5120, np.float32))
    assert [str(w.message) for w in raised] == ["ptxas: wgmmas serialized in the 64-thread form"]


def test_an_ops_choice_among_ways_is_timed_kept_and_first_off_the_gpu(tmp_path, monkeypatch):
    """`autotune.choose`: off the GPU the first option, untimed; with a timer each option's run
    timed once (built once each), the fastest kept in memory and on disk (a later call, or
    another process's, takes it untimed) and its times in `autotune.choices`, and a different
    list of options is a new choice."""
    at = sys.modules["tirx.autotune"]

    monkeypatch.setenv("TIRX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(at, "_memory", {})
    monkeypatch.setattr(at, "_choices", {})
    built, ran = [], []

    def build(i):
        built.append(i)
        return lambda: ran.append(i)

    assert at.choose("op(x)", ["one", "two"], build, on_gpu=False) == 0 and built == ran == []
    times = {"one": 2.0, "two": 1.0, "three": 3.0}

    def timer(option, run):
        run()
        return times[option]

    assert at.choose("op(y)", ["one", "two", "three"], build, on_gpu=False, timer=timer) == 1
    assert built == [0, 1, 2] and ran == [0, 1, 2]
    text = at.choices()["op(y)"]
    assert "chosen two  1.0000 ms" in text and "one  2.0000 ms" in text and "op(x)" not in at.choices(), text
    assert at.choose("op(y)", ["one", "two", "three"], build, on_gpu=False, timer=timer) == 1 and built == [0, 1, 2]
    monkeypatch.setattr(at, "_memory", {})  # (a new process: the disk's choice)
    assert at.choose("op(y)", ["one", "two", "three"], build, on_gpu=False, timer=timer) == 1 and built == [0, 1, 2]
    data = json.load(open(os.path.join(tmp_path, "autotune-v2.json")))
    assert [v for k, v in data.items() if "|choice|" in k and "op(y)" in k] == [1]
    times["one"] = 0.5
    assert at.choose("op(y)", ["one", "two"], build, on_gpu=False, timer=timer) == 0


def rows_scale(dtype, threads):
    @T.prim_func
    def rows_add(X_ptr: T.handle, Y_ptr: T.handle, m: T.int32):
        X = T.match_buffer(X_ptr, (m, 128), dtype)
        Y = T.match_buffer(Y_ptr, (m, 128), dtype)
        T.device_entry()
        bx = T.cta_id([m])
        t = T.thread_id([threads])
        for j in T.serial(128 // threads):
            Y[bx, j * threads + t] = Y[bx, j * threads + t] + X[bx, j * threads + t] * 2.0

    return rows_add


def test_each_size_class_is_timed_and_kept_apart(tmp_path, monkeypatch):
    """`autotune`'s ``size``: a call's size class (here a row kernel's rows, `_common.rows_class`)
    is chosen for apart, in memory and on disk, and a plan's launcher launches each class's
    choice; ``explain`` names the class of the last call."""
    import tirx.ops._common as c

    at = sys.modules["tirx.autotune"]
    monkeypatch.setenv("TIRX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(at, "_memory", {})
    timed, ran = [], []

    def timer(kernel, args):  # 32 threads fastest on a few rows, 128 on many
        timed.append((args[2], kernel.meta["block"][0]))
        return {32: 1.0, 64: 2.0, 128: 3.0}[kernel.meta["block"][0]] * (1 if args[2] <= 4 else -1)

    tuned = tirx.autotune(configs=CONFIGS, key=["dtype"], timer=timer, size=c.rows_class)(rows_scale)
    k = tuned(dtype="float32")

    def call(f, m):
        x, y = np.arange(m * 128, dtype=np.float32).reshape(m, 128), np.ones((m, 128), np.float32)
        f(x, y, m)
        np.testing.assert_array_equal(y, 1 + 2 * x)

    call(k, 3)
    assert k.kernel.meta["block"][0] == 32 and "[size class 1]" in k.explain() and len(timed) == 3
    call(k, 100)  # (class 4: timed)
    assert k.kernel.meta["block"][0] == 128 and "[size class 4]" in k.explain() and len(timed) == 6
    assert k.config == {"threads": 128}  # (the chosen configuration: the current class's)
    call(k, 2)  # (class 1 again: its choice kept, not timed)
    assert k.kernel.meta["block"][0] == 32 and len(timed) == 6 and "timed" in k.explain()
    data = json.load(open(os.path.join(tmp_path, "autotune-v2.json")))
    assert sorted((key.rsplit("|", 1)[1], v) for key, v in data.items() if "rows_scale" in key) == [("size=1", 0), ("size=4", 2)]
    # A plan's launcher: each class's choice, without timing again.
    launch = k.launcher()
    monkeypatch.setattr(at, "_memory", {})
    monkeypatch.setenv("TIRX_CACHE_DIR", str(tmp_path / "new"))
    for m in (100, 3, 70000, 100):
        call(launch, m)
    assert len(timed) == 9 and k.size_class == 9 and k.kernel.meta["block"][0] == 128  # (70,000 rows: class 9, timed)
    assert c.rows_class([np.empty((1 << 30, 0))]) == c.ROWS_CLASS_TOP == 9
    # ``fixed_signature`` (a plan's: the first call's shapes throughout): its class looked up once.
    sized = []
    monkeypatch.setattr(k.tuner, "size", lambda args: sized.append(1) or c.rows_class(args))
    pinned = k.launcher(fixed_signature=True)
    for _ in range(3):
        call(pinned, 3)
    assert len(sized) == 1 and len(timed) == 9 and k.kernel.meta["block"][0] == 32
