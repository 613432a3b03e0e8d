"""Summarises a pytest --junitxml report of the reference's test files run through tirx.compat:
passed / failed / skipped per file, then the failures grouped by cause: a known cause
(``CAUSES``, matched against the whole failure text, first match wins) or else the first line of
the exception, with numbers and file paths folded so that parametrizations group together.

    python python/bench/ref_summary.py report.xml
"""

import collections
import re
import sys
import xml.etree.ElementTree as ET


# Known causes of failures that are not tirx bugs (docs/python.md §6.3), most specific first.
CAUSES = [
    ("reference internal: the TMA planner's private helpers and records (_build_*_plan, TensorMapSpec, ...)",
     r"copy_async\.tma\.(_\w+|TensorMapSpec|TMAPlan|AutoIssueAxis|IssueCoord|ProofStatus)` is a reference"),
    ("reference internal: host IR (cuTensorMapEncodeTiled statements); tirx encodes tensor maps in its launcher",
     r"sctx\.callbacks"),
    ("reference internal: TVMScript text parser (tvm.script.from_source) for sm_100 selector/gather4 kernels",
     r"tvm\.script\.from_source"),
    ("sm_100 only: gather4 / selectors (Blackwell TMA), not on Hopper", r"config `gather4`|gather4"),
    ("reference's error text: the test matches the reference planner's message format; tirx declines with its own rule",
     r"Regex pattern did not match"),
    ("deliberate: dsmem declines a region it cannot split into 16-byte bulk chunks (tile-primitives §3.21, rules bulk_chunk, alignment)",
     r"forced variant 'dsmem' does not apply"),
    ("reference kernel is racy: a bare Tx.<op> is thread scope, every thread read-modify-writes the shared tile "
     "(simulator, docs/python.md §6.4)",
     r"data race: `A_smem`[\s\S]*tx_op\(A_smem, A_smem, B_smem\)"),
    ("reference kernel is racy: no cluster barrier after the dsmem copy completed (simulator, tile-primitives §8.8)",
     r"no cluster barrier after the copy completed"),
    ("symbolic strides in a TileLayout object (S[...] with a Var stride); run-time strides are `strides=` on parameters",
     r"operand type\(s\) for \*: 'Var'|a layout stride is an int"),
    ("TVM's temporary names in generated code (condval)", r"'condval' in"),
]


def cause_of(text: str):
    for label, pattern in CAUSES:
        if re.search(pattern, text):
            return label
    return None


def main(path):
    per_file = collections.defaultdict(collections.Counter)
    causes = collections.Counter()
    example = {}
    for tc in ET.parse(path).iter("testcase"):
        f = tc.get("classname", "").split(".")
        name = "/".join(f[:-1] + [f[-1] + ".py"]) if f else "?"
        bad = tc.find("failure")
        bad = bad if bad is not None else tc.find("error")
        if tc.find("skipped") is not None:
            per_file[name]["skipped"] += 1
        elif bad is None:
            per_file[name]["passed"] += 1
        else:
            per_file[name]["failed"] += 1
            text = (bad.get("message") or "") + "\n" + (bad.text or "")
            first = (bad.get("message") or "").strip().split("\n")[0][:160]
            key = cause_of(text) or re.sub(r"\d+", "N", re.sub(r"/\S+", "<path>", first))
            causes[key] += 1
            example.setdefault(key, f"{name}::{tc.get('name')}")
    total = collections.Counter()
    print(f"{'file':<48} {'passed':>6} {'failed':>6} {'skipped':>7}")
    for name in sorted(per_file):
        c = per_file[name]
        total.update(c)
        print(f"{name:<48} {c['passed']:>6} {c['failed']:>6} {c['skipped']:>7}")
    print(f"{'total':<48} {total['passed']:>6} {total['failed']:>6} {total['skipped']:>7}")
    print("\nfailures by cause:")
    for k, n in causes.most_common():
        print(f"{n:5d}  {k}\n       e.g. {example[k]}")


if __name__ == "__main__":
    main(sys.argv[1])
