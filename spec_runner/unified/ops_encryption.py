"""Operations of the unified test format on ``clientEncryption`` entities, over
:class:`mongio.encryption.ClientEncryption`: ``createDataKey``, ``getKey``, ``getKeys``, ``deleteKey``,
``addKeyAltName``, ``removeKeyAltName``, ``getKeyByAltName``, ``rewrapManyDataKey``, ``encrypt`` and
``decrypt``.

The entity is made with :mod:`spec_runner.unified.encryption_entities`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spec_runner.unified.backend import api_call
from spec_runner.unified.errors import UnifiedTestError
from spec_runner.unified.operations import OperationCall, ResultShape, operation
from spec_runner.unified.ops_crud import bulk_write_result, read_all


def _data_key_options(opts: Mapping[str, Any]) -> dict[str, Any]:
    names = {"masterKey": "master_key", "keyAltNames": "key_alt_names", "keyMaterial": "key_material"}
    unknown = set(opts) - set(names)
    if unknown:
        raise UnifiedTestError(f"createDataKey opts: unsupported option(s) {sorted(unknown)}")
    return {names[key]: value for key, value in opts.items()}


@operation("createDataKey", object="clientEncryption", required=("kmsProvider",), optional=("opts",))
async def create_data_key(call: OperationCall) -> Any:
    arguments = dict(call.arguments)
    options = _data_key_options(arguments.get("opts", {}))
    return await api_call(call.target.create_data_key, arguments["kmsProvider"], **options)


@operation("getKey", object="clientEncryption", required=("id",))
async def get_key(call: OperationCall) -> Any:
    return await api_call(call.target.get_key, call.arguments["id"])


@operation("getKeys", object="clientEncryption", result=ResultShape.DOCUMENTS)
async def get_keys(call: OperationCall) -> Any:
    return await read_all(call.target.get_keys())


@operation("deleteKey", object="clientEncryption", required=("id",))
async def delete_key(call: OperationCall) -> Any:
    result = await api_call(call.target.delete_key, call.arguments["id"])
    return {"deletedCount": result.deleted_count}


@operation("addKeyAltName", object="clientEncryption", required=("id", "keyAltName"))
async def add_key_alt_name(call: OperationCall) -> Any:
    return await api_call(call.target.add_key_alt_name, call.arguments["id"], call.arguments["keyAltName"])


@operation("removeKeyAltName", object="clientEncryption", required=("id", "keyAltName"))
async def remove_key_alt_name(call: OperationCall) -> Any:
    return await api_call(call.target.remove_key_alt_name, call.arguments["id"], call.arguments["keyAltName"])


@operation("getKeyByAltName", object="clientEncryption", required=("keyAltName",))
async def get_key_by_alt_name(call: OperationCall) -> Any:
    return await api_call(call.target.get_key_by_alt_name, call.arguments["keyAltName"])


@operation("rewrapManyDataKey", object="clientEncryption", required=("filter",), optional=("opts",))
async def rewrap_many_data_key(call: OperationCall) -> Any:
    opts = dict(call.arguments.get("opts", {}))
    unknown = set(opts) - {"provider", "masterKey"}
    if unknown:
        raise UnifiedTestError(f"rewrapManyDataKey opts: unsupported option(s) {sorted(unknown)}")
    result = await api_call(
        call.target.rewrap_many_data_key,
        call.arguments["filter"],
        provider=opts.get("provider"),
        master_key=opts.get("masterKey"),
    )
    if result.bulk_write_result is None:
        return {}
    return {"bulkWriteResult": bulk_write_result(result.bulk_write_result)}


_ENCRYPT_OPTIONS = {
    "keyId": "key_id",
    "keyAltName": "key_alt_name",
    "algorithm": "algorithm",
    "contentionFactor": "contention_factor",
    "queryType": "query_type",
}


@operation("encrypt", object="clientEncryption", required=("value", "opts"))
async def encrypt(call: OperationCall) -> Any:
    opts = dict(call.arguments["opts"])
    unknown = set(opts) - set(_ENCRYPT_OPTIONS)
    if unknown:
        raise UnifiedTestError(f"encrypt opts: unsupported option(s) {sorted(unknown)}")
    kwargs = {_ENCRYPT_OPTIONS[key]: value for key, value in opts.items()}
    return await api_call(call.target.encrypt, call.arguments["value"], **kwargs)


@operation("decrypt", object="clientEncryption", required=("value",))
async def decrypt(call: OperationCall) -> Any:
    return await api_call(call.target.decrypt, call.arguments["value"])
