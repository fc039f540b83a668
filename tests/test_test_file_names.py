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


def test_no_two_test_files_share_a_name() -> None:
    """Test folders have no ``__init__.py``: pytest imports each test file by its base name, so two
    files of one name (say tests/proxy/test_faults.py and examples/test_faults.py) stop the whole
    run at collection with "import file mismatch"."""
    seen: dict[str, list[str]] = {}
    for path in [*TESTS.rglob("test_*.py"), *(TESTS.parent / "examples").rglob("test_*.py")]:
        seen.setdefault(path.name, []).append(str(path.relative_to(TESTS.parent)))
    shared = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not shared, f"test files sharing a name (rename one): {shared}"
