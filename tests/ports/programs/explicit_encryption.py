"""Explicit client-side field level encryption with a local master key: a data key with alternate names,
deterministic and random encryption, values stored encrypted and decrypted after a find, key management,
and a rewrap; every printed line is deterministic (ciphertexts are compared, never printed)."""

import asyncio
import sys

from bson.binary import STANDARD
from bson.codec_options import CodecOptions
from pymongo import AsyncMongoClient
from pymongo.asynchronous.encryption import AsyncClientEncryption
from pymongo.encryption import Algorithm
from pymongo.errors import EncryptionError

DB = "port_explicit_encryption"
LOCAL_KEY = bytes(range(96))
DETERMINISTIC = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Deterministic
RANDOM = Algorithm.AEAD_AES_256_CBC_HMAC_SHA_512_Random


async def main(uri: str) -> None:
    client = AsyncMongoClient(uri)
    await client.drop_database(DB)
    encryption = AsyncClientEncryption(
        {"local": {"key": LOCAL_KEY}}, f"{DB}.datakeys", client, CodecOptions(uuid_representation=STANDARD)
    )
    key_id = await encryption.create_data_key("local", key_alt_names=["patients"])
    print("key subtype", key_id.subtype)

    ssn = await encryption.encrypt("123-45-6789", DETERMINISTIC, key_alt_name="patients")
    again = await encryption.encrypt("123-45-6789", DETERMINISTIC, key_id=key_id)
    notes = await encryption.encrypt({"allergies": ["nuts"]}, RANDOM, key_id=key_id)
    print("ciphertext subtype", ssn.subtype, "deterministic repeats", ssn == again)

    records = client[DB].records
    await records.insert_one({"name": "Ann", "ssn": ssn, "notes": notes})
    found = await records.find_one({"ssn": again}, {"_id": 0})
    print("found by encrypted value", found["name"])
    print("decrypted", await encryption.decrypt(found["ssn"]), await encryption.decrypt(found["notes"]))

    key = await encryption.get_key_by_alt_name("patients")
    print("key provider", key["masterKey"]["provider"], "names", list(key["keyAltNames"]))
    await encryption.add_key_alt_name(key_id, "archive")
    previous = await encryption.remove_key_alt_name(key_id, "patients")
    print("names before removal", sorted(previous["keyAltNames"]))
    print("keys", len([k async for k in encryption.get_keys()]))

    result = await encryption.rewrap_many_data_key({})
    print("rewrapped", result.bulk_write_result.modified_count)
    print("still decrypts", await encryption.decrypt(ssn))

    try:
        await encryption.encrypt("x", RANDOM, key_alt_name="patients")
    except EncryptionError as exc:
        print("removed name:", type(exc).__name__)

    await encryption.close()
    await client.drop_database(DB)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
