"""The ctypes layer on any machine (no PyTorch, no GPU needed): finding librlgemm, statuses and messages."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import rlgemm
from rlgemm import _library


def library_or_skip():
    try:
        return rlgemm.library()
    except rlgemm.LibraryNotFound as e:
        pytest.skip(str(e))


def test_version_names_the_commit():
    library_or_skip()
    assert "commit" in rlgemm.version()


def test_missing_database_is_invalid_input():
    library_or_skip()
    with pytest.raises(rlgemm.RlgemmError) as info:
        rlgemm.Handle(database="/nonexistent/rlgemm-tune.db")
    assert info.value.status == rlgemm.ERROR_INVALID_INPUT
    assert "does not exist" in str(info.value)


def test_bad_tuned_table_names_the_line(tmp_path):
    library_or_skip()
    table = tmp_path / "t.csv"
    table.write_text("gpu,M,N,K,layout,design,time_us,speedup_vs_lt_auto\nX,64,60,64,tn,sm80,1,1\n")
    with pytest.raises(rlgemm.RlgemmError) as info:
        rlgemm.Handle(tuned_table=str(table))
    assert info.value.status == rlgemm.ERROR_INVALID_INPUT
    assert f"{table}:2:" in str(info.value)


def test_bad_autotune_options_name_the_rule():
    library_or_skip()
    with pytest.raises(rlgemm.RlgemmError) as info:
        rlgemm.Handle(autotune=True, prefer_cublaslt=False)
    assert info.value.status == rlgemm.ERROR_INVALID_INPUT
    assert "needs prefer_cublaslt" in str(info.value)
    with pytest.raises(rlgemm.RlgemmError) as info:
        rlgemm.Handle(autotune=True, autotune_candidates=40)
    assert "must be 1 to 16" in str(info.value)


def test_default_options_are_the_handles():
    options = library_or_skip().rlgemm_default_options()
    assert (options.prefer_cublaslt, options.predicted_kernels, options.autotune, options.autotune_candidates) == \
        (1, 1, 0, 4)
    assert options.database is None and options.cache_dir is None


def test_stats_mirror_every_route_of_the_c_api():
    # rlgemm_stats_t's fields, read from the header: a route the C API counts and this layer left out would go
    # missing from every sum of rlgemm.stats().
    header = Path(__file__).resolve().parents[2] / "include" / "rlgemm" / "rlgemm_c.h"
    body = re.search(r"typedef struct \{([^}]*)\} rlgemm_stats_t;", header.read_text())
    assert body, f"rlgemm_stats_t not found in {header}"
    fields = re.findall(r"uint64_t (\w+);", body.group(1))
    assert "predicted" in fields
    assert [name for name, _ in _library.Stats._fields_] == fields


def test_without_gpu_handle_creation_says_so():
    library_or_skip()
    try:
        h = rlgemm.Handle()
    except rlgemm.RlgemmError as e:
        assert e.status == rlgemm.ERROR_NO_DEVICE
        assert "GPU" in str(e)
    else:
        h.close()  # a GPU machine: creation works


def test_rlgemm_library_env_is_honoured_and_a_wrong_path_is_reported():
    code = ("import rlgemm\ntry:\n    rlgemm.library()\nexcept rlgemm.LibraryNotFound as e:\n    print('NOTFOUND', e)\n")
    env = dict(os.environ, RLGEMM_LIBRARY="/nonexistent/librlgemm.so",
               PYTHONPATH=str(Path(rlgemm.__file__).resolve().parents[1]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert "NOTFOUND" in out and "/nonexistent/librlgemm.so" in out and "RLGEMM_LIBRARY" in out


def test_candidates_start_with_the_environment(monkeypatch):
    monkeypatch.setenv("RLGEMM_LIBRARY", "/x/librlgemm.so")
    assert _library.candidate_paths() == [Path("/x/librlgemm.so")]
    monkeypatch.delenv("RLGEMM_LIBRARY")
    paths = _library.candidate_paths()
    assert paths[0].name == "librlgemm.so" and paths[0].parent.name == "rlgemm"
    assert any(p.parent.name == "build" for p in paths)
