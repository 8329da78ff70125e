"""A griffe extension for the documentation build: the API pages leave out the members that are public within
the package but not API. They are the methods :class:`mongio.sessions.operation_session.OperationSession`
declares (what the executor asks of a session) and ``abandon`` on ``ClientSession``; the methods
``mongio.execution.executor.ClientLike`` and ``mongio.cursor_client.CursorClient`` declare (what the executor,
the cursors and the change streams ask of their client) and ``executor`` on ``MongoClient``; the error label
and service methods of ``MongioError`` (inherited by every error, so hidden on each); ``new_object_id`` of
``CodecOptions``, ``share_index_check`` of ``GridIn``, and what ``find_one`` asks of a ``Cursor``. tests/docs/public_api.py
declares the same ones (PACKAGE_INTERNAL_MEMBERS) for the checks of the API pages and of the comparison with
PyMongo."""

from __future__ import annotations

from typing import Any

import griffe

# Class -> where its package-internal members are declared: Protocols' paths, and names given as they are.
INTERNAL: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {
    "mongio.sessions.client_session.ClientSession": (
        ("mongio.sessions.operation_session.OperationSession",),
        frozenset({"abandon"}),
    ),
    "mongio.client.MongoClient": (
        ("mongio.execution.executor.ClientLike", "mongio.cursor_client.CursorClient"),
        frozenset({"executor"}),
    ),
    "mongio.errors.MongioError": (
        (),
        frozenset({"add_error_label", "remove_error_label", "attribute_to_service", "failed_service_id"}),
    ),
    "mongio.bson.codec_options.CodecOptions": ((), frozenset({"new_object_id"})),
    "mongio.gridfs.grid_in.GridIn": ((), frozenset({"share_index_check"})),
    "mongio.cursor.Cursor": ((), frozenset({"first_document", "kill_left_open"})),
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
        for class_path, (protocols, listed) in INTERNAL.items():
            names = listed.union(*(_contract_methods(pkg, protocol) for protocol in protocols))
            cls = pkg.get_member(class_path.removeprefix("mongio."))
            for name in names:
                if name in cls.members:
                    cls.del_member(name)
