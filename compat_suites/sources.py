"""The reference suites' sources: each project's ``test`` directory at a pinned tag, unpacked into a cache directory.

Nothing of theirs is kept in this repository. A suite's sources come from its git repository (the pinned
URL, or a local clone or mirror named by ``MONGIO_COMPAT_<SUITE>_GIT``) or, with ``--from sdist``, from its
source distribution on PyPI (``pip download``), which carries the same ``test`` directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

CACHE_ENV = "MONGIO_COMPAT_CACHE"
DEFAULT_CACHE = Path.home() / ".cache" / "mongio-compat-suites"
# What the runner needs from a checkout: the tests and the pytest configuration they run under.
WANTED = ("test", "pyproject.toml")


@dataclass(frozen=True)
class Source:
    """Where one project's tests come from."""

    name: str
    git_url: str
    tag: str
    distribution: str

    @property
    def git_env(self) -> str:
        return f"MONGIO_COMPAT_{self.name.upper()}_GIT"

    @property
    def git_location(self) -> str:
        return os.environ.get(self.git_env) or self.git_url


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE).expanduser()


def unpacked(source: Source, origin: str) -> Path:
    """The directory holding ``source``'s ``test`` directory and ``pyproject.toml``, unpacked on first use."""
    root = cache_dir() / f"{source.name}-{source.tag}"
    if (root / "test").is_dir():
        return root
    staging = Path(tempfile.mkdtemp(prefix=f"{source.name}-", dir=_ensure(cache_dir())))
    try:
        if origin == "git":
            _from_git(source, staging)
        else:
            _from_sdist(source, staging)
        staging.rename(root)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return root


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _from_git(source: Source, target: Path) -> None:
    location = source.git_location
    if Path(location).is_dir():
        repository = location
    else:
        repository = str(target / "clone.git")
        subprocess.run(
            ["git", "clone", "--quiet", "--bare", "--depth", "1", "--branch", source.tag, location, repository],
            check=True,
        )
    archive = subprocess.run(
        ["git", "-C", repository, "archive", "--format=tar", source.tag, *WANTED],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    shutil.rmtree(target / "clone.git", ignore_errors=True)


def _from_sdist(source: Source, target: Path) -> None:
    requirement = f"{source.distribution}=={source.tag}"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
         requirement, "-d", str(target)],
        check=True,
    )  # fmt: skip
    (archive,) = target.glob("*.tar.gz")
    prefix = f"{archive.name.removesuffix('.tar.gz')}/"
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.removeprefix(prefix).split("/")[0] in WANTED]
        for member in members:
            member.name = member.name.removeprefix(prefix)
        tar.extractall(target, members=members, filter="data")
    archive.unlink()
