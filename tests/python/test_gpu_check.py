"""scripts/gpu_check_results.py, scripts/gpu-check's reading of JUnit files: statuses and skip reasons from ctest
and pytest, which tests the GPU pass runs again, and the summary; and scripts/gpu-check itself on a made-up ctest
tree, cut and resumed. Standard library only."""
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import SCRIPTS_DIR


CTEST_JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="(empty)" tests="5" failures="1" disabled="0" skipped="2" hostname="" time="3">
  <testcase name="Problem.ParsesValidShapes" classname="Problem.ParsesValidShapes" time="0.01" status="run">
    <system-out>[  PASSED  ] 1 test.</system-out>
  </testcase>
  <testcase name="HandleGpu.BadInputsAreRefusedWithTheRule" classname="HandleGpu.BadInputsAreRefusedWithTheRule"
            time="0.2" status="notrun">
    <skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>
    <system-out>[ RUN      ] HandleGpu.BadInputsAreRefusedWithTheRule
/src/tests/dispatch/handle_gpu_test.cpp:123: Skipped
needs a CUDA GPU, none usable here: no CUDA device
[  SKIPPED ] HandleGpu.BadInputsAreRefusedWithTheRule (0 ms)</system-out>
  </testcase>
  <testcase name="Mpi.Ranks" classname="Mpi.Ranks" time="0.1" status="notrun">
    <skipped message="Unable to find executable: /build/tests/search/test_search_mpi"/>
  </testcase>
  <testcase name="Store.Broken" classname="Store.Broken" time="0.1" status="fail">
    <failure message="Failed"/>
    <system-out>expected 1, got 0</system-out>
  </testcase>
  <testcase name="python.pytest" classname="python.pytest" time="50" status="run">
    <system-out>...s.
SKIPPED [1] tests/python/test_ops.py:14: needs a CUDA GPU (torch.cuda.is_available() is False)
65 passed, 1 skipped, 1 warning in 55.18s
</system-out>
  </testcase>
</testsuite>
"""


@pytest.fixture(scope="module")
def results(load_script):
    return load_script("gpu_check_results")


def test_gpu_check_reads_ctest_junit_and_picks_what_the_gpu_pass_reruns(results, tmp_path):
    first = tmp_path / "cpu.xml"
    first.write_text(CTEST_JUNIT)
    got = results.cases(str(first))
    assert got["Problem.ParsesValidShapes"][0] == "passed"
    assert got["HandleGpu.BadInputsAreRefusedWithTheRule"][:2] == (
        "skipped", "needs a CUDA GPU, none usable here: no CUDA device")
    assert got["Mpi.Ranks"][:2] == ("failed", "not run: Unable to find executable: /build/tests/search/test_search_mpi")
    assert got["Store.Broken"][:2] == ("failed", "Failed")
    # Skipped, failed, and python.pytest (its GPU tests skipped inside it); not what passed whole.
    assert sorted(results.rerun(str(first))) == ["HandleGpu.BadInputsAreRefusedWithTheRule", "Mpi.Ranks",
                                                  "Store.Broken", "python.pytest"]
    assert results.pytest_counts(got["python.pytest"][2]) == (
        {"passed": 65, "skipped": 1, "warning": 1},
        ["SKIPPED [1] tests/python/test_ops.py:14: needs a CUDA GPU (torch.cuda.is_available() is False)"])


def test_gpu_check_summary_takes_the_gpu_pass_and_lists_skips_and_failures(results, tmp_path):
    first = tmp_path / "cpu.xml"
    first.write_text(CTEST_JUNIT)
    second = tmp_path / "gpu.xml"
    second.write_text(CTEST_JUNIT.replace('status="notrun">\n    <skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>',
                                          'status="run">')
                      .replace('status="fail">\n    <failure message="Failed"/>', 'status="run">')
                      .replace("65 passed, 1 skipped, 1 warning in 55.18s", "80 passed in 70.00s"))
    expected = ["HandleGpu.BadInputsAreRefusedWithTheRule", "Mpi.Ranks", "Store.Broken", "python.pytest",
                "Gone.Missing"]
    lines, failed = results.summary([str(first), str(second)], "NVIDIA H200", "abc", expected)
    assert failed
    assert "NOTE    Store.Broken: failed without a GPU (Failed), passed with it" in lines
    assert "FAILED  Mpi.Ranks: not run: Unable to find executable: /build/tests/search/test_search_mpi" in lines
    assert "FAILED  Gone.Missing: no result with the GPU (ctest stopped before it?)" in lines
    assert lines[-1] == ("gpu-check: SUMMARY NVIDIA H200, abc: 6 tests, 4 passed, 2 failed, 0 skipped; inside "
                         "python.pytest: 80 passed")
    # One pass only (the GPU pass missing): the skips stay skips and are listed with their reason.
    lines, failed = results.summary([str(first)], "NVIDIA H200", "abc")
    assert "SKIPPED HandleGpu.BadInputsAreRefusedWithTheRule: needs a CUDA GPU, none usable here: no CUDA device" in lines
    assert ("SKIPPED python.pytest: SKIPPED [1] tests/python/test_ops.py:14: needs a CUDA GPU "
            "(torch.cuda.is_available() is False)") in lines
    assert lines[-1].endswith("5 tests, 2 passed, 2 failed, 1 skipped; inside python.pytest: 65 passed, 1 skipped, "
                              "1 warning")
    lines, failed = results.summary([str(tmp_path / "none.xml")], "X", "abc")
    assert failed and lines[-1] == "gpu-check: SUMMARY X, abc: no tests ran"


def test_gpu_check_reads_pytest_junit(results, tmp_path):
    report = tmp_path / "pytest.xml"
    report.write_text('<?xml version="1.0"?><testsuites><testsuite name="pytest">'
                      '<testcase classname="tests.python.test_ops" name="test_mm"/>'
                      '<testcase classname="tests.python.test_ops" name="test_gpu">'
                      '<skipped type="pytest.skip" message="needs a CUDA GPU"/></testcase>'
                      '<testcase classname="tests.python.test_ops" name="test_bad"><failure message="boom"/></testcase>'
                      '</testsuite></testsuites>')
    got = results.cases(str(report))
    assert {k: v[:2] for k, v in got.items()} == {
        "tests.python.test_ops::test_mm": ("passed", ""),
        "tests.python.test_ops::test_gpu": ("skipped", "needs a CUDA GPU"),
        "tests.python.test_ops::test_bad": ("failed", "boom")}


def test_gpu_check_lists_the_tests_whose_executable_a_slim_carry_left_out(results, tmp_path):
    present = tmp_path / "test_core"
    present.write_text("")
    listing = {"kind": "ctestInfo", "tests": [
        {"name": "Problem.ParsesValidShapes", "command": [str(present), "--gtest_filter=Problem.ParsesValidShapes"]},
        {"name": "Mpi.Ranks", "command": [str(tmp_path / "test_search_mpi"), "--gtest_filter=Mpi.Ranks"]},
        {"name": "Store.Lists"},  # ctest lists a test whose executable it cannot find without a command
    ]}
    path = tmp_path / "tests.json"
    path.write_text(json.dumps(listing))
    assert results.not_carried(str(path)) == ["Mpi.Ranks", "Store.Lists"]


def test_gpu_check_merges_the_gpu_pass_split_over_gpus(results, tmp_path):
    # Pass 2 split over two GPUs: one JUnit file each (one missing: its ctest wrote none), merged into one file that
    # the summary reads as the GPU pass.
    part0, part1 = tmp_path / "gpu-0.xml", tmp_path / "gpu-1.xml"
    part0.write_text('<?xml version="1.0"?><testsuite name="(empty)" tests="1">'
                     '<testcase name="A.One" classname="A.One" status="run"><system-out>ok</system-out></testcase>'
                     '</testsuite>')
    part1.write_text('<?xml version="1.0"?><testsuite name="(empty)" tests="1">'
                     '<testcase name="B.Two" classname="B.Two" status="fail"><failure message="Failed"/></testcase>'
                     '</testsuite>')
    merged = tmp_path / "gpu.xml"
    assert results.main(["--merge", str(merged), str(part0), str(tmp_path / "gpu-2.xml"), str(part1)]) == 0
    got = results.cases(str(merged))
    assert {k: v[0] for k, v in got.items()} == {"A.One": "passed", "B.Two": "failed"}
    lines, failed = results.summary([str(tmp_path / "cpu.xml"), str(merged)], "G", "c", ["A.One", "B.Two"])
    assert failed and lines[-1] == "gpu-check: SUMMARY G, c: 2 tests, 1 passed, 1 failed, 0 skipped"


# scripts/gpu-check end to end, on a made-up ctest tree in a copy of the scripts: A passes whole without a GPU, B
# and C skip there ("needs a CUDA GPU") and pass when a device is visible. Each run of B or C adds a line to
# runs.txt; C waits while the file `hold` exists, so a run can be cut while C runs. C's name holds slashes, as a
# parameterized GoogleTest's does.
def _fake_checkout(tmp_path):
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    for name in ("gpu-check", "gpu_check_results.py"):
        shutil.copy2(SCRIPTS_DIR / name, root / "scripts" / name)
    build = root / "build"
    build.mkdir()
    runs, hold = tmp_path / "runs.txt", tmp_path / "hold"

    def gpu_test(name, token, wait):
        body = (f'[ -z "$CUDA_VISIBLE_DEVICES" ] && {{ echo needs a CUDA GPU; exit 0; }}; echo {token} >> {runs}; '
                + (f'while [ -e {hold} ]; do sleep 0.1; done; ' if wait else "") + "echo ran on the GPU")
        body = body.replace('"', '\\"')
        return (f'add_test({name} "/bin/sh" "-c" "{body}")\n'
                f'set_tests_properties({name} PROPERTIES SKIP_REGULAR_EXPRESSION "needs a CUDA GPU")\n')

    (build / "CTestTestfile.cmake").write_text('add_test(T.A "/bin/sh" "-c" "echo fine")\n'
                                               + gpu_test("T.B", "T.B", False) + gpu_test("P/T.C/0", "T.C", True))
    return root, runs, hold


def _no_gpu_env(root):
    """The environment of a machine without a GPU, on any machine: an nvidia-smi that finds none comes first on
    PATH (the real one, on a GPU machine, would count its GPUs) and CUDA_VISIBLE_DEVICES is unset."""
    fake = root / "no-gpu-bin"
    fake.mkdir(exist_ok=True)
    smi = fake / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed: no devices were found' >&2\nexit 9\n")
    smi.chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}:" + os.environ["PATH"])
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def _gpu_check(root, *args, timeout=60):
    return subprocess.run([str(root / "scripts" / "gpu-check"), "--allow-no-gpu", "--jobs", "2", *args],
                          cwd=root, env=_no_gpu_env(root), capture_output=True, text=True, timeout=timeout)


def test_gpu_check_keeps_a_cut_runs_results_and_resume_runs_only_the_rest(tmp_path):
    if not shutil.which("ctest") or not shutil.which("flock"):
        pytest.skip("needs ctest and flock")
    root, runs, hold = _fake_checkout(tmp_path)
    log, state = tmp_path / "gpu-tests.log", tmp_path / "state"
    args = ["--log", str(log), "--state", str(state)]
    # The first run is cut while C runs: B's result and output are kept, in the state folder and in the log.
    hold.write_text("")
    first = subprocess.Popen([str(root / "scripts" / "gpu-check"), "--allow-no-gpu", "--jobs", "2", *args],
                             cwd=root, env=_no_gpu_env(root), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 60
    while not (runs.exists() and "T.C" in runs.read_text()) and time.time() < deadline:
        time.sleep(0.1)
    assert runs.read_text().split() == ["T.B", "T.C"]
    os.killpg(first.pid, signal.SIGTERM)
    first.wait(timeout=30)
    hold.unlink()
    kept = sorted(p.name for p in (state / "pass2").glob("*.xml"))
    assert len(kept) == 1 and "T.B" in (state / "pass2" / kept[0]).read_text()
    text = log.read_text()
    assert "-- GPU 0: T.B" in text and "SUMMARY" not in text
    # Resumed with other arguments: refused, nothing run.
    r = _gpu_check(root, *args, "--resume", "--only", "T.B")
    assert r.returncode == 2 and "other arguments" in r.stderr
    # Resumed: pass 1 is not run again, only C runs, and the summary covers A, B and C; the log keeps the first part.
    r = _gpu_check(root, *args, "--resume")
    assert r.returncode == 0, r.stdout + r.stderr
    assert runs.read_text().split() == ["T.B", "T.C", "T.C"]
    text = log.read_text()
    assert "-- GPU 0: T.B" in text and "-- GPU 0: P/T.C/0" in text and "== pass 1: taken from the cut run" in text
    assert text.strip().splitlines()[-1].endswith("3 tests, 3 passed, 0 failed, 0 skipped")
    # A fresh run starts over (pass 1 and both GPU tests again); --resume without a state is refused.
    r = _gpu_check(root, *args)
    assert r.returncode == 0 and runs.read_text().split() == ["T.B", "T.C", "T.C", "T.B", "T.C"]
    assert "taken from the cut run" not in log.read_text()
    r = _gpu_check(root, "--log", str(log), "--state", str(tmp_path / "empty"), "--resume")
    assert r.returncode == 2 and "no pass 1" in r.stderr


def test_gpu_check_shares_the_gpu_pass_among_gpus_each_test_once_and_python_first(tmp_path):
    if not shutil.which("ctest") or not shutil.which("flock"):
        pytest.skip("needs ctest and flock")
    root, runs, hold = _fake_checkout(tmp_path)
    build = root / "build" / "CTestTestfile.cmake"
    extra = "".join(
        f'add_test({name} "/bin/sh" "-c" "[ -z \\"$CUDA_VISIBLE_DEVICES\\" ] && {{ echo needs a CUDA GPU; exit 0; }}; '
        f'echo {name}:$CUDA_VISIBLE_DEVICES >> {runs}")\n'
        f'set_tests_properties({name} PROPERTIES SKIP_REGULAR_EXPRESSION "needs a CUDA GPU")\n'
        for name in ("T.D", "T.E", "T.F", "python.pytest"))
    build.write_text(build.read_text() + extra)
    state = tmp_path / "state"
    r = _gpu_check(root, "--gpus", "2", "--log", str(tmp_path / "log"), "--state", str(state))
    assert r.returncode == 0, r.stdout + r.stderr
    ran = [line.split(":")[0] for line in runs.read_text().split()]
    assert sorted(ran) == ["T.B", "T.C", "T.D", "T.E", "T.F", "python.pytest"]
    assert (state / "pass2.list").read_text().split()[0] == "python.pytest"
    assert {line.split(":")[1] for line in runs.read_text().split() if ":" in line} <= {"0", "1"}
    assert "7 tests, 7 passed, 0 failed, 0 skipped" in r.stdout.strip().splitlines()[-2]
