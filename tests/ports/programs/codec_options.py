"""Codec options as PyMongo code sets them: document_class, tz_aware/tzinfo, a TypeRegistry with custom codecs,
RawBSONDocument reads."""

import asyncio
import datetime
import sys
from collections import OrderedDict
from decimal import Decimal
from zoneinfo import ZoneInfo

from bson import Decimal128
from bson.codec_options import CodecOptions, TypeCodec, TypeRegistry
from bson.raw_bson import RawBSONDocument
from bson.son import SON
from pymongo import AsyncMongoClient

DB = "port_codec_options"


class DecimalCodec(TypeCodec):
    python_type = Decimal
    bson_type = Decimal128

    def transform_python(self, value):
        return Decimal128(value)

    def transform_bson(self, value):
        return value.to_decimal()


class Money:
    def __init__(self, cents):
        self.cents = cents


class MoneyCodec(TypeCodec):
    python_type = Money
    bson_type = int

    def transform_python(self, value):
        return value.cents

    def transform_bson(self, value):
        return value


async def main(uri: str) -> None:
    client = AsyncMongoClient(uri)
    await client.drop_database(DB)
    db = client[DB]
    registry = TypeRegistry([DecimalCodec()])
    options = CodecOptions(type_registry=registry, tz_aware=True, tzinfo=ZoneInfo("Europe/Oslo"))
    prices = db.get_collection("prices", codec_options=options)
    when = datetime.datetime(2024, 6, 1, 12, 30, tzinfo=datetime.UTC)
    await prices.insert_one({"_id": 1, "price": Decimal("19.99"), "at": when})
    stored = await prices.find_one({"_id": 1})
    print("decimal back:", repr(stored["price"]), stored["price"] + Decimal("0.01"))
    print("aware in Oslo:", stored["at"].isoformat(), stored["at"].tzinfo)
    plain = await db.prices.find_one({"_id": 1})
    print("plain client:", str(plain["price"]), plain["at"].tzinfo, plain["at"].isoformat())
    print("query with Decimal:", await prices.count_documents({"price": {"$gt": Decimal("10")}}))

    fallback = CodecOptions(type_registry=TypeRegistry(fallback_encoder=lambda v: str(v) if isinstance(v, set)
                                                        else v))
    await db.get_collection("tags", codec_options=fallback).insert_one({"_id": 1, "tags": {"solo"}})
    print("fallback encoder:", (await db.tags.find_one())["tags"])

    money = db.get_collection("wallet", codec_options=CodecOptions(type_registry=TypeRegistry([MoneyCodec()])))
    await money.insert_one({"_id": 1, "balance": Money(1250)})
    print("custom type stored as:", (await db.wallet.find_one())["balance"])

    ordered = db.get_collection("prices", codec_options=CodecOptions(document_class=SON))
    doc = await ordered.find_one({"_id": 1})
    print("document_class SON:", type(doc).__name__, list(doc.keys()))
    odict = db.get_collection("prices", codec_options=CodecOptions(document_class=OrderedDict))
    print("document_class OrderedDict:", type(await odict.find_one({"_id": 1})).__name__)

    with_opts = prices.with_options(codec_options=prices.codec_options.with_options(tz_aware=False, tzinfo=None))
    print("with_options keeps registry:", repr((await with_opts.find_one())["price"]),
          (await with_opts.find_one())["at"].tzinfo)
    print("codec options:", prices.codec_options.tz_aware, str(prices.codec_options.tzinfo),
          db.codec_options.tz_aware)

    raw = db.get_collection("prices", codec_options=CodecOptions(document_class=RawBSONDocument))
    raw_doc = await raw.find_one({"_id": 1})
    print("raw:", type(raw_doc).__name__, len(raw_doc.raw) > 20, raw_doc["_id"])

    await client.drop_database(DB)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
