"""evaluate/'s parent side imports no torch at module level: it runs in the CLI and in the warm
pool's server, which must start fast and must not initialise a device. (The import-linter contract
in pyproject.toml keeps the two sides apart; it cannot tell a module-level import from one inside a
function, so this checks the modules as Python loads them.)"""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import sol_execbench.evaluate.parent as parent


def test_the_parent_side_loads_without_torch():
    modules = [f"sol_execbench.evaluate.parent.{m.name}" for m in pkgutil.iter_modules(parent.__path__)]
    assert "sol_execbench.evaluate.parent.runner" in modules and len(modules) >= 5
    code = ("import importlib, sys\n"
            f"for name in {modules!r} + ['sol_execbench.evaluate', 'sol_execbench.cli.main']:\n"
            "    importlib.import_module(name)\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton'))\n"
            "print(','.join(loaded[:5]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"loaded at import: {out.stdout.strip()}"


def test_the_child_side_loads_without_the_parent_side():
    """The evaluation child imports none of the parent's modules (staging, launching, collecting):
    the package root names them, but loads them only when asked for."""
    from .fresh_interpreter import run_program

    lines = run_program("import sys\n"
                        "import sol_execbench.evaluate.child.driver, sol_execbench.evaluate.child.workload_eval\n"
                        "import sol_execbench.evaluate.child.measure\n"
                        "print(','.join(sorted(m for m in sys.modules if m.startswith('sol_execbench.evaluate.parent'))))\n"
                        "from sol_execbench.evaluate import load_problem, EvalOptions\n"
                        "print(load_problem.__module__, EvalOptions.__module__)\n")
    assert lines[0] == ""
    assert lines[1] == "sol_execbench.evaluate.parent.problem sol_execbench.evaluate.parent.runner"
