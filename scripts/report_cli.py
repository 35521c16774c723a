"""What the results scripts share at their command line: a report printed, or the error that stopped it."""
import sys

RESULTS_CSVS = "give results CSVs of rlgemm bench"


def print_report(script, make_lines, hint=RESULTS_CSVS):
    """Prints the lines that make_lines() returns and gives 0. Where reading the inputs fails (a file that is not
    there, a column or a value that is missing or wrong), says so on stderr, naming `script` and what to give it
    (`hint`), and gives 2."""
    try:
        lines = make_lines()
    except (OSError, KeyError, ValueError) as e:
        print(f"{script}: {e.__class__.__name__}: {e} ({hint})", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0
