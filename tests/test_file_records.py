"""Fetch responses with record holes (broker.file_records) written to a real TCP socket by
sendfile, and copied for a TLS-like stream: the bytes on the wire are the framed response,
whatever happens to the segment file after the read."""

import os
import uuid

import pytest
import trio

from kraft.trio_run import run_trio
import trio.testing

from broker import file_records
from broker.file_records import FileRecords, ShortFile, can_sendfile, send_response
from kraft.protocol import rpc

BATCHES = bytes(range(256)) * 40  # 10 KiB standing for record batches
BODY = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
    {"topic": "t", "topic_id": uuid.UUID(int=5), "partitions": [
        {"partition_index": i, "error_code": 0, "high_watermark": 9, "last_stable_offset": 9,
         "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
         "records": None} for i in range(3)]}]}


def segment(tmp_path, name="00000000000000000000.log"):
    path = tmp_path / name
    path.write_bytes(b"x" * 100 + BATCHES)
    return path


def body_with(records: list) -> dict:
    body = {**BODY, "responses": [dict(BODY["responses"][0])]}
    body["responses"][0]["partitions"] = [dict(p, records=r) for p, r in
                                          zip(BODY["responses"][0]["partitions"], records)]
    return body


async def received_over_tcp(pieces, use_sendfile: bool) -> bytes:
    """What a peer reads from a TCP connection the pieces were sent on, until it closes."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    got = bytearray()
    async with trio.open_nursery() as nursery:
        client = await trio.open_tcp_stream("127.0.0.1", port)
        server = await listeners[0].accept()

        async def read_all():
            while data := await client.receive_some(65536):
                got.extend(data)
        nursery.start_soon(read_all)
        try:
            assert can_sendfile(server) is True
            await send_response(server, pieces, use_sendfile)
        finally:
            await server.aclose()
            await listeners[0].aclose()
    await client.aclose()
    return bytes(got)


@pytest.mark.parametrize("version", [4, 11, 12, 16])
@pytest.mark.parametrize("use_sendfile", [True, False])
def test_the_wire_carries_the_same_bytes_as_a_copied_response(tmp_path, version, use_sendfile):
    path = segment(tmp_path)
    slices = [(100, 4000), (4100, 0), (5000, 5340)]
    expected = rpc.encode_response("Fetch", version, 7, body_with(
        [BATCHES[p - 100:p - 100 + n] for p, n in slices]))
    pieces = rpc.encode_response_spliced("Fetch", version, 7, body_with(
        [FileRecords(path, p, n) if n else b"" for p, n in slices]))
    before = (file_records.STATS.sendfile_bytes, file_records.STATS.copied_bytes)
    assert trio.run(received_over_tcp, pieces, use_sendfile) == expected
    sent = file_records.STATS.sendfile_bytes - before[0], file_records.STATS.copied_bytes - before[1]
    assert sent == ((9340, 0) if use_sendfile else (0, 9340))
    assert all(p.fd is None for p in pieces if isinstance(p, FileRecords))  # closed once sent


def test_a_segment_deleted_after_the_read_is_still_sent(tmp_path):
    path = segment(tmp_path)
    pieces = rpc.encode_response_spliced("Fetch", 12, 1, body_with([FileRecords(path, 100, len(BATCHES)), b"", b""]))
    path.unlink()  # retention deleted it; the response holds its own descriptor
    expected = rpc.encode_response("Fetch", 12, 1, body_with([BATCHES, b"", b""]))
    assert trio.run(received_over_tcp, pieces, True) == expected


@pytest.mark.parametrize("use_sendfile", [True, False])
def test_a_segment_truncated_after_the_read_fails_the_response_instead_of_hanging(tmp_path, use_sendfile):
    path = segment(tmp_path)
    records = FileRecords(path, 100, len(BATCHES))
    pieces = rpc.encode_response_spliced("Fetch", 12, 1, body_with([records, b"", b""]))
    os.truncate(path, 2000)  # a follower truncated its log to the leader's

    async def main():
        with trio.fail_after(10):
            return await received_over_tcp(pieces, use_sendfile)
    with pytest.raises(ShortFile):
        run_trio(main)  # strict exception groups (trio >= 0.25's default), the sole error unwrapped
    assert records.fd is None


def test_a_stream_that_is_not_a_socket_gets_a_copy(tmp_path):
    path = segment(tmp_path)
    pieces = rpc.encode_response_spliced("Fetch", 12, 3, body_with([FileRecords(path, 100, 500), b"", b""]))
    expected = rpc.encode_response("Fetch", 12, 3, body_with([BATCHES[:500], b"", b""]))

    async def main():
        left, right = trio.testing.memory_stream_pair()
        assert can_sendfile(left) is False
        await send_response(left, pieces, can_sendfile(left))
        await left.aclose()
        got = bytearray()
        while data := await right.receive_some():
            got.extend(data)
        return bytes(got)
    assert trio.run(main) == expected


def test_a_response_without_records_in_files_is_one_piece():
    body = body_with([b"abc", b"", b"defg"])
    assert rpc.encode_response_spliced("Fetch", 12, 5, body) == [rpc.encode_response("Fetch", 12, 5, body)]
