"""scripts/compare_runs.py: one subject's ratio to its run's best vendor call in two runs, by bucket, by group of a
shapes file, the shapes that moved most, and every subject's time new over old."""
import pytest

HEADER = ("M,N,K,layout,impl,mode,time_us,tflops,speedup_vs_best_vendor,speedup_vs_lt_auto,correct,time_min_us,"
          "time_max_us,samples,batch,detail,dtype,paired_vs_best_vendor\n")


def row(shape, impl, mode, time_us, speedup=1.0, paired="", correct=1, detail=""):
    return (f"{shape},tn,{impl},{mode},{time_us},1,{speedup},1,{correct},{time_us},{time_us},9,1,\"{detail}\",fp16,"
            f"{paired}\n")


@pytest.fixture(scope="module")
def runs(load_script):
    return load_script("compare_runs")


def write(path, rows):
    path.write_text(HEADER + "".join(rows))
    return str(path)


def test_compare_runs_tells_the_librarys_move_from_the_vendors(runs, tmp_path):
    # A short shape: the library the same in both runs, the vendor's eager call 2 us faster in the new one.
    old = write(tmp_path / "old.csv", [
        row("128,512,3584", "lt_auto", "offline", 10.0, 0.78, 0.78),
        row("128,512,3584", "rlgemm", "offline", 7.8, 1.0, 1.35, detail="cublaslt floor"),
        row("2048,8192,8192", "lt_auto", "offline", 400.0, 1.0, 1.0),
        row("2048,8192,8192", "rlgemm", "offline", 400.0, 1.0, 1.0),
        row("1,2,3", "lt_auto", "offline", 5.0),
        row("1,2,3", "rlgemm", "offline", 5.0, correct=0)])  # wrong: left out
    new = write(tmp_path / "new.csv", [
        row("128,512,3584", "lt_auto", "offline", 8.0, 0.98, 0.98),
        row("128,512,3584", "rlgemm", "offline", 7.8, 1.0, 1.01, detail="cublaslt floor"),
        row("2048,8192,8192", "lt_auto", "offline", 404.0, 1.0, 1.0),
        row("2048,8192,8192", "rlgemm", "offline", 400.0, 1.01, 1.01),
        row("1,2,3", "rlgemm", "offline", 5.0)])
    lines = runs.compare([new], [old], top=1)
    assert lines[0].startswith("offline: 2 shapes;")
    assert f"new {(1.01 * 1.01) ** 0.5:.4f}, old {1.35 ** 0.5:.4f}" in lines[0]
    assert any(l.strip().startswith("MNK<2^30") and "new 1.0100  old 1.3500" in l for l in lines)
    moved = [l for l in lines if l.startswith("  128x512x3584") or l.startswith("  2048x8192x8192")]
    assert moved[0].startswith("  128x512x3584") and "best vendor 8.000" in moved[0] and "10.000" in moved[0]
    times = [l for l in lines if l.strip().startswith("MNK<2^30") and "best vendor call" in l]
    assert times == ["    MNK<2^30        lt_auto 0.800, rlgemm 1.000, best vendor call 0.800"]
    assert lines[-1] == "graph: no shape with rlgemm in both runs"


def test_compare_runs_lists_a_shapes_files_rows_in_groups(runs, tmp_path):
    rows = lambda r: [row("1,64,64", "lt_auto", "graph", 2.0), row("1,64,64", "rlgemm", "graph", 2.0, 1.0, r),
                      row("2,64,64", "lt_auto", "graph", 2.0), row("2,64,64", "rlgemm", "graph", 2.0, 1.0, r),
                      row("3,64,64", "lt_auto", "graph", 2.0), row("3,64,64", "rlgemm", "graph", 2.0, 1.0, 1.0)]
    new, old = write(tmp_path / "new.csv", rows(1.04)), write(tmp_path / "old.csv", rows(0.96))
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("# two groups\nM,N,K\n2,64,64\n1,64,64\n3,64,64\n")
    assert runs.main(["--new", new, "--old", old, "--shapes", str(shapes), "--groups", "2,1"]) == 0
    lines = runs.compare([new], [old], shapes=runs.read_shapes(str(shapes)), groups=[2, 1])
    graph = lines[lines.index(next(l for l in lines if l.startswith("graph:"))):]
    assert "group 1 (2 of the shapes file's rows 1-2)  new 1.0400  old 0.9600" in graph[2]
    assert "group 2 (1 of the shapes file's rows 3-3)  new 1.0000  old 1.0000" in graph[3]
    listed = [l.split()[0] for l in graph if l.startswith("  ") and "x64x64" in l.split()[0]]
    assert listed == ["2x64x64", "1x64x64", "3x64x64"]  # the shapes file's order


def test_compare_runs_says_what_it_needs(runs, tmp_path, capsys):
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("M,N,K\n1,2,3\n")
    empty = write(tmp_path / "e.csv", [])
    assert runs.main(["--new", empty, "--old", empty, "--shapes", str(shapes), "--groups", "2"]) == 2
    assert "does not split the 1 rows" in capsys.readouterr().err
    assert runs.main(["--new", str(tmp_path / "none.csv"), "--old", empty]) == 2
    assert "none.csv" in capsys.readouterr().err
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    assert runs.main(["--new", str(other), "--old", empty]) == 2
    assert "has no column" in capsys.readouterr().err
