"""./scripts/demo installs without setuptools' editable-install notice.

The notice is a Python warning that setuptools' ``editable_wheel`` emits (message
"Editable installation." and a note on folders shadowing the package) in pip's build
subprocess; the demo runs pip with a ``PYTHONWARNINGS`` filter for it. The test checks
the filter the script sets against a warning with setuptools' text, in a subprocess.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DEMO = Path(__file__).resolve().parents[2] / "scripts" / "demo"

NOTICE = (
    "import warnings\n"
    "class InformationOnly(UserWarning): pass\n"
    "warnings.warn('Editable installation.\\n!!\\n  Please be careful with folders in your "
    "working directory with the same name as your package', InformationOnly)\n"
    "warnings.warn('another warning')\n"
)


def test_demo_filters_the_editable_install_notice() -> None:
    script = DEMO.read_text()
    install = re.search(
        r"PYTHONWARNINGS=(\"[^\"]*\"|\S+)\s*\\\n\s*\.venv/bin/python -m pip install", script
    )
    assert install, "the pip install of the demo carries no PYTHONWARNINGS filter"
    filter_text = install[1].strip('"')
    shown = subprocess.run(
        [sys.executable, "-c", NOTICE], capture_output=True, text=True, check=True
    ).stderr
    assert "Editable installation" in shown  # the notice shows without the filter
    filtered = subprocess.run(
        [sys.executable, "-c", NOTICE],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONWARNINGS": filter_text, "PATH": "/usr/bin:/bin"},
    ).stderr
    assert "Editable installation" not in filtered
    assert "another warning" in filtered  # other warnings still show
