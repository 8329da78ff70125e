"""Where each test module lives, by rule: ``tests/unit/`` mirrors ``src/mongio``'s layers (plus the spec
runner, the benchmarks and the tests' own support code), ``tests/integration/`` is split by what a test runs
against.

A module's folder follows from its file name: an explicit entry in the tree's ``exceptions`` table if it has
one, else the one folder whose name patterns it matches. A name no rule places, or one that patterns of two
folders match, is an error that names the file: add a pattern or an exception here rather than guess.

    python tests/layout.py           move every misplaced module (git mv) into its folder, and rewrite
                                     the paths and module names that still name it where it was
    python tests/layout.py --check   list misplaced modules and stale references; exit 1 if there are any

A moved module's ``Path(__file__).parents[N]`` is shifted so that it names the same folder as before; any
other use of ``__file__`` in it, and any ``from tests.unit import ...``, is reported for a look by hand.
Moving is idempotent: a second run finds nothing to do. Nothing moves if any module is unplaced.
``tests/test_helpers_layout.py`` runs the check.
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Folder:
    """One folder of a test tree: what belongs in it, and the file name patterns that place a module there."""

    name: str
    holds: str
    patterns: tuple[str, ...] = ()


@dataclass(frozen=True)
class Tree:
    """A test tree (``tests/unit``, ``tests/integration``): its folders, and the modules placed one by one."""

    root: str
    folders: tuple[Folder, ...]
    exceptions: dict[str, str] = field(default_factory=dict)


UNIT = Tree(
    root="tests/unit",
    folders=(
        Folder(
            "api",
            "The API modules (client, database, collection, cursor, change stream), the package's surface.",
            ("test_api_*",),
        ),
        Folder(
            "bson",
            "mongio.bson: the codec, the value types, Extended JSON.",
            ("test_bson_*", "test_decimal128*", "test_json_util*"),
        ),
        Folder(
            "wire",
            "mongio.wire: message formats, compression, cursor replies.",
            ("test_wire_*", "test_cursor_reply_*"),
        ),
        Folder(
            "connection",
            "mongio.connection: connections, the pool, the handshake, authentication, the HTTP client.",
            (
                "test_connection_*",
                "test_pool*",
                "test_auth_*",
                "test_handshake*",
                "test_reply_waiter*",
                "test_ocsp*",
                "test_http*",
            ),
        ),
        Folder(
            "topology",
            "mongio.topology: descriptions, monitoring, server selection.",
            ("test_topology_*", "test_selection*", "test_change_condition*"),
        ),
        Folder(
            "execution",
            "mongio.execution: the executor, retries, the operation timeout.",
            ("test_executor*", "test_execution_*", "test_csot_executor*", "test_retry_*", "test_deadline*", "test_operation_run*"),
        ),
        Folder(
            "loop_runtime",
            "The event-loop runtime: what happens when a loop closes or the process forks, the sockets "
            "of each loop, fair waiting.",
            ("test_loop_*", "test_wait_queue*"),
        ),
        Folder(
            "errors",
            "mongio.errors: the error classes and what each error means (retryable, network, state change).",
            ("test_error_*", "test_errors*"),
        ),
        Folder("sessions", "mongio.sessions: sessions, their pool, transactions.", ("test_sessions_*",)),
        Folder(
            "operations",
            "mongio.operations: the commands each operation builds and how replies become results.",
            ("test_operations_*", "test_transaction_commands*", "test_change_stream_*"),
        ),
        Folder(
            "options",
            "mongio.options: client options, the connection string, SRV, concerns, the stable API.",
            (
                "test_options_*",
                "test_option_*",
                "test_proxy_options*",
                "test_uri_*",
                "test_srv*",
                "test_server_api*",
            ),
        ),
        Folder(
            "events",
            "mongio.events: command events, logs, listeners.",
            ("test_command_events*", "test_listener_*"),
        ),
        Folder("tracing", "mongio.tracing: OpenTelemetry spans.", ("test_tracing*",)),
        Folder("gridfs", "mongio.gridfs without a server.", ("test_gridfs*",)),
        Folder(
            "compat",
            "PyMongo compatibility: the PyMongo-typed mode, PyMongo's names and objects, the differences.",
            ("test_pymongo_*", "test_readme_differences*"),
        ),
        Folder(
            "spec_runner",
            "The spec runner: the unified format, the skip list, the cluster harness's pure parts.",
            ("test_unified_*", "test_skip_*", "test_spec_runner_*", "test_cluster_*", "test_timed_*"),
        ),
        Folder(
            "benchmarks",
            "The benchmark and fuzzing scripts' bookkeeping and checks.",
            ("test_*bench*", "test_hostile_*", "test_floor_client*", "test_workload_*", "test_fuzz_*"),
        ),
        Folder("support", "The tests' own support code (tests/support).", ("test_virtual_clock*", "test_query_analyser*")),
    ),
    exceptions={
        "api_parity.py": "compat",
        "readme_differences.py": "compat",
        "test_api_parity.py": "compat",
        "test_connection_pin.py": "execution",
        "test_csot_cursor.py": "api",
        "test_docstrings.py": "api",
        "test_document_array_offsets.py": "bson",
        "test_embedded_output.py": "api",
        "test_lazy_imports.py": "api",
    },
)

INTEGRATION = Tree(
    root="tests/integration",
    folders=(
        Folder(
            "api",
            "What an application sees through MongoClient, against the test server or loopback "
            "peers; and the programs built on the API (examples, the port corpus, the benchmarks).",
            (
                "test_api_*",
                "test_client*",
                "test_cursor_*",
                "test_pymongo_*",
                "test_bson_*",
                "test_option_effects*",
                "test_server_api*",
                "test_gridfs*",
                "test_index_*",
                "test_tracing*",
                "test_event_loops*",
                "test_examples*",
                "test_port_corpus*",
                "test_bench_*",
            ),
        ),
        Folder(
            "prose",
            "The specifications' prose tests, and the rules their shared test files do not reach.",
            (
                "*_prose*",
                "test_transactions_*",
                "test_sessions_*",
                "test_retry_*",
                "test_csot_*",
                "test_backpressure*",
                "test_establish_backpressure_*",
                "test_write_concern_*",
                "test_encryption_*",
            ),
        ),
        Folder(
            "cluster",
            "mongio against the loopback cluster harness (spec_runner.cluster).",
            ("test_cluster_*",),
        ),
        Folder(
            "server",
            "The layers below the API against a server: the test server (SecantusDB) in its own "
            "modes, the harness that starts it, and peers that stand in for a server or misbehave.",
            (
                "test_connection*",
                "test_pool*",
                "test_auth_*",
                "test_*_secantus*",
                "test_server_harness*",
                "test_tls_*",
                "test_ocsp*",
                "test_socks5_*",
                "test_hostile_*",
            ),
        ),
    ),
    exceptions={"test_socks5.py": "prose"},
)

TREES = (UNIT, INTEGRATION)

# Modules every folder may hold: they are found by location, not placed by name.
NOT_PLACED = frozenset({"__init__.py", "conftest.py"})
# Files whose text is not rewritten: the changelog records the paths as they were.
NOT_REWRITTEN = frozenset({"CHANGELOG.md", "tests/layout.py"})
TEXT_SUFFIXES = frozenset(
    {".py", ".md", ".yaml", ".yml", ".toml", ".cfg", ".ini", ".txt", ".rst", ".c", ".h"}
)


class LayoutError(Exception):
    """A module the rules place nowhere, or in more than one folder."""


@dataclass(frozen=True)
class Move:
    """A module and the place its rule gives it, both relative to the repository."""

    source: str
    target: str


def folder_for(tree: Tree, name: str) -> str:
    """The folder of ``tree`` that the module named ``name`` belongs in."""
    if name in tree.exceptions:
        return tree.exceptions[name]
    matches = sorted(
        {
            folder.name
            for folder in tree.folders
            for pattern in folder.patterns
            if fnmatch.fnmatchcase(name, pattern)
        }
    )
    if not matches:
        raise LayoutError(
            f"{tree.root}: no rule places {name}: add a pattern or an exception in tests/layout.py"
        )
    if len(matches) > 1:
        raise LayoutError(
            f"{tree.root}: {name} matches the patterns of {', '.join(matches)}: add an exception"
        )
    return matches[0]


def modules(repo: Path, tree: Tree) -> list[Path]:
    """Every module under the tree that is placed by its name."""
    root = repo / tree.root
    return sorted(
        path for path in root.rglob("*.py") if path.name not in NOT_PLACED and "__pycache__" not in path.parts
    )


def plan(repo: Path) -> list[Move]:
    """Every module with its place; raises LayoutError naming each module that cannot be placed."""
    moves: list[Move] = []
    problems: list[str] = []
    for tree in TREES:
        for path in modules(repo, tree):
            try:
                folder = folder_for(tree, path.name)
            except LayoutError as exc:
                problems.append(str(exc))
                continue
            moves.append(Move(path.relative_to(repo).as_posix(), f"{tree.root}/{folder}/{path.name}"))
    if problems:
        raise LayoutError("\n".join(problems))
    return moves


def misplaced(repo: Path) -> list[Move]:
    """The modules that are not where their rule puts them."""
    return [move for move in plan(repo) if move.source != move.target]


def text_files(repo: Path) -> list[str]:
    """The tracked text files whose paths and module names are kept in step with the layout."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=repo, capture_output=True, check=True, text=True
    ).stdout
    return [
        name
        for name in listed.split("\0")
        if name
        and name not in NOT_REWRITTEN
        and (Path(name).suffix in TEXT_SUFFIXES or Path(name).name == "Makefile")
        and (repo / name).is_file()
    ]


def renames(moves: Iterable[Move]) -> dict[str, str]:
    """Each old name of a module (flat in its tree, or where it was) to its new one, as path and as module."""
    renamed: dict[str, str] = {}
    for move in moves:
        flat = f"{move.target.rsplit('/', 2)[0]}/{move.target.rsplit('/', 1)[1]}"
        for old in {flat, move.source} - {move.target}:
            renamed[old] = move.target
            renamed[old.removesuffix(".py").replace("/", ".")] = move.target.removesuffix(".py").replace(
                "/", "."
            )
    return renamed


def reference_pattern(renamed: dict[str, str]) -> re.Pattern[str] | None:
    """One expression matching any old name in ``renamed`` as a whole path or dotted module name."""
    if not renamed:
        return None
    alternatives = "|".join(re.escape(old) for old in sorted(renamed, key=len, reverse=True))
    return re.compile(rf"(?<![\w./])(?:{alternatives})(?![\w])")


def renamed_in(text: str, renamed: dict[str, str], pattern: re.Pattern[str]) -> str:
    """``text`` with each old name ``pattern`` finds replaced by its new one."""
    return pattern.sub(lambda match: renamed[match.group(0)], text)


def names_a_file(repo: Path, name: str) -> bool:
    """Whether a path or dotted module name found in a text names a module that is there."""
    path = name if name.endswith(".py") else name.replace(".", "/") + ".py"
    return (repo / path).is_file()


def stale_references(repo: Path, moves: list[Move]) -> dict[str, list[str]]:
    """The text files that still name a module where it no longer is, with the names they use."""
    renamed = renames(moves)
    pattern = reference_pattern(renamed)
    if pattern is None:
        return {}
    found: dict[str, list[str]] = {}
    for name in text_files(repo):
        text = (repo / name).read_text(encoding="utf-8", errors="replace")
        hits = sorted(
            {match.group(0) for match in pattern.finditer(text) if not names_a_file(repo, match.group(0))}
        )
        if hits:
            found[name] = hits
    return found


def rewrite_references(repo: Path, moves: list[Move]) -> list[str]:
    """Rewrites every old name of a moved module in the tracked text files; returns the files changed."""
    renamed = renames(moves)
    pattern = reference_pattern(renamed)
    if pattern is None:
        return []
    changed: list[str] = []
    for name in stale_references(repo, moves):
        path = repo / name
        text = path.read_text(encoding="utf-8")
        path.write_text(renamed_in(text, renamed, pattern), encoding="utf-8")
        changed.append(name)
    return changed


def ensure_package(repo: Path, folder: Path) -> None:
    """Makes ``folder`` a package (tests import each other by absolute name), described by its docstring."""
    folder.mkdir(parents=True, exist_ok=True)
    init = folder / "__init__.py"
    if init.exists():
        return
    tree = next(tree for tree in TREES if (repo / tree.root) == folder.parent)
    holds = next(entry.holds for entry in tree.folders if entry.name == folder.name)
    init.write_text('"""' + textwrap.fill(holds, width=104) + '"""\n', encoding="utf-8")
    subprocess.run(["git", "add", str(init.relative_to(repo))], cwd=repo, check=True)


def tracked(repo: Path, name: str) -> bool:
    """Whether git tracks the file (a new one, not yet added, is moved as a plain file)."""
    listed = subprocess.run(
        ["git", "ls-files", "--", name], cwd=repo, capture_output=True, check=True, text=True
    )
    return bool(listed.stdout.strip())


def apply(repo: Path) -> list[Move]:
    """Moves every misplaced module into its folder (with ``git mv`` if tracked); returns the moves."""
    moves = misplaced(repo)
    for move in moves:
        ensure_package(repo, (repo / move.target).parent)
        if tracked(repo, move.source):
            subprocess.run(["git", "mv", move.source, move.target], cwd=repo, check=True)
        else:
            (repo / move.source).rename(repo / move.target)
        shift_parents(repo / move.target, move.target.count("/") - move.source.count("/"))
    return moves


# ``Path(__file__).resolve().parents[N]``: a path made from the module's own place, N folders up.
OWN_PARENTS = re.compile(r"(Path\(__file__\)(?:\.resolve\(\))?\.parents\[)(\d+)(\])")


def shift_parents(path: Path, deeper: int) -> None:
    """Keeps the folders a moved module names by ``Path(__file__)...parents[N]`` the same after a move."""
    text = path.read_text(encoding="utf-8")
    shifted = OWN_PARENTS.sub(lambda match: f"{match[1]}{int(match[2]) + deeper}{match[3]}", text)
    if shifted != text:
        path.write_text(shifted, encoding="utf-8")


def warnings_for(repo: Path, moves: list[Move]) -> list[str]:
    """What a move cannot fix by itself: paths relative to a moved file, and imports of a tree's package."""
    notes: list[str] = []
    for move in moves:
        if "__file__" in OWN_PARENTS.sub("", (repo / move.target).read_text(encoding="utf-8")):
            notes.append(f"{move.target} uses __file__ otherwise than as Path(__file__).parents[N]: check it")
    for name in text_files(repo):
        text = (repo / name).read_text(encoding="utf-8", errors="replace")
        if re.search(r"from tests\.(unit|integration) import", text):
            notes.append(f"{name} imports from a tree's package: import from the module's folder instead")
    return notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="report what is out of place; move nothing")
    arguments = parser.parse_args(argv)
    try:
        placed = plan(REPO)
    except LayoutError as exc:
        print(exc, file=sys.stderr)
        return 1
    if arguments.check:
        wrong = [move for move in placed if move.source != move.target]
        stale = stale_references(REPO, placed)
        for move in wrong:
            print(f"misplaced: {move.source} belongs in {move.target}")
        for name, hits in stale.items():
            print(f"stale: {name} names {', '.join(hits)}")
        return 1 if wrong or stale else 0
    moves = apply(REPO)
    for move in moves:
        print(f"moved {move.source} -> {move.target}")
    for name in rewrite_references(REPO, plan(REPO) + moves):
        print(f"rewrote references in {name}")
    for note in warnings_for(REPO, moves):
        print(f"check: {note}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
