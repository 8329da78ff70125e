"""A griffe extension for the documentation build: the API pages leave out the members that are public within
the package but not API. They are the methods :class:`mongio.sessions.operation_session.OperationSession`
declares (what the executor asks of a session) on ``ClientSession``, and ``MongoClient.executor``;
tests/docs/public_api.py declares the same ones (PACKAGE_INTERNAL_MEMBERS) for the checks of the API pages and of
the comparison with PyMongo."""

from __future__ import annotations

from typing import Any

import griffe

CONTRACT = "mongio.sessions.operation_session.OperationSession"
# Class -> where its package-internal members are declared: a Protocol's path, or the names themselves.
INTERNAL: dict[str, str | frozenset[str]] = {
    "mongio.sessions.client_session.ClientSession": CONTRACT,
    "mongio.client.MongoClient": frozenset({"executor"}),
}


def _contract_methods(package: griffe.Module, path: str) -> frozenset[str]:
    """The public methods the Protocol at ``path`` declares."""
    protocol = package.get_member(path.removeprefix(f"{package.path}."))
    return frozenset(
        name for name, member in protocol.members.items() if member.is_function and not name.startswith("_")
    )


class InternalMembers(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.path != "mongio":
            return
        for class_path, declared in INTERNAL.items():
            names = _contract_methods(pkg, declared) if isinstance(declared, str) else declared
            cls = pkg.get_member(class_path.removeprefix("mongio."))
            for name in names:
                if name in cls.members:
                    cls.del_member(name)
