"""The GridFS specification's unified tests: uploads, downloads (by id and by name and revision), deletes
and renames on a ``bucket`` entity over :mod:`mongio.gridfs`."""

from __future__ import annotations

from spec_runner.suites._unified_support import unified_suite

SUITE = unified_suite("gridfs")
