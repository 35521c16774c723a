#!/usr/bin/env python3
"""scripts/gpu-check's reading of ctest's (and pytest's) JUnit files: which tests pass 2 runs again with the GPU,
and the summary: a test's last result (a later file wins), the failed and skipped tests with a reason each, the
pytest counts inside ctest's python.pytest, and the final SUMMARY line.

    gpu_check_results.py --rerun PASS1.xml                  names pass 2 runs again, one per line
    gpu_check_results.py [--gpu G] [--commit C] [--expected NAMES] PASS1.xml [PASS2.xml [PYTEST.xml]]
                                                            the summary; exit 1 when a test failed
    gpu_check_results.py --merge OUT.xml PART.xml...         one JUnit file of the test cases of several (pass 2
                                                            split over GPUs, one ctest and one file a GPU)
    gpu_check_results.py --not-carried CTEST.json           names of the tests whose executable is missing (a
                                                            carried build packed with CARRY_SKIP), one per line;
                                                            CTEST.json: `ctest --show-only=json-v1`

Standard library only.
"""
import argparse
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

# Output of a test that passed without a GPU by leaving its GPU part out: pytest's skips, "no GPU" messages, the
# installed-package example's accepted exit code 3.
PARTIAL = re.compile(r"\b\d+ skipped\b|\bno (usable )?(CUDA )?GPU\b|needs a CUDA GPU|exited 3", re.I)


def cases(path):
    """{name: (status, reason, output)} of a ctest or pytest JUnit file; status passed, failed or skipped. A
    missing or empty file has none."""
    if not path or not os.path.exists(path) or os.path.getsize(path) == 0:
        return {}
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name, status = case.get("name"), case.get("status")
        text = (case.findtext("system-out") or "") + (case.findtext("system-err") or "")
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        skipped = case.find("skipped")
        if status is None:  # pytest's report (ctest puts a status on every case): file::test
            name = case.get("classname", "") + "::" + name
            status = "fail" if failure is not None else "notrun" if skipped is not None else "run"
            if skipped is not None:
                skipped.set("message", "SKIP_" + (skipped.get("message") or ""))
        if failure is not None or status == "fail":
            out[name] = ("failed", (failure.get("message") if failure is not None else "") or "failed", text)
        elif status == "disabled":
            out[name] = ("skipped", "disabled", text)
        elif status == "notrun":
            message = skipped.get("message", "") if skipped is not None else ""
            if message.startswith("SKIP_"):  # SKIP_REGULAR_EXPRESSION_MATCHED, SKIP_RETURN_CODE=...
                out[name] = ("skipped", skip_reason(text) or message.removeprefix("SKIP_"), text)
            else:  # not run for another reason (its executable missing): a failure
                out[name] = ("failed", "not run: " + (message or "no reason given"), text)
        else:
            out[name] = ("passed", "", text)
    return out


def skip_reason(text):
    """GoogleTest's skip message: the line after "file:line: Skipped"."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.rstrip().endswith(": Skipped") and i + 1 < len(lines) and lines[i + 1].strip():
            return lines[i + 1].strip()
    return ""


def pytest_counts(text):
    """pytest's last summary line ("12 passed, 3 skipped, 1 warning in 4.5s") as {what: n}, and its -rs lines."""
    found = re.findall(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s", text, re.M)
    counts = {w: int(n) for n, w in re.findall(r"(\d+) (\w+)", found[-1])} if found else {}
    skips = [line.strip() for line in text.splitlines() if line.startswith("SKIPPED [")]
    return counts, skips


def rerun(path):
    """Names to run again with the GPU: what skipped, failed, or passed having left its GPU part out."""
    return [name for name, (status, _, text) in cases(path).items() if status != "passed" or PARTIAL.search(text)]


def summary(files, gpu="", commit="", expected=()):
    """(lines, failed): the report of the results in `files`, a later file's result winning; each name in
    `expected` must have a result in the second file (pass 2), else it counts as failed."""
    results, first = {}, cases(files[0]) if files else {}
    for path in files:
        results.update(cases(path))
    second = cases(files[1]) if len(files) > 1 else {}
    for name in expected:
        if name not in second:
            results[name] = ("failed", "no result with the GPU (ctest stopped before it?)", "")
    if not results:
        return ["gpu-check: no test results (ctest found no tests, or stopped before writing them)",
                f"gpu-check: SUMMARY {gpu}, {commit}: no tests ran"], True
    lines = []
    by = {s: sorted(n for n, r in results.items() if r[0] == s) for s in ("passed", "failed", "skipped")}
    for name in sorted(first):
        if first[name][0] == "failed" and name in second and results[name][0] != "failed":
            lines.append(f"NOTE    {name}: failed without a GPU ({first[name][1]}), {results[name][0]} with it")
    lines += [f"FAILED  {name}: {results[name][1]}" for name in by["failed"]]
    lines += [f"SKIPPED {name}: {results[name][1]}" for name in by["skipped"]]
    inner = ""
    if "python.pytest" in results:
        counts, skips = pytest_counts(results["python.pytest"][2])
        lines += [f"SKIPPED python.pytest: {line}" for line in skips]
        inner = "; inside python.pytest: " + (", ".join(f"{n} {w}" for w, n in counts.items()) or "no pytest summary")
    lines.append(f"gpu-check: SUMMARY {gpu}, {commit}: {len(results)} tests, {len(by['passed'])} passed, "
                 f"{len(by['failed'])} failed, {len(by['skipped'])} skipped{inner}")
    return lines, bool(by["failed"])


def merge(out, parts):
    """Writes the test cases of the JUnit files `parts` (missing or empty ones have none) into one file `out`, in the
    order given; returns how many."""
    suite = ET.Element("testsuite", name="gpu-check")
    count = 0
    for path in parts:
        if not path or not os.path.exists(path) or os.path.getsize(path) == 0:
            continue
        for case in ET.parse(path).getroot().iter("testcase"):
            suite.append(case)
            count += 1
    suite.set("tests", str(count))
    ET.ElementTree(suite).write(out, encoding="utf-8", xml_declaration=True)
    return count


def not_carried(path):
    """Tests of ctest's JSON listing whose executable does not exist here (ctest lists such a test without its
    command)."""
    with open(path) as f:
        listing = json.load(f)
    return [t["name"] for t in listing.get("tests", [])
            if not t.get("command") or not os.path.exists(t["command"][0])]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rerun", action="store_true", help="list the tests pass 2 runs again")
    p.add_argument("--not-carried", action="store_true", help="list the tests whose executable is missing")
    p.add_argument("--merge", metavar="OUT", help="write the test cases of the files into one JUnit file OUT")
    p.add_argument("--gpu", default="")
    p.add_argument("--commit", default="")
    p.add_argument("--expected", help="a file of the names pass 2 ran, one per line")
    p.add_argument("files", nargs="+")
    a = p.parse_args(argv)
    if a.merge:
        merge(a.merge, a.files)
        return 0
    if a.rerun or a.not_carried:
        for name in (rerun if a.rerun else not_carried)(a.files[0]):
            print(name)
        return 0
    expected = []
    if a.expected and os.path.exists(a.expected):
        expected = [n for n in open(a.expected).read().split("\n") if n]
    lines, failed = summary(a.files, a.gpu, a.commit, expected)
    print("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
