"""Test files are named by one rule: in each folder of ``tests/``, either every test file carries
the folder's name as a prefix (``tests/assets/test_assets_store.py``) or none does
(``tests/wait/test_eventually.py``), so a file's name says where it is the same way throughout."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).parent

NOT_YET: dict[str, str] = {}
"""Folders the rule does not hold in yet: folder -> why."""


def test_each_folder_prefixes_all_its_test_files_or_none() -> None:
    mixed = {}
    for folder in sorted(p for p in TESTS.iterdir() if p.is_dir() and p.name not in NOT_YET):
        names = sorted(p.name for p in folder.glob("test_*.py"))
        prefixed = [name for name in names if name.startswith(f"test_{folder.name}_")]
        if prefixed and len(prefixed) != len(names):
            mixed[folder.name] = sorted(set(names) - set(prefixed))
    assert not mixed, (
        f"folders whose test files are partly prefixed with the folder's name (folder: the unprefixed "
        f"ones): {mixed}; rename so that all carry the prefix or none does (whichever renames fewer)"
    )
