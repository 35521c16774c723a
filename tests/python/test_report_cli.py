"""scripts/report_cli.py: a report printed with status 0, or the error that stopped it named with its script and
what to give it, status 2."""
import pytest


@pytest.fixture(scope="module")
def cli(load_script):
    return load_script("report_cli")


def test_print_report_prints_the_lines(cli, capsys):
    assert cli.print_report("a_script", lambda: ["one", "two"]) == 0
    out = capsys.readouterr()
    assert out.out == "one\ntwo\n" and out.err == ""


@pytest.mark.parametrize("error", [FileNotFoundError("no such file"), KeyError("detail"), ValueError("not a number")])
def test_print_report_names_what_stopped_it(cli, capsys, error):
    def fail():
        raise error

    assert cli.print_report("a_script", fail) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.startswith(f"a_script: {error.__class__.__name__}: ")
    assert out.err.rstrip().endswith("(give results CSVs of rlgemm bench)")
    assert cli.print_report("a_script", fail, "give CSVs of a probe") == 2
    assert "(give CSVs of a probe)" in capsys.readouterr().err


def test_print_report_lets_other_errors_through(cli):
    def broken():
        raise TypeError("a bug, not bad input")

    with pytest.raises(TypeError):
        cli.print_report("a_script", broken)
