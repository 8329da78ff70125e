"""GridFS with AsyncGridFSBucket: upload, download, streams, find, rename, delete, NoFile."""

import asyncio
import hashlib
import io
import sys

from bson import ObjectId
from gridfs import AsyncGridFSBucket, NoFile
from gridfs.errors import GridFSError
from pymongo import AsyncMongoClient

DB = "port_gridfs_files"


async def main(uri: str) -> None:
    client = AsyncMongoClient(uri)
    await client.drop_database(DB)
    db = client[DB]
    bucket = AsyncGridFSBucket(db, bucket_name="media", chunk_size_bytes=1024)

    payload = bytes(range(256)) * 20
    file_id = await bucket.upload_from_stream("blob.bin", payload, metadata={"kind": "binary"})
    print("uploaded:", len(str(file_id)), await db["media.chunks"].count_documents({"files_id": file_id}))

    stream = await bucket.open_download_stream(file_id)
    print("download:", stream.filename, stream.length, stream.chunk_size, stream.metadata)
    head = await stream.read(10)
    rest = await stream.read()
    print("read parts:", list(head), len(rest), head + rest == payload)

    own_id = ObjectId()
    await bucket.upload_from_stream_with_id(own_id, "notes.txt", io.BytesIO(b"first version\n"))
    upload = bucket.open_upload_stream("notes.txt", metadata={"rev": 2})
    await upload.write(b"second ")
    await upload.write(b"version\n")
    await upload.close()
    print("upload stream id matches:", (await bucket.open_download_stream(upload._id)).filename)

    latest = await bucket.open_download_stream_by_name("notes.txt")
    print("latest:", await latest.read())
    oldest = await bucket.open_download_stream_by_name("notes.txt", revision=0)
    print("oldest:", await oldest.read())

    sink = io.BytesIO()
    await bucket.download_to_stream(own_id, sink)
    print("to stream:", sink.getvalue())
    sink = io.BytesIO()
    await bucket.download_to_stream_by_name("blob.bin", sink)
    print("by name sha1:", hashlib.sha1(sink.getvalue()).hexdigest())

    async for grid_out in bucket.find({"filename": "notes.txt"}).sort("uploadDate", 1):
        print("found:", grid_out.filename, grid_out.length, grid_out.metadata)
    files = await bucket.find({}, no_cursor_timeout=False).sort("length", -1).to_list()
    print("all files by length:", [(f.filename, f.length) for f in files])

    await bucket.rename(own_id, "renamed.txt")
    print("renamed:", (await bucket.open_download_stream(own_id)).filename)

    await bucket.delete(file_id)
    print("chunks left of deleted:", await db["media.chunks"].count_documents({"files_id": file_id}))
    for label, call in [
        ("download deleted", lambda: bucket.open_download_stream(file_id)),
        ("delete missing", lambda: bucket.delete(ObjectId())),
        ("missing name", lambda: bucket.open_download_stream_by_name("nope.txt")),
        ("missing revision", lambda: bucket.open_download_stream_by_name("notes.txt", revision=5)),
        ("rename missing", lambda: bucket.rename(ObjectId(), "x")),
    ]:
        try:
            await call()
        except NoFile as error:
            print(label, "-> NoFile", isinstance(error, GridFSError))

    empty_id = await bucket.upload_from_stream("empty", b"")
    empty = await bucket.open_download_stream(empty_id)
    print("empty:", empty.length, await empty.read())

    await db.drop_collection("media.files")
    await db.drop_collection("media.chunks")
    print("after drop:", sorted(await db.list_collection_names()))
    await client.drop_database(DB)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
