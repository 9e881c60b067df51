"""Templates for one connection's run of alike Produce requests and their answers.

A producer that sends a record per request (librdkafka with ``batch.num.messages=1``, any
client with ``linger.ms=0`` under a light load) pipelines Produce requests whose bytes
differ only in the correlation id, the partition and the records, and whose answers differ
only in the correlation id, the partition and the offsets.  Decoding such a request with the
schema-driven codec cost 15-18 us and encoding its answer 6-8 us, a third of what the whole
request cost the broker.

``ProduceRequestTemplate`` is the canonical encoding of one decoded request with its partition
index and records cut out: a frame whose bytes equal it around them (and end right after the
records) decodes to that request's fields with this index, these records and this
correlation id, which is then what it is taken to be, without the codec.  The template is
built by encoding, not from the bytes that came, so it holds only what the codec would read
back the same way.  ``ProduceAnswerTemplate`` is one encoded answer with the places of the
correlation id, the partition index and the offsets found in it, patched for each answer of
the same shape.  Anything that does not match is decoded or encoded in full, as before.
"""

from __future__ import annotations

import logging
import struct
from operator import itemgetter

from kraft.protocol import codec, rpc
from kraft.protocol.errors import MalformedMessage
from kraft.protocol.primitives import Reader
from kraft.protocol.rpc import Request, RequestHeader, request_header_version

log = logging.getLogger(__name__)

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_INDEX_AND_SIZE = struct.Struct(">ii")  # a partition's index and its records' size, not flexible
_PRODUCE_API_KEY = rpc.API_KEYS["Produce"]


class ProduceRequestTemplate:
    """The bytes every request of the template has, around its partition index and records."""

    __slots__ = ("head", "version", "prefix", "index_at", "compact", "suffix", "body", "topic", "partition",
                 "client_id")

    @classmethod
    def of(cls, request: Request) -> ProduceRequestTemplate | None:
        """The template of a decoded Produce ``request`` for one partition, or None when it
        carries more (or tagged fields) and is not worth one."""
        body = request.body
        if request.api != "Produce":
            return None
        topics = body.get("topic_data") or ()
        if len(topics) != 1 or len(topics[0].get("partition_data") or ()) != 1:
            return None
        version = request.version
        topic = topics[0]
        partition = topic["partition_data"][0]
        if partition.get("records") is None:
            return None
        header = codec.encode("RequestHeader", "header", request_header_version("Produce", version), {
            "request_api_key": _PRODUCE_API_KEY, "request_api_version": version, "correlation_id": 0,
            "client_id": request.header.client_id})
        empty = dict(body, topic_data=[dict(topic, partition_data=[dict(partition, records=b"")])])
        encoded = codec.encode("Produce", "request", version, empty)
        compact = codec.is_flexible("Produce", "request", version)
        # The partition's index, its records' size, and after the records the partition's,
        # the topic's and the request's tagged fields, all empty (none when not flexible; a
        # request with any has no template).
        suffix = b"\0\0\0" if compact else b""
        tail = _I32.pack(partition["index"]) + (b"\x01" if compact else bytes(4)) + suffix
        if not encoded.endswith(tail):
            return None
        self = cls()
        self.head, self.version = header[:4], version
        self.prefix = header[8:] + encoded[:len(encoded) - len(tail)]
        self.index_at = 8 + len(self.prefix)
        self.compact = compact
        self.suffix = suffix
        # Without the first request's records: a template must not hold a megabyte batch.
        self.body = dict(body, topic_data=None)
        self.topic = dict(topic, partition_data=None)
        self.partition = dict(partition, records=None)
        self.client_id = request.header.client_id
        return self

    def request(self, payload: bytes, principal: str, client_host: str, connection_id: str) -> Request | None:
        """``payload`` as a request (of a connection: ``decode_request``'s last three
        arguments) when it matches the template, else None."""
        if not (payload.startswith(self.head) and payload.startswith(self.prefix, 8)):
            return None
        at = self.index_at
        end = len(payload) - len(self.suffix)
        if end < at + 5:
            return None
        if self.compact:
            index = _I32.unpack_from(payload, at)[0]
            pos = at + 5
            size = payload[at + 4] - 1
            if size >= 0x7F:  # not a one-byte varint: read it whole
                reader = Reader(payload, at + 4, end)
                try:
                    size = reader.uvarint() - 1
                except MalformedMessage:
                    return None
                pos = reader.pos
        else:
            if end < at + 8:
                return None
            index, size = _INDEX_AND_SIZE.unpack_from(payload, at)
            pos = at + 8
        if size < 0 or pos + size != end or not payload.endswith(self.suffix):
            return None
        partition = dict(self.partition, index=index, records=payload[pos:end])
        body = dict(self.body, topic_data=[dict(self.topic, partition_data=[partition])])
        header = RequestHeader(_PRODUCE_API_KEY, self.version, _I32.unpack_from(payload, 4)[0], self.client_id)
        return Request(header, "Produce", body, principal, client_host, connection_id)


# Values put where the varying fields go, to find their places: bytes no topic name holds
# (``ProduceAnswerTemplate.of`` makes sure each is found once).
_MARKS = {"index": (0x7F7E7D7C, struct.Struct(">i")), "base_offset": (0x7B7A7978_77767501, _I64),
          "log_append_time_ms": (0x7B7A7978_77767502, _I64), "log_start_offset": (0x7B7A7978_77767503, _I64)}
_PLAIN_RESULT = frozenset(_MARKS) | {"error_code"}


class ProduceAnswerTemplate:
    """A framed one-partition Produce answer; ``encode`` patches in the correlation id, the
    partition's index and its offsets of another answer of the same shape (``_shape``)."""

    __slots__ = ("frame", "result_at", "pack_result", "result_fields")

    @classmethod
    def of(cls, version: int, body: dict) -> ProduceAnswerTemplate | None:
        if _shape(version, body) is None:
            return None
        (topic,) = body["responses"]
        marked = dict(topic["partition_responses"][0], **{name: mark for name, (mark, _) in _MARKS.items()})
        frame = rpc.encode_response("Produce", version, 0, dict(body, responses=[
            dict(topic, partition_responses=[marked])]))
        places = {}
        for name, (mark, packer) in _MARKS.items():
            packed = packer.pack(mark)
            at = frame.find(packed)  # not found: not in this version (log_start_offset before v5)
            if at != frame.rfind(packed):
                return None
            if at >= 0:
                places[name] = at
        # The result's fields lie one after the other in every version: the index, the
        # error code's 2 bytes, then the offsets the version has.  One pack fills them.
        at = places.get("index", -1)
        fields, expected = ["index", "error_code"], at + 6
        for name in _OFFSETS:
            if places.get(name) != expected:
                break
            fields.append(name)
            expected += 8
        if at < 0 or len(fields) < 3 or len(places) != len(fields) - 1:
            return None
        self = cls()
        self.frame, self.result_at = bytearray(frame), at
        self.pack_result = struct.Struct(">ih" + "q" * (len(fields) - 2)).pack_into
        self.result_fields = itemgetter(*fields)
        return self

    def encode(self, correlation_id: int, result: dict) -> bytes:
        """The framed answer with ``result``'s varying fields (it has this template's shape)."""
        frame = self.frame
        _I32.pack_into(frame, 4, correlation_id)  # after the frame's size, in either header version
        self.pack_result(frame, self.result_at, *self.result_fields(result))
        return bytes(frame)


_OFFSETS = ("base_offset", "log_append_time_ms", "log_start_offset")  # in the order they lie


def _shape(version: int, body: dict) -> tuple | None:
    """What a one-partition plain answer holds besides its varying fields (None for any other)."""
    responses = body.get("responses")
    if type(responses) is not list or len(responses) != 1 or len(body) > 2:
        return None
    topic = responses[0]
    results = topic.get("partition_responses")
    if type(results) is not list or len(results) != 1 or len(topic) != 2:
        return None
    result = results[0]
    if result.keys() != _PLAIN_RESULT:
        return None
    return version, body.get("throttle_time_ms", 0), topic.get("name"), topic.get("topic_id"), result["error_code"]


# Templates a connection keeps, of each kind: a producer writes to few topics at a time.
MAX_TEMPLATES = 4


class ProduceTemplates:
    """One connection's templates, learnt from the requests and answers it decodes and
    encodes in full.  A producer that spreads requests over more topics than it keeps stops
    costing template builds once they rarely pay (more than four builds per use)."""

    __slots__ = ("requests", "answers", "builds", "uses")

    def __init__(self):
        self.requests: list[ProduceRequestTemplate] = []
        self.answers: dict[tuple, ProduceAnswerTemplate | None] = {}
        self.builds = self.uses = 0

    def _worth_building(self) -> bool:
        return self.builds < 16 or self.builds < 4 * self.uses

    def decode(self, payload: bytes, principal: str, client_host: str, connection_id: str) -> Request | None:
        """``payload`` as a Produce request that matches a template, else None."""
        for template in self.requests:
            request = template.request(payload, principal, client_host, connection_id)
            if request is not None:
                self.uses += 1
                return request
        return None

    def learn(self, request: Request) -> None:
        """Keep a template of ``request`` (a Produce decoded in full) if it makes one."""
        if not self._worth_building():
            return
        self.builds += 1
        try:
            template = ProduceRequestTemplate.of(request)
        except Exception:  # values the codec read but cannot write back: no template, the codec goes on
            log.debug("no Produce request template for %s", request.header, exc_info=True)
            return
        if template is not None:
            if len(self.requests) >= MAX_TEMPLATES:
                del self.requests[0]
            self.requests.append(template)

    def encode(self, version: int, correlation_id: int, body: dict) -> bytes | None:
        """The framed answer from a template (built now if it can be), or None: encode it in full."""
        key = _shape(version, body)
        if key is None:
            return None
        template = self.answers.get(key, False)
        if template is False:
            if not self._worth_building():
                return None
            self.builds += 1
            if len(self.answers) >= MAX_TEMPLATES:
                del self.answers[next(iter(self.answers))]
            try:
                template = ProduceAnswerTemplate.of(version, body)
            except Exception:  # an answer the codec cannot encode: it says why, for this one
                template = None
            self.answers[key] = template
        if template is None:
            return None
        try:
            answer = template.encode(correlation_id, body["responses"][0]["partition_responses"][0])
        except struct.error:  # a value out of its field's range: the codec says so
            return None
        self.uses += 1
        return answer
