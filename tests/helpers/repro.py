"""Running a reproducer as its user would: no farm importable."""
from __future__ import annotations

import subprocess
import sys


def run_without_farm(script) -> subprocess.CompletedProcess:  # noqa: ANN001
    """Run a script as its user would, with every ``farm`` import made to fail."""
    code = ("import runpy, sys; sys.modules['farm'] = None; sys.argv = [sys.argv[1]]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")
    return subprocess.run([sys.executable, "-c", code, script.name], cwd=script.parent, capture_output=True,
                          text=True, timeout=300, env={"PATH": "/usr/bin:/bin"})
