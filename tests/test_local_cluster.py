"""kraft.local_cluster: the ports it hands to nodes."""

import socket

from kraft.local_cluster import _ephemeral_low, free_port


def test_free_ports_are_bindable_and_below_the_ephemeral_range():
    """A port in the ephemeral range could become some outgoing connection's local port
    before the node binds it."""
    low = _ephemeral_low()
    for _ in range(50):
        port = free_port()
        assert 1024 < port < low - 1000  # the pysyncobj engine also uses port + 1000
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))

