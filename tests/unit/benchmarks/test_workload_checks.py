"""The driver benchmark's tasks check what the driver answered: every task passes on a driver that answers right
and fails (WrongResult, the task is not timed) on one that answers None, or another document, instead."""

from __future__ import annotations

import copy
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from benchmarks.driver_workload import TASKS, Workloads, WrongResult
from benchmarks.loopback_responder import Replies

from mongio.bson import decode, encode

TWEET: dict[str, Any] = {
    "text": "a tweet",
    "retweet_count": 3,
    "user": {"id": 7, "name": "n"},
    "entities": {"urls": []},
}
DOCUMENTS: dict[str, dict[str, Any]] = {
    "tweet": TWEET,
    "small_doc": {"field1": "x", "n": 1},
    "large_doc": {"big": "y" * 100},
}


@dataclass
class Acknowledged:
    """The shape of a driver's write result that the checks read."""

    acknowledged: bool = True
    inserted_id: Any = None
    inserted_ids: list[Any] | None = None
    inserted_count: int = 0


class FakeDriver:
    """An in-memory client with the API the workloads use: one database, one collection. ``wrong`` names the
    method that answers wrongly: ``None`` from it, or for ``find_one`` a document of another ``_id``."""

    def __init__(self, wrong: str | None = None, wrong_id: bool = False) -> None:
        self.wrong = wrong
        self.wrong_id = wrong_id
        self.stored: dict[Any, dict[str, Any]] = {}
        self._ids = itertools.count(1_000_000)

    def __getitem__(self, name: str) -> FakeDriver:  # client[db] and db[collection]
        return self

    def _answer(self, method: str, right: Any) -> Any:
        return None if self.wrong == method else right

    async def drop_database(self, name: str) -> None:
        self.stored.clear()

    async def drop_collection(self, name: str) -> None:
        self.stored.clear()

    async def create_collection(self, name: str) -> None:
        return None

    async def command(self, command: dict[str, Any]) -> Any:
        return self._answer("command", {"isWritablePrimary": True, "ok": 1.0})

    def _store(self, document: dict[str, Any]) -> Any:
        document.setdefault("_id", next(self._ids))
        self.stored[document["_id"]] = copy.deepcopy(document)
        return document["_id"]

    async def insert_one(self, document: dict[str, Any]) -> Any:
        return self._answer("insert_one", Acknowledged(inserted_id=self._store(document)))

    async def insert_many(self, documents: list[dict[str, Any]], ordered: bool = True) -> Any:
        return self._answer("insert_many", Acknowledged(inserted_ids=[self._store(d) for d in documents]))

    async def bulk_write(self, models: list[Any], ordered: bool = True) -> Any:
        return self._answer("bulk_write", Acknowledged(inserted_count=len(models)))

    async def find_one(self, query: dict[str, Any]) -> Any:
        wanted = query["_id"] + 1 if self.wrong_id else query["_id"]
        return self._answer("find_one", copy.deepcopy(self.stored.get(wanted)))

    async def _cursor(self) -> AsyncIterator[Any]:
        for document in list(self.stored.values()):
            yield self._answer("find", copy.deepcopy(document))

    def find(self, query: dict[str, Any]) -> AsyncIterator[Any]:
        return self._cursor()


# The driver method each task's answers come from.
ANSWERED_BY = {
    "run_command": "command",
    "find_one_by_id": "find_one",
    "find_many": "find",
    "find_many_streamed": "find",
    "concurrency_200x50": "find_one",
    "concurrency_1000x10": "find_one",
    "large_insert_one": "insert_one",
    "small_insert_one": "insert_one",
    "small_bulk_insert": "insert_many",
    "large_bulk_insert": "insert_many",
    "client_bulk_insert": "bulk_write",
}


def test_every_task_names_the_method_it_checks() -> None:
    assert set(ANSWERED_BY) == set(TASKS)


@pytest.mark.parametrize("task", list(TASKS))
async def test_a_task_is_timed_when_the_driver_answers_right(task: str) -> None:
    result = await Workloads(FakeDriver(), DOCUMENTS, quick=True).run(TASKS[task])
    assert len(result["wall"]) == TASKS[task].quick_iterations


@pytest.mark.parametrize("task", list(TASKS))
async def test_a_task_fails_when_the_driver_returns_none(task: str) -> None:
    # find_many_streamed's loop takes the length of every document: a None fails it there already.
    failure = TypeError if task == "find_many_streamed" else WrongResult
    with pytest.raises(failure):
        await Workloads(FakeDriver(wrong=ANSWERED_BY[task]), DOCUMENTS, quick=True).run(TASKS[task])


@pytest.mark.parametrize("task", ["find_one_by_id", "concurrency_200x50"])
async def test_a_find_task_fails_when_the_driver_answers_another_document(task: str) -> None:
    with pytest.raises(WrongResult, match="expected _id"):
        await Workloads(FakeDriver(wrong_id=True), DOCUMENTS, quick=True).run(TASKS[task])


async def test_a_find_task_fails_when_the_first_document_lacks_the_tweet_s_fields() -> None:
    driver = FakeDriver()
    workloads = Workloads(driver, DOCUMENTS, quick=True)
    await workloads.setup("find_many_streamed", 10)
    next(iter(driver.stored.values())).pop("text")
    with pytest.raises(WrongResult, match="the tweet's fields"):
        workloads.check("find_many_streamed", 10, await workloads.work("find_many_streamed", 10)())


async def test_a_find_task_fails_when_the_last_document_lacks_the_tweet_s_fields() -> None:
    driver = FakeDriver()
    workloads = Workloads(driver, DOCUMENTS, quick=True)
    await workloads.setup("find_one_by_id", 10)
    driver.stored[10].pop("text")
    with pytest.raises(WrongResult, match="the tweet's fields"):
        workloads.check("find_one_by_id", 10, await workloads.work("find_one_by_id", 10)())


def test_the_loopback_responder_answers_a_find_by_id_with_that_id() -> None:
    """So the find checks hold against the loopback responder too (it stores nothing)."""
    replies = Replies({**TWEET, "_id": 1})

    def answered(query: dict[str, Any]) -> dict[str, Any]:
        request = b"\x00" * 21 + encode({"find": "corpus", "filter": query, "$db": "perftest"})
        (document,) = decode(replies.find_reply(request)[5:])["cursor"]["firstBatch"]
        return dict(document)

    assert answered({"_id": 4321}) == {**TWEET, "_id": 4321}
    assert answered({}) == {**TWEET, "_id": 1}
