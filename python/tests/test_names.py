"""The native table of the language's names (``_native.builtins()``, crates/script/src/names.rs)
and the Python namespaces built from it agree: a name known on one side only, or a name whose
Python object does not do what its kind says, fails here (docs/python.md §2.3)."""

import inspect
import types

import pytest

import tirx
from tirx import T, Tx, layout
from tirx.script import ir, namespace as ns

# What a hand-written name of each kind is; kinds the table builds itself are checked by
# `test_every_name_of_a_t_namespace_does_what_its_kind_says`.
HAND_WRITTEN_KINDS = {
    "buffer": callable,
    "loop": callable,
    "value": callable,
    "decorator": callable,
    "annotation": lambda v: v in (ns.HANDLE, ns.LET),
    "kernel_object": lambda v: inspect.isclass(v) and issubclass(v, ns.KernelObject),
    "namespace": lambda v: isinstance(v, (ns.TPath, types.ModuleType)),
}


def names(namespace, kind=None):
    return [n for n in ns.names_in(namespace) if kind is None or n["kind"] == kind]


def public(module):
    """What a module defines itself (not through its `__getattr__` pass-through)."""
    return {k for k in vars(module) if not k.startswith("_")}


def test_the_table_has_every_namespace_and_no_name_twice():
    assert set(ns.UNKNOWN_MEMBERS) == {n["namespace"] for n in ns.NAMES}
    rows = [(n["namespace"], n["name"]) for n in ns.NAMES]
    assert len(rows) == len(set(rows))
    assert {n["meaning"] for n in ns.NAMES} <= {"script", "front_end", "unsupported"}


def test_t_defines_exactly_the_tables_names():
    table = {n["name"] for n in names("T")}
    assert sorted(table - public(T)) == [], "in the native table, missing from T"
    assert sorted(public(T) - table) == [], "defined in T, missing from the native table"


def test_every_hand_written_t_name_is_what_its_kind_says():
    for n in names("T"):
        check = HAND_WRITTEN_KINDS.get(n["kind"])
        if check is not None:
            assert check(getattr(T, n["name"])), n


def test_dtypes_scope_ids_and_layouts_of_t():
    for n in names("T", "dtype"):
        v = getattr(T, n["name"])
        assert isinstance(v, ns.DType) and v.name == (n["alias_of"] or n["name"]), n
    assert set(ns.DTYPES) == {n["name"] for n in names("T", "dtype") if not n["alias_of"]}
    for n in names("T", "scope_id"):
        decl = getattr(T, n["name"])([4])
        assert isinstance(decl, ns.ScopeIdDecl) and decl.call.path == f"T.{n['name']}", n
    for n in names("T", "layout"):
        assert getattr(T, n["name"]) is getattr(layout, n["name"]), n


def resolve(path):
    """`T.ptx.cp.async_.commit_group` → that object, attribute by attribute."""
    head, *rest = path.split(".")
    v = {"T": T, "Tx": Tx}[head]
    for part in rest:
        v = getattr(v, part)
    return v


def emitted(call, monkeypatch):
    """The calls `call()` writes where it is made, and what it returns."""
    out = []
    monkeypatch.setattr(ns, "_emit", out.append)
    return out, call()


@pytest.mark.parametrize("namespace", ["T", "T.cuda", "T.ptx"])
def test_every_name_of_a_t_namespace_does_what_its_kind_says(namespace, monkeypatch):
    for n in names(namespace):
        if n["kind"] not in ("statement", "expression"):
            continue
        path = f"{namespace}.{n['name']}"
        out, ret = emitted(resolve(path), monkeypatch)
        if n["kind"] == "statement":
            assert ret is None and [c.path for c in out] == [path], path
        else:
            assert out == [] and isinstance(ret, ir.Call) and ret.path == path, path


def test_unknown_names_pass_through_as_their_namespace_says(monkeypatch):
    assert ns.UNKNOWN_MEMBERS["T"] == ns.UNKNOWN_MEMBERS["T.cuda"] == "expression"
    assert ns.UNKNOWN_MEMBERS["T.ptx"] == "statement"
    out, ret = emitted(T.cuda.cta_synk, monkeypatch)
    assert out == [] and ret.path == "T.cuda.cta_synk"
    out, ret = emitted(T.ptx.cp_async.comit_group, monkeypatch)
    assert ret is None and [c.path for c in out] == ["T.ptx.cp_async.comit_group"]
    assert isinstance(Tx.cpy, ns.TxOp) and repr(Tx.wg.cpy) == "Tx.wg.cpy"


def test_tx_defines_exactly_the_tables_scopes_and_ops():
    table = {n["name"] for n in names("Tx")}
    assert sorted(table - public(Tx)) == [], "in the native table, missing from Tx"
    assert sorted(public(Tx) - table) == [], "defined in Tx, missing from the native table"
    assert {n["kind"] for n in names("Tx")} == {"namespace", "tile_op"}
    assert {n["name"] for n in names("Tx", "tile_op")} == set(tirx._native.registered_variants())


def test_every_tile_op_at_every_scope_is_a_tile_call(monkeypatch):
    for s in names("Tx", "namespace"):
        scope = getattr(Tx, s["name"])
        written = s["alias_of"] or s["name"]
        assert isinstance(scope, ns.TxScope) and scope.scope == written, s
        for op in names("Tx", "tile_op"):
            call = getattr(scope, op["name"])
            path = f"Tx.{op['name']}" if written == "thread" else f"Tx.{written}.{op['name']}"
            out, ret = emitted(call, monkeypatch)
            assert ret is None and [c.path for c in out] == [path], path
            if written == "thread":
                assert repr(getattr(Tx, op["name"])) == path


def test_the_layout_module_defines_exactly_the_tables_names():
    table = {n["name"] for n in names("layout")}
    assert sorted(table - set(layout.__all__)) == [], "in the native table, missing from tirx.layout"
    assert sorted(set(layout.__all__) - table) == [], "in tirx.layout, missing from the native table"
    axes = names("layout", "thread_axis") + names("layout", "memory_axis")
    assert set(layout.AXIS_NAMES) == {n["name"] for n in axes}
    assert layout.MEMORY_AXES == {n["name"] for n in names("layout", "memory_axis")}
    for n in names("tma_utils"):
        assert getattr(layout, n["name"]) is not None, n
    assert [n["name"] for n in names("pipeline")] == ["MBarrier"]
    assert issubclass(tirx.MBarrier, ns.KernelObject)
