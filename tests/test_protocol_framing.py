"""Framing and request/response headers (kraft.protocol.framing, kraft.protocol.rpc)."""

import functools
import socket
import struct

import pytest
import trio

from broker.network import serve_kafka
from kraft.protocol import rpc
from kraft.protocol.error_codes import ErrorCode
from kraft.protocol.errors import FrameTooLarge, MalformedMessage, UnknownApiKey, UnsupportedVersion
from kraft.protocol.framing import FrameDecoder, frame


def test_frames_split_whole_byte_by_byte_and_in_bursts():
    payloads = [b"", b"a", b"hello" * 100]
    stream = b"".join(frame(p) for p in payloads)
    for step in (len(stream), 1, 3, 7):
        d = FrameDecoder()
        got = []
        for i in range(0, len(stream), step):
            d.receive_data(stream[i : i + step])
            while (f := d.next_frame()) is not None:
                got.append(f)
        assert got == payloads and d.buffered == 0


def test_oversized_and_negative_frames_are_rejected():
    d = FrameDecoder(max_frame_bytes=100)
    d.receive_data(struct.pack(">i", 101))
    with pytest.raises(FrameTooLarge) as info:
        d.next_frame()
    assert info.value.disconnect
    d = FrameDecoder()
    d.receive_data(struct.pack(">i", -5))
    with pytest.raises(FrameTooLarge):
        d.next_frame()


@pytest.mark.parametrize("api,version,header_version", [
    ("Metadata", 8, 1), ("Metadata", 9, 2), ("Produce", 9, 2), ("ApiVersions", 3, 2), ("Fetch", 4, 1),
])
def test_request_round_trip_with_the_right_header_version(api, version, header_version):
    assert rpc.request_header_version(api, version) == header_version
    data = rpc.encode_request(api, version, 42, {}, client_id="me")
    req = rpc.decode_request(data[4:])
    assert (req.api, req.version, req.header.correlation_id, req.header.client_id) == (api, version, 42, "me")


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("correlation_id", [0, 7, -1, 2**31 - 1, -2**31])
def test_packed_response_headers_are_the_tables(version, correlation_id):
    from kraft.protocol import codec

    table = codec.encode("ResponseHeader", "header", version, {"correlation_id": correlation_id})
    assert rpc.response_header(version, correlation_id) == table
    framed = rpc.encode_response("Produce", 9 if version else 8, correlation_id, {"responses": []})
    assert framed[:4] == struct.pack(">i", len(framed) - 4)
    assert framed[4:4 + len(table)] == table
    assert rpc.decode_response("Produce", 9 if version else 8, framed[4:]) == (
        correlation_id, codec.decode("Produce", "response", 9 if version else 8, framed[4 + len(table):]))


def test_api_versions_response_header_is_never_flexible():
    data = rpc.encode_response("ApiVersions", 3, 7, {"api_keys": []})
    # size, correlation id, then the body starts directly (no tag section in the header).
    assert data[4:8] == b"\x00\x00\x00\x07"
    assert data[8:10] == b"\x00\x00"  # error code
    corr, body = rpc.decode_response("ApiVersions", 3, data[4:])
    assert corr == 7 and body["api_keys"] == [] and body["error_code"] == 0
    flexible = rpc.encode_response("Metadata", 9, 7, {})
    assert flexible[8] == 0  # Metadata v9 has a response header tag section


def test_unknown_api_key_and_unsupported_version():
    with pytest.raises(UnknownApiKey):
        rpc.decode_request(struct.pack(">hhi", 9999, 0, 1))
    with pytest.raises(UnsupportedVersion) as info:
        rpc.decode_request(struct.pack(">hhi", 3, 99, 5))
    assert info.value.correlation_id == 5 and info.value.error_code == ErrorCode.UNSUPPORTED_VERSION
    with pytest.raises(MalformedMessage):
        rpc.decode_request(b"\x00\x03")


async def test_server_answers_unknown_api_versions_version_in_v0_and_closes_on_garbage():
    async def handler(request):
        return {"api_keys": []}

    async with trio.open_nursery() as nursery:
        port = await nursery.start(functools.partial(serve_kafka, handler, "127.0.0.1", 0))

        def talk():
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                # ApiVersions v99: answered in v0 with UNSUPPORTED_VERSION and the range.
                s.sendall(frame(struct.pack(">hhi", 18, 99, 77) + b"junk"))
                size = struct.unpack(">i", s.recv(4))[0]
                body = b""
                while len(body) < size:
                    body += s.recv(size - len(body))
                answer = rpc.decode_response("ApiVersions", 0, body)
                # Garbage (an unknown api key) closes the connection.
                s.sendall(frame(struct.pack(">hhi", 9999, 0, 1)))
                closed = s.recv(10) == b""
                return answer, closed

        (corr, body), closed = await trio.to_thread.run_sync(talk)
        nursery.cancel_scope.cancel()
    assert corr == 77
    assert body["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    assert body["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 4}]
    assert closed
