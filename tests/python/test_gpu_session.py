"""scripts/gpu-session on a made-up checkout: a fake nvidia-smi, a fake build/rlgemm that appends a row to the CSV
it is told to write (and sleeps when asked), and a carry-build that does nothing. Stages run once and are skipped
after, a cut stage is resumed, a stage without time left is not started, and the state goes to $OUT after each.
Standard library only."""
import os
import shutil
import subprocess
import tarfile
import time

import pytest

from conftest import SCRIPTS_DIR

FAKE_RLGEMM = """#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/calls.txt"
out=""
while (($#)); do [ "$1" = --out ] && out=$2; shift; done
[ -n "${FAKE_SLEEP:-}" ] && sleep "$FAKE_SLEEP"
mkdir -p "$(dirname "$out")"
[ -f "$out" ] || echo "M,N,K" > "$out"
echo "1,2,3" >> "$out"
"""

FAKE_SMI = """#!/usr/bin/env bash
case "$*" in
  *count,name*) echo "1, NVIDIA H200" ;;
  *) echo "NVIDIA H200" ;;
esac
"""


def executable(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPTS_DIR / "gpu-session", root / "scripts" / "gpu-session")
    executable(root / "scripts" / "carry-build", "#!/usr/bin/env bash\nexit 0\n")
    executable(root / "build" / "rlgemm", FAKE_RLGEMM)
    executable(tmp_path / "bin" / "nvidia-smi", FAKE_SMI)
    return tmp_path


def run(tree, *stages, budget=200, **env):
    full = dict(os.environ, PATH=str(tree / "bin") + os.pathsep + os.environ["PATH"], BUDGET=str(budget),
                RESERVE="1", STATE=str(tree / "state" / "h200"), OUT=str(tree / "out"))
    full.pop("FAKE_SLEEP", None)
    full.update(env)
    return subprocess.run(["bash", str(tree / "checkout" / "scripts" / "gpu-session"), *stages], env=full,
                          capture_output=True, text=True, timeout=120)


def invocations(tree):
    calls = tree / "checkout" / "build" / "calls.txt"
    return calls.read_text().splitlines() if calls.exists() else []


def test_a_stage_runs_once_is_recorded_and_its_state_goes_out(tree):
    done = run(tree, "first-in-place-2")
    assert done.returncode == 0, done.stderr
    state = tree / "state" / "h200"
    assert (state / "first-in-place-2.done").exists()
    log = (state / "calls.log").read_text()
    assert "first-in-place-2 rc=0" in log and "rows=1" in log, log
    calls = invocations(tree)
    assert len(calls) == 1 and "bench --shapes bench/shapes/first-in-place.csv" in calls[0], calls
    assert "--seed 20262002" in calls[0], calls
    assert "--resume" in calls[0] and f"--out {state}/first-in-place/bench-2.csv" in calls[0], calls
    with tarfile.open(tree / "out" / "state.tgz") as packed:
        assert "h200/first-in-place-2.done" in packed.getnames()
    # Done is done: a second call skips it.
    again = run(tree, "first-in-place-2")
    assert again.returncode == 0, again.stderr
    assert len(invocations(tree)) == 1
    log = (state / "calls.log").read_text()
    assert log.count("== call at") == 2 and log.count("first-in-place-2 rc=") == 1, log


def test_a_stage_cut_by_the_budget_goes_on_the_next_time(tree):
    started = time.monotonic()
    cut = run(tree, "zero-shot-1", budget=5, FAKE_SLEEP="60", MIN_SECONDS="1", ZERO_SHOT="v9")
    assert time.monotonic() - started < 40
    assert cut.returncode == 0, cut.stderr
    state = tree / "state" / "h200"
    assert not (state / "zero-shot-1-v9.done").exists()
    assert "zero-shot-1-v9 rc=124" in (state / "calls.log").read_text()
    resumed = run(tree, "zero-shot-1", ZERO_SHOT="v9")
    assert resumed.returncode == 0, resumed.stderr
    assert (state / "zero-shot-1-v9.done").exists()
    calls = invocations(tree)
    assert len(calls) == 2 and all("--resume --shard 1/2" in c for c in calls), calls
    assert all(f"--out {state}/zero-shot-v9-fp16/bench-1.csv" in c for c in calls), calls
    assert "zero-shot-1-v9 rc=0" in (state / "calls.log").read_text()


def test_a_stage_without_time_left_is_not_started(tree):
    short = run(tree, "model-decode", budget=100)  # model-decode asks for 120 s at least
    assert short.returncode == 0, short.stderr
    assert "model-decode not started" in (tree / "state" / "h200" / "calls.log").read_text()
    assert invocations(tree) == []


def test_no_gpu_and_unknown_stages_are_refused(tree):
    executable(tree / "bin" / "nvidia-smi", "#!/usr/bin/env bash\nexit 9\n")
    assert run(tree, "first-in-place-1").returncode == 3
    executable(tree / "bin" / "nvidia-smi", FAKE_SMI)
    unknown = run(tree, "no-such-stage")
    assert unknown.returncode == 2 and "unknown stage 'no-such-stage'" in unknown.stderr


def test_the_bf16_zero_shot_stages_measure_bf16_into_a_folder_of_their_own(tree):
    done = run(tree, "zero-shot-bf16-0", "zero-shot-1", ZERO_SHOT="v9")
    assert done.returncode == 0, done.stderr
    state = tree / "state" / "h200"
    assert (state / "zero-shot-bf16-0-v9.done").exists() and (state / "zero-shot-1-v9.done").exists()
    log = (state / "calls.log").read_text()
    assert "zero-shot-bf16-0-v9 rc=0 at" in log and "rows=1" in log, log
    calls = invocations(tree)
    assert len(calls) == 2, calls
    assert f"--out {state}/zero-shot-v9-bf16/bench-0.csv" in calls[0] and "--dtype bf16" in calls[0], calls
    assert "--shard 0/2" in calls[0] and "--control" in calls[0], calls
    assert f"--out {state}/zero-shot-v9-fp16/bench-1.csv" in calls[1] and "--dtype fp16" in calls[1], calls


FAKE_PROBE = """#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/probe-calls.txt"
[ -n "${FAKE_PROBE_FAIL:-}" ] && case "$*" in *bf16*) echo "512,1536,8960 candidate 0: [partial"; exit 1 ;; esac
for s in "$@"; do case "$s" in *,*) echo "$s candidate 0: [k grid 1x1x1 block 1 smem 0 clusters 1 of 2 resident]" ;; esac; done
"""


def test_the_kernels_stage_lists_the_held_out_shapes_in_both_types_and_keeps_only_whole_listings(tree):
    checkout = tree / "checkout"
    executable(checkout / "build" / "lt_choice_probe", FAKE_PROBE)
    (checkout / "bench" / "shapes").mkdir(parents=True)
    (checkout / "bench" / "shapes" / "llm-heldout.csv").write_text(
        "# a comment\nM,N,K\n# tokens 1\n16,4096,4096\n1,4096,4096\n16,4096,4096\n2048,512,3584\n")
    state = tree / "state" / "h200"
    failed = run(tree, "lt-kernels", FAKE_PROBE_FAIL="1")
    assert not (state / "lt-kernels.done").exists(), failed.stdout
    assert (state / "lt-kernels" / "kernels-fp16.txt").exists()
    assert not (state / "lt-kernels" / "kernels-bf16.txt").exists()
    done = run(tree, "lt-kernels")
    assert done.returncode == 0, done.stderr
    assert (state / "lt-kernels.done").exists()
    calls = (checkout / "build" / "probe-calls.txt").read_text().splitlines()
    shapes = "1,4096,4096 16,4096,4096 2048,512,3584"
    # fp16 once (kept from the cut call), bf16 twice (the cut listing started again)
    assert calls == [f"--kernels --dtype fp16 {shapes}", f"--kernels --dtype bf16 {shapes}",
                     f"--kernels --dtype bf16 {shapes}"], calls
    listing = (state / "lt-kernels" / "kernels-bf16.txt").read_text().splitlines()
    assert listing[0].startswith("1,4096,4096 candidate 0:") and len(listing) == 3
    assert "lt-kernels rc=0 at" in (state / "calls.log").read_text() and "listed=6" in (state / "calls.log").read_text()
