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



def test_free_ports_are_never_handed_out_twice():
    """A cluster's ports are all chosen before any node binds one: two draws of the same
    port (or of a port and its pysyncobj pair, port + 1000) would leave a node unable to
    start.  4,000 draws from about 21,000 ports would repeat one almost surely."""
    from kraft.local_cluster import _PYSYNCOBJ_OFFSET

    ports = [free_port() for _ in range(4000)]
    assert len(set(ports)) == len(ports)
    taken = set(ports)
    assert not any(p + _PYSYNCOBJ_OFFSET in taken for p in ports)
