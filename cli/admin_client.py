"""A small synchronous admin client for ``kraftctl``'s commands, over kraft's own protocol
codec: it picks a bootstrap broker, negotiates versions with ApiVersions, and sends one
request at a time.  Errors come back as ``AdminError`` with a message fit for a terminal.
"""

from __future__ import annotations

import trio

from kraft.client import KafkaClient, NodeUnavailable
from kraft.protocol import codec, rpc
from kraft.protocol.error_codes import ErrorCode
from kraft.security.config import PLAINTEXT_CLIENT
from kraft.trio_run import run_trio


class AdminError(Exception):
    pass


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    out = []
    for item in text.split(","):
        item = item.strip()
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise AdminError(f"--bootstrap-server: {item!r} is not host:port")
        out.append((host.strip("[]") or "127.0.0.1", int(port)))
    if not out:
        raise AdminError("--bootstrap-server: no address given")
    return out


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


class AdminClient:
    """``AdminClient("h:p,h2:p2").call(api, body)`` -> response dict."""

    def __init__(self, bootstrap: str, timeout_s: float = 15.0, command_config: str | None = None,
                 security=None):
        """``command_config``: a client properties file (Kafka's ``--command-config``):
        ``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``, ``ssl.*``.
        ``security``: a ``kraft.client`` ClientSecurity given directly instead."""
        self.addresses = parse_bootstrap(bootstrap)
        self.timeout_s = timeout_s
        self.security = security or PLAINTEXT_CLIENT
        if command_config:
            from kraft.properties import PropertiesError, read_properties
            from kraft.security.config import SecurityConfigError, client_security_from_properties

            try:
                self.security = client_security_from_properties(read_properties(command_config))
            except (OSError, PropertiesError, SecurityConfigError) as exc:
                raise AdminError(f"--command-config {command_config}: {exc}") from None
        self._versions: dict[str, int] | None = None
        self._address: tuple[str, int] | None = None

    def call(self, api: str, body: dict, version: int | None = None, address=None) -> dict:
        return run_trio(self._call, api, body, version, address)

    async def _call(self, api, body, version, address):
        async with trio.open_nursery() as nursery:
            client = KafkaClient(nursery, client_id="kraftctl", connect_timeout_s=self.timeout_s,
                                 security=self.security)
            try:
                return await self._request(client, api, body, version, address)
            finally:
                await client.aclose()
                nursery.cancel_scope.cancel()

    async def _request(self, client, api, body, version, address):
        errors = []
        if address:
            targets = [address]
        else:  # the broker that answered last first; when it stops answering, the others
            targets = ([self._address] if self._address else []) + [a for a in self.addresses if a != self._address]
        for host, port in targets:
            try:
                if self._versions is None:
                    resp = await client.request(host, port, "ApiVersions", 3, {
                        "client_software_name": "kraftctl", "client_software_version": "0.1.0"},
                        timeout_s=self.timeout_s)
                    self._versions = {}
                    for item in resp["api_keys"]:
                        name = rpc.API_NAMES.get(item["api_key"])
                        if name is not None:
                            ours = codec.versions_of(name)
                            top = min(item["max_version"], ours.hi)
                            if top >= max(item["min_version"], ours.lo):
                                self._versions[name] = top
                    self._address = (host, port)
                v = version if version is not None else self._versions.get(api)
                if v is None:
                    raise AdminError(f"the broker at {host}:{port} does not support {api}")
                return await client.request(host, port, api, v, body, timeout_s=self.timeout_s)
            except NodeUnavailable as exc:
                errors.append(str(exc))
                self._versions = None
                if (host, port) == self._address:
                    self._address = None
        raise AdminError("no broker reachable: " + "; ".join(errors))

    def version_of(self, api: str) -> int:
        if self._versions is None:
            self.call("ApiVersions", {"client_software_name": "kraftctl", "client_software_version": "0.1.0"}, 3)
        return self._versions.get(api, -1)

    def metadata(self, topics: list[str] | None = None) -> dict:
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False}
        md = self.call("Metadata", body)
        # As Kafka's clients: the bootstrap list is for the first contact; later calls may
        # go to any broker the cluster named, should the bootstrap ones stop answering.
        for b in md["brokers"]:
            if (b["host"], b["port"]) not in self.addresses:
                self.addresses.append((b["host"], b["port"]))
        return md
