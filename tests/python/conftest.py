# Run from the source tree: `PYTHONPATH=python pytest tests/python` (or after `pip install .`).
import sys
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"
if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))
SCRIPTS_DIR = PYTHON_DIR.parent / "scripts"


@pytest.fixture(scope="session")
def load_script():
    """load_script("model_e2e") imports scripts/model_e2e.py as a module (scripts/ on the path for its own
    imports)."""
    import importlib.util
    if str(SCRIPTS_DIR) not in sys.path:
        sys.path.insert(0, str(SCRIPTS_DIR))

    def load(name):
        spec = importlib.util.spec_from_file_location(name, SCRIPTS_DIR / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load
