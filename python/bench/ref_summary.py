"""Summarises a pytest --junitxml report of the reference's test files run through tirx.compat:
passed / failed / skipped per file, then the failures grouped by cause (the first line of the
exception, with numbers and file paths folded so that parametrizations group together).

    python python/bench/ref_summary.py report.xml
"""

import collections
import re
import sys
import xml.etree.ElementTree as ET


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
            first = (bad.get("message") or "").strip().split("\n")[0][:160]
            key = re.sub(r"\d+", "N", re.sub(r"/\S+", "<path>", first))
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
