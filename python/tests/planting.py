"""Tests' helper: a `tirx.ops` module rebuilt from its source with one mistake planted, so that the
kernels it builds carry the mistake and the simulator must report it."""

import importlib.util


def planted(module, old: str, new: str, tmp_path):
    """``module`` executed anew from its source with the one occurrence of ``old`` replaced by
    ``new`` (the file written under ``tmp_path``: the front end reads kernels from it)."""
    with open(module.__file__) as f:
        src = f.read()
    assert src.count(old) == 1, f"the planted site moved in {module.__name__}: update the test's mistakes"
    name = module.__name__.rsplit(".", 1)[-1]
    path = tmp_path / f"planted_{name}.py"
    path.write_text(src.replace(old, new))
    spec = importlib.util.spec_from_file_location(f"tirx.ops._planted_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
