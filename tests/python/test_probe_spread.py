"""scripts/probe_spread.py: the spread of one candidate over placements, round by round, from lt_choice_probe's CSV."""
import pytest

HEADER = "M,N,K,what,mode,candidate,time_us,min_us,max_us\n"


@pytest.fixture(scope="module")
def spread(load_script):
    return load_script("probe_spread")


def test_probe_spread_reads_workspace_and_operand_placements_round_by_round(spread, tmp_path):
    path = tmp_path / "probe.csv"
    rows = [
        # candidate 1 takes 4096 bytes of workspace; workspace 2 is 8% slower in both rounds
        ("1,512,3584", "workspace-0-4096-0", 1, 10.0), ("1,512,3584", "workspace-1-4096-0", 1, 10.1),
        ("1,512,3584", "workspace-2-4096-0", 1, 10.8),
        ("1,512,3584", "workspace-0-4096-1", 1, 10.0), ("1,512,3584", "workspace-1-4096-1", 1, 10.0),
        ("1,512,3584", "workspace-2-4096-1", 1, 10.8),
        # candidate 0 takes none and moves 1%: not listed
        ("1,512,3584", "workspace-0-0-0", 0, 10.0), ("1,512,3584", "workspace-1-0-0", 0, 10.1),
        # operand placements of another shape: 5% in round 0 only, so not in every round
        ("16,14336,3584", "placement-0-0", 3, 30.0), ("16,14336,3584", "placement-1-0", 3, 31.5),
        ("16,14336,3584", "placement-0-1", 3, 30.0), ("16,14336,3584", "placement-1-1", 3, 30.2),
        ("16,14336,3584", "first-use-offline", 3, 30.0),  # not a placement row
    ]
    path.write_text(HEADER + "".join(f"{s},{w},graph,{c},{t},{t},{t}\n" for s, w, c, t in rows))
    got = spread.spreads([str(path)])
    assert set(got) == {("1,512,3584", "workspace", 1), ("1,512,3584", "workspace", 0),
                        ("16,14336,3584", "placement", 3)}
    assert got[("1,512,3584", "workspace", 1)]["bytes"] == 4096
    assert [p for _, p in got[("1,512,3584", "workspace", 1)]["rounds"]] == [2, 2]
    assert got[("16,14336,3584", "placement", 3)]["bytes"] is None
    lines = spread.report(got)
    assert lines[1] == "1,512,3584 | workspace | 1 | 4096 | 1.080 (2) 1.080 (2) | yes"
    assert lines[-1] == "1 of 3 candidates moved more than 3% in every round"


def test_probe_spread_refuses_a_missing_file_or_another_csv(spread, tmp_path, capsys):
    assert spread.main([str(tmp_path / "none.csv")]) == 2
    assert "none.csv" in capsys.readouterr().err
    broken = tmp_path / "broken.csv"
    broken.write_text("M,N,K,what\n1,2,3,placement-0-0\n")  # a placement row without its time
    assert spread.main([str(broken)]) == 2
    assert "lt_choice_probe" in capsys.readouterr().err
