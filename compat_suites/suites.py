"""The reference suites: where each comes from, which of its tests run, and the plugin that swaps in mongio."""

from __future__ import annotations

from dataclasses import dataclass

from compat_suites.sources import Source


@dataclass(frozen=True)
class Suite:
    """One project's own tests, run once with its native driver and once with mongio swapped in."""

    source: Source
    paths: tuple[str, ...]
    swap_plugin: str
    # pytest options replacing the project's own ``addopts`` (its JUnit path and --maxfail do not fit here).
    addopts: tuple[str, ...] = ()
    # Tests left out of both runs, each with the reason.
    deselected: tuple[tuple[str, str], ...] = ()

    def paths_of(self, files: list[str] | None) -> tuple[str, ...]:
        """The suite's paths whose file name is one of ``files`` (all of them without ``files``)."""
        if not files:
            return self.paths
        by_name = {path.rsplit("/", 1)[-1]: path for path in self.paths}
        unknown = [name for name in files if name not in by_name]
        if unknown:
            raise SystemExit(
                f"not files of the {self.source.name} suite: {', '.join(unknown)} (one of {', '.join(by_name)})"
            )
        return tuple(by_name[name] for name in files)


MOTOR = Suite(
    source=Source("motor", "https://github.com/mongodb/motor.git", "3.7.1", "motor"),
    paths=("test/asyncio_tests",),
    swap_plugin="compat_suites.motor_swap",
    # Motor's asyncio tests are unittest cases running their own loop; pytest-asyncio has no part in them.
    addopts=("-ra", "--strict-config", "--strict-markers", "-p", "no:asyncio"),
)

# PyMongo's async tests of the API mongio mirrors; the others test PyMongo's internals (pool, monitors, SDAM,
# encryption, its own spec runners), which mongio has its own tests for.
PYMONGO_FILES = (
    "test_collection.py",
    "test_cursor.py",
    "test_database.py",
    "test_client.py",
    "test_session.py",
    "test_transactions.py",
    "test_change_stream.py",
    "test_bulk.py",
    "test_gridfs_bucket.py",
)

PYMONGO = Suite(
    source=Source("pymongo", "https://github.com/mongodb/mongo-python-driver.git", "4.20.1", "pymongo"),
    paths=tuple(f"test/asynchronous/{name}" for name in PYMONGO_FILES),
    swap_plugin="compat_suites.pymongo_swap",
    addopts=("-ra", "--strict-config", "--strict-markers", "-m", "default or default_async"),
)

SUITES = {"motor": MOTOR, "pymongo": PYMONGO}
