"""What a run depends on, fingerprinted: a checkout's code (commit, committed files, uncommitted diff), an
installed package's files, and data files (whole, or sampled when large)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from data_agent_compare.engine import identity
from data_agent_compare.engine.identity import code_identity, data_file, data_file_changes, plugin_hash

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(root, *args):
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


@pytest.fixture
def checkout(tmp_path):
    """A git checkout shaped like the suite's (core/runlog.py tracked), one commit."""
    root = tmp_path / "suite"
    (root / "core").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "core" / "runlog.py").write_text("VERSION = 1\n")
    (root / "tests" / "test_x.py").write_text("")
    (root / "README.md").write_text("# suite\n")
    (root / ".gitignore").write_text("runs/\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    return root


@needs_git
def test_a_dirty_checkout_whose_diff_is_unchanged_keeps_its_identity(checkout):
    clean = code_identity(checkout)
    assert clean.source == "checkout" and clean.diff_sha256 is None and len(clean.commit) == 40
    (checkout / "core" / "runlog.py").write_text("VERSION = 2\n")
    dirty = code_identity(checkout)
    assert dirty.diff_sha256 is not None and dirty.tree_sha256 == clean.tree_sha256
    assert code_identity(checkout) == dirty  # the same diff: the same identity
    (checkout / "core" / "runlog.py").write_text("VERSION = 3\n")
    assert code_identity(checkout).diff_sha256 not in (None, dirty.diff_sha256)


@needs_git
def test_tests_prose_and_ignored_files_do_not_change_the_code_but_untracked_code_does(checkout):
    clean = code_identity(checkout)
    (checkout / "tests" / "test_x.py").write_text("assert True\n")
    (checkout / "README.md").write_text("# the suite\n")
    (checkout / "runs").mkdir()
    (checkout / "runs" / "manifest.json").write_text("{}")
    (checkout / "notes.txt").write_text("not code")
    assert code_identity(checkout) == clean
    (checkout / "core" / "new_module.py").write_text("X = 1\n")
    assert code_identity(checkout).diff_sha256 is not None


@needs_git
def test_a_commit_that_touches_only_tests_keeps_the_code_identity(checkout):
    clean = code_identity(checkout)
    (checkout / "tests" / "test_x.py").write_text("assert True\n")
    git(checkout, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "tests only")
    after = code_identity(checkout)
    assert after.commit != clean.commit and after.tree_sha256 == clean.tree_sha256


def test_outside_a_checkout_the_package_files_are_hashed(tmp_path):
    root = tmp_path / "site-packages" / "data_agent_compare"
    (root / "core").mkdir(parents=True)
    (root / "core" / "runlog.py").write_text("VERSION = 1\n")
    (root / "core" / "__pycache__").mkdir()
    (root / "core" / "__pycache__" / "runlog.pyc").write_bytes(b"\0")
    first = code_identity(root)
    assert first.source == "package" and first.commit is None
    (root / "core" / "__pycache__" / "runlog.pyc").write_bytes(b"\1")
    assert code_identity(root) == first
    (root / "core" / "runlog.py").write_text("VERSION = 2\n")
    assert code_identity(root).package_sha256 != first.package_sha256


def test_a_large_data_file_is_sampled_and_an_edit_in_a_sampled_block_or_its_time_shows(tmp_path, monkeypatch):
    monkeypatch.setattr(identity, "WHOLE_FILE_BYTES", 1 << 20)
    big = tmp_path / "big.db"
    big.write_bytes(bytes(4 << 20))
    before = data_file(big)
    assert before.sampled and before.size == 4 << 20 and before.mtime_ns is not None
    with big.open("r+b") as file:  # the last block is always sampled
        file.seek((4 << 20) - 10)
        file.write(b"x")
    os.utime(big, ns=(before.mtime_ns, before.mtime_ns))
    edited = data_file(big)
    assert edited.sha256 != before.sha256
    assert data_file_changes({str(big): before}, {str(big): edited}) == [
        f"data file {big}: content changed (sha256 {before.sha256[:12]} → {edited.sha256[:12]})"
    ]
    os.utime(big, ns=(before.mtime_ns + 10**9, before.mtime_ns + 10**9))
    touched = data_file(big)
    assert data_file_changes({str(big): edited}, {str(big): touched}) == [
        f"data file {big}: modified since the run started (same size and sampled blocks)"
    ]


def test_a_small_data_file_is_hashed_whole_and_a_touch_changes_nothing(tmp_path):
    small = tmp_path / "manual.md"
    small.write_text("fees apply\n")
    before = data_file(small)
    os.utime(small, ns=(1, 1))
    assert data_file(small) == before and not before.sampled and before.mtime_ns is None


def test_a_plugin_is_known_by_its_files_hash_given_as_a_file_or_a_module(tmp_path, monkeypatch):
    package = tmp_path / "my_systems"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "agent.py").write_text("PROMPT = 'one'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    as_module, as_file = plugin_hash("my_systems"), plugin_hash(str(package / "agent.py"))
    (package / "agent.py").write_text("PROMPT = 'two'\n")
    assert plugin_hash("my_systems") != as_module and plugin_hash(str(package / "agent.py")) != as_file
    assert plugin_hash("no_such_plugin_module") == "missing" and plugin_hash(str(tmp_path / "gone.py")) == "missing"


def test_every_package_folder_of_the_suite_counts_in_its_code_identity():
    """A folder left out (as `app/` was named after it became `engine/` and `cli/`) would let a change of the
    runner pass for the same code on resume and replay."""
    from helpers import ROOT

    folders = {path.parent.name for path in ROOT.glob("*/__init__.py")}
    assert folders - {"tests"} <= set(identity.PACKAGE_FOLDERS)
