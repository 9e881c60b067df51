"""Shared setup for in-process broker tests (ReplicaManager, DataPath) without sockets."""

from kraft.server_config import ServerConfig


def server_config(tmp_path, node_id: int = 1, **extra) -> ServerConfig:
    """A broker-only node's config with its log dir under ``tmp_path`` (no listener is
    opened: the in-process tests never start the server)."""
    props = {"process.roles": "broker", "node.id": str(node_id), "controller.quorum.voters": "9@127.0.0.1:1",
             "controller.listener.names": "CONTROLLER", "listeners": "PLAINTEXT://127.0.0.1:1",
             "log.dirs": str(tmp_path / "data")}
    props.update(extra)
    return ServerConfig.from_properties(props)
