"""Which folders of a model are versions: plain numbers, read as tritonserver reads them
(the folders it would misread are skipped here; see docs/server.md)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tritonhttp.server.core._repo_files import version_numbers as _version_numbers


def test_only_plain_numbers_are_versions(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    kept = ["0", "3", "12", "9223372036854775807"]
    skipped = {
        "01": "contains leading zeros in its directory name",
        "007": "contains leading zeros in its directory name",
        # tritonserver 2.51 reads these as 5, 6, 2, -1 and 6, then waits forever for a
        # model file in the folder of that number
        "+5": "fails to convert to integral number",
        " 6": "fails to convert to integral number",
        "2.0": "fails to convert to integral number",
        "-1": "fails to convert to integral number",
        "6abc": "fails to convert to integral number",
        # tritonserver 2.51 crashes (std::out_of_range) on a number past int64
        "9223372036854775808": "fails to convert to integral number",
        "\u00b2": "fails to convert to integral number",  # a digit to str.isdigit
        "\u0663": "fails to convert to integral number",  # ARABIC-INDIC DIGIT THREE
        ".ipynb_checkpoints": "fails to convert to integral number",
    }
    for name in [*kept, *skipped]:
        (tmp_path / name).mkdir()
    (tmp_path / "7").write_text("a file is not a version folder")
    with caplog.at_level(logging.WARNING, logger="tritonhttp.server"):
        assert _version_numbers(tmp_path) == sorted(int(v) for v in kept)
    warned = {r.getMessage() for r in caplog.records}
    for name, why in skipped.items():
        assert f"ignore version directory '{name}' which {why}" in warned
    assert len(warned) == len(skipped)
