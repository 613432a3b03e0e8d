//! The language's builtin names ([`tirx_script::names`]) as plain Python data, from which
//! `python/tirx/script/namespace.py` builds `T` and `Tx` (docs/python.md §2.3).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tirx_script::names::{table, Namespace};

/// `{"names": [{"namespace", "name", "kind", "meaning", "alias_of"}, ...], "namespaces":
/// {path: kind of the names it does not hold, or None}}`.
#[pyfunction]
pub fn builtins(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let names = PyList::empty(py);
    for n in table() {
        let row = PyDict::new(py);
        row.set_item("namespace", n.ns.path())?;
        row.set_item("name", n.name.as_ref())?;
        row.set_item("kind", n.kind.name())?;
        row.set_item("meaning", n.meaning.name())?;
        row.set_item("alias_of", n.alias_of)?;
        names.append(row)?;
    }
    let namespaces = PyDict::new(py);
    for ns in Namespace::ALL {
        namespaces.set_item(ns.path(), ns.unknown_members().map(|k| k.name()))?;
    }
    let out = PyDict::new(py);
    out.set_item("names", names)?;
    out.set_item("namespaces", namespaces)?;
    Ok(out)
}
